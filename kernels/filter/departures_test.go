package filter

// Tests pinning the departures from Monolith listed in the package doc.

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

func TestDepartureI4SetSemantics(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{
		ex(nil, withActions(1)),
		ex(nil, withActions(1, 1)),
		ex(nil, withActions(2, 1, 1)),
	})
	defer rec.Release()
	for _, tc := range []struct {
		operands []int64
		want     []int
	}{
		// Duplicate operands count once: every row holds the distinct operand 1.
		{[]int64{1, 1}, []int{0, 1, 2}},
		// Duplicate values count once: [1, 1] does not hold all of {1, 2}.
		{[]int64{1, 2}, []int{2}},
		{[]int64{2, 1, 2, 1}, []int{2}},
	} {
		f, err := NewFilterByValue(ValueOptions{Field: "actions", Op: "all", Operands: Operands{Ints: tc.operands}})
		if err != nil {
			t.Fatal(err)
		}
		if got := keep(t, f, rec); !slices.Equal(got, tc.want) {
			t.Errorf("all %v: kept %v, want %v", tc.operands, got, tc.want)
		}
	}
}

func TestDepartureI5MissingFeature(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{ex(nil, nil, int64F("i", 1)), ex(nil, nil)})
	defer rec.Release()
	for _, tc := range []struct {
		feature   string
		keepEmpty bool
		want      []int
	}{
		{"missing", true, []int{0, 1}}, // missing from the batch
		{"missing", false, []int{}},
		{"i", true, []int{0, 1}}, // missing from row 1
		{"i", false, []int{0}},
	} {
		f, err := NewFilterByFeatureValue(FeatureValueOptions{Feature: tc.feature, FieldType: "int64", Op: "eq",
			Operands: Operands{Ints: []int64{1}}, KeepEmpty: tc.keepEmpty})
		if err != nil {
			t.Fatal(err)
		}
		if got := keep(t, f, rec); !slices.Equal(got, tc.want) {
			t.Errorf("%s keep_empty=%v: kept %v, want %v", tc.feature, tc.keepEmpty, got, tc.want)
		}
	}
}

func TestDepartureI6HeadFieldText(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{
		ex(nil, lid(func(l *matrixpb.LineId) {
			l.ReqTime, l.SampleRate, l.DeviceType, l.IsDraw, l.Uid = new(int64(-42)), new(float32(0.1)), new("ios"), new(true), new(uint64(math.MaxUint64))
			l.Actions = []int32{1}
		})),
	})
	defer rec.Release()
	for _, tc := range []struct{ field, key string }{
		{"req_time", "-42"},
		{"sample_rate", "0.1"}, // float32 in its shortest form, not 0.10000000149011612
		{"device_type", "ios"},
		{"is_draw", "1"},
		{"uid", "18446744073709551615"},
	} {
		g, err := NewMultiLabelGen(MultiLabelGenOptions{HeadField: tc.field, HeadToIndex: map[string]int{tc.key: 1},
			PosActions: []int32{1}, PosLabel: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := applyOp(t, mem, g, rec); !equalLabels(got, [][]float32{{inv, 1}}) {
			t.Errorf("%s as %q: %v", tc.field, tc.key, got)
		}
	}
}

func TestDepartureI7Seeded(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	exs := make([]*examplepb.Example, 300)
	for i := range exs {
		exs[i] = ex([]float32{0}, strategies(1))
	}
	rec := examples(t, mem, exs)
	defer rec.Release()
	run := func(seed uint64) ([]int, []int) {
		n, _ := NewNegativeSample(NegativeSampleOptions{DropRate: 0.5, Threshold: 1, Seed: seed})
		s, _ := NewSpecialStrategy(StrategyOptions{StrategyList: []int32{1}, Rules: []StrategyRule{{Strategy: 1, SampleRate: 0.5}}, Seed: seed})
		return keep(t, n, rec), keep(t, s, rec)
	}
	n1, s1 := run(3)
	n2, s2 := run(3)
	if !slices.Equal(n1, n2) || !slices.Equal(s1, s2) {
		t.Error("same seed, different results")
	}
	n3, s3 := run(4)
	if slices.Equal(n1, n3) || slices.Equal(s1, s3) {
		t.Error("different seeds, same results")
	}
	d1, _ := run(0)
	d2, _ := run(DefaultSeed)
	if !slices.Equal(d1, d2) {
		t.Error("Seed 0 is not DefaultSeed")
	}
}

func TestDepartureSpecialStrategyNoneMatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{ex(nil, strategies(8, 9)), ex(nil, strategies(1))})
	defer rec.Release()
	s, _ := NewSpecialStrategy(StrategyOptions{StrategyList: []int32{1}, KeepEmptyStrategy: true})
	if got := keep(t, s, rec); !slices.Equal(got, []int{1}) {
		t.Errorf("kept %v, want [1]", got)
	}
}

