package parse

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

var (
	inv  = InvalidLabel
	fmin = FltMin
)

// want lists expected output columns; columns not listed are not checked.
type want struct {
	sparse map[string][][]uint64
	f32    map[string][]float32
	i64    map[string][]int64
	str    map[string][]string
}

func checkWant(t *testing.T, got *result, w want) {
	t.Helper()
	sub := &result{n: got.n, sparse: map[string][][]uint64{}, f32: map[string][]float32{}, i64: map[string][]int64{}, str: map[string][]string{}}
	exp := &result{n: got.n, sparse: w.sparse, f32: w.f32, i64: w.i64, str: w.str}
	for k := range w.sparse {
		sub.sparse[k] = got.sparse[k]
	}
	for k := range w.f32 {
		sub.f32[k] = got.f32[k]
	}
	for k := range w.i64 {
		sub.i64[k] = got.i64[k]
	}
	for k := range w.str {
		sub.str[k] = got.str[k]
	}
	if exp.sparse == nil {
		exp.sparse = map[string][][]uint64{}
	}
	if exp.f32 == nil {
		exp.f32 = map[string][]float32{}
	}
	if exp.i64 == nil {
		exp.i64 = map[string][]int64{}
	}
	if exp.str == nil {
		exp.str = map[string][]string{}
	}
	if d := diffResult(sub, exp); d != "" {
		t.Error(d)
	}
}

type ruleCase struct {
	name   string
	rec    func(t testing.TB, mem memory.Allocator) arrow.RecordBatch
	sparse []SparseFeature
	dense  []DenseFeature
	extra  []ExtraFeature
	want   want
	err    string // substring of the expected error (wrapping ErrInput)
}

func sp(names ...string) []SparseFeature {
	out := make([]SparseFeature, len(names))
	for i, n := range names {
		out[i] = SparseFeature{Name: n}
	}
	return out
}

func f32d(name string, dim int) DenseFeature { return DenseFeature{Name: name, Dim: dim} }

func eb(rows int, lists ...*examplepb.NamedFeatureList) func(testing.TB, memory.Allocator) arrow.RecordBatch {
	return func(t testing.TB, mem memory.Allocator) arrow.RecordBatch { return ebRecord(t, mem, rows, lists...) }
}

func ex(exs ...*examplepb.Example) func(testing.TB, memory.Allocator) arrow.RecordBatch {
	return func(t testing.TB, mem memory.Allocator) arrow.RecordBatch { return exRecord(t, mem, exs...) }
}

func in(ins ...*parserpb.Instance) func(testing.TB, memory.Allocator) arrow.RecordBatch {
	return func(t testing.TB, mem memory.Allocator) arrow.RecordBatch { return inRecord(t, mem, ins...) }
}

func mf(name string) *matrixpb.Feature { return &matrixpb.Feature{Name: proto.String(name)} }

func lineBytes(m *matrixpb.LineId) *examplepb.Feature {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{b}}}}
}

const (
	v1a = 3<<54 | 0x3F<<48 | 0xABCDEF // v1 fid of slot 3 with signature bits 48..53 set
	v2a = 3<<48 | 0xABCDEF
)

