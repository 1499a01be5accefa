package filter

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
)

func strategies(s ...int32) *matrixpb.LineId {
	return lid(func(l *matrixpb.LineId) { l.SpecialStrategies = s })
}

func TestSpecialStrategy(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	exs := []*examplepb.Example{
		0: ex([]float32{0}, strategies(1)),
		1: ex([]float32{0, 5}, strategies(9, 2)),
		2: ex([]float32{0}, nil),
		3: ex([]float32{0}, strategies(9)),
		4: ex(nil, strategies(3)),
	}
	rules, err := ParseStrategyConf("1:1.0:7,2:1.0,3:1:4")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		keepEmpty  bool
		want       []int
		wantLabels [][]float32
	}{
		{"keep empty", true, []int{0, 1, 2, 4}, [][]float32{{7}, {0, 5}, {0}, {4}}},
		{"drop empty", false, []int{0, 1, 4}, [][]float32{{7}, {0, 5}, {4}}},
	}
	for _, v := range lineIDVariants {
		rec := examples(t, mem, exs, v.opts...)
		for _, tc := range tests {
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				s, err := NewSpecialStrategy(StrategyOptions{StrategyList: []int32{1, 2, 3}, Rules: rules, KeepEmptyStrategy: tc.keepEmpty})
				if err != nil {
					t.Fatal(err)
				}
				if got := keep(t, s, rec); !slices.Equal(got, tc.want) {
					t.Errorf("kept %v, want %v", got, tc.want)
				}
				out, err := s.Apply(mem, rec)
				if err != nil {
					t.Fatal(err)
				}
				defer out.Release()
				if got := labelsOf(t, out); !equalLabels(got, tc.wantLabels) {
					t.Errorf("labels %v, want %v", got, tc.wantLabels)
				}
			})
		}
		rec.Release()
	}
}

