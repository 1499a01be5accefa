package treedump

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/schemas/parserpb"
)

// WriteInstance writes inst to w in tree-dump form (see [Encode]).
func WriteInstance(w io.Writer, inst *parserpb.Instance) error {
	b, err := Encode(inst)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("io/treedump: write: %w", err)
	}
	return nil
}

// Encode returns m in tree-dump form, starting with the `"root":` line, one line per
// field, list element and scalar, each ending in "\n". It fails with an error wrapping
// [ErrNotRepresentable] (naming the field path) when m has unknown fields, extensions or
// map fields, or when the text would not decode back to a message equal to m.
func Encode(m proto.Message) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("\"root\":\n")
	if err := encodeMessage(&buf, m.ProtoReflect(), ""); err != nil {
		return nil, err
	}
	// The format is ambiguous for some shapes; never emit text that reads back differently.
	check := m.ProtoReflect().New().Interface()
	if err := Unmarshal("", buf.Bytes(), check); err != nil {
		var de *Error
		if errors.As(err, &de) {
			return nil, fmt.Errorf("%w: line %d of the encoding would not decode (ambiguous nesting): %s",
				ErrNotRepresentable, de.Line, de.cause())
		}
		return nil, fmt.Errorf("%w: the encoding would not decode: %v", ErrNotRepresentable, err)
	}
	if !proto.Equal(m, check) {
		return nil, fmt.Errorf("%w: the encoding would decode to a different message (ambiguous nesting)",
			ErrNotRepresentable)
	}
	return buf.Bytes(), nil
}

func encodeMessage(buf *bytes.Buffer, m protoreflect.Message, path string) error {
	if len(m.GetUnknown()) > 0 {
		return fmt.Errorf("%w: %s has unknown fields", ErrNotRepresentable, pathOr(path, m))
	}
	var fields []protoreflect.FieldDescriptor
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if fd.IsExtension() {
			err = fmt.Errorf("%w: %s has extension %s", ErrNotRepresentable, pathOr(path, m), fd.FullName())
			return false
		}
		fields = append(fields, fd)
		return true
	})
	if err != nil {
		return err
	}
	slices.SortFunc(fields, func(a, b protoreflect.FieldDescriptor) int {
		return strings.Compare(string(a.Name()), string(b.Name()))
	})
	for _, fd := range fields {
		v := m.Get(fd)
		p := joinPath(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			return fmt.Errorf("%w: map field %s", ErrNotRepresentable, p)
		case fd.IsList():
			fmt.Fprintf(buf, "%q:\n", fd.Name())
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				if fd.Message() != nil {
					fmt.Fprintf(buf, "%d:\n", i)
					if err := encodeMessage(buf, l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i)); err != nil {
						return err
					}
					continue
				}
				s, err := formatScalar(fd, l.Get(i), p)
				if err != nil {
					return err
				}
				fmt.Fprintf(buf, "%d: %s\n", i, s)
			}
		case fd.Message() != nil:
			fmt.Fprintf(buf, "%q:\n", fd.Name())
			if err := encodeMessage(buf, v.Message(), p); err != nil {
				return err
			}
		default:
			s, err := formatScalar(fd, v, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(buf, "%q: %s\n", fd.Name(), s)
		}
	}
	return nil
}

func pathOr(path string, m protoreflect.Message) string {
	if path == "" {
		return string(m.Descriptor().FullName())
	}
	return path
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// formatScalar renders a scalar as protobuf JSON does.
func formatScalar(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) (string, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return strconv.FormatInt(v.Int(), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.FormatUint(v.Uint(), 10), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return `"` + strconv.FormatInt(v.Int(), 10) + `"`, nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return `"` + strconv.FormatUint(v.Uint(), 10) + `"`, nil
	case protoreflect.FloatKind:
		return formatFloat(v.Float(), 32), nil
	case protoreflect.DoubleKind:
		return formatFloat(v.Float(), 64), nil
	case protoreflect.StringKind:
		s := v.String()
		if !utf8.ValidString(s) {
			return "", fmt.Errorf("%w: %s holds invalid UTF-8", ErrNotRepresentable, path)
		}
		return quote(s), nil
	case protoreflect.BytesKind:
		return `"` + base64.StdEncoding.EncodeToString(v.Bytes()) + `"`, nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return `"` + string(ev.Name()) + `"`, nil
		}
		return strconv.FormatInt(int64(v.Enum()), 10), nil
	}
	return "", fmt.Errorf("%w: %s has unsupported kind %s", ErrNotRepresentable, path, fd.Kind())
}

func formatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return `"NaN"`
	case math.IsInf(f, 1):
		return `"Infinity"`
	case math.IsInf(f, -1):
		return `"-Infinity"`
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// quote renders s as a JSON string literal without HTML escaping.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
