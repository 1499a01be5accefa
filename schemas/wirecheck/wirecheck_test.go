package wirecheck

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

// lineID is exempt from the unknown-field rule, as record sniffing exempts it.
func lineID(n protoreflect.FullName) bool { return n == "idl.matrix.proto.LineId" }

// types are the message types compared: the record types, and one proto2 type with
// enums and unchecked strings.
var types = []func() proto.Message{
	func() proto.Message { return &examplepb.ExampleBatch{} },
	func() proto.Message { return &examplepb.Example{} },
	func() proto.Message { return &parserpb.Instance{} },
	func() proto.Message { return &examplepb.FeatureMap{} },
	func() proto.Message { return &descriptorpb.FieldDescriptorProto{} },
}

// reference is the message path: proto.Unmarshal succeeds and no message but a LineId
// keeps an unknown field.
func reference(b []byte, m proto.Message) bool {
	return proto.Unmarshal(b, m) == nil && !hasUnknown(m.ProtoReflect())
}

func hasUnknown(m protoreflect.Message) bool {
	if lineID(m.Descriptor().FullName()) {
		return false
	}
	if len(m.GetUnknown()) > 0 {
		return true
	}
	unknown := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					unknown = hasUnknown(mv.Message())
					return !unknown
				})
			}
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && !unknown; i++ {
				unknown = hasUnknown(l.Get(i).Message())
			}
		case fd.Message() != nil:
			unknown = hasUnknown(v.Message())
		}
		return !unknown
	})
	return unknown
}

func tag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return protowire.AppendTag(b, num, typ)
}

func bytesField(num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(tag(nil, num, protowire.BytesType), v)
}

func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(tag(nil, num, protowire.VarintType), v)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// cases are inputs built by hand around each rule, named by what they exercise.
func cases(t testing.TB) map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	mustMarshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	eb := mustMarshal(prototest.ExampleBatch(rng, 4))
	ex := mustMarshal(prototest.Examples(rng, 1)[0])
	in := mustMarshal(prototest.Instances(rng, 1)[0])
	feature := mustMarshal(prototest.FidV1(1, 2, 3))
	return map[string][]byte{
		"empty":                       nil,
		"example batch":               eb,
		"example":                     ex,
		"instance":                    in,
		"example batch, truncated":    eb[:len(eb)-1],
		"example, truncated":          ex[:len(ex)/2],
		"unknown field at the top":    cat(ex, varintField(1000, 7)),
		"unknown field in a feature":  cat(feature, varintField(999, 1)),
		"unknown field in a line id":  cat(ex, bytesField(100, varintField(999, 1))),
		"field number 0":              cat(tag(nil, 0, protowire.VarintType), []byte{1}),
		"wrong wire type":             cat(tag(nil, 3, protowire.Fixed32Type), []byte{1, 0, 0, 0}),
		"bad utf-8 in a name":         bytesField(1, bytesField(1, []byte{0xff, 0xfe})),
		"packed varints":              bytesField(1, protowire.AppendVarint(protowire.AppendVarint(nil, 5), 300)),
		"packed, truncated varint":    bytesField(1, []byte{0x80}),
		"packed fixed64, short":       bytesField(3, []byte{1, 2, 3}),
		"map entry":                   bytesField(1, cat(bytesField(1, []byte("a")), bytesField(2, feature))),
		"map entry, unknown field":    bytesField(1, cat(bytesField(1, []byte("a")), varintField(3, 1))),
		"map entry, unknown in value": bytesField(1, cat(bytesField(1, []byte("a")), bytesField(2, cat(feature, varintField(999, 1))))),
		"map entry, wrong key type":   bytesField(1, varintField(1, 4)),
		"enum, declared":              varintField(5, 9),
		"enum, undeclared":            varintField(5, 99),
		"proto2 string, bad utf-8":    bytesField(1, []byte{0xff}),
		"end group without start":     tag(nil, 1, protowire.EndGroupType),
		"group":                       cat(tag(nil, 7, protowire.StartGroupType), varintField(1, 1), tag(nil, 7, protowire.EndGroupType)),
		"deep nesting":                deep(200),
	}
}

// deep nests n Features' worth of length-delimited field 1.
func deep(n int) []byte {
	var b []byte
	for range n {
		b = bytesField(1, b)
	}
	return b
}

// TestMatchesMessagePath: on every hand-built input and every type, Known answers what
// proto.Unmarshal and the unknown-field walk answer.
func TestMatchesMessagePath(t *testing.T) {
	for name, b := range cases(t) {
		for _, mk := range types {
			m := mk()
			want := reference(b, m)
			if got := Known(b, m.ProtoReflect().Descriptor(), lineID); got != want {
				t.Errorf("%s as %s: Known %v, message path %v", name, m.ProtoReflect().Descriptor().FullName(), got, want)
			}
		}
	}
}

// TestRecordTypes pins the answers record sniffing relies on.
func TestRecordTypes(t *testing.T) {
	c := cases(t)
	eb := (&examplepb.ExampleBatch{}).ProtoReflect().Descriptor()
	ex := (&examplepb.Example{}).ProtoReflect().Descriptor()
	in := (&parserpb.Instance{}).ProtoReflect().Descriptor()
	for _, tc := range []struct {
		input      string
		eb, ex, in bool
	}{
		{"example batch", true, false, false},
		{"example", false, true, false},
		{"instance", false, false, true},
		{"unknown field in a line id", false, true, false},
		{"unknown field at the top", false, false, false},
	} {
		b := c[tc.input]
		if got := [3]bool{Known(b, eb, lineID), Known(b, ex, lineID), Known(b, in, lineID)}; got != [3]bool{tc.eb, tc.ex, tc.in} {
			t.Errorf("%s: ExampleBatch, Example, Instance = %v, want %v", tc.input, got, [3]bool{tc.eb, tc.ex, tc.in})
		}
	}
	if Known(c["unknown field in a line id"], ex, nil) {
		t.Error("without the exemption, a LineId's unknown field passes")
	}
}

// FuzzKnown compares Known with the message path on arbitrary bytes for every type.
func FuzzKnown(f *testing.F) {
	for _, b := range cases(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mk := range types {
			m := mk()
			want := reference(b, m)
			if got := Known(b, m.ProtoReflect().Descriptor(), lineID); got != want {
				t.Fatalf("%x as %s: Known %v, message path %v", b, m.ProtoReflect().Descriptor().FullName(), got, want)
			}
		}
	})
}

// BenchmarkSniff compares Known with the message path on a 256-row ExampleBatch, as a
// reader sniffs a file's first record.
func BenchmarkSniff(b *testing.B) {
	b.ReportAllocs()
	eb, err := proto.Marshal(prototest.ExampleBatch(rand.New(rand.NewPCG(3, 4)), 256))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("wire", func(b *testing.B) {
		for b.Loop() {
			for _, mk := range types[:3] {
				Known(eb, mk().ProtoReflect().Descriptor(), lineID)
			}
		}
	})
	b.Run("message", func(b *testing.B) {
		for b.Loop() {
			for _, mk := range types[:3] {
				reference(eb, mk())
			}
		}
	})
}