// TestMissingValueTable checks every row of io.md §4.5 for every source.
func TestMissingValueTable(t *testing.T) {
	lid := &matrixpb.LineId{} // every field absent
	cases := []ruleCase{
		// sparse feature absent → empty row(s)
		{name: "instance/sparse absent", rec: in(&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("fc_a"), Fid: []uint64{5}}}}, &parserpb.Instance{}),
			sparse: sp("fc_a", "fc_b", "slot_9"),
			want:   want{sparse: map[string][][]uint64{"fc_a": {{5}, nil}, "fc_b": {nil, nil}, "slot_9": {nil, nil}}}},
		{name: "example/sparse absent", rec: ex(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("a", prototest.FidV2(5))}}, &examplepb.Example{}),
			sparse: sp("a", "b"),
			want:   want{sparse: map[string][][]uint64{"a": {{5}, nil}, "b": {nil, nil}}}},
		{name: "examplebatch/sparse absent", rec: eb(2, list("a", prototest.FidV2(5), unset())),
			sparse: sp("a", "b"),
			want:   want{sparse: map[string][][]uint64{"a": {{5}, nil}, "b": {nil, nil}}}},
		// dense float absent → 0
		{name: "instance/dense absent", rec: in(&parserpb.Instance{}), dense: []DenseFeature{f32d("d", 2)},
			want: want{f32: map[string][]float32{"d": {0, 0}}}},
		{name: "example/dense absent", rec: ex(&examplepb.Example{}), dense: []DenseFeature{f32d("d", 2)},
			want: want{f32: map[string][]float32{"d": {0, 0}}}},
		{name: "examplebatch/dense absent", rec: eb(1, list("x", unset())), dense: []DenseFeature{f32d("d", 2)},
			want: want{f32: map[string][]float32{"d": {0, 0}}}},
		// dense float wrong length
		{name: "instance/dense wrong length → row 0", rec: in(
			&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("d"), FloatValue: []float32{1, 2}}}},
			&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("d"), FloatValue: []float32{1, 2, 3, 4}}}},
			&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("d"), FloatValue: []float32{1, 2, 3}}}}),
			dense: []DenseFeature{f32d("d", 3)},
			want:  want{f32: map[string][]float32{"d": {0, 0, 0, 0, 0, 0, 1, 2, 3}}}},
		{name: "example/dense wrong length → first min(n,dim)", rec: ex(
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.Floats(1, 2)), nf("e", prototest.Doubles(1, 2, 3, 4))}},
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.Floats(1, 2, 3, 4)), nf("e", prototest.Doubles(1, 2))}}),
			dense: []DenseFeature{f32d("d", 3), f32d("e", 3)},
			want:  want{f32: map[string][]float32{"d": {1, 2, 0, 1, 2, 3}, "e": {1, 2, 3, 1, 2, 0}}}},
		{name: "examplebatch/dense wrong length → first min(n,dim)", rec: eb(2, list("d", prototest.Floats(1, 2), prototest.Floats(1, 2, 3, 4)), list("e", prototest.Doubles(1, 2, 3, 4), prototest.Doubles(1))),
			dense: []DenseFeature{f32d("d", 3), f32d("e", 3)},
			want:  want{f32: map[string][]float32{"d": {1, 2, 0, 1, 2, 3}, "e": {1, 2, 3, 1, 0, 0}}}},
		// dense float dim 1, empty list
		{name: "instance/dense dim1 empty → 0", rec: in(&parserpb.Instance{Feature: []*matrixpb.Feature{mf("d")}}),
			dense: []DenseFeature{f32d("d", 1)}, want: want{f32: map[string][]float32{"d": {0}}}},
		{name: "example/dense dim1 empty → FLT_MIN", rec: ex(
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.Floats()), nf("e", prototest.Doubles(2))}},
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.Floats(3)), nf("e", prototest.Doubles())}}),
			dense: []DenseFeature{f32d("d", 1), f32d("e", 1)}, want: want{f32: map[string][]float32{"d": {fmin, 3}, "e": {2, fmin}}}},
		{name: "examplebatch/dense dim1 empty → FLT_MIN", rec: eb(2, list("d", prototest.Floats(), prototest.Floats(3)), list("e", prototest.Doubles(2), prototest.Doubles())),
			dense: []DenseFeature{f32d("d", 1), f32d("e", 1)}, want: want{f32: map[string][]float32{"d": {fmin, 3}, "e": {2, fmin}}}},
		// label absent
		{name: "instance/label absent → 0", rec: in(&parserpb.Instance{}), dense: []DenseFeature{f32d("label", 2)},
			want: want{f32: map[string][]float32{"label": {0, 0}}}},
		{name: "example/label absent → INVALID_LABEL", rec: ex(&examplepb.Example{}), dense: []DenseFeature{f32d("label", 2)},
			want: want{f32: map[string][]float32{"label": {inv, inv}}}},
		{name: "example/label absent dim1 → INVALID_LABEL", rec: ex(&examplepb.Example{}), dense: []DenseFeature{f32d("label", 1)},
			want: want{f32: map[string][]float32{"label": {inv}}}},
		{name: "examplebatch/label absent → 0", rec: eb(1, list("x", unset())), dense: []DenseFeature{f32d("label", 2)},
			want: want{f32: map[string][]float32{"label": {0, 0}}}},
		// label shorter than dim
		{name: "instance/label short → rest 0", rec: in(&parserpb.Instance{Label: []float32{5}}), dense: []DenseFeature{f32d("label", 3)},
			want: want{f32: map[string][]float32{"label": {5, 0, 0}}}},
		{name: "example/label short → rest INVALID_LABEL", rec: ex(&examplepb.Example{Label: []float32{5}}), dense: []DenseFeature{f32d("label", 3)},
			want: want{f32: map[string][]float32{"label": {5, inv, inv}}}},
		{name: "examplebatch/label short → rest 0", rec: eb(1, list("__LABEL__", prototest.Floats(5))), dense: []DenseFeature{f32d("label", 3)},
			want: want{f32: map[string][]float32{"label": {5, 0, 0}}}},
		// instance_weight absent
		{name: "instance/weight absent → 1", rec: in(&parserpb.Instance{}, &parserpb.Instance{InstanceWeight: proto.Float32(-2)}),
			dense: []DenseFeature{f32d("instance_weight", 1)}, want: want{f32: map[string][]float32{"instance_weight": {1, -2}}}},
		{name: "example/weight absent → 1", rec: ex(&examplepb.Example{}, &examplepb.Example{InstanceWeight: -2}, &examplepb.Example{InstanceWeight: 0.5}),
			dense: []DenseFeature{f32d("instance_weight", 1)}, want: want{f32: map[string][]float32{"instance_weight": {1, 1, 0.5}}}},
		{name: "examplebatch/weight list absent → 0", rec: eb(1, list("x", unset())),
			dense: []DenseFeature{f32d("instance_weight", 1)}, want: want{f32: map[string][]float32{"instance_weight": {0}}}},
		// LineId field absent
		{name: "instance/line id absent → proto defaults", rec: in(&parserpb.Instance{}, &parserpb.Instance{LineId: lid}),
			extra: []ExtraFeature{{Name: "sample_rate", Dim: 1}, {Name: "req_time", Dim: 1}, {Name: "user_id", Dim: 1}, {Name: "actions", Dim: 2}},
			want: want{f32: map[string][]float32{"sample_rate": {1, 1}}, i64: map[string][]int64{"req_time": {0, 0}, "actions": {0, 0, 0, 0}},
				str: map[string][]string{"user_id": {"", ""}}}},
		{name: "example/line id absent → proto defaults", rec: ex(&examplepb.Example{}, &examplepb.Example{LineId: lid}),
			extra: []ExtraFeature{{Name: "sample_rate", Dim: 1}, {Name: "req_time", Dim: 1}, {Name: "user_id", Dim: 1}},
			want: want{f32: map[string][]float32{"sample_rate": {1, 1}}, i64: map[string][]int64{"req_time": {0, 0}},
				str: map[string][]string{"user_id": {"", ""}}}},
		{name: "examplebatch/line id field absent → proto defaults", rec: eb(1, list("__LINE_ID__", lineBytes(lid))),
			extra: []ExtraFeature{{Name: "sample_rate", Dim: 1}, {Name: "req_time", Dim: 1}, {Name: "user_id", Dim: 1}},
			want: want{f32: map[string][]float32{"sample_rate": {1}}, i64: map[string][]int64{"req_time": {0}},
				str: map[string][]string{"user_id": {""}}}},
		{name: "examplebatch/no __LINE_ID__ → whole column 0", rec: eb(2, list("x", unset(), unset())),
			extra: []ExtraFeature{{Name: "sample_rate", Dim: 1}, {Name: "req_time", Dim: 1}, {Name: "user_id", Dim: 2}},
			want: want{f32: map[string][]float32{"sample_rate": {0, 0}}, i64: map[string][]int64{"req_time": {0, 0}},
				str: map[string][]string{"user_id": {"", "", "", ""}}}},
	}
	runRules(t, cases)
}

