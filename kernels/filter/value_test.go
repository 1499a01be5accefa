package filter

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// valueRows is the LineId fixture of the filter_by_value tests.
func valueRows() []*matrixpb.LineId {
	return []*matrixpb.LineId{
		0: lid(func(l *matrixpb.LineId) {
			l.ReqTime, l.Chnid, l.Uid = new(int64(100)), new(int64(-5)), new(uint64(1<<63+7))
			l.SampleRate, l.Cid, l.IsDraw = new(float32(0.5)), new("video_123"), new(true)
			l.Actions = []int32{1, 2, 2}
		}),
		1: lid(func(l *matrixpb.LineId) {
			l.ReqTime, l.Chnid, l.Uid = new(int64(200)), new(int64(10)), new(uint64(3))
			l.Cid = new("image_9")
			l.Actions = []int32{3}
		}),
		2: nil, // absent LineId: defaults (req_time 0, sample_rate 1, no actions)
	}
}

func TestFilterByValue(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	tests := []struct {
		name string
		o    ValueOptions
		want []int
	}{
		{"gt", ValueOptions{Field: "req_time", Op: "gt", Operands: Operands{Ints: []int64{100}}}, []int{1}},
		{"ge", ValueOptions{Field: "req_time", Op: "ge", Operands: Operands{Ints: []int64{100}}}, []int{0, 1}},
		{"eq default", ValueOptions{Field: "req_time", Op: "eq", Operands: Operands{Ints: []int64{0}}}, []int{2}},
		{"lt", ValueOptions{Field: "chnid", Op: "lt", Operands: Operands{Ints: []int64{0}}}, []int{0}},
		{"le", ValueOptions{Field: "chnid", Op: "le", Operands: Operands{Ints: []int64{0}}}, []int{0, 2}},
		{"neq", ValueOptions{Field: "chnid", Op: "neq", Operands: Operands{Ints: []int64{10}}}, []int{0, 2}},
		{"between is half-open", ValueOptions{Field: "req_time", Op: "between", Operands: Operands{Ints: []int64{100, 200}}}, []int{0}},
		{"in", ValueOptions{Field: "chnid", Op: "in", Operands: Operands{Ints: []int64{10, -5, 10}}}, []int{0, 1}},
		{"in empty", ValueOptions{Field: "chnid", Op: "in", Operands: Operands{Ints: []int64{}}}, []int{}},
		{"not-in", ValueOptions{Field: "chnid", Op: "not-in", Operands: Operands{Ints: []int64{10}}}, []int{0, 2}},
		{"uint64 reinterprets operands", ValueOptions{Field: "uid", Op: "eq", Operands: Operands{Ints: []int64{-1<<63 + 7}}}, []int{0}},
		{"uint64 compares unsigned", ValueOptions{Field: "uid", Op: "gt", Operands: Operands{Ints: []int64{5}}}, []int{0}},
		{"float", ValueOptions{Field: "sample_rate", Op: "lt", Operands: Operands{Floats: []float64{0.75}}}, []int{0}},
		{"float default 1", ValueOptions{Field: "sample_rate", Op: "eq", Operands: Operands{Floats: []float64{1}}}, []int{1, 2}},
		{"float between", ValueOptions{Field: "sample_rate", Op: "between", Operands: Operands{Floats: []float64{0.5, 1}}}, []int{0}},
		{"string eq", ValueOptions{Field: "cid", Op: "eq", Operands: Operands{Strings: []string{"image_9"}}}, []int{1}},
		{"string gt", ValueOptions{Field: "cid", Op: "gt", Operands: Operands{Strings: []string{"j"}}}, []int{0}},
		{"startswith", ValueOptions{Field: "cid", Op: "startswith", Operands: Operands{Strings: []string{"x", "video"}}}, []int{0}},
		{"endswith", ValueOptions{Field: "cid", Op: "endswith", Operands: Operands{Strings: []string{"_9", "3"}}}, []int{0, 1}},
		{"string in", ValueOptions{Field: "cid", Op: "in", Operands: Operands{Strings: []string{"", "image_9"}}}, []int{1, 2}},
		{"bool as 0/1", ValueOptions{Field: "is_draw", Op: "eq", Operands: Operands{Ints: []int64{1}}}, []int{0}},
		{"any", ValueOptions{Field: "actions", Op: "any", Operands: Operands{Ints: []int64{2, 3}}}, []int{0, 1}},
		{"all", ValueOptions{Field: "actions", Op: "all", Operands: Operands{Ints: []int64{1, 2}}}, []int{0}},
		{"diff", ValueOptions{Field: "actions", Op: "diff", Operands: Operands{Ints: []int64{3}}}, []int{0}},
		{"diff keep_empty", ValueOptions{Field: "actions", Op: "diff", Operands: Operands{Ints: []int64{3}}, KeepEmpty: true}, []int{0, 2}},
		{"all keep_empty", ValueOptions{Field: "actions", Op: "all", Operands: Operands{Ints: []int64{9}}, KeepEmpty: true}, []int{2}},
	}
	for _, v := range lineIDVariants {
		var exs []*examplepb.Example
		for _, l := range valueRows() {
			exs = append(exs, ex(nil, l))
		}
		rec := examples(t, mem, exs, v.opts...)
		for _, tc := range tests {
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				f, err := NewFilterByValue(tc.o)
				if err != nil {
					t.Fatal(err)
				}
				if got := keep(t, f, rec); !slices.Equal(got, tc.want) {
					t.Errorf("kept %v, want %v", got, tc.want)
				}
			})
		}
		rec.Release()
	}
}

func TestFilterByValueConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		o    ValueOptions
	}{
		{"unknown field", ValueOptions{Field: "no_such_field", Op: "eq", Operands: Operands{Ints: []int64{1}}}},
		{"unknown op", ValueOptions{Field: "req_time", Op: "approx", Operands: Operands{Ints: []int64{1}}}},
		{"float operands on int field", ValueOptions{Field: "req_time", Op: "eq", Operands: Operands{Floats: []float64{1}}}},
		{"int operands on float field", ValueOptions{Field: "sample_rate", Op: "eq", Operands: Operands{Ints: []int64{1}}}},
		{"int operands on string field", ValueOptions{Field: "cid", Op: "eq", Operands: Operands{Ints: []int64{1}}}},
		{"NaN operand", ValueOptions{Field: "sample_rate", Op: "eq", Operands: Operands{Floats: []float64{nan()}}}},
		{"two operands for gt", ValueOptions{Field: "req_time", Op: "gt", Operands: Operands{Ints: []int64{1, 2}}}},
		{"one operand for between", ValueOptions{Field: "req_time", Op: "between", Operands: Operands{Ints: []int64{1}}}},
		{"startswith on int", ValueOptions{Field: "req_time", Op: "startswith", Operands: Operands{Ints: []int64{1}}}},
		{"set op on scalar", ValueOptions{Field: "req_time", Op: "any", Operands: Operands{Ints: []int64{1}}}},
		{"scalar op on repeated", ValueOptions{Field: "actions", Op: "eq", Operands: Operands{Ints: []int64{1}}}},
		{"set op without operands", ValueOptions{Field: "actions", Op: "all"}},
		{"operand file with eq", ValueOptions{Field: "req_time", Op: "eq", OperandFile: "x"}},
		{"operand file and operands", ValueOptions{Field: "req_time", Op: "in", OperandFile: "x", Operands: Operands{Ints: []int64{1}}}},
		{"missing operand file", ValueOptions{Field: "req_time", Op: "in", OperandFile: filepath.Join(t.TempDir(), "none")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewFilterByValue(tc.o); !errors.Is(err, ErrConfig) {
				t.Errorf("got %v, want ErrConfig", err)
			}
		})
	}
}

