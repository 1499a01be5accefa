package label_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/protobuf/proto"

	kfilter "github.com/monolith-go/monolith/kernels/filter"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/transforms/filter"
	"github.com/monolith-go/monolith/transforms/filter/filtertest"
	"github.com/monolith-go/monolith/transforms/label"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

var mem = filtertest.Mem

const inv = kfilter.InvalidLabel

// kernelSummaries runs the kernel op directly on every batch (add_label seeded per batch
// as the package doc says) and returns the summaries of the non-empty results.
func kernelSummaries(t *testing.T, cfg label.Config, bs []filtertest.Batch) []string {
	t.Helper()
	return filtertest.Summaries(t, filtertest.Records(bs), func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		var op kfilter.Op
		var err error
		switch {
		case cfg.AddAction != nil:
			op, err = kfilter.NewAddAction(*cfg.AddAction)
		case cfg.AddLabel != nil:
			o := *cfg.AddLabel
			o.Seed = filter.BatchSeed(o.Seed, label.OpAddLabel, rec)
			op, err = kfilter.NewAddLabel(o)
		case cfg.ScatterLabel != nil:
			op, err = kfilter.NewScatterLabel(*cfg.ScatterLabel)
		case cfg.UpperBound != nil:
			op, err = kfilter.NewLabelUpperBound(*cfg.UpperBound)
		case cfg.Normalization != nil:
			op, err = kfilter.NewLabelNormalization(*cfg.Normalization)
		case cfg.FieldAsLabel != nil:
			op, err = kfilter.NewUseFieldAsLabel(*cfg.FieldAsLabel)
		case cfg.MultiLabelGen != nil:
			op, err = kfilter.NewMultiLabelGen(*cfg.MultiLabelGen)
		case cfg.InstanceReweight != nil:
			op, err = kfilter.NewInstanceReweight(*cfg.InstanceReweight)
		default:
			t.Fatal("no op")
		}
		if err != nil {
			return nil, err
		}
		return op.Apply(mem, rec)
	})
}

func one(e *examplepb.Example) []*examplepb.Example { return []*examplepb.Example{e} }

func invalids(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = inv
	}
	return v
}

