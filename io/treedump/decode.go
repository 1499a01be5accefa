package treedump

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/schemas/parserpb"
)

var (
	// ErrSyntax reports a line that is not a valid tree-dump line for the schema.
	ErrSyntax = errors.New("io/treedump: syntax error")
	// ErrNotRepresentable reports a message the tree-dump format cannot express exactly.
	ErrNotRepresentable = errors.New("io/treedump: message not representable")
)

// Error reports a malformed line.
type Error struct {
	File string // the name given to the decoder ("" when none)
	Line int    // 1-based line number
	Text string // the offending line, trimmed
	Err  error  // wraps ErrSyntax
}

// Error formats the error as "io/treedump: file:line: cause (in "text")".
func (e *Error) Error() string {
	name := e.File
	if name == "" {
		name = "input"
	}
	return fmt.Sprintf("io/treedump: %s:%d: %s (in %q)", name, e.Line, e.cause(), e.Text)
}

// cause returns the message of Err without the package prefix.
func (e *Error) cause() string {
	if e.Err == nil {
		return "<nil>"
	}
	return strings.TrimPrefix(e.Err.Error(), "io/treedump: ")
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ParseInstance reads a tree-dump Instance from r. name is used in error messages.
func ParseInstance(r io.Reader, name string) (*parserpb.Instance, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("io/treedump: read %s: %w", name, err)
	}
	inst := &parserpb.Instance{}
	if err := Unmarshal(name, b, inst); err != nil {
		return nil, err
	}
	return inst, nil
}

// frame is an open message or list on the decoder's stack.
type frame struct {
	msg  protoreflect.Message // message frames
	seen map[protoreflect.FieldNumber]bool

	list protoreflect.List // list frames
	fd   protoreflect.FieldDescriptor
}

func (f *frame) isList() bool { return f.list != nil }

// decoder holds the state of one Unmarshal call.
type decoder struct {
	stack []*frame
}

// Unmarshal decodes the tree dump b into m, which is reset first. name is used in error
// messages. Errors are *[Error] values wrapping [ErrSyntax].
func Unmarshal(name string, b []byte, m proto.Message) error {
	proto.Reset(m)
	d := &decoder{stack: []*frame{{msg: m.ProtoReflect(), seen: map[protoreflect.FieldNumber]bool{}}}}
	first := true
	for i, raw := range strings.Split(string(b), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		isFirst := first
		first = false
		if err := d.line(line, isFirst); err != nil {
			return &Error{File: name, Line: i + 1, Text: line, Err: err}
		}
	}
	return nil
}

func syntaxf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSyntax, fmt.Sprintf(format, args...))
}

// stripQuotes removes surrounding '"' and then '\” characters, as the reference does.
func stripQuotes(s string) string {
	return strings.Trim(strings.Trim(strings.TrimSpace(s), `"`), "'")
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (d *decoder) line(line string, first bool) error {
	rawKey, value, ok := strings.Cut(line, ":")
	if !ok {
		return syntaxf(`want "key: value"`)
	}
	value = strings.TrimSpace(value)
	key := stripQuotes(rawKey)
	if first && key == "root" && value == "" {
		return nil
	}
	if isIndex(key) {
		idx, err := strconv.Atoi(key)
		if err != nil {
			return syntaxf("bad list index %q", key)
		}
		return d.index(idx, value)
	}
	if key == "" {
		return syntaxf("empty key")
	}
	return d.named(key, value)
}

func (d *decoder) top() *frame { return d.stack[len(d.stack)-1] }

func (d *decoder) pop() { d.stack = d.stack[:len(d.stack)-1] }

func lookupField(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	fields := md.Fields()
	if fd := fields.ByName(protoreflect.Name(key)); fd != nil {
		return fd
	}
	return fields.ByJSONName(key)
}

// accepts reports whether message frame f can take field fd now.
func (f *frame) accepts(fd protoreflect.FieldDescriptor) bool {
	if f.seen[fd.Number()] {
		return false
	}
	if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
		if set := f.msg.WhichOneof(od); set != nil {
			return false
		}
	}
	return true
}