func writeFilterValues(t *testing.T, fv *examplepb.FilterValues) string {
	t.Helper()
	b, err := proto.Marshal(fv)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "values.pb")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFilterByValueOperandFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	var exs []*examplepb.Example
	for _, l := range valueRows() {
		exs = append(exs, ex(nil, l))
	}
	rec := examples(t, mem, exs)
	defer rec.Release()

	ints := writeFilterValues(t, &examplepb.FilterValues{Type: &examplepb.FilterValues_Int64List{Int64List: &examplepb.Int64List{Value: []int64{200, 0}}}})
	f, err := NewFilterByValue(ValueOptions{Field: "req_time", Op: "not-in", OperandFile: ints})
	if err != nil {
		t.Fatal(err)
	}
	if got := keep(t, f, rec); !slices.Equal(got, []int{0}) {
		t.Errorf("not-in file: kept %v, want [0]", got)
	}
	strs := writeFilterValues(t, &examplepb.FilterValues{Type: &examplepb.FilterValues_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{[]byte("video_123")}}}})
	f, err = NewFilterByValue(ValueOptions{Field: "cid", Op: "in", OperandFile: strs})
	if err != nil {
		t.Fatal(err)
	}
	if got := keep(t, f, rec); !slices.Equal(got, []int{0}) {
		t.Errorf("in file: kept %v, want [0]", got)
	}
	one := writeFilterValues(t, &examplepb.FilterValues{Type: &examplepb.FilterValues_Int64List{Int64List: &examplepb.Int64List{Value: []int64{200}}}})
	if _, err := NewFilterByValue(ValueOptions{Field: "req_time", Op: "eq", OperandFile: one}); !errors.Is(err, ErrConfig) {
		t.Errorf("operand file with eq: got %v, want ErrConfig", err)
	}
	// The file's list type must match the field.
	if _, err := NewFilterByValue(ValueOptions{Field: "req_time", Op: "in", OperandFile: strs}); !errors.Is(err, ErrConfig) {
		t.Errorf("bytes file for an int field: got %v, want ErrConfig", err)
	}
	floats := writeFilterValues(t, &examplepb.FilterValues{Type: &examplepb.FilterValues_FloatList{FloatList: &examplepb.FloatList{Value: []float32{0.5}}}})
	o, err := LoadFilterValues(floats)
	if err != nil || !slices.Equal(o.Floats, []float64{0.5}) || o.Ints != nil {
		t.Errorf("LoadFilterValues: %+v, %v", o, err)
	}
	if _, err := OperandsFromFilterValues(&examplepb.FilterValues{}); !errors.Is(err, ErrConfig) {
		t.Errorf("empty FilterValues: got %v, want ErrConfig", err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte{0xff, 0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFilterValues(garbage); !errors.Is(err, ErrConfig) {
		t.Errorf("garbage file: got %v, want ErrConfig", err)
	}
}

func TestFilterByValueSharedLineID(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	l, _ := proto.Marshal(lid(func(l *matrixpb.LineId) { l.ReqTime = new(int64(7)) }))
	cell := &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{l}}}}
	eb := &examplepb.ExampleBatch{BatchSize: 4, NamedFeatureList: []*examplepb.NamedFeatureList{
		{Name: batch.ListLineID, Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{cell}},
	}}
	for _, v := range lineIDVariants {
		rec, err := batch.FromExampleBatch(mem, eb, v.opts...)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := NewFilterByValue(ValueOptions{Field: "req_time", Op: "eq", Operands: Operands{Ints: []int64{7}}})
		if got := keep(t, f, rec); !slices.Equal(got, seq(4)) {
			t.Errorf("%s: kept %v, want all 4", v.name, got)
		}
		rec.Release()
	}
}

func featureRows() []*examplepb.Example {
	return []*examplepb.Example{
		0: ex(nil, nil, int64F("i", 5), floatF("f", 0.5), doubleF("d", 2.5), bytesF("b", "hello"),
			feat("s", &examplepb.Feature{Type: &examplepb.Feature_FloatValue{FloatValue: 0.5}})),
		1: ex(nil, nil, int64F("i", 1, 2, 2), floatF("f", 1, 2), doubleF("d"), bytesF("b", "world")),
		2: ex(nil, nil, int64F("i")),
		3: ex(nil, nil, &examplepb.NamedFeature{Name: "i"}), // a NamedFeature without a Feature
		4: ex(nil, nil),                                     // no features at all
	}
}