func TestLabelOpsOnPrism(t *testing.T) {
	bs := filtertest.MakeBatches(t, 1, 30, 41, 1, 0, 57)
	unlabelled := filtertest.GenExamples(rand.New(rand.NewPCG(8, 8)), 9, 12)
	for _, e := range unlabelled {
		e.Label = nil
	}
	rec, err := filtertest.BatchFromExamples(unlabelled)
	if err != nil {
		t.Fatal(err)
	}
	bs = append(bs, filtertest.Batch{Exs: unlabelled, Rec: rec}, filtertest.FixtureBatch(t))
	tests := []struct {
		name string
		cfg  label.Config
		want func(*examplepb.Example) []*examplepb.Example // nil: kernel only
	}{
		{"add_action", label.Config{AddAction: &kfilter.AddActionOptions{Field: "chnid", Op: "eq", Operands: kfilter.Operands{Ints: []int64{2}}, Action: 9}},
			func(e *examplepb.Example) []*examplepb.Example {
				if filtertest.LineID(e).GetChnid() == 2 {
					e.LineId.Actions = append(e.LineId.Actions, 9)
				}
				return one(e)
			}},
		{"add_action between", label.Config{AddAction: &kfilter.AddActionOptions{Field: "req_time", Op: "between", Operands: kfilter.Operands{Ints: []int64{10, 50}}, Action: 7}}, nil},
		{"add_label rate 1", label.Config{AddLabel: &kfilter.AddLabelOptions{Tasks: []kfilter.AddLabelTask{{PosActions: []int32{1}, SampleRate: 1}}, NegativeValue: -1, NewSampleRate: 0.25}},
			func(e *examplepb.Example) []*examplepb.Example {
				if len(e.Label) > 0 && e.Label[0] <= 0 {
					e.Label[0] = inv
				}
				v := float32(-1)
				if slices.Contains(filtertest.LineID(e).GetActions(), 1) {
					v = 1
				}
				e.Label = append(e.Label, v)
				if e.LineId == nil {
					e.LineId = &matrixpb.LineId{}
				}
				e.LineId.SampleRate = proto.Float32(0.25)
				return one(e)
			}},
		{"add_label sampled", label.Config{AddLabel: &kfilter.AddLabelOptions{Tasks: []kfilter.AddLabelTask{
			{PosActions: []int32{1}, NegActions: []int32{2}, SampleRate: 0.5}, {PosActions: []int32{3, 4}, SampleRate: 0.3}},
			NewSampleRate: 0.5, Seed: 5}}, nil},
		{"scatter_label", label.Config{ScatterLabel: &kfilter.ScatterLabelOptions{Index: map[int64]int{0: 1, 2: 0, 3: 2}}},
			func(e *examplepb.Example) []*examplepb.Example {
				l := invalids(3)
				if i, ok := map[int64]int{0: 1, 2: 0, 3: 2}[filtertest.LineID(e).GetChnid()]; ok && len(e.Label) > 0 {
					l[i] = e.Label[0]
				}
				e.Label = l
				return one(e)
			}},
		{"label_upper_bound", label.Config{UpperBound: &kfilter.UpperBoundOptions{Bounds: []float32{1, 0.5}}},
			func(e *examplepb.Example) []*examplepb.Example {
				if len(e.Label) >= 2 {
					e.Label[0], e.Label[1] = min(e.Label[0], 1), min(e.Label[1], 0.5)
				}
				return one(e)
			}},
		{"label_normalization", label.Config{Normalization: &kfilter.NormOptions{Methods: []kfilter.NormMethod{kfilter.NormScale, kfilter.NormLog}, Values: []float32{2, 1}}},
			func(e *examplepb.Example) []*examplepb.Example {
				for i, x := range e.Label {
					x /= 2
					e.Label[i] = float32(math.Log(float64(max(x+1, 0))))
				}
				return one(e)
			}},
		{"use_field_as_label", label.Config{FieldAsLabel: &kfilter.FieldAsLabelOptions{Field: "req_time", OverwriteInvalidValue: true, LabelThreshold: 50}},
			func(e *examplepb.Example) []*examplepb.Example {
				v := float32(filtertest.LineID(e).GetReqTime())
				if v >= 50 {
					v = 0
				}
				for i, x := range e.Label {
					e.Label[i] = max(x, v)
				}
				return one(e)
			}},
		{"multi_label_gen origin label", label.Config{MultiLabelGen: &kfilter.MultiLabelGenOptions{HeadToIndex: map[string]int{"0": 3, "1": 2, "2": 1}, UseOriginLabel: true}},
			func(e *examplepb.Example) []*examplepb.Example {
				l := invalids(4)
				if i, ok := map[int64]int{0: 3, 1: 2, 2: 1}[filtertest.LineID(e).GetChnid()]; ok && len(e.Label) > 0 {
					l[i] = e.Label[0]
				}
				e.Label = l
				return one(e)
			}},
		{"multi_label_gen req_time head (I6)", label.Config{MultiLabelGen: &kfilter.MultiLabelGenOptions{HeadField: "req_time",
			HeadToIndex: map[string]int{"5": 0, "17": 1, "42": 2, "99": 3}, PosActions: []int32{1}, NegActions: []int32{2}, PosLabel: 1, ActionPriority: []int32{2, 1}}}, nil},
		{"instance_reweight no rules", label.Config{InstanceReweight: &kfilter.ReweightOptions{}},
			func(e *examplepb.Example) []*examplepb.Example {
				// Without priorities or rules a labelled row is kept once iff it has no
				// pre_actions, and unlabelled rows are dropped.
				if len(e.Label) == 0 || len(filtertest.LineID(e).GetPreActions()) > 0 {
					return nil
				}
				return one(e)
			}},
		{"instance_reweight", label.Config{InstanceReweight: &kfilter.ReweightOptions{ActionPriority: []int32{1, 2, 3},
			Rules: []kfilter.ReweightRule{{Action: 1, Weight: 2, Label: 1}, {Action: 2, Weight: 0}, {Action: 3, Weight: 3, Label: 0}}}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := kernelSummaries(t, tc.cfg, bs)
			if tc.want != nil {
				filtertest.CheckExpectation(t, want, filtertest.ExampleSummaries(bs, tc.want))
			}
			filtertest.RunPipeline(t, filtertest.Records(bs), func(s beam.Scope, col beam.PCollection) {
				filtertest.ExpectSummaries(s, label.Apply(s, col, tc.cfg), want)
			})
		})
	}
}

