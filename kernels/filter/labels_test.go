package filter

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// applyOp runs op on rec and returns the labels of the result.
func applyOp(t *testing.T, mem memory.Allocator, op Op, rec arrow.RecordBatch) [][]float32 {
	t.Helper()
	out, err := op.Apply(mem, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if out.NumRows() != rec.NumRows() {
		t.Fatalf("%d rows out of %d", out.NumRows(), rec.NumRows())
	}
	return labelsOf(t, out)
}

func TestAddLabel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	withUnknown := withActions(4)
	withUnknown.ProtoReflect().SetUnknown(unknownField)
	exs := []*examplepb.Example{
		0: ex([]float32{0}, withActions(1)),    // label[0] ≤ 0 → INVALID
		1: ex([]float32{2, 0}, withActions(3)), // neg of task 0
		2: ex(nil, withUnknown),                // pos of task 1
		3: ex([]float32{-1}, nil),              // no actions: task 0 has negs → INVALID
	}
	tasks, err := ParseAddLabelConfig("1,2:3:1.0;4::1")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{
		{inv, 1, -7},
		{2, 0, -7, -7},
		{inv, 1},
		{inv, inv, -7},
	}
	for _, v := range lineIDVariants {
		rec := examples(t, mem, exs, v.opts...)
		a, err := NewAddLabel(AddLabelOptions{Tasks: tasks, NegativeValue: -7, NewSampleRate: 0.25})
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.Apply(mem, rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := labelsOf(t, out); !equalLabels(got, want) {
			t.Errorf("%s: labels %v, want %v", v.name, got, want)
		}
		for r, l := range lineIDsOf(t, out) {
			if l.GetSampleRate() != 0.25 {
				t.Errorf("%s: row %d sample_rate %v", v.name, r, l.GetSampleRate())
			}
		}
		if u := lineIDsOf(t, out)[2].ProtoReflect().GetUnknown(); string(u) != string(unknownField) {
			t.Errorf("%s: unknown LineId field lost (I3)", v.name)
		}
		// The decoded columns follow the new sample rate.
		f, _ := NewFilterByValue(ValueOptions{Field: "sample_rate", Op: "eq", Operands: Operands{Floats: []float64{0.25}}})
		if k := keep(t, f, out); !slices.Equal(k, seq(4)) {
			t.Errorf("%s: decoded sample_rate: %v", v.name, k)
		}
		out.Release()
		rec.Release()
	}
}

func TestAddLabelSampling(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const n = 500
	exs := make([]*examplepb.Example, n)
	for i := range exs {
		exs[i] = ex(nil, withActions(int32(i%2)+1))
	}
	rec := examples(t, mem, exs)
	defer rec.Release()
	// Tasks "1::1;1::0.3": rows with action 2 reach sampling (no neg list) in both tasks;
	// the rate-1 task always selects without a draw, the other draws once per row.
	run := func(seed uint64) [][]float32 {
		tasks := []AddLabelTask{{PosActions: []int32{1}, SampleRate: 1}, {PosActions: []int32{1}, SampleRate: 0.3}}
		a, err := NewAddLabel(AddLabelOptions{Tasks: tasks, NegativeValue: -2, NewSampleRate: 1, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return applyOp(t, mem, a, rec)
	}
	got := run(0)
	ref := rand.New(rand.NewPCG(DefaultSeed, pcgStream))
	for r := range n {
		want := []float32{1, 1}
		if r%2 == 1 {
			want = []float32{-2, inv}
			if ref.Float64() < 0.3 {
				want[1] = -2
			}
		}
		if !slices.Equal(got[r], want) {
			t.Fatalf("row %d: %v, want %v", r, got[r], want)
		}
	}
	if !equalLabels(run(DefaultSeed), got) {
		t.Error("Seed 0 and DefaultSeed differ")
	}
	if equalLabels(run(99), got) {
		t.Error("another seed gave the same draws")
	}
}

func TestScatterLabel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	chn := func(c int64) *matrixpb.LineId { return lid(func(l *matrixpb.LineId) { l.Chnid = &c }) }
	exs := []*examplepb.Example{
		0: ex([]float32{2}, chn(100)), // the worked example of io.md §3.7.8
		1: ex([]float32{3, 4}, chn(300)),
		2: ex([]float32{5}, chn(999)), // unmapped chnid
		3: ex(nil, chn(200)),          // no labels
	}
	o, err := ParseScatterLabelConfig("100:3,200:1,300:4")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{
		{inv, inv, inv, 2, inv},
		{inv, inv, inv, inv, 3},
		{inv, inv, inv, inv, inv},
		{inv, inv, inv, inv, inv},
	}
	for _, v := range lineIDVariants {
		rec := examples(t, mem, exs, v.opts...)
		s, err := NewScatterLabel(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := applyOp(t, mem, s, rec); !equalLabels(got, want) {
			t.Errorf("%s: %v, want %v", v.name, got, want)
		}
		rec.Release()
	}
	if _, err := NewScatterLabel(ScatterLabelOptions{Index: map[int64]int{1: 3}, TaskNum: 2}); !errors.Is(err, ErrConfig) {
		t.Errorf("task num below index: %v", err)
	}
	if _, err := NewScatterLabel(ScatterLabelOptions{}); !errors.Is(err, ErrConfig) {
		t.Errorf("empty map: %v", err)
	}
}

func TestFilterByLabel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{
		ex([]float32{1, 0}, nil),
		ex([]float32{0, 0.5}, nil),
		ex([]float32{0.5, 0.5}, nil),
		ex([]float32{9}, nil), // fewer labels than thresholds
		ex(nil, nil),
	})
	defer rec.Release()
	for _, tc := range []struct {
		equal bool
		want  []int
	}{{false, []int{0, 1, 2}}, {true, []int{0}}} {
		f, err := NewFilterByLabel(LabelFilterOptions{Thresholds: []float32{0.5, 0.5}, FilterEqual: tc.equal})
		if err != nil {
			t.Fatal(err)
		}
		if got := keep(t, f, rec); !slices.Equal(got, tc.want) {
			t.Errorf("filter_equal=%v: kept %v, want %v", tc.equal, got, tc.want)
		}
	}
	if _, err := NewFilterByLabel(LabelFilterOptions{}); !errors.Is(err, ErrConfig) {
		t.Errorf("no thresholds: %v", err)
	}
}

func TestLabelUpperBound(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := instances(t, mem, []*parserpb.Instance{
		{Label: []float32{5, 5, 5}},
		{Label: []float32{5}}, // fewer labels than bounds: unchanged
		{Label: []float32{0, 1}},
	})
	defer rec.Release()
	u, err := NewLabelUpperBound(UpperBoundOptions{Bounds: []float32{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{1, 2, 5}, {5}, {0, 1}}
	if got := applyOp(t, mem, u, rec); !equalLabels(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
	u, _ = NewLabelUpperBound(UpperBoundOptions{Bounds: []float32{100}})
	out, err := u.Apply(mem, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out != rec {
		t.Error("nothing bounded but a new record")
	}
	out.Release()
}

func TestLabelNormalization(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{ex([]float32{0, 1}, nil), ex([]float32{3}, nil), ex(nil, nil)})
	defer rec.Release()
	tests := []struct {
		methods string
		values  []float32
		want    [][]float32
	}{
		// The spec's test: [0, 1] with scale 0.5 then repow 3 → [0, 8].
		{"scale,repow", []float32{0.5, 3}, [][]float32{{0, 8}, {216}, nil}},
		{"log", []float32{1}, [][]float32{{0, float32(math.Log(2))}, {float32(math.Log(4))}, nil}},
		{"log", []float32{-1}, [][]float32{{float32(math.Inf(-1)), float32(math.Inf(-1))}, {float32(math.Log(2))}, nil}},
		{"scale2int", []float32{2}, [][]float32{{0, 0}, {1}, nil}},
		{"scale2int", []float32{1e-38}, [][]float32{{0, math.MaxInt32}, {math.MaxInt32}, nil}},
		{"pow", []float32{2}, [][]float32{{1, 4}, {16}, nil}},
		{"repow", []float32{0.5}, [][]float32{{0, 1}, {float32(math.Sqrt(3))}, nil}},
		{"scalelog", []float32{1}, [][]float32{{0, float32(math.Log(2))}, {float32(math.Log(4))}, nil}},
	}
	for _, tc := range tests {
		ms, err := ParseNormMethods(tc.methods)
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewLabelNormalization(NormOptions{Methods: ms, Values: tc.values})
		if err != nil {
			t.Fatal(err)
		}
		if got := applyOp(t, mem, l, rec); !equalLabels(got, tc.want) {
			t.Errorf("%s %v: %v, want %v", tc.methods, tc.values, got, tc.want)
		}
	}
	for _, o := range []NormOptions{{}, {Methods: []NormMethod{NormLog}}, {Methods: []NormMethod{99}, Values: []float32{1}}} {
		if _, err := NewLabelNormalization(o); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestUseFieldAsLabel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	// The reference's test: labels [0, 0.5] and sample_rate 1.0.
	exs := []*examplepb.Example{
		ex([]float32{0, 0.5}, lid(func(l *matrixpb.LineId) { l.SampleRate = new(float32(1)) })),
		ex([]float32{3}, lid(func(l *matrixpb.LineId) { l.SampleRate = new(float32(0.25)) })),
		ex(nil, nil),
	}
	for _, v := range lineIDVariants {
		rec := examples(t, mem, exs, v.opts...)
		for _, tc := range []struct {
			o    FieldAsLabelOptions
			want [][]float32
		}{
			{DefaultFieldAsLabelOptions("sample_rate"), [][]float32{{1, 1}, {3}, nil}},
			{FieldAsLabelOptions{Field: "sample_rate", OverwriteInvalidValue: true, LabelThreshold: 1}, [][]float32{{0, 0.5}, {3}, nil}},
			{FieldAsLabelOptions{Field: "sample_rate", OverwriteInvalidValue: true, LabelThreshold: DefaultLabelThreshold}, [][]float32{{1, 1}, {3}, nil}},
		} {
			u, err := NewUseFieldAsLabel(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := applyOp(t, mem, u, rec); !equalLabels(got, tc.want) {
				t.Errorf("%s %+v: %v, want %v", v.name, tc.o, got, tc.want)
			}
		}
		rec.Release()
	}
	for _, f := range []string{"cid", "actions", "nope"} {
		if _, err := NewUseFieldAsLabel(FieldAsLabelOptions{Field: f}); !errors.Is(err, ErrConfig) {
			t.Errorf("field %s: %v", f, err)
		}
	}
}

func TestMultiLabelGen(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	row := func(chnid int64, cid string, actions ...int32) *matrixpb.LineId {
		return lid(func(l *matrixpb.LineId) { l.Chnid, l.Cid, l.Actions = &chnid, &cid, actions })
	}
	exs := []*examplepb.Example{
		0: ex([]float32{0.5}, row(10, "a", 1)),    // pos → task 0
		1: ex([]float32{0.5}, row(20, "b", 2, 1)), // priority picks 1 → pos → task 2
		2: ex(nil, row(20, "c", 3)),               // neg → task 2
		3: ex([]float32{9}, row(10, "a")),         // no actions → INVALID
		4: ex([]float32{9}, row(30, "z", 5)),      // unmapped head
		5: ex(nil, row(10, "a", 5, 6)),            // no listed action: actions[0] = 5, neither pos nor neg
	}
	o := DefaultMultiLabelGenOptions()
	o.HeadToIndex = map[string]int{"10": 0, "20": 2}
	o.PosActions, o.NegActions = []int32{1}, []int32{2, 3}
	o.ActionPriority = []int32{1, 2}
	want := [][]float32{
		{1, inv, inv},
		{inv, inv, 1},
		{inv, inv, 0},
		{inv, inv, inv},
		{inv, inv, inv},
		{inv, inv, inv},
	}
	originWant := [][]float32{{0.5, inv, inv}, {inv, inv, 0.5}, {inv, inv, inv}, {9, inv, inv}, {inv, inv, inv}, {inv, inv, inv}}
	for _, v := range lineIDVariants {
		rec := examples(t, mem, exs, v.opts...)
		g, err := NewMultiLabelGen(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := applyOp(t, mem, g, rec); !equalLabels(got, want) {
			t.Errorf("%s: %v, want %v", v.name, got, want)
		}
		origin := o
		origin.UseOriginLabel = true
		g, _ = NewMultiLabelGen(origin)
		if got := applyOp(t, mem, g, rec); !equalLabels(got, originWant) {
			t.Errorf("%s origin: %v, want %v", v.name, got, originWant)
		}
		// cid head, task_num beyond the largest index.
		byCid := o
		byCid.HeadField, byCid.HeadToIndex, byCid.TaskNum = "cid", map[string]int{"c": 0}, 2
		g, _ = NewMultiLabelGen(byCid)
		if got := applyOp(t, mem, g, rec); !equalLabels(got[2:3], [][]float32{{0, inv}}) || !equalLabels(got[0:1], [][]float32{{inv, inv}}) {
			t.Errorf("%s cid: %v", v.name, got)
		}
		rec.Release()
	}
	for name, o := range map[string]MultiLabelGenOptions{
		"empty map":          {},
		"repeated head":      {HeadField: "actions", HeadToIndex: map[string]int{"1": 0}},
		"non-decimal key":    {HeadToIndex: map[string]int{"010": 0}},
		"pos and neg":        {HeadToIndex: map[string]int{"1": 0}, PosActions: []int32{1}, NegActions: []int32{1}},
		"index beyond tasks": {HeadToIndex: map[string]int{"1": 4}, TaskNum: 3},
		"huge index":         {HeadToIndex: map[string]int{"1": MaxTasks}},
	} {
		if _, err := NewMultiLabelGen(o); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLabelOpsKeepOtherColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	w := float32(0.5)
	rec := instances(t, mem, []*parserpb.Instance{{Fid: []uint64{a1, b1}, Label: []float32{3}, InstanceWeight: &w, LineId: withActions(1)}})
	defer rec.Release()
	u, _ := NewLabelUpperBound(UpperBoundOptions{Bounds: []float32{1}})
	out, err := u.Apply(mem, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	ins, err := batch.ToInstances(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ins[0].GetFid(), []uint64{a1, b1}) || ins[0].GetInstanceWeight() != 0.5 ||
		!slices.Equal(ins[0].GetLabel(), []float32{1}) || !slices.Equal(ins[0].GetLineId().GetActions(), []int32{1}) {
		t.Errorf("got %v", ins[0])
	}
}