// named handles a `"key": value` line.
func (d *decoder) named(key, value string) error {
	for {
		f := d.top()
		if f.isList() {
			d.pop()
			continue
		}
		fd := lookupField(f.msg.Descriptor(), key)
		if fd != nil && f.accepts(fd) {
			f.seen[fd.Number()] = true
			return d.setField(f.msg, fd, value)
		}
		if len(d.stack) == 1 {
			switch {
			case fd == nil:
				return syntaxf("unknown field %q (not in %s or any open message)", key, f.msg.Descriptor().FullName())
			case f.seen[fd.Number()]:
				return syntaxf("field %q given twice", key)
			default:
				return syntaxf("field %q: another member of oneof %s is already set", key,
					fd.ContainingOneof().Name())
			}
		}
		d.pop()
	}
}

func (d *decoder) setField(m protoreflect.Message, fd protoreflect.FieldDescriptor, value string) error {
	switch {
	case fd.IsMap():
		return syntaxf("map field %q is not supported", fd.Name())
	case fd.IsList():
		if value != "" {
			return syntaxf("repeated field %q takes indexed lines, not a value", fd.Name())
		}
		d.stack = append(d.stack, &frame{list: m.Mutable(fd).List(), fd: fd})
	case fd.Message() != nil:
		if value != "" {
			return syntaxf("message field %q takes nested lines, not a value", fd.Name())
		}
		d.stack = append(d.stack, &frame{msg: m.Mutable(fd).Message(), seen: map[protoreflect.FieldNumber]bool{}})
	default:
		if value == "" {
			// The reference clears a scalar given without a value; leave it unset.
			return nil
		}
		v, err := parseScalar(fd, value)
		if err != nil {
			return err
		}
		m.Set(fd, v)
	}
	return nil
}

// index handles an `i: value` line.
func (d *decoder) index(idx int, value string) error {
	for {
		f := d.top()
		if f.isList() {
			isMsg := f.fd.Message() != nil
			if idx == f.list.Len() && isMsg == (value == "") {
				if isMsg {
					el := f.list.NewElement()
					f.list.Append(el)
					d.stack = append(d.stack, &frame{msg: el.Message(), seen: map[protoreflect.FieldNumber]bool{}})
					return nil
				}
				v, err := parseScalar(f.fd, value)
				if err != nil {
					return err
				}
				f.list.Append(v)
				return nil
			}
		} else if len(d.stack) == 1 {
			if value == "" {
				return syntaxf("index %d opens no element: no open list of messages expects it", idx)
			}
			return syntaxf("index %d continues no open list of scalars", idx)
		}
		d.pop()
	}
}

// unquoteString decodes a JSON string literal, or strips quotes leniently.
func unquoteString(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		var out string
		if err := json.Unmarshal([]byte(s), &out); err == nil {
			return out
		}
	}
	return stripQuotes(s)
}

func parseScalar(fd protoreflect.FieldDescriptor, raw string) (protoreflect.Value, error) {
	bad := func(err error) (protoreflect.Value, error) {
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			err = ne.Err
		}
		return protoreflect.Value{}, syntaxf("field %q: bad %s value %q: %v", fd.Name(), fd.Kind(), raw, err)
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		s := unquoteString(raw)
		if fd.ParentFile() != nil && fd.ParentFile().Syntax() == protoreflect.Proto3 && !utf8.ValidString(s) {
			return bad(errors.New("invalid UTF-8"))
		}
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BytesKind:
		b, err := decodeBase64(unquoteString(raw))
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfBytes(b), nil
	}
	s := stripQuotes(raw)
	switch fd.Kind() {
	case protoreflect.BoolKind:
		v, err := strconv.ParseBool(s)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfBool(v), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfInt32(int32(v)), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfInt64(v), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfUint32(uint32(v)), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfUint64(v), nil
	case protoreflect.FloatKind:
		v, err := parseFloat(s, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfFloat32(float32(v)), nil
	case protoreflect.DoubleKind:
		v, err := parseFloat(s, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfFloat64(v), nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByName(protoreflect.Name(s)); ev != nil {
			return protoreflect.ValueOfEnum(ev.Number()), nil
		}
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return bad(fmt.Errorf("not a value of %s", fd.Enum().FullName()))
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(v)), nil
	}
	return bad(errors.New("unsupported kind"))
}

// parseFloat accepts Go float syntax plus protobuf JSON's "Infinity" and "-Infinity".
// Out-of-range values are errors.
func parseFloat(s string, bits int) (float64, error) {
	switch s {
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	v, err := strconv.ParseFloat(s, bits)
	if err != nil {
		return 0, err
	}
	return v, nil
}

// decodeBase64 accepts standard or URL-safe base64, padded or not, like protobuf JSON.
func decodeBase64(s string) ([]byte, error) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc.DecodeString(s)
}