func TestSpecialStrategySampling(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const n = 2000
	exs := make([]*examplepb.Example, n)
	for i := range exs {
		exs[i] = ex([]float32{1}, strategies(int32(i%2), 5))
	}
	rec := examples(t, mem, exs)
	defer rec.Release()
	// Even rows: strategy 0 decides with rate 1 (kept, no draw). Odd rows: strategy 5
	// decides (1 is listed after it) with rate 0.25: keep iff uniform ≤ 0.25.
	o := StrategyOptions{StrategyList: []int32{0, 5, 1}, Rules: []StrategyRule{{Strategy: 5, SampleRate: 0.25}, {Strategy: 0, SampleRate: 1}}, Seed: 42}
	s, _ := NewSpecialStrategy(o)
	got := keep(t, s, rec)
	ref := rand.New(rand.NewPCG(42, pcgStream))
	var want []int
	for r := range n {
		if r%2 == 0 || ref.Float64() <= 0.25 {
			want = append(want, r)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("kept %d rows, reference draw keeps %d", len(got), len(want))
	}
	if odd := len(got) - n/2; odd < n/10 || odd > n*3/20 {
		t.Errorf("kept %d of %d odd rows at rate 0.25", odd, n/2)
	}
	// The generator advances across calls: the next batch differs.
	if again := keep(t, s, rec); slices.Equal(again, got) {
		t.Error("second call repeated the first call's draws")
	}
}

func TestNegativeSample(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const n = 1000
	exs := make([]*examplepb.Example, n)
	for i := range exs {
		l := float32(0)
		if i%4 == 0 {
			l = 1
		}
		exs[i] = ex([]float32{5, l}, withActions(int32(i%3)+1, 7))
	}
	for _, v := range lineIDVariants {
		rec := examples(t, mem, exs, v.opts...)
		t.Run(v.name, func(t *testing.T) {
			// drop rate 1: only positives stay; 0: everything stays.
			for _, tc := range []struct {
				rate float64
				want func(r int) bool
			}{
				{1, func(r int) bool { return r%4 == 0 }},
				{0, func(int) bool { return true }},
			} {
				f, err := NewNegativeSample(NegativeSampleOptions{DropRate: tc.rate, LabelIndex: 1, Threshold: 0.5})
				if err != nil {
					t.Fatal(err)
				}
				got := keep(t, f, rec)
				if want := slices.DeleteFunc(seq(n), func(r int) bool { return !tc.want(r) }); !slices.Equal(got, want) {
					t.Errorf("rate %v: kept %d rows, want %d", tc.rate, len(got), len(want))
				}
			}
			// Rate 0.6 against the reference formula on the same generator.
			f, _ := NewNegativeSample(NegativeSampleOptions{DropRate: 0.6, LabelIndex: 1, Threshold: 0.5, Seed: 7})
			got := keep(t, f, rec)
			ref := rand.New(rand.NewPCG(7, pcgStream))
			var want []int
			for r := range n {
				if r%4 == 0 || float64(ref.Uint64()%1000)/1000 >= 0.6 {
					want = append(want, r)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("rate 0.6: kept %d rows, reference keeps %d", len(got), len(want))
			}
			// Per-action rates: priority 3 > 1 > 2. Rows with action 3 (i%3 == 2) drop all
			// negatives, rows with action 1 keep them, rows with only 2 (and 7) use 0.
			rates, err := ParsePerActionDropRate("3:1.0,1:0.0,2:1.0")
			if err != nil {
				t.Fatal(err)
			}
			prio, _ := ParseActionPriority("3,1")
			f, _ = NewNegativeSample(NegativeSampleOptions{DropRate: 0, LabelIndex: 1, Threshold: 0.5, ActionPriority: prio, PerActionDropRate: rates})
			got = keep(t, f, rec)
			want = slices.DeleteFunc(seq(n), func(r int) bool { return r%4 != 0 && r%3 == 2 })
			if !slices.Equal(got, want) {
				t.Errorf("per action: kept %d rows, want %d", len(got), len(want))
			}
		})
		rec.Release()
	}
}

// TestNegativeSampleBoundary: a draw equal to the rate keeps the row (random ≥ rate).
func TestNegativeSampleBoundary(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := examples(t, mem, []*examplepb.Example{ex([]float32{0}, nil)})
	defer rec.Release()
	for seed := uint64(1); seed <= 20; seed++ {
		first := rand.New(rand.NewPCG(seed, pcgStream)).Uint64() % 1000
		for _, tc := range []struct {
			rate float64
			want []int
		}{
			{float64(first) / 1000, []int{0}},
			{float64(first+1) / 1000, []int{}},
		} {
			f, err := NewNegativeSample(NegativeSampleOptions{DropRate: tc.rate, Threshold: 1, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			if got := keep(t, f, rec); !slices.Equal(got, tc.want) {
				t.Errorf("seed %d rate %v (draw %d/1000): kept %v, want %v", seed, tc.rate, first, got, tc.want)
			}
		}
	}
}

func TestSamplingConfigErrors(t *testing.T) {
	for name, err := range map[string]error{
		"drop rate":         second(NewNegativeSample(NegativeSampleOptions{DropRate: 1.5})),
		"label index":       second(NewNegativeSample(NegativeSampleOptions{LabelIndex: -1})),
		"per action rate":   second(NewNegativeSample(NegativeSampleOptions{ActionPriority: []int32{1}, PerActionDropRate: map[int32]float64{1: 2}})),
		"empty strategies":  second(NewSpecialStrategy(StrategyOptions{})),
		"strategy rate":     second(NewSpecialStrategy(StrategyOptions{StrategyList: []int32{1}, Rules: []StrategyRule{{Strategy: 1, SampleRate: -1}}})),
		"strategy repeated": second(NewSpecialStrategy(StrategyOptions{StrategyList: []int32{1}, Rules: []StrategyRule{{Strategy: 1}, {Strategy: 1}}})),
	} {
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
