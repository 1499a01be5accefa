package filter

import (
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// allOps builds one of every filter and op.
func allOps(t testing.TB) (map[string]Filter, map[string]Op) {
	t.Helper()
	must := func(v any, err error) any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tasks, _ := ParseAddLabelConfig("1,2:3:0.5;4::1")
	scatter, _ := ParseScatterLabelConfig("1:0,2:2")
	mlg := DefaultMultiLabelGenOptions()
	mlg.HeadToIndex, mlg.PosActions = map[string]int{"1": 1}, []int32{1}
	filters := map[string]Filter{
		"filter_by_fids":          must(NewFilterByFids(FidsOptions{HasFids: []uint64{a1, c2}, SelectSlots: []int32{5}})).(Filter),
		"filter_by_value":         must(NewFilterByValue(ValueOptions{Field: "actions", Op: "any", Operands: Operands{Ints: []int64{1}}, KeepEmpty: true})).(Filter),
		"filter_by_feature_value": must(NewFilterByFeatureValue(FeatureValueOptions{Feature: "i", FieldType: "int64", Op: "ge", Operands: Operands{Ints: []int64{1}}, KeepEmpty: true})).(Filter),
		"special_strategy":        must(NewSpecialStrategy(StrategyOptions{StrategyList: []int32{1}, Rules: []StrategyRule{{Strategy: 1, SampleRate: 0.5, Label: 2, HasLabel: true}}, KeepEmptyStrategy: true})).(Filter),
		"negative_sample":         must(NewNegativeSample(NegativeSampleOptions{DropRate: 0.5, Threshold: 0.5})).(Filter),
		"filter_by_label":         must(NewFilterByLabel(LabelFilterOptions{Thresholds: []float32{0}})).(Filter),
	}
	ops := map[string]Op{
		"special_strategy":    must(NewSpecialStrategy(StrategyOptions{StrategyList: []int32{1}, Rules: []StrategyRule{{Strategy: 1, SampleRate: 0.5, Label: 2, HasLabel: true}}, KeepEmptyStrategy: true})).(Op),
		"add_action":          must(NewAddAction(AddActionOptions{Field: "chnid", Op: "eq", Operands: Operands{Ints: []int64{1}}, Action: 5})).(Op),
		"add_label":           must(NewAddLabel(AddLabelOptions{Tasks: tasks, NewSampleRate: 0.5})).(Op),
		"scatter_label":       must(NewScatterLabel(scatter)).(Op),
		"label_upper_bound":   must(NewLabelUpperBound(UpperBoundOptions{Bounds: []float32{0.5}})).(Op),
		"label_normalization": must(NewLabelNormalization(NormOptions{Methods: []NormMethod{NormScale}, Values: []float32{2}})).(Op),
		"use_field_as_label":  must(NewUseFieldAsLabel(DefaultFieldAsLabelOptions("req_time"))).(Op),
		"multi_label_gen":     must(NewMultiLabelGen(mlg)).(Op),
		"instance_reweight":   must(NewInstanceReweight(ReweightOptions{ActionPriority: []int32{1, 2}, Rules: []ReweightRule{{Action: 1, Weight: 3, Label: 1}}})).(Op),
	}
	return filters, ops
}

// smokeBatches returns batches of every source and shape the ops must handle.
func smokeBatches(t testing.TB, mem memory.Allocator) map[string]arrow.RecordBatch {
	t.Helper()
	chn := func(c int64, actions ...int32) *matrixpb.LineId {
		return lid(func(l *matrixpb.LineId) {
			l.Chnid, l.Actions, l.ReqTime, l.SpecialStrategies = &c, actions, new(c*10), actions
		})
	}
	exs := []*examplepb.Example{
		ex([]float32{1, 0}, chn(1, 1), fidV1("u", a1), int64F("i", 3), fidV2("v", c2)),
		ex(nil, chn(2, 2, 1), fidV1("u", a2)),
		ex([]float32{0}, nil, int64F("i")),
		ex([]float32{0.25}, chn(1)),
	}
	out := map[string]arrow.RecordBatch{}
	out["examples"] = examples(t, mem, exs)
	out["examples without decoded LineIds"] = examples(t, mem, exs, batch.WithoutLineIDFields())
	out["no rows"] = examples(t, mem, nil)
	out["no label or line_id values"] = examples(t, mem, []*examplepb.Example{ex(nil, nil), ex(nil, nil)})
	out["instances"] = instances(t, mem, []*parserpb.Instance{
		{Fid: []uint64{a1, b1}, Label: []float32{1}, LineId: chn(1, 1)},
		{Fid: []uint64{a2}, LineId: chn(2, 2)},
		{Label: []float32{0, 0}},
	})
	lb, _ := proto.Marshal(chn(1, 1))
	floats := func(v ...float32) *examplepb.Feature {
		return &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: v}}}
	}
	fids := func(v ...uint64) *examplepb.Feature {
		return &examplepb.Feature{Type: &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: v}}}
	}
	eb := &examplepb.ExampleBatch{BatchSize: 3, NamedFeatureList: []*examplepb.NamedFeatureList{
		{Name: "u", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{fids(a1)}},
		{Name: "w", Feature: []*examplepb.Feature{fids(b1), fids(), {}}},
		{Name: batch.ListLabel, Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{floats(1, 0)}},
		{Name: batch.ListLineID, Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{
			{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{lb}}}}}},
	}}
	rec, err := batch.FromExampleBatch(mem, eb)
	if err != nil {
		t.Fatal(err)
	}
	out["example batch with shared lists"] = rec
	return out
}