func runRules(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			spec := mustSpec(t, c.sparse, c.dense, c.extra)
			rec := c.rec(t, mem)
			defer rec.Release()
			res, err := parseResult(t, mem, rec, spec)
			if c.err != "" {
				if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrInput containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkWant(t, res, c.want)
		})
	}
}

// TestRules checks the per-source rules of io.md §4.2–§4.4 and §2.6 beyond the table.
func TestRules(t *testing.T) {
	lineA := &matrixpb.LineId{ReqTime: proto.Int64(5), Chnid: proto.Int64(7), Uid: proto.Uint64(1<<63 | 9),
		Actions: []int32{1, 2}, UserId: proto.String("u"), SampleRate: proto.Float32(0.25)}
	lineB := &matrixpb.LineId{ReqTime: proto.Int64(6)}
	exLine := func(f *examplepb.Feature) *examplepb.Example {
		return &examplepb.Example{LineId: lineA, NamedFeature: []*examplepb.NamedFeature{nf("__LINE_ID__", f)}}
	}
	qtz := func(payload ...byte) *parserpb.Instance {
		return &parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("e"),
			BytesValue: [][]byte{[]byte("other"), append([]byte("UE_QTZ"), payload...)}}}}
	}
	step := float32(2) / 255
	cases := []ruleCase{
		// ExampleBatch weights, labels and SHARED lists.
		{name: "examplebatch/weight ≤ 0 or NaN → 1", rec: eb(4, list("instance_weight", prototest.Floats(0.25), prototest.Floats(-1), prototest.Floats(0), prototest.Floats(float32(math.NaN())))),
			dense: []DenseFeature{f32d("instance_weight", 1)}, want: want{f32: map[string][]float32{"instance_weight": {0.25, 1, 1, 1}}}},
		{name: "examplebatch/weight list of two values (feature column)", rec: eb(2, list("instance_weight", prototest.Floats(3, 4), prototest.Floats(-5))),
			dense: []DenseFeature{f32d("instance_weight", 1)}, want: want{f32: map[string][]float32{"instance_weight": {3, 1}}}},
		{name: "examplebatch/weight unset cell aborts", rec: eb(2, list("instance_weight", prototest.Floats(3), unset())),
			dense: []DenseFeature{f32d("instance_weight", 1)}, err: `"instance_weight" row 1`},
		{name: "examplebatch/weight bytes cell aborts", rec: eb(1, list("instance_weight", prototest.Bytes("x"))),
			dense: []DenseFeature{f32d("instance_weight", 1)}, err: `"instance_weight" row 0`},
		{name: "examplebatch/dim-1 label without value aborts", rec: eb(2, list("__LABEL__", prototest.Floats(1), unset())),
			dense: []DenseFeature{f32d("label", 1)}, err: `"__LABEL__" row 1`},
		{name: "examplebatch/dim-2 label without value → 0", rec: eb(2, list("__LABEL__", prototest.Floats(1), unset())),
			dense: []DenseFeature{f32d("label", 2)}, want: want{f32: map[string][]float32{"label": {1, 0, 0, 0}}}},
		{name: "examplebatch/__LABEL__ of other kinds reads no labels", rec: eb(2, list("__LABEL__", prototest.FidV1(3), unset())),
			dense: []DenseFeature{f32d("label", 2)}, want: want{f32: map[string][]float32{"label": {0, 0, 0, 0}}}},
		{name: "examplebatch/__LABEL__ of other kinds, dim 1, aborts", rec: eb(2, list("__LABEL__", prototest.FidV1(3), unset())),
			dense: []DenseFeature{f32d("label", 1)}, err: `"__LABEL__" row 0`},
		{name: "examplebatch/label list then __LABEL__ overlay", rec: eb(1, list("label", prototest.Floats(1, 2, 3)), list("__LABEL__", prototest.Floats(9))),
			dense: []DenseFeature{f32d("label", 3)}, want: want{f32: map[string][]float32{"label": {9, 2, 3}}}},
		{name: "examplebatch/__LABEL__ then label list overlay", rec: eb(1, list("__LABEL__", prototest.Floats(9)), list("label", prototest.Floats(1, 2))),
			dense: []DenseFeature{f32d("label", 3)}, want: want{f32: map[string][]float32{"label": {1, 2, 0}}}},
		{name: "examplebatch/SHARED lists repeat into every row", rec: eb(3,
			shared("s", prototest.FidV1(v1a, 1<<54|7)), list("i", prototest.FidV2(1), unset(), prototest.FidV2(2, 3)), shared("d", prototest.Floats(4, 5)),
			shared("__LABEL__", prototest.Floats(8)), shared("instance_weight", prototest.Floats(-1)), shared("__LINE_ID__", lineBytes(lineA))),
			sparse: sp("s", "i"),
			dense:  []DenseFeature{f32d("d", 2), f32d("label", 1), f32d("instance_weight", 1)},
			extra:  []ExtraFeature{{Name: "req_time", Dim: 1}, {Name: "user_id", Dim: 1}},
			want: want{
				sparse: map[string][][]uint64{"s": {{v2a, 1<<48 | 7}, {v2a, 1<<48 | 7}, {v2a, 1<<48 | 7}}, "i": {{1}, nil, {2, 3}}},
				f32:    map[string][]float32{"d": {4, 5, 4, 5, 4, 5}, "label": {8, 8, 8}, "instance_weight": {1, 1, 1}},
				i64:    map[string][]int64{"req_time": {5, 5, 5}}, str: map[string][]string{"user_id": {"u", "u", "u"}}}},
		{name: "examplebatch/__LINE_ID__ unset cell aborts", rec: eb(2, list("__LINE_ID__", lineBytes(lineA), unset())),
			extra: []ExtraFeature{{Name: "req_time", Dim: 1}}, err: `"__LINE_ID__" row 1`},
		{name: "examplebatch/__LINE_ID__ unset cell ignored without extras", rec: eb(2, list("__LINE_ID__", lineBytes(lineA), unset())),
			sparse: sp("x"), want: want{sparse: map[string][][]uint64{"x": {nil, nil}}}},
		{name: "examplebatch/__LINE_ID__ garbage aborts", rec: func(t testing.TB, mem memory.Allocator) arrow.RecordBatch {
			rec, err := batch.FromExampleBatch(mem, &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{
				list("__LINE_ID__", prototest.Bytes("\xff"))}}, batch.WithoutLineIDFields())
			if err != nil {
				t.Fatal(err)
			}
			return rec
		},
			extra: []ExtraFeature{{Name: "req_time", Dim: 1}}, err: "failed to parse the LineId"},
		{name: "examplebatch/__LINE_ID__ of two values reads the first", rec: eb(1, list("__LINE_ID__", &examplepb.Feature{Type: &examplepb.Feature_BytesList{
			BytesList: &examplepb.BytesList{Value: [][]byte{lineBytes(lineB).GetBytesList().GetValue()[0], []byte("x")}}}})),
			extra: []ExtraFeature{{Name: "req_time", Dim: 1}}, want: want{i64: map[string][]int64{"req_time": {6}}}},
		{name: "examplebatch/bytes_list under a sparse name", rec: eb(1, list("s", prototest.Bytes("a"))), sparse: sp("s"), err: "shape must be 1"},
		{name: "examplebatch/float_list under a sparse name", rec: eb(2, list("s", unset(), prototest.Floats(1))), sparse: sp("s"), err: `"s" row 1`},

		// Example: ExtendExample and the named label / weight features.
		{name: "example/__LABEL__ appends to labels", rec: ex(
			&examplepb.Example{Label: []float32{1}, NamedFeature: []*examplepb.NamedFeature{nf("__LABEL__", prototest.Floats(2, 3))}},
			&examplepb.Example{Label: []float32{4}}),
			dense: []DenseFeature{f32d("label", 4)}, want: want{f32: map[string][]float32{"label": {1, 2, 3, inv, 4, inv, inv, inv}}}},
		{name: "example/__LABEL__ of another kind appends nothing", rec: ex(
			&examplepb.Example{Label: []float32{1}, NamedFeature: []*examplepb.NamedFeature{nf("__LABEL__", prototest.FidV1(1))}}),
			dense: []DenseFeature{f32d("label", 2)}, want: want{f32: map[string][]float32{"label": {1, inv}}}},
		{name: "example/named label wins, even unset", rec: ex(
			&examplepb.Example{Label: []float32{9}, NamedFeature: []*examplepb.NamedFeature{nf("label", prototest.Floats(7))}},
			&examplepb.Example{Label: []float32{9}, NamedFeature: []*examplepb.NamedFeature{nf("label", unset())}},
			&examplepb.Example{Label: []float32{9}, NamedFeature: []*examplepb.NamedFeature{{Name: "label"}}},
			&examplepb.Example{Label: []float32{9}}),
			dense: []DenseFeature{f32d("label", 1)}, want: want{f32: map[string][]float32{"label": {7, 0, 0, 9}}}},
		{name: "example/named instance_weight is a dense float", rec: ex(
			&examplepb.Example{InstanceWeight: 4, NamedFeature: []*examplepb.NamedFeature{nf("instance_weight", prototest.Floats(-3))}},
			&examplepb.Example{InstanceWeight: 4, NamedFeature: []*examplepb.NamedFeature{nf("instance_weight", prototest.Floats())}},
			&examplepb.Example{InstanceWeight: 4, NamedFeature: []*examplepb.NamedFeature{nf("instance_weight", unset())}},
			&examplepb.Example{InstanceWeight: 4}),
			dense: []DenseFeature{f32d("instance_weight", 1)}, want: want{f32: map[string][]float32{"instance_weight": {-3, fmin, 0, 4}}}},
		{name: "example/__LINE_ID__ replaces line_id", rec: ex(exLine(lineBytes(lineB)), &examplepb.Example{LineId: lineA}),
			extra: []ExtraFeature{{Name: "req_time", Dim: 1}, {Name: "sample_rate", Dim: 1}, {Name: "chnid", Dim: 1}},
			want:  want{i64: map[string][]int64{"req_time": {6, 5}, "chnid": {0, 7}}, f32: map[string][]float32{"sample_rate": {1, 0.25}}}},
		{name: "example/unparsable __LINE_ID__ → defaults", rec: ex(exLine(prototest.Bytes("\xff\xff"))),
			extra: []ExtraFeature{{Name: "req_time", Dim: 1}, {Name: "sample_rate", Dim: 1}},
			want:  want{i64: map[string][]int64{"req_time": {0}}, f32: map[string][]float32{"sample_rate": {1}}}},
		{name: "example/__LINE_ID__ without bytes crashes", rec: ex(exLine(unset())),
			extra: []ExtraFeature{{Name: "req_time", Dim: 1}}, err: `"__LINE_ID__" row 0`},
		{name: "example/float_list under a sparse name", rec: ex(&examplepb.Example{}, &examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("s", prototest.Floats(1))}}),
			sparse: sp("s"), err: `"s" row 1`},
		{name: "example/int64_list under a sparse name", rec: ex(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("s", prototest.Int64s())}}),
			sparse: sp("s"), err: `"s" row 0`},
		{name: "example/empty int64 dim 1 aborts", rec: ex(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.Int64s())}}),
			dense: []DenseFeature{{Name: "d", Dim: 1, DType: Int64}}, err: "empty int64_list"},
		{name: "example/int64 under a float name aborts", rec: ex(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.Int64s(1))}}),
			dense: []DenseFeature{f32d("d", 2)}, err: `"d" row 0`},
		{name: "example/float under an int64 name aborts", rec: ex(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.Floats(1))}}),
			dense: []DenseFeature{{Name: "d", Dim: 2, DType: Int64}}, err: `"d" row 0`},
		{name: "example/fids under a dense name", rec: ex(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.FidV2(1))}}),
			dense: []DenseFeature{{Name: "d", Dim: 2, DType: Int64}}, err: `"d" row 0`},
		{name: "example/empty bytes aborts", rec: ex(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.Bytes())}}),
			dense: []DenseFeature{{Name: "d", Dim: 1, DType: Bytes}}, err: "empty bytes_list"},
		{name: "example/bytes under a float name", rec: ex(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("d", prototest.Bytes("x"))}}),
			dense: []DenseFeature{f32d("d", 1)}, err: `"d" row 0`},
		{name: "example/int64 and bytes dense", rec: ex(
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("i", prototest.Int64s(7)), nf("b", prototest.Bytes("x", "y"))}},
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("i", prototest.Int64s(1, 2, 3))}}),
			dense: []DenseFeature{{Name: "i", Dim: 2, DType: Int64}, {Name: "b", Dim: 1, DType: Bytes}},
			want:  want{i64: map[string][]int64{"i": {7, 0, 1, 2}}, str: map[string][]string{"b": {"x", ""}}}},
		{name: "example/lists of lists and scalars read nothing", rec: ex(&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{
			nf("s", &examplepb.Feature{Type: &examplepb.Feature_FidV2Lists{FidV2Lists: &examplepb.FidLists{List: []*examplepb.FidList{{Value: []uint64{1}}}}}}),
			nf("d", &examplepb.Feature{Type: &examplepb.Feature_FloatValue{FloatValue: 3}})}}),
			sparse: sp("s"), dense: []DenseFeature{f32d("d", 1)},
			want: want{sparse: map[string][][]uint64{"s": {nil}}, f32: map[string][]float32{"d": {0}}}},
		{name: "example/v1 and v2 cells in one column", rec: ex(
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("s", prototest.FidV1(v1a))}},
			&examplepb.Example{NamedFeature: []*examplepb.NamedFeature{nf("s", prototest.FidV2(v1a))}}),
			sparse: sp("s"), want: want{sparse: map[string][][]uint64{"s": {{v2a}, {v1a}}}}},

		// Extras.
		{name: "extras: chnid is int64, scalars fill column 0, repeated first min(dim,n)", rec: ex(&examplepb.Example{LineId: lineA}),
			extra: []ExtraFeature{{Name: "chnid", Dim: 1}, {Name: "req_time", Dim: 3}, {Name: "actions", Dim: 3},
				{Name: "uid", Dim: 1}, {Name: "user_id", Dim: 2}, {Name: "sample_rate", Dim: 2}, {Name: "pre_actions", Dim: 1}},
			want: want{i64: map[string][]int64{"chnid": {7}, "req_time": {5, 0, 0}, "actions": {1, 2, 0}, "uid": {-(1 << 63) + 9}, "pre_actions": {0}},
				str: map[string][]string{"user_id": {"u", ""}}, f32: map[string][]float32{"sample_rate": {0.25, 0}}}},

		// Instance.
		{name: "instance/fidv1 raw without fidv2 features", rec: in(&parserpb.Instance{Fid: []uint64{v1a, 5 << 54, v1a + 1}}),
			sparse: sp("slot_3", "fc_slot_5"), want: want{sparse: map[string][][]uint64{"slot_3": {{v1a, v1a + 1}}, "fc_slot_5": {{5 << 54}}}}},
		{name: "instance/fidv1 converted with fidv2 features", rec: in(&parserpb.Instance{Fid: []uint64{v1a, 5 << 54, v1a + 1}}),
			sparse: []SparseFeature{{Name: "f_three", FidV1: true, Slot: 3}, {Name: "fc_a"}},
			want:   want{sparse: map[string][][]uint64{"f_three": {{v2a, v2a + 1}}, "fc_a": {nil}}}},
		{name: "instance/fidv2 fid then fid_list values", rec: in(
			&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("fc_seq"), FidList: []*matrixpb.Fixed64List{{Value: []uint64{1, 2}}, {}, {Value: []uint64{3}}}}}},
			&parserpb.Instance{Feature: []*matrixpb.Feature{mf("fc_seq")}}),
			sparse: sp("fc_seq"), want: want{sparse: map[string][][]uint64{"fc_seq": {{1, 2, 3}, nil}}}},
		{name: "instance/value field is not a feature", rec: in(&parserpb.Instance{Value: []float32{1}}),
			dense: []DenseFeature{f32d("value", 1)}, want: want{f32: map[string][]float32{"value": {0}}}},
		{name: "instance/int64 and bytes need exactly dim values", rec: in(
			&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("i"), Int64Value: []int64{4, 5}}, {Name: proto.String("b"), BytesValue: [][]byte{[]byte("x")}}}},
			&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("i"), Int64Value: []int64{4}}, {Name: proto.String("b"), BytesValue: [][]byte{[]byte("x"), []byte("y")}}}}),
			dense: []DenseFeature{{Name: "i", Dim: 2, DType: Int64}, {Name: "b", Dim: 1, DType: Bytes}},
			want:  want{i64: map[string][]int64{"i": {4, 5, 0, 0}}, str: map[string][]string{"b": {"x", ""}}}},
		{name: "instance/UE_QTZ qtz8", rec: in(qtz(0x00, 0xBC, 0x00, 0x3C, 0, 255, 128, 64, 1)),
			dense: []DenseFeature{f32d("e", 5)},
			want:  want{f32: map[string][]float32{"e": {-1, -1 + float32(step*255), -1 + float32(step*128), -1 + float32(step*64), -1 + step}}}},
		{name: "instance/UE_QTZ f16", rec: in(qtz(0x00, 0x3C, 0x00, 0x80)),
			dense: []DenseFeature{f32d("e", 2)}, want: want{f32: map[string][]float32{"e": {1 + 1.0/2048, 0}}}},
		{name: "instance/UE_QTZ odd f16 falls back to float values", rec: in(qtz(0x00, 0x3C, 0x00)),
			dense: []DenseFeature{f32d("e", 1)}, want: want{f32: map[string][]float32{"e": {0}}}},
		{name: "instance/UE_QTZ length mismatch", rec: in(&parserpb.Instance{}, qtz(0x00, 0xBC, 0x00, 0x3C, 0, 255, 128, 64, 1)),
			dense: []DenseFeature{f32d("e", 4)}, err: `"e" row 1`},
		{name: "instance/D5: a slot feature's name is also a named feature", rec: in(&parserpb.Instance{Fid: []uint64{3 << 54},
			Feature: []*matrixpb.Feature{{Name: proto.String("slot_3"), Fid: []uint64{1}}}}),
			sparse: sp("slot_3"), err: "D5"},
		{name: "instance/a named feature called fc_slot_N is not slot N", rec: in(&parserpb.Instance{
			Feature: []*matrixpb.Feature{{Name: proto.String("fc_slot_3"), Fid: []uint64{1}}}}),
			sparse: sp("fc_slot_3", "fc_x"), want: want{sparse: map[string][][]uint64{"fc_slot_3": {nil}}}},
		{name: "instance/labels and extras", rec: in(&parserpb.Instance{Label: []float32{1, 2, 3}, LineId: lineA}),
			dense: []DenseFeature{f32d("label", 2)}, extra: []ExtraFeature{{Name: "chnid", Dim: 2}, {Name: "actions", Dim: 1}},
			want: want{f32: map[string][]float32{"label": {1, 2}}, i64: map[string][]int64{"chnid": {7, 0}, "actions": {1}}}},
	}
	runRules(t, cases)
}