func TestDepartureSpecialStrategyLabelWithoutLabels(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{ex(nil, strategies(1)), ex([]float32{0, 2}, strategies(1))})
	defer rec.Release()
	s, _ := NewSpecialStrategy(StrategyOptions{StrategyList: []int32{1}, Rules: []StrategyRule{{Strategy: 1, SampleRate: 1, Label: 6, HasLabel: true}}})
	if got := applyOp(t, mem, s, rec); !equalLabels(got, [][]float32{{6}, {6, 2}}) {
		t.Errorf("labels %v", got)
	}
}

func TestDepartureNegativeSampleShortLabels(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{ex(nil, nil), ex([]float32{0}, nil), ex([]float32{0, 0}, nil)})
	defer rec.Release()
	n, _ := NewNegativeSample(NegativeSampleOptions{DropRate: 1, LabelIndex: 1, Threshold: 1})
	if got := keep(t, n, rec); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("kept %v, want [0 1] (row 2 is a negative at drop rate 1)", got)
	}
}

func TestDepartureConfigErrors(t *testing.T) {
	for name, err := range map[string]error{
		"unknown LineId field":         second(NewFilterByValue(ValueOptions{Field: "video_play_time", Op: "gt", Operands: Operands{Ints: []int64{1}}})),
		"unknown field as label":       second(NewUseFieldAsLabel(FieldAsLabelOptions{Field: "video_play_time"})),
		"add_action on repeated field": second(NewAddAction(AddActionOptions{Field: "pre_actions", Op: "eq", Operands: Operands{Ints: []int64{1}}})),
		"unknown norm method":          second(NewLabelNormalization(NormOptions{Methods: []NormMethod{0}, Values: []float32{1}})),
		"unknown norm name":            second(ParseNormMethods("log,exp")),
		"chnid twice":                  second(ParseScatterLabelConfig("1:0,1:1")),
		"index beyond MaxTasks":        second(NewScatterLabel(ScatterLabelOptions{Index: map[int64]int{1: MaxTasks}})),
	} {
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", name, err)
		}
	}
}

func TestDepartureReweightLimit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := instances(t, mem, []*parserpb.Instance{{Label: []float32{1}}, {Label: []float32{1}, LineId: withActions(4, 5)}})
	defer rec.Release()
	w := newReweight(t, "", "4:65536:1,5:2:1")
	_, err := w.Apply(mem, rec)
	var re *RowError
	if !errors.As(err, &re) || re.Row != 1 || re.Op != "instance_reweight" {
		t.Errorf("got %v, want a RowError for row 1", err)
	}
}

func TestDepartureScale2IntSaturates(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{ex([]float32{0, 1, -1}, nil)})
	defer rec.Release()
	l, _ := NewLabelNormalization(NormOptions{Methods: []NormMethod{NormScale2Int}, Values: []float32{0}})
	// 0/0 is NaN → 0; ±1/0 is ±Inf → the int32 bounds.
	if got := applyOp(t, mem, l, rec); !equalLabels(got, [][]float32{{0, math.MaxInt32, math.MinInt32}}) {
		t.Errorf("got %v", got)
	}
}

func TestDepartureFeatureValueInstance(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := instances(t, mem, []*parserpb.Instance{{Label: []float32{1}}})
	defer rec.Release()
	f, _ := NewFilterByFeatureValue(FeatureValueOptions{Feature: "x", FieldType: "int64", Op: "eq", Operands: Operands{Ints: []int64{1}}})
	if _, err := f.Keep(rec, nil); !errors.Is(err, ErrInput) {
		t.Errorf("got %v, want ErrInput", err)
	}
}

func TestDepartureMalformedLineIDIsRowError(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := badLineIDs(t, mem, nil, []byte{0x18}) // field 3 (req_time) without its varint
	defer rec.Release()
	f, _ := NewFilterByValue(ValueOptions{Field: "req_time", Op: "eq", Operands: Operands{Ints: []int64{0}}})
	_, err := f.Keep(rec, nil)
	var re *RowError
	if !errors.As(err, &re) || re.Row != 1 || re.Column != batch.ColLineID {
		t.Errorf("got %v, want a RowError for row 1", err)
	}
	a, _ := NewAddAction(AddActionOptions{Field: "req_time", Op: "eq", Operands: Operands{Ints: []int64{0}}, Action: 1})
	if _, err := a.Apply(mem, rec); !errors.As(err, &re) {
		t.Errorf("add_action: got %v, want a RowError", err)
	}
}