func TestAllOpsSmoke(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	filters, ops := allOps(t)
	recs := smokeBatches(t, mem)
	for name, rec := range recs {
		src, _ := batch.SourceOf(rec.Schema())
		for fname, f := range filters {
			got, err := f.Keep(rec, []int{99})
			if fname == "filter_by_feature_value" && src == batch.SourceInstance {
				if err == nil {
					t.Errorf("%s/%s: no error for an Instance batch", name, fname)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s/%s: %v", name, fname, err)
				continue
			}
			if !slices.IsSorted(got) || slices.Contains(got, 99) || len(got) > 0 && (got[0] < 0 || got[len(got)-1] >= int(rec.NumRows())) {
				t.Errorf("%s/%s: bad rows %v", name, fname, got)
			}
			out, err := Apply(mem, rec, got)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, fname, err)
			}
			if int(out.NumRows()) != len(got) {
				t.Errorf("%s/%s: %d rows, want %d", name, fname, out.NumRows(), len(got))
			}
			out.Release()
		}
		for oname, op := range ops {
			out, err := op.Apply(mem, rec)
			if err != nil {
				t.Errorf("%s/%s: %v", name, oname, err)
				continue
			}
			if err := batch.CheckSchema(out.Schema()); err != nil {
				t.Errorf("%s/%s: result schema: %v", name, oname, err)
			}
			if _, err := batch.Rows(out); err != nil {
				t.Errorf("%s/%s: result unreadable: %v", name, oname, err)
			}
			out.Release()
		}
		rec.Release()
	}
}

// TestConcurrentUse runs every op from several goroutines on one record (run with -race).
func TestConcurrentUse(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	filters, ops := allOps(t)
	recs := smokeBatches(t, mem)
	rec := recs["examples"]
	for _, r := range recs {
		if r != rec {
			r.Release()
		}
	}
	defer rec.Release()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, f := range filters {
				if _, err := f.Keep(rec, nil); err != nil {
					t.Error(err)
				}
			}
			for _, op := range ops {
				out, err := op.Apply(mem, rec)
				if err != nil {
					t.Error(err)
					continue
				}
				out.Release()
			}
		})
	}
	wg.Wait()
}

// TestSharedLabelColumn: an ExampleBatch's SHARED __LABEL__ and __LINE_ID__ lists are
// run-end encoded columns; label ops read them per row and write one cell per row.
func TestSharedLabelColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	recs := smokeBatches(t, mem)
	rec := recs["example batch with shared lists"]
	for _, r := range recs {
		if r != rec {
			r.Release()
		}
	}
	defer rec.Release()
	if rec.Column(rec.Schema().FieldIndices(batch.ColLabel)[0]).DataType().ID() != arrow.RUN_END_ENCODED {
		t.Fatal("fixture: the label column is not shared")
	}
	s, _ := NewScatterLabel(ScatterLabelOptions{Index: map[int64]int{1: 1}})
	want := [][]float32{{inv, 1}, {inv, 1}, {inv, 1}}
	if got := applyOp(t, mem, s, rec); !equalLabels(got, want) {
		t.Errorf("scatter_label: %v, want %v", got, want)
	}
	f, _ := NewFilterByLabel(LabelFilterOptions{Thresholds: []float32{0.5}})
	if got := keep(t, f, rec); !slices.Equal(got, seq(3)) {
		t.Errorf("filter_by_label: %v", got)
	}
}