func TestShorthands(t *testing.T) {
	bs := filtertest.MakeBatches(t, 2, 20, 33)
	aa := kfilter.AddActionOptions{Field: "chnid", Op: "in", Operands: kfilter.Operands{Ints: []int64{1, 3}}, Action: 8}
	al := kfilter.AddLabelOptions{Tasks: []kfilter.AddLabelTask{{PosActions: []int32{2}, SampleRate: 0.5}}, NewSampleRate: 1}
	sl := kfilter.ScatterLabelOptions{Index: map[int64]int{1: 0, 2: 1}, TaskNum: 4}
	ub := kfilter.UpperBoundOptions{Bounds: []float32{0.5}}
	no := kfilter.NormOptions{Methods: []kfilter.NormMethod{kfilter.NormPow}, Values: []float32{2}}
	fl := kfilter.DefaultFieldAsLabelOptions("chnid")
	ml := kfilter.DefaultMultiLabelGenOptions()
	ml.HeadToIndex, ml.PosActions = map[string]int{"1": 0, "3": 1}, []int32{1, 2}
	rw := kfilter.ReweightOptions{ActionPriority: []int32{3}, Rules: []kfilter.ReweightRule{{Action: 3, Weight: 2, Label: 1}}}
	filtertest.RunPipeline(t, filtertest.Records(bs), func(s beam.Scope, col beam.PCollection) {
		check := func(out beam.PCollection, cfg label.Config) {
			filtertest.ExpectSummaries(s, out, kernelSummaries(t, cfg, bs))
		}
		check(label.AddAction(s, col, aa), label.Config{AddAction: &aa})
		check(label.AddLabel(s, col, al), label.Config{AddLabel: &al})
		check(label.ScatterLabel(s, col, sl), label.Config{ScatterLabel: &sl})
		check(label.UpperBound(s, col, ub), label.Config{UpperBound: &ub})
		check(label.Normalize(s, col, no), label.Config{Normalization: &no})
		check(label.UseFieldAsLabel(s, col, fl), label.Config{FieldAsLabel: &fl})
		check(label.MultiLabelGen(s, col, ml), label.Config{MultiLabelGen: &ml})
		check(label.InstanceReweight(s, col, rw), label.Config{InstanceReweight: &rw})
	})
}

// TestAddLabelReproducible pins the determinism rule: add_label's labels for a batch do
// not depend on the order of the batches, their grouping or the runner; and shows that
// one kernel op reused over the batches would.
func TestAddLabelReproducible(t *testing.T) {
	recs := filtertest.Records(filtertest.MakeBatches(t, 3, 40, 64, 17, 80, 33, 51))
	cfg := label.Config{AddLabel: &kfilter.AddLabelOptions{Tasks: []kfilter.AddLabelTask{
		{PosActions: []int32{1}, SampleRate: 0.5}, {PosActions: []int32{2}, NegActions: []int32{3}, SampleRate: 0.5}}, NewSampleRate: 0.5}}
	newRunner := func(t *testing.T) filtertest.Apply {
		var r label.Runner
		if err := r.Init(cfg); err != nil {
			t.Fatal(err)
		}
		return r.Apply
	}
	filtertest.CheckReproducible(t, recs, newRunner, func(s beam.Scope, col beam.PCollection) beam.PCollection {
		return label.Apply(s, col, cfg)
	})
	filtertest.CheckReusedOpDependsOnOrder(t, recs, func(t *testing.T) filtertest.Apply {
		op, err := kfilter.NewAddLabel(*cfg.AddLabel)
		if err != nil {
			t.Fatal(err)
		}
		return func(rec arrow.RecordBatch) (arrow.RecordBatch, error) { return op.Apply(mem, rec) }
	})
}

