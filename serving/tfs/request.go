package tfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/io/treedump"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
)

// StringTensor is TensorFlow's make_tensor_proto of a list of byte strings: a DT_STRING
// tensor of shape [len(vals)] (the input tensor tfs_client sends to TF Serving).
func StringTensor(vals [][]byte) *tfcorepb.TensorProto {
	return &tfcorepb.TensorProto{
		Dtype:       tfcorepb.DataType_DT_STRING,
		TensorShape: &tfcorepb.TensorShapeProto{Dim: []*tfcorepb.TensorShapeProto_Dim{{Size: int64(len(vals))}}},
		StringVal:   vals,
	}
}

// RandomInstance is tfs_client's generate_random_instance: for slot i (slots default
// 1…len(vocab)), vocab[i] v1 fids (slot << 54) | (i·max(vocab) + U{1…vocab[i]}). A nil
// vocab is tfs_client's: six slots of 5.
func RandomInstance(rng *rand.Rand, slots, vocab []int) (*parserpb.Instance, error) {
	if vocab == nil {
		vocab = []int{5, 5, 5, 5, 5, 5}
	}
	if len(vocab) == 0 {
		return nil, fmt.Errorf("tfs: random instance: no vocabulary sizes")
	}
	if slots == nil {
		for i := range vocab {
			slots = append(slots, i+1)
		}
	}
	if len(slots) > len(vocab) {
		return nil, fmt.Errorf("tfs: random instance: %d slots for %d vocabulary sizes", len(slots), len(vocab))
	}
	maxVocab := 0
	for _, v := range vocab {
		if v <= 0 {
			return nil, fmt.Errorf("tfs: random instance: vocabulary size %d is not positive", v)
		}
		maxVocab = max(maxVocab, v)
	}
	inst := &parserpb.Instance{}
	for i, slot := range slots {
		if slot < 0 || slot >= 1<<10 {
			return nil, fmt.Errorf("tfs: random instance: slot %d outside the 10 bits of a v1 fid", slot)
		}
		for range vocab[i] {
			inst.Fid = append(inst.Fid, uint64(slot)<<54|uint64(i*maxVocab+1+rng.IntN(vocab[i])))
		}
	}
	return inst, nil
}

// InstanceTensor is get_instance_proto's tensor: the serialized instances.
func InstanceTensor(insts []*parserpb.Instance) (*tfcorepb.TensorProto, error) {
	vals := make([][]byte, len(insts))
	for i, inst := range insts {
		b, err := proto.Marshal(inst)
		if err != nil {
			return nil, fmt.Errorf("tfs: instance %d: %w", i, err)
		}
		vals[i] = b
	}
	return StringTensor(vals), nil
}

// fidV2Mask keeps the 48 low bits of a fid.
const fidV2Mask = 1<<48 - 1

// ExampleBatchToInstances is tfs_client's get_example_batch_to_instance: one Instance per
// row of eb. __LABEL__ gives the labels, __LINE_ID__ the LineId; a feature with v1 fids
// gets them as v2 fids of the slot of its first fid; v2 fids, floats (doubles narrowed),
// int64s and bytes keep their values; SHARED lists give every row their first feature. A
// row missing from a non-shared list, or a LineId that does not parse, is an error naming
// the feature and row.
func ExampleBatchToInstances(eb *examplepb.ExampleBatch) ([]*parserpb.Instance, error) {
	n := int(eb.GetBatchSize())
	out := make([]*parserpb.Instance, n)
	for i := range out {
		out[i] = &parserpb.Instance{}
	}
	for _, nfl := range eb.GetNamedFeatureList() {
		name := nfl.GetName()
		feats := nfl.GetFeature()
		shared := nfl.GetType() == examplepb.FeatureListType_SHARED
		for i, inst := range out {
			var f *examplepb.Feature
			switch {
			case shared && len(feats) > 0:
				f = feats[0]
			case !shared && i < len(feats):
				f = feats[i]
			default:
				return nil, fmt.Errorf("tfs: example batch: feature %q has %d rows, row %d is missing", name, len(feats), i)
			}
			if err := addFeature(inst, name, f); err != nil {
				return nil, fmt.Errorf("tfs: example batch: feature %q row %d: %w", name, i, err)
			}
		}
	}
	return out, nil
}