func TestFilterByFeatureValue(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, featureRows())
	defer rec.Release()
	tests := []struct {
		name string
		o    FeatureValueOptions
		want []int
	}{
		{"int64 eq", FeatureValueOptions{Feature: "i", FieldType: "int64", Op: "eq", Operands: Operands{Ints: []int64{5}}}, []int{0}},
		{"int64 eq keep_empty", FeatureValueOptions{Feature: "i", FieldType: "int64", Op: "eq", Operands: Operands{Ints: []int64{5}}, KeepEmpty: true}, []int{0, 1, 2, 3, 4}},
		{"int64 any", FeatureValueOptions{Feature: "i", FieldType: "int64", Op: "any", Operands: Operands{Ints: []int64{2, 9}}}, []int{1}},
		{"int64 all (sets)", FeatureValueOptions{Feature: "i", FieldType: "int64", Op: "all", Operands: Operands{Ints: []int64{2, 1, 1}}}, []int{1}},
		{"int64 diff", FeatureValueOptions{Feature: "i", FieldType: "int64", Op: "diff", Operands: Operands{Ints: []int64{2}}}, []int{0}},
		{"int64 diff keep_empty", FeatureValueOptions{Feature: "i", FieldType: "int64", Op: "diff", Operands: Operands{Ints: []int64{2}}, KeepEmpty: true}, []int{0, 2, 3, 4}},
		{"float between", FeatureValueOptions{Feature: "f", FieldType: "float", Op: "between", Operands: Operands{Floats: []float64{0, 1}}}, []int{0}},
		{"float 2 values keep_empty", FeatureValueOptions{Feature: "f", FieldType: "float", Op: "gt", Operands: Operands{Floats: []float64{100}}, KeepEmpty: true}, []int{1, 2, 3, 4}},
		{"double ge", FeatureValueOptions{Feature: "d", FieldType: "double", Op: "ge", Operands: Operands{Floats: []float64{2.5}}}, []int{0}},
		{"bytes startswith", FeatureValueOptions{Feature: "b", FieldType: "bytes", Op: "startswith", Operands: Operands{Strings: []string{"wor"}}}, []int{1}},
		{"bytes not-in", FeatureValueOptions{Feature: "b", FieldType: "bytes", Op: "not-in", Operands: Operands{Strings: []string{"hello"}}}, []int{1}},
		{"wrong type keep_empty", FeatureValueOptions{Feature: "f", FieldType: "double", Op: "gt", Operands: Operands{Floats: []float64{0}}, KeepEmpty: true}, []int{0, 1, 2, 3, 4}},
		{"scalar kind keep_empty", FeatureValueOptions{Feature: "s", FieldType: "float", Op: "eq", Operands: Operands{Floats: []float64{0.5}}, KeepEmpty: true}, []int{0, 1, 2, 3, 4}},
		{"scalar kind", FeatureValueOptions{Feature: "s", FieldType: "float", Op: "eq", Operands: Operands{Floats: []float64{0.5}}}, []int{}},
		{"wrong type", FeatureValueOptions{Feature: "f", FieldType: "double", Op: "gt", Operands: Operands{Floats: []float64{0}}}, []int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFilterByFeatureValue(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := keep(t, f, rec); !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFilterByFeatureValueErrors(t *testing.T) {
	for _, o := range []FeatureValueOptions{
		{Feature: "", FieldType: "int64", Op: "eq", Operands: Operands{Ints: []int64{1}}},
		{Feature: "x", FieldType: "int32", Op: "eq", Operands: Operands{Ints: []int64{1}}},
		{Feature: "x", FieldType: "float", Op: "any", Operands: Operands{Floats: []float64{1}}},
		{Feature: "x", FieldType: "int64", Op: "startswith", Operands: Operands{Ints: []int64{1}}},
		{Feature: "x", FieldType: "bytes", Op: "eq", Operands: Operands{Ints: []int64{1}}},
	} {
		if _, err := NewFilterByFeatureValue(o); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", o, err)
		}
	}
}

// unknownField is LineId field 11 (unknown to our schema) holding varint 42, as wire bytes.
var unknownField = protowire.AppendVarint(protowire.AppendTag(nil, 11, protowire.VarintType), 42)

func TestAddAction(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	withUnknown := lid(func(l *matrixpb.LineId) { l.ReqTime = new(int64(500)); l.Actions = []int32{1} })
	withUnknown.ProtoReflect().SetUnknown(unknownField)
	exs := []*examplepb.Example{
		0: ex(nil, withUnknown),
		1: ex(nil, lid(func(l *matrixpb.LineId) { l.ReqTime = new(int64(5)) })),
		2: ex(nil, nil),
	}
	for _, v := range lineIDVariants {
		rec := examples(t, mem, exs, v.opts...)
		a, err := NewAddAction(AddActionOptions{Field: "req_time", Op: "ge", Operands: Operands{Ints: []int64{100}}, Action: 9})
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.Apply(mem, rec)
		if err != nil {
			t.Fatal(err)
		}
		got := lineIDsOf(t, out)
		if !slices.Equal(got[0].GetActions(), []int32{1, 9}) || got[0].GetReqTime() != 500 {
			t.Errorf("%s: row 0 = %v, want actions [1 9]", v.name, got[0])
		}
		if u := got[0].ProtoReflect().GetUnknown(); !bytes.Equal(u, unknownField) {
			t.Errorf("%s: unknown field lost (I3): %x", v.name, u)
		}
		inRows, outRows := rowsOf(t, rec), rowsOf(t, out)
		if !bytes.Equal(inRows[1].LineID, outRows[1].LineID) || outRows[2].LineID != nil {
			t.Errorf("%s: unmatched rows changed", v.name)
		}
		// The decoded columns follow the new bytes.
		f, _ := NewFilterByValue(ValueOptions{Field: "actions", Op: "any", Operands: Operands{Ints: []int64{9}}})
		if k := keep(t, f, out); !slices.Equal(k, []int{0}) {
			t.Errorf("%s: rows with action 9: %v", v.name, k)
		}
		out.Release()

		// A default LineId matches "eq 0": the absent row gets one.
		a, _ = NewAddAction(AddActionOptions{Field: "req_time", Op: "eq", Operands: Operands{Ints: []int64{0}}, Action: 4})
		out, err = a.Apply(mem, rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := lineIDsOf(t, out); got[2] == nil || !slices.Equal(got[2].GetActions(), []int32{4}) {
			t.Errorf("%s: absent row: %v", v.name, got[2])
		}
		out.Release()

		// Nothing matches: the input comes back, retained.
		a, _ = NewAddAction(AddActionOptions{Field: "cid", Op: "in", Operands: Operands{Strings: []string{"zzz"}}, Action: 4})
		out, err = a.Apply(mem, rec)
		if err != nil {
			t.Fatal(err)
		}
		if out != rec {
			t.Errorf("%s: no match but a new record", v.name)
		}
		out.Release()
		rec.Release()
	}
	for _, o := range []AddActionOptions{
		{Field: "actions", Op: "any", Operands: Operands{Ints: []int64{1}}},
		{Field: "nope", Op: "eq", Operands: Operands{Ints: []int64{1}}},
		{Field: "req_time", Op: "not-in", Operands: Operands{Ints: []int64{1}}},
	} {
		if _, err := NewAddAction(o); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", o, err)
		}
	}
}

func TestAddActionInstance(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := instances(t, mem, []*parserpb.Instance{{Fid: []uint64{a1}, LineId: lid(func(l *matrixpb.LineId) { l.Chnid = new(int64(3)) })}})
	defer rec.Release()
	a, _ := NewAddAction(AddActionOptions{Field: "chnid", Op: "in", Operands: Operands{Ints: []int64{3}}, Action: 77})
	out, err := a.Apply(mem, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	ins, err := batch.ToInstances(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ins[0].GetLineId().GetActions(), []int32{77}) || !slices.Equal(ins[0].GetFid(), []uint64{a1}) {
		t.Errorf("got %v", ins[0])
	}
}

func nan() float64 { return math.NaN() }