func TestConfigPanics(t *testing.T) {
	tests := []struct {
		name string
		cfg  label.Config
		want []string
	}{
		{"no op", label.Config{}, []string{"no op"}},
		{"two ops", label.Config{UpperBound: &kfilter.UpperBoundOptions{Bounds: []float32{1}}, InstanceReweight: &kfilter.ReweightOptions{}}, []string{"label_upper_bound", "instance_reweight", "exactly one"}},
		{"repeated field", label.Config{AddAction: &kfilter.AddActionOptions{Field: "actions", Op: "eq", Operands: kfilter.Operands{Ints: []int64{1}}}}, []string{"add_action", "actions"}},
		{"add_action op", label.Config{AddAction: &kfilter.AddActionOptions{Field: "chnid", Op: "not-in", Operands: kfilter.Operands{Ints: []int64{1}}}}, []string{"add_action", "not-in"}},
		{"no tasks", label.Config{AddLabel: &kfilter.AddLabelOptions{NewSampleRate: 1}}, []string{"add_label", "no tasks"}},
		{"sample rate", label.Config{AddLabel: &kfilter.AddLabelOptions{Tasks: []kfilter.AddLabelTask{{PosActions: []int32{1}, SampleRate: 1}}, NewSampleRate: 1.5}}, []string{"add_label", "1.5"}},
		{"scatter index", label.Config{ScatterLabel: &kfilter.ScatterLabelOptions{Index: map[int64]int{4: -2}}}, []string{"scatter_label", "-2"}},
		{"no bounds", label.Config{UpperBound: &kfilter.UpperBoundOptions{}}, []string{"label_upper_bound", "no bounds"}},
		{"infinite bound", label.Config{UpperBound: &kfilter.UpperBoundOptions{Bounds: []float32{float32(math.Inf(1))}}}, []string{"label_upper_bound", "JSON"}},
		{"norm method", label.Config{Normalization: &kfilter.NormOptions{Methods: []kfilter.NormMethod{42}, Values: []float32{1}}}, []string{"label_normalization", "NormMethod(42)"}},
		{"norm values", label.Config{Normalization: &kfilter.NormOptions{Methods: []kfilter.NormMethod{kfilter.NormLog}}}, []string{"label_normalization", "1 methods but 0 values"}},
		{"string field as label", label.Config{FieldAsLabel: &kfilter.FieldAsLabelOptions{Field: "user_id"}}, []string{"use_field_as_label", "user_id"}},
		{"head not decimal", label.Config{MultiLabelGen: &kfilter.MultiLabelGenOptions{HeadToIndex: map[string]int{"07": 0}}}, []string{"multi_label_gen", "07"}},
		{"head text not UTF-8", label.Config{MultiLabelGen: &kfilter.MultiLabelGenOptions{HeadField: "user_id", HeadToIndex: map[string]int{"\xff": 0}}}, []string{"multi_label_gen", "JSON"}},
		{"reweight weight", label.Config{InstanceReweight: &kfilter.ReweightOptions{Rules: []kfilter.ReweightRule{{Action: 1, Weight: -3}}}}, []string{"instance_reweight", "-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			filtertest.CheckConfigRejected(t, tc.want,
				func(s beam.Scope, col beam.PCollection) { label.Apply(s, col, tc.cfg) },
				func() error { return new(label.Runner).Init(tc.cfg) })
		})
	}
}

func TestDefaultSeedLogged(t *testing.T) {
	task := []kfilter.AddLabelTask{{PosActions: []int32{1}, SampleRate: 0.5}}
	for _, tc := range []struct {
		cfg    label.Config
		logged bool
	}{
		{label.Config{AddLabel: &kfilter.AddLabelOptions{Tasks: task, NewSampleRate: 1}}, true},
		{label.Config{AddLabel: &kfilter.AddLabelOptions{Tasks: task, NewSampleRate: 1, Seed: 9}}, false},
		{label.Config{UpperBound: &kfilter.UpperBoundOptions{Bounds: []float32{1}}}, false},
	} {
		filtertest.CheckDefaultSeedLog(t, tc.logged, func() (string, error) {
			var r label.Runner
			err := r.Init(tc.cfg)
			return r.Op(), err
		})
	}
}

func TestRunnerErrors(t *testing.T) {
	var r label.Runner
	bs := filtertest.MakeBatches(t, 7, 3)
	if _, err := r.Apply(bs[0].Rec); err == nil {
		t.Error("a Runner without Init applied")
	}
	// A row that needs more than MaxReplicas copies: the error names the op and batch.
	exs := []*examplepb.Example{{Label: []float32{1}, LineId: &matrixpb.LineId{Actions: []int32{1, 2}}}}
	rec, err := filtertest.BatchFromExamples(exs)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Init(label.Config{InstanceReweight: &kfilter.ReweightOptions{Rules: []kfilter.ReweightRule{
		{Action: 1, Weight: kfilter.MaxReplicas}, {Action: 2, Weight: 2}}}}); err != nil {
		t.Fatal(err)
	}
	_, err = r.Apply(rec)
	filtertest.CheckRowError(t, err, "instance_reweight: batch of 1 rows")
}