func TestNewSpec(t *testing.T) {
	bad := []struct {
		name   string
		sparse []SparseFeature
		dense  []DenseFeature
		extra  []ExtraFeature
	}{
		{"empty name", sp(""), nil, nil},
		{"duplicate across lists", sp("a"), []DenseFeature{f32d("a", 1)}, nil},
		{"duplicate extra", nil, nil, []ExtraFeature{{Name: "uid", Dim: 1}, {Name: "uid", Dim: 1}}},
		{"reserved __LABEL__", sp("__LABEL__"), nil, nil},
		{"reserved __LINE_ID__", nil, []DenseFeature{f32d("__LINE_ID__", 1)}, nil},
		{"sparse label", sp("label"), nil, nil},
		{"int64 label", nil, []DenseFeature{{Name: "label", Dim: 1, DType: Int64}}, nil},
		{"weight dim 2", nil, []DenseFeature{f32d("instance_weight", 2)}, nil},
		{"dim 0", nil, []DenseFeature{f32d("d", 0)}, nil},
		{"dim too large", nil, []DenseFeature{f32d("d", MaxDim+1)}, nil},
		{"bytes dim 2", nil, []DenseFeature{{Name: "d", Dim: 2, DType: Bytes}}, nil},
		{"unknown dtype", nil, []DenseFeature{{Name: "d", Dim: 1, DType: 9}}, nil},
		{"unknown extra", nil, nil, []ExtraFeature{{Name: "did", Dim: 1}}},
		{"bool extra", nil, nil, []ExtraFeature{{Name: "is_draw", Dim: 1}}},
		{"extra dim 0", nil, nil, []ExtraFeature{{Name: "uid", Dim: 0}}},
		{"slot out of range", []SparseFeature{{Name: "x", FidV1: true, Slot: 1024}}, nil, nil},
		{"duplicate slot", []SparseFeature{{Name: "x", FidV1: true, Slot: 3}, {Name: "slot_3"}}, nil, nil},
	}
	for _, c := range bad {
		if _, err := NewSpec(c.sparse, c.dense, c.extra); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: err = %v, want ErrSpec", c.name, err)
		}
	}
	s := mustSpec(t, sp("slot_7", "fc_slot_1023", "slot_1024", "slot_x", "fc_a"), nil, []ExtraFeature{{Name: "uid", Dim: 1}})
	got := s.Sparse()
	wantSparse := []SparseFeature{{"slot_7", true, 7}, {"fc_slot_1023", true, 1023}, {"slot_1024", false, 0}, {"slot_x", false, 0}, {"fc_a", false, 0}}
	for i := range wantSparse {
		if got[i] != wantSparse[i] {
			t.Errorf("sparse %d = %+v, want %+v", i, got[i], wantSparse[i])
		}
	}
	if s.FidV1Raw() {
		t.Error("FidV1Raw with fidv2 features")
	}
	if !mustSpec(t, sp("slot_1"), nil, nil).FidV1Raw() {
		t.Error("!FidV1Raw without fidv2 features")
	}
	for name, want := range map[string]DType{"uid": Int64, "item_id": Int64, "actions": Int64, "chnid": Int64, "rank": Int64,
		"sample_rate": Float32, "user_id": Bytes, "device_type": Bytes, "cid": Bytes, "data_source_name": Bytes,
		"req_time": Int64, "pre_actions": Int64, "special_strategies": Int64} {
		if dt, err := ExtraType(name); err != nil || dt != want {
			t.Errorf("ExtraType(%s) = %v, %v; want %v", name, dt, err, want)
		}
	}
}