func addFeature(inst *parserpb.Instance, name string, f *examplepb.Feature) error {
	switch name {
	case "__LABEL__":
		inst.Label = append(inst.Label, f.GetFloatList().GetValue()...)
		return nil
	case "__LINE_ID__":
		b := f.GetBytesList().GetValue()
		if len(b) == 0 {
			return fmt.Errorf("no LineId bytes")
		}
		lid := &matrixpb.LineId{}
		if err := proto.Unmarshal(b[0], lid); err != nil {
			return fmt.Errorf("LineId: %w", err)
		}
		inst.LineId = lid
		return nil
	}
	mf := &matrixpb.Feature{Name: proto.String(name)}
	switch {
	case len(f.GetFidV1List().GetValue()) > 0:
		v1 := f.GetFidV1List().GetValue()
		slot := v1[0] >> 54
		for _, v := range v1 {
			mf.Fid = append(mf.Fid, slot<<48|v&fidV2Mask)
		}
	case len(f.GetFidV2List().GetValue()) > 0:
		mf.Fid = append(mf.Fid, f.GetFidV2List().GetValue()...)
	case len(f.GetFloatList().GetValue()) > 0:
		mf.FloatValue = append(mf.FloatValue, f.GetFloatList().GetValue()...)
	case len(f.GetDoubleList().GetValue()) > 0:
		for _, d := range f.GetDoubleList().GetValue() {
			mf.FloatValue = append(mf.FloatValue, float32(d))
		}
	case len(f.GetInt64List().GetValue()) > 0:
		mf.Int64Value = append(mf.Int64Value, f.GetInt64List().GetValue()...)
	case len(f.GetBytesList().GetValue()) > 0:
		mf.BytesValue = append(mf.BytesValue, f.GetBytesList().GetValue()...)
	default:
		return nil // an empty feature adds nothing, as in the reference
	}
	inst.Feature = append(inst.Feature, mf)
	return nil
}

// InstanceFromFile is utils.InstanceFormater's from_json, from_pb_text and from_dump: an
// Instance read from a file whose extension names its form: .json (protobuf JSON),
// .pbtxt/.pbtext (text format) or .dump (the flattened tree dump of io/treedump).
func InstanceFromFile(path string) (*parserpb.Instance, error) {
	if strings.EqualFold(filepath.Ext(path), ".dump") {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("tfs: instance: %w", err)
		}
		defer f.Close()
		return treedump.ParseInstance(f, path)
	}
	return pbtext.ReadInstanceFile(path)
}

// RepeatedInstanceTensor is InstanceFormater.to_tensor_proto: batch copies of inst's
// serialization as one DT_STRING tensor of shape [batch].
func RepeatedInstanceTensor(inst *parserpb.Instance, batch int) (*tfcorepb.TensorProto, error) {
	if batch < 0 {
		return nil, fmt.Errorf("tfs: batch size %d is negative", batch)
	}
	b, err := proto.Marshal(inst)
	if err != nil {
		return nil, fmt.Errorf("tfs: instance: %w", err)
	}
	vals := make([][]byte, batch)
	for i := range vals {
		vals[i] = b
	}
	return StringTensor(vals), nil
}

// WriteInstanceFile is InstanceFormater's to_pb, to_json and to_pb_text: inst written to
// path as the extension says: .json (protobuf JSON), .pbtxt/.pbtext (text format), .dump
// (tree dump), anything else the binary serialization.
func WriteInstanceFile(path string, inst *parserpb.Instance) error {
	var (
		b   []byte
		err error
	)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		b, err = protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(inst)
	case ".pbtxt", ".pbtext":
		b, err = prototext.MarshalOptions{Multiline: true}.Marshal(inst)
	case ".dump":
		b, err = treedump.Encode(inst)
	default:
		b, err = proto.Marshal(inst)
	}
	if err != nil {
		return fmt.Errorf("tfs: instance to %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("tfs: instance: %w", err)
	}
	return nil
}
