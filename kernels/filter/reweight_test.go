package filter

import (
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

func newReweight(t testing.TB, prio, conf string) *InstanceReweight {
	t.Helper()
	p, err := ParseActionPriority(prio)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseReweightConfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewInstanceReweight(ReweightOptions{ActionPriority: p, Rules: r})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestInstanceReweightRules(t *testing.T) {
	// Ranks: 1→1, 2→2, 7→3, 3→4. Action 4 has a rule but no rank; 7 a rank but no rule.
	w := newReweight(t, "1,2,7,3", "1:2:1, 2:3:0, 3:4:1, 4:5:1")
	tests := []struct {
		name         string
		actions, pre []int64
		l0           float32
		wantN        int64
		wantL0       float32
	}{
		{"no actions at all", nil, nil, 0.5, 1, 0.5},
		{"relabel from the most prior action", []int64{1}, nil, 0, 2, 1},
		{"unlisted action without rule", []int64{5}, nil, 0, 1, 0},
		{"unlisted action with rule multiplies", []int64{4}, nil, 0, 5, 0},
		{"most prior and unlisted multiply", []int64{1, 4}, nil, 0, 10, 1},
		{"listed non-most-prior actions are skipped", []int64{1, 2}, nil, 0, 2, 1},
		{"pre label differs: sum", []int64{1}, []int64{2}, 0, 5, 1},
		{"pre label equal, pre count larger: negate", []int64{1}, []int64{3}, 0, 2, -1},
		{"pre label equal, current count larger", []int64{1, 4}, []int64{3}, 0, 6, 1},
		{"pre without rule: current count", []int64{1}, []int64{5}, 0, 2, 1},
		{"label truncated toward zero: equal", []int64{7}, []int64{3}, 1.9, 3, -1.9},
		{"label truncated toward zero: differs", []int64{7}, []int64{3}, 0.9, 5, 0.9},
		{"INVALID label", []int64{7}, []int64{3}, inv, 5, inv},
		{"pre more prior: drop", []int64{2}, []int64{1}, 0, 0, 0},
		{"only pre actions: drop", nil, []int64{1}, 0, 0, 0},
		{"both unlisted: drop", []int64{5}, []int64{6}, 0, 0, 0},
	}
	for _, tc := range tests {
		n, l0 := w.replicas(tc.actions, tc.pre, tc.l0)
		if n != tc.wantN || l0 != tc.wantL0 {
			t.Errorf("%s: (%d, %v), want (%d, %v)", tc.name, n, l0, tc.wantN, tc.wantL0)
		}
	}
	z := newReweight(t, "1", "4:0:1")
	if n, _ := z.replicas([]int64{4}, nil, 0); n != 0 {
		t.Errorf("weight 0: %d replicas", n)
	}
}

func TestInstanceReweightApply(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	w := newReweight(t, "1,2,7,3", "1:2:1,2:3:0,3:4:1,4:5:1")
	row := func(label []float32, f uint64, actions, pre []int32) *parserpb.Instance {
		return &parserpb.Instance{Fid: []uint64{f}, Label: label,
			LineId: lid(func(l *matrixpb.LineId) { l.Actions, l.PreActions = actions, pre })}
	}
	ins := []*parserpb.Instance{
		0: row([]float32{0, 9}, 100, []int32{1}, []int32{3}), // 2 copies, label[0] -1
		1: row(nil, 101, nil, nil),                           // no labels: dropped
		2: row([]float32{0.5}, 102, nil, nil),                // 1 copy
		3: row([]float32{0}, 103, []int32{2}, []int32{1}),    // dropped
		4: row([]float32{0}, 104, []int32{1, 4}, nil),        // 10 copies, label 1
	}
	for _, v := range lineIDVariants {
		rec := instances(t, mem, ins, v.opts...)
		out, err := w.Apply(mem, rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := batch.ToInstances(out)
		if err != nil {
			t.Fatal(err)
		}
		var fids []uint64
		var labels [][]float32
		for _, in := range got {
			fids = append(fids, in.GetFid()[0])
			labels = append(labels, in.GetLabel())
		}
		wantFids := []uint64{100, 100, 102}
		wantLabels := [][]float32{{-1, 9}, {-1, 9}, {0.5}}
		for range 10 {
			wantFids = append(wantFids, 104)
			wantLabels = append(wantLabels, []float32{1})
		}
		if !slices.Equal(fids, wantFids) || !equalLabels(labels, wantLabels) {
			t.Errorf("%s: fids %v labels %v, want %v %v", v.name, fids, labels, wantFids, wantLabels)
		}
		if !slices.Equal(got[0].GetLineId().GetPreActions(), []int32{3}) {
			t.Errorf("%s: line_id not kept: %v", v.name, got[0].GetLineId())
		}
		out.Release()
		rec.Release()
	}
}

func TestInstanceReweightPassThrough(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := instances(t, mem, []*parserpb.Instance{{Label: []float32{1}}, {Label: []float32{0}}})
	defer rec.Release()
	w := newReweight(t, "1", "1:2:1")
	out, err := w.Apply(mem, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if out != rec {
		t.Error("every row once and unchanged, but a new record")
	}
}

func TestInstanceReweightErrors(t *testing.T) {
	for name, o := range map[string]ReweightOptions{
		"priority twice":  {ActionPriority: []int32{1, 1}},
		"negative weight": {Rules: []ReweightRule{{Action: 1, Weight: -1}}},
		"rule twice":      {Rules: []ReweightRule{{Action: 1, Weight: 1}, {Action: 1, Weight: 2}}},
	} {
		if _, err := NewInstanceReweight(o); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