// TestHalf checks the f16 conversions against float64 arithmetic for every bit pattern.
func TestHalf(t *testing.T) {
	for h := range 1 << 16 {
		want := naiveHalf(uint16(h))
		got := halfBits(uint16(h))
		if math.IsNaN(want) {
			if got == got {
				t.Fatalf("halfBits(%#04x) = %v, want NaN", h, got)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("halfBits(%#04x) = %v, want %v", h, got, want)
		}
	}
	for _, c := range []struct {
		h    uint16
		want float32
	}{{0x3C00, 1 + 1.0/2048}, {0xBC00, -1 - 1.0/2048}, {0x8000, 0}, {0x0000, 0}, {0x7C00, 65504 + 32}, {0x0001, float32(math.Ldexp(1, -24) + math.Ldexp(1, -26))}} {
		if got := halfGetM(c.h); got != c.want {
			t.Errorf("halfGetM(%#04x) = %v, want %v", c.h, got, c.want)
		}
	}
}

func TestParseArguments(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := exRecord(t, mem, &examplepb.Example{})
	defer rec.Release()
	if _, err := Parse(mem, rec, nil); !errors.Is(err, ErrSpec) {
		t.Errorf("nil spec: err = %v, want ErrSpec", err)
	}
	plain := rec.NewSlice(0, 1)
	defer plain.Release()
	bare := array.NewRecordBatch(arrow.NewSchema(plain.Schema().Fields(), nil), plain.Columns(), plain.NumRows())
	defer bare.Release()
	if _, err := Parse(mem, bare, mustSpec(t, sp("a"), nil, nil)); !errors.Is(err, batch.ErrLayout) {
		t.Errorf("record without layout metadata: err = %v, want batch.ErrLayout", err)
	}
	s := mustSpec(t, sp("a"), nil, nil)
	if s.Schema(0) != nil || s.Schema(batch.SourceInstance+1) != nil {
		t.Error("Schema of an invalid source is not nil")
	}
	s.Sparse()[0].Name = "changed"
	if s.Sparse()[0].Name != "a" {
		t.Error("Sparse returns the spec's own slice")
	}
}
