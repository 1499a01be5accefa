// Package savedmodel reads the one fact the serving agent needs from an exported
// TensorFlow SavedModel, the model name of its TfServingRemotePredict ops (§1.10
// find_model_name, decision S5), and writes fake exports for demos and tests.
//
// The saved_model.pb walk decodes only SavedModel.meta_graphs (2) → MetaGraphDef.graph_def
// (2) → GraphDef.node (1) → NodeDef.op (2) / attr (5) → AttrValue.s (2), with protowire and
// TensorFlow's field numbers, so no TensorFlow proto is linked. Departure (S5): the newest
// version folder (largest numeric name) is read, not the lexicographically first.
package savedmodel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// RemotePredictOp is the op whose model_name attribute names the served model.
const RemotePredictOp = "TfServingRemotePredict"

// ErrMalformed reports a saved_model.pb that does not decode.
var ErrMalformed = errors.New("serving/savedmodel: malformed saved_model.pb")

// FindModelName returns the model name of an export: in the newest numeric version folder
// of {exportBase}/entry, the part before ':' of the first TfServingRemotePredict node's
// model_name attribute. ok is false when there is no such node.
func FindModelName(exportBase string) (name string, ok bool, err error) {
	entry := filepath.Join(exportBase, "entry")
	version, err := NewestVersion(entry)
	if err != nil {
		return "", false, err
	}
	p := filepath.Join(entry, version, "saved_model.pb")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", false, fmt.Errorf("serving/savedmodel: %w", err)
	}
	names, err := RemotePredictModelNames(b)
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", p, err)
	}
	if len(names) == 0 {
		return "", false, nil
	}
	model, _, _ := strings.Cut(names[0], ":")
	return model, true, nil
}

// NewestVersion returns the numerically largest version folder name in dir.
func NewestVersion(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("serving/savedmodel: %w", err)
	}
	best, bestV := "", int64(-1)
	for _, e := range ents {
		v, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || v < 0 || !e.IsDir() {
			continue
		}
		if v > bestV {
			best, bestV = e.Name(), v
		}
	}
	if best == "" {
		return "", fmt.Errorf("serving/savedmodel: no numeric version folder in %s", dir)
	}
	return best, nil
}

// RemotePredictModelNames lists the model_name attribute of every TfServingRemotePredict
// node of the first meta graph, in node order.
func RemotePredictModelNames(savedModel []byte) ([]string, error) {
	mg, found, err := firstField(savedModel, 2)
	if err != nil || !found {
		return nil, err
	}
	var names []string
	err = eachField(mg, func(num protowire.Number, v []byte) error {
		if num != 2 { // graph_def
			return nil
		}
		return eachField(v, func(num protowire.Number, node []byte) error {
			if num != 1 { // node
				return nil
			}
			op, attrs, err := nodeOpAndAttr(node, "model_name")
			if err == nil && op == RemotePredictOp && attrs != nil {
				names = append(names, string(attrs))
			}
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// nodeOpAndAttr returns a NodeDef's op and the string value of one attribute (nil if absent).
func nodeOpAndAttr(node []byte, key string) (op string, val []byte, err error) {
	err = eachField(node, func(num protowire.Number, v []byte) error {
		switch num {
		case 2:
			op = string(v)
		case 5: // map<string, AttrValue> entry
			var k string
			var av []byte
			if err := eachField(v, func(n protowire.Number, b []byte) error {
				switch n {
				case 1:
					k = string(b)
				case 2:
					av = b
				}
				return nil
			}); err != nil {
				return err
			}
			if k == key {
				s, found, err := firstField(av, 2) // AttrValue.s
				if err != nil {
					return err
				}
				if found {
					val = s
				}
			}
		}
		return nil
	})
	return op, val, err
}

// eachField calls fn with every length-delimited field of a message; other wire types are
// skipped. Malformed input is ErrMalformed.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(m))
			}
			if err := fn(num, v); err != nil {
				return err
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(m))
		}
		b = b[m:]
	}
	return nil
}

// firstField returns the first length-delimited field num of a message.
func firstField(b []byte, num protowire.Number) (v []byte, found bool, err error) {
	stop := errors.New("stop")
	err = eachField(b, func(n protowire.Number, x []byte) error {
		if n == num {
			v, found = x, true
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		err = nil
	}
	return v, found, err
}

// EncodeRemotePredictGraph returns a saved_model.pb holding one meta graph whose graph has
// a TfServingRemotePredict node per model name (the shape of an exported entry graph, as
// far as find_model_name reads it).
func EncodeRemotePredictGraph(modelNames []string) []byte {
	var graph []byte
	for i, mn := range modelNames {
		var attrVal []byte
		attrVal = protowire.AppendTag(attrVal, 2, protowire.BytesType)
		attrVal = protowire.AppendBytes(attrVal, []byte(mn))
		var entry []byte
		entry = protowire.AppendTag(entry, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, "model_name")
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, attrVal)
		var node []byte
		node = protowire.AppendTag(node, 1, protowire.BytesType)
		node = protowire.AppendString(node, "remote_predict_"+strconv.Itoa(i))
		node = protowire.AppendTag(node, 2, protowire.BytesType)
		node = protowire.AppendString(node, RemotePredictOp)
		node = protowire.AppendTag(node, 5, protowire.BytesType)
		node = protowire.AppendBytes(node, entry)
		graph = protowire.AppendTag(graph, 1, protowire.BytesType)
		graph = protowire.AppendBytes(graph, node)
	}
	var mg []byte
	mg = protowire.AppendTag(mg, 2, protowire.BytesType)
	mg = protowire.AppendBytes(mg, graph)
	var sm []byte
	sm = protowire.AppendTag(sm, 1, protowire.VarintType)
	sm = protowire.AppendVarint(sm, 1)
	sm = protowire.AppendTag(sm, 2, protowire.BytesType)
	sm = protowire.AppendBytes(sm, mg)
	return sm
}

// WriteFakeExport writes an export tree for model with numPS parameter-server sub-graphs:
// {dir}/entry/{version}/saved_model.pb with a TfServingRemotePredict node per PS
// ("{model}:ps_{i}") and {dir}/ps_{i}/{version}/saved_model.pb with an empty graph. It
// holds no variables: TF Serving's double loads it, a real TF Serving does not.
func WriteFakeExport(dir, model string, numPS int, version int64) error {
	if model == "" || strings.ContainsAny(model, ":/") {
		return fmt.Errorf("serving/savedmodel: bad model name %q", model)
	}
	if numPS < 0 || version < 0 {
		return fmt.Errorf("serving/savedmodel: negative num_ps %d or version %d", numPS, version)
	}
	var remote []string
	for i := range numPS {
		remote = append(remote, fmt.Sprintf("%s:ps_%d", model, i))
	}
	write := func(sub string, pb []byte) error {
		d := filepath.Join(dir, sub, strconv.FormatInt(version, 10))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("serving/savedmodel: %w", err)
		}
		if err := os.WriteFile(filepath.Join(d, "saved_model.pb"), pb, 0o644); err != nil {
			return fmt.Errorf("serving/savedmodel: %w", err)
		}
		return nil
	}
	if err := write("entry", EncodeRemotePredictGraph(remote)); err != nil {
		return err
	}
	for i := range numPS {
		if err := write(fmt.Sprintf("ps_%d", i), EncodeRemotePredictGraph(nil)); err != nil {
			return err
		}
	}
	return nil
}
