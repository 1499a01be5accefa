package filter_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/protobuf/proto"

	kfilter "github.com/monolith-go/monolith/kernels/filter"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/transforms/filter"
	"github.com/monolith-go/monolith/transforms/filter/filtertest"
)

// kernelSummaries runs the kernel op directly on every batch (seeded per batch as the
// package doc says for random ops) and returns the summaries of the non-empty results.
func kernelSummaries(t *testing.T, cfg filter.Config, bs []filtertest.Batch) []string {
	t.Helper()
	return filtertest.Summaries(t, filtertest.Records(bs), func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		var f kfilter.Filter
		var err error
		switch {
		case cfg.ByLabel != nil:
			f, err = kfilter.NewFilterByLabel(*cfg.ByLabel)
		case cfg.ByFids != nil:
			f, err = kfilter.NewFilterByFids(*cfg.ByFids)
		case cfg.ByValue != nil:
			f, err = kfilter.NewFilterByValue(*cfg.ByValue)
		case cfg.ByFeatureValue != nil:
			f, err = kfilter.NewFilterByFeatureValue(*cfg.ByFeatureValue)
		case cfg.NegativeSample != nil:
			o := *cfg.NegativeSample
			o.Seed = filter.BatchSeed(o.Seed, filter.OpNegativeSample, rec)
			f, err = kfilter.NewNegativeSample(o)
		case cfg.SpecialStrategy != nil:
			o := *cfg.SpecialStrategy
			o.Seed = filter.BatchSeed(o.Seed, filter.OpSpecialStrategy, rec)
			s, err := kfilter.NewSpecialStrategy(o)
			if err != nil {
				return nil, err
			}
			return s.Apply(mem, rec)
		default:
			t.Fatal("no op")
		}
		if err != nil {
			return nil, err
		}
		return kfilter.Select(mem, f, rec)
	})
}

// predSummaries keeps the Examples of every batch that pred accepts and returns the
// summaries of the non-empty batches: an expectation computed without the kernel.
func predSummaries(bs []filtertest.Batch, pred func(*examplepb.Example) bool) []string {
	return filtertest.ExampleSummaries(bs, func(e *examplepb.Example) []*examplepb.Example {
		if pred(e) {
			return []*examplepb.Example{e}
		}
		return nil
	})
}

func TestFilterOnPrism(t *testing.T) {
	bs := append(filtertest.MakeBatches(t, 1, 30, 41, 1, 0, 57), filtertest.FixtureBatch(t))
	fixtureFid := fidsOf(bs[len(bs)-1].Exs[0])[0]
	has := func(set []int32, v int32) bool { return slices.Contains(set, v) }
	tests := []struct {
		name string
		cfg  filter.Config
		pred func(*examplepb.Example) bool // nil for random ops
	}{
		{"filter_by_label", filter.Config{ByLabel: &kfilter.LabelFilterOptions{Thresholds: []float32{0.5}}},
			func(e *examplepb.Example) bool { return len(e.Label) >= 1 && e.Label[0] > 0.5 }},
		{"filter_by_label two thresholds, filter equal", filter.Config{ByLabel: &kfilter.LabelFilterOptions{Thresholds: []float32{1, 0}, FilterEqual: true}},
			func(e *examplepb.Example) bool { return len(e.Label) >= 2 && (e.Label[0] > 1 || e.Label[1] > 0) }},
		{"filter_by_fids", filter.Config{ByFids: &kfilter.FidsOptions{HasFids: []uint64{filtertest.GenFids[1], fixtureFid}, ReqTimeMin: 30}},
			func(e *examplepb.Example) bool {
				fids := fidsOf(e)
				return filtertest.LineID(e).GetReqTime() >= 30 && (slices.Contains(fids, filtertest.GenFids[1]) || slices.Contains(fids, fixtureFid))
			}},
		{"filter_by_value in", filter.Config{ByValue: &kfilter.ValueOptions{Field: "chnid", Op: "in", Operands: kfilter.Operands{Ints: []int64{1, 3}}}},
			func(e *examplepb.Example) bool { c := filtertest.LineID(e).GetChnid(); return c == 1 || c == 3 }},
		{"filter_by_value all (I4)", filter.Config{ByValue: &kfilter.ValueOptions{Field: "actions", Op: "all", Operands: kfilter.Operands{Ints: []int64{1, 2, 2}}, KeepEmpty: true}},
			func(e *examplepb.Example) bool {
				a := filtertest.LineID(e).GetActions()
				return len(a) == 0 || has(a, 1) && has(a, 2)
			}},
		{"filter_by_feature_value", filter.Config{ByFeatureValue: &kfilter.FeatureValueOptions{Feature: "i", FieldType: "int64", Op: "ge", Operands: kfilter.Operands{Ints: []int64{5}}, KeepEmpty: true}},
			func(e *examplepb.Example) bool {
				v := feature(e, "i").GetInt64List().GetValue()
				return len(v) != 1 || v[0] >= 5
			}},
		{"filter_by_feature_value missing, keep (I5)", filter.Config{ByFeatureValue: &kfilter.FeatureValueOptions{Feature: "nope", FieldType: "bytes", Op: "eq", Operands: kfilter.Operands{Strings: []string{"x"}}, KeepEmpty: true}},
			func(*examplepb.Example) bool { return true }},
		{"filter_by_feature_value missing, drop (I5)", filter.Config{ByFeatureValue: &kfilter.FeatureValueOptions{Feature: "nope", FieldType: "bytes", Op: "eq", Operands: kfilter.Operands{Strings: []string{"x"}}}},
			func(*examplepb.Example) bool { return false }},
		{"negative_sample", filter.Config{NegativeSample: &kfilter.NegativeSampleOptions{DropRate: 0.5, Threshold: 0.5, Seed: 7}}, nil},
		{"negative_sample per action", filter.Config{NegativeSample: &kfilter.NegativeSampleOptions{DropRate: 0.5, Threshold: 0.5,
			ActionPriority: []int32{3, 1}, PerActionDropRate: map[int32]float64{3: 1, 1: 0}}}, nil},
		{"special_strategy", filter.Config{SpecialStrategy: &kfilter.StrategyOptions{StrategyList: []int32{2, 1},
			Rules: []kfilter.StrategyRule{{Strategy: 1, SampleRate: 0.5, Label: 9, HasLabel: true}, {Strategy: 2, SampleRate: 0.3}}, KeepEmptyStrategy: true, Seed: 3}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := kernelSummaries(t, tc.cfg, bs)
			if tc.pred != nil {
				filtertest.CheckExpectation(t, want, predSummaries(bs, tc.pred))
			}
			filtertest.RunPipeline(t, filtertest.Records(bs), func(s beam.Scope, col beam.PCollection) {
				filtertest.ExpectSummaries(s, filter.Filter(s, col, tc.cfg), want)
			})
		})
	}
}

func TestShorthands(t *testing.T) {
	bs := filtertest.MakeBatches(t, 2, 20, 33)
	lf := kfilter.LabelFilterOptions{Thresholds: []float32{0.5}}
	vo := kfilter.ValueOptions{Field: "req_time", Op: "lt", Operands: kfilter.Operands{Ints: []int64{50}}}
	fo := kfilter.FidsOptions{SelectFids: filtertest.GenFids[:2]}
	fv := kfilter.FeatureValueOptions{Feature: "b", FieldType: "bytes", Op: "startswith", Operands: kfilter.Operands{Strings: []string{"x1"}}}
	ns := kfilter.NegativeSampleOptions{DropRate: 0.7, Threshold: 1}
	ss := kfilter.StrategyOptions{StrategyList: []int32{3}, Rules: []kfilter.StrategyRule{{Strategy: 3, SampleRate: 0.5}}}
	filtertest.RunPipeline(t, filtertest.Records(bs), func(s beam.Scope, col beam.PCollection) {
		check := func(out beam.PCollection, cfg filter.Config) {
			filtertest.ExpectSummaries(s, out, kernelSummaries(t, cfg, bs))
		}
		check(filter.ByLabel(s, col, lf), filter.Config{ByLabel: &lf})
		check(filter.ByValue(s, col, vo), filter.Config{ByValue: &vo})
		check(filter.ByFids(s, col, fo), filter.Config{ByFids: &fo})
		check(filter.ByFeatureValue(s, col, fv), filter.Config{ByFeatureValue: &fv})
		check(filter.NegativeSample(s, col, ns), filter.Config{NegativeSample: &ns})
		check(filter.SpecialStrategy(s, col, ss), filter.Config{SpecialStrategy: &ss})
	})
}

// newRunner returns the Filter method of a Runner initialized with cfg.
func newRunner(cfg filter.Config) func(*testing.T) filtertest.Apply {
	return func(t *testing.T) filtertest.Apply {
		var r filter.Runner
		if err := r.Init(cfg); err != nil {
			t.Fatal(err)
		}
		return r.Filter
	}
}

// TestRandomReproducible pins the determinism rule: the rows a random op keeps from a
// batch do not depend on the order of the batches, their grouping or the runner.
func TestRandomReproducible(t *testing.T) {
	recs := filtertest.Records(filtertest.MakeBatches(t, 3, 40, 64, 17, 80, 33, 51, 29, 70))
	configs := map[string]filter.Config{
		"negative_sample": {NegativeSample: &kfilter.NegativeSampleOptions{DropRate: 0.5, Threshold: 0.5, Seed: 11}},
		"special_strategy": {SpecialStrategy: &kfilter.StrategyOptions{StrategyList: []int32{1, 2, 3},
			Rules: []kfilter.StrategyRule{{Strategy: 1, SampleRate: 0.5}, {Strategy: 2, SampleRate: 0.5, Label: 4, HasLabel: true}, {Strategy: 3, SampleRate: 0.2}}, KeepEmptyStrategy: true}},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			filtertest.CheckReproducible(t, recs, newRunner(cfg), func(s beam.Scope, col beam.PCollection) beam.PCollection {
				return filter.Filter(s, col, cfg)
			})
		})
	}
}

// TestNaiveKernelDependsOnOrder shows what TestRandomReproducible guards against: one
// kernel op reused over the batches gives order-dependent results.
func TestNaiveKernelDependsOnOrder(t *testing.T) {
	recs := filtertest.Records(filtertest.MakeBatches(t, 3, 40, 64, 17, 80))
	filtertest.CheckReusedOpDependsOnOrder(t, recs, func(t *testing.T) filtertest.Apply {
		f, err := kfilter.NewNegativeSample(kfilter.NegativeSampleOptions{DropRate: 0.5, Threshold: 0.5, Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		return func(rec arrow.RecordBatch) (arrow.RecordBatch, error) { return kfilter.Select(mem, f, rec) }
	})
}

// TestNegativeSampleRates checks the sampling against its definition, independently of
// the kernel: positives and rows without labels are kept, negatives with probability
// 1 − DropRate; seeds matter; seed 0 is DefaultSeed.
func TestNegativeSampleRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	var recs []arrow.RecordBatch
	var exsAll [][]*examplepb.Example
	for id := range 20 {
		exs := filtertest.GenExamples(rng, id, 200)
		rec, err := filtertest.BatchFromExamples(exs)
		if err != nil {
			t.Fatal(err)
		}
		recs, exsAll = append(recs, rec), append(exsAll, exs)
	}
	const drop = 0.3
	counts := func(seed uint64) (negIn, negKept int, sums []string) {
		var r filter.Runner
		if err := r.Init(filter.Config{NegativeSample: &kfilter.NegativeSampleOptions{DropRate: drop, Threshold: 0.5, Seed: seed}}); err != nil {
			t.Fatal(err)
		}
		for i, rec := range recs {
			res, err := r.Filter(rec)
			if err != nil {
				t.Fatal(err)
			}
			kept := map[string]bool{}
			if res != nil {
				sum := filtertest.MustSummarize(t, res)
				sums = append(sums, sum)
				for _, line := range strings.Split(sum, "\n")[1:] {
					kept[line] = true
				}
				res.Release()
			}
			for _, e := range exsAll[i] {
				line := strings.Split(filtertest.SummarizeExamples([]*examplepb.Example{e}), "\n")[1]
				if len(e.Label) == 0 || e.Label[0] >= 0.5 {
					if !kept[line] {
						t.Fatalf("seed %d: batch %d: a positive or unlabelled row was dropped: %s", seed, i, line)
					}
					continue
				}
				negIn++
				if kept[line] {
					negKept++
				}
			}
		}
		return negIn, negKept, sums
	}
	negIn, negKept, a := counts(42)
	frac := float64(negKept) / float64(negIn)
	sd := math.Sqrt(drop * (1 - drop) / float64(negIn))
	if math.Abs(frac-(1-drop)) > 5*sd {
		t.Errorf("kept %d of %d negatives (%.3f), want about %.3f ± %.3f", negKept, negIn, frac, 1-drop, 5*sd)
	}
	if _, _, b := counts(43); slices.Equal(a, b) {
		t.Error("seeds 42 and 43 kept the same rows")
	}
	_, _, zero := counts(0)
	_, _, def := counts(kfilter.DefaultSeed)
	if !slices.Equal(zero, def) {
		t.Error("seed 0 is not DefaultSeed")
	}
}

func TestBatchSeed(t *testing.T) {
	bs := filtertest.MakeBatches(t, 4, 30, 30, 0)
	a, b, empty := bs[0].Rec, bs[1].Rec, bs[2].Rec
	seedA := filter.BatchSeed(7, filter.OpNegativeSample, a)
	// The same content, with and without the decoded LineId columns, after a coder
	// round trip: the same seed.
	bytesOnly, err := batchFromExamplesOpts(bs[0].Exs, true)
	if err != nil {
		t.Fatal(err)
	}
	decoded := roundTrip(t, a)
	for name, rec := range map[string]arrow.RecordBatch{"bytes only": bytesOnly, "coder round trip": decoded, "bytes only, round trip": roundTrip(t, bytesOnly)} {
		if got := filter.BatchSeed(7, filter.OpNegativeSample, rec); got != seedA {
			t.Errorf("%s: seed %#x, want %#x", name, got, seedA)
		}
	}
	// Other content, op or seed: another seed.
	relabelled := slices.Clone(bs[0].Exs)
	e := proto.Clone(relabelled[3]).(*examplepb.Example)
	e.Label = append(slices.Clone(e.Label), 1)
	relabelled[3] = e
	other, err := batchFromExamplesOpts(relabelled, false)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]string{seedA: "a"}
	for name, s := range map[string]uint64{
		"other batch":      filter.BatchSeed(7, filter.OpNegativeSample, b),
		"one label more":   filter.BatchSeed(7, filter.OpNegativeSample, other),
		"other op":         filter.BatchSeed(7, filter.OpSpecialStrategy, a),
		"other seed":       filter.BatchSeed(8, filter.OpNegativeSample, a),
		"default seed":     filter.BatchSeed(0, filter.OpNegativeSample, a),
		"empty batch":      filter.BatchSeed(7, filter.OpNegativeSample, empty),
		"empty, add_label": filter.BatchSeed(7, "add_label", empty),
	} {
		if prev, dup := seen[s]; dup {
			t.Errorf("%s has the seed of %s", name, prev)
		}
		seen[s] = name
	}
	if filter.BatchSeed(0, filter.OpNegativeSample, a) != filter.BatchSeed(kfilter.DefaultSeed, filter.OpNegativeSample, a) {
		t.Error("seed 0 does not mean DefaultSeed")
	}
	if n := testing.AllocsPerRun(20, func() { filter.BatchSeed(7, filter.OpNegativeSample, bytesOnly) }); n != 0 {
		t.Errorf("BatchSeed allocates %v times per call", n)
	}
}

func TestConfigPanics(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  filter.Config
		want []string // substrings of the panic message
	}{
		{"no op", filter.Config{}, []string{"no op"}},
		{"two ops", filter.Config{ByLabel: &kfilter.LabelFilterOptions{Thresholds: []float32{1}}, ByFids: &kfilter.FidsOptions{}}, []string{"filter_by_label", "filter_by_fids", "exactly one"}},
		{"no thresholds", filter.Config{ByLabel: &kfilter.LabelFilterOptions{}}, []string{"filter_by_label", "no thresholds"}},
		{"bad slot", filter.Config{ByFids: &kfilter.FidsOptions{SelectSlots: []int32{-4}}}, []string{"filter_by_fids", "-4"}},
		{"unknown field", filter.Config{ByValue: &kfilter.ValueOptions{Field: "nope", Op: "eq", Operands: kfilter.Operands{Ints: []int64{1}}}}, []string{"filter_by_value", "nope"}},
		{"unknown cmp", filter.Config{ByValue: &kfilter.ValueOptions{Field: "chnid", Op: "like", Operands: kfilter.Operands{Ints: []int64{1}}}}, []string{"filter_by_value", "like"}},
		{"missing operand file", filter.Config{ByValue: &kfilter.ValueOptions{Field: "chnid", Op: "in", OperandFile: filepath.Join(dir, "absent.pb")}}, []string{"filter_by_value", "absent.pb"}},
		{"bad field type", filter.Config{ByFeatureValue: &kfilter.FeatureValueOptions{Feature: "i", FieldType: "int32", Op: "eq", Operands: kfilter.Operands{Ints: []int64{1}}}}, []string{"filter_by_feature_value", "int32"}},
		{"bytes operand not UTF-8", filter.Config{ByFeatureValue: &kfilter.FeatureValueOptions{Feature: "b", FieldType: "bytes", Op: "eq", Operands: kfilter.Operands{Strings: []string{"\xff\xfe"}}}}, []string{"filter_by_feature_value", "JSON"}},
		{"infinite threshold", filter.Config{ByLabel: &kfilter.LabelFilterOptions{Thresholds: []float32{float32(math.Inf(1))}}}, []string{"filter_by_label", "JSON"}},
		{"drop rate", filter.Config{NegativeSample: &kfilter.NegativeSampleOptions{DropRate: 2}}, []string{"negative_sample", "drop rate 2"}},
		{"per action drop rate", filter.Config{NegativeSample: &kfilter.NegativeSampleOptions{ActionPriority: []int32{1}, PerActionDropRate: map[int32]float64{1: -0.5}}}, []string{"negative_sample", "-0.5"}},
		{"empty strategy list", filter.Config{SpecialStrategy: &kfilter.StrategyOptions{}}, []string{"special_strategy", "empty strategy list"}},
		{"strategy rate", filter.Config{SpecialStrategy: &kfilter.StrategyOptions{StrategyList: []int32{1}, Rules: []kfilter.StrategyRule{{Strategy: 1, SampleRate: 1.5}}}}, []string{"special_strategy", "1.5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			filtertest.CheckConfigRejected(t, tc.want,
				func(s beam.Scope, col beam.PCollection) { filter.Filter(s, col, tc.cfg) },
				func() error { return new(filter.Runner).Init(tc.cfg) })
		})
	}
}

// TestOperandFileShipped: an operand file is read at construction, so the pipeline runs
// after the file is gone (as on a worker that cannot see it).
func TestOperandFileShipped(t *testing.T) {
	bs := filtertest.MakeBatches(t, 6, 40, 25)
	path := filepath.Join(t.TempDir(), "values.pb")
	fv := &examplepb.FilterValues{Type: &examplepb.FilterValues_Int64List{Int64List: &examplepb.Int64List{Value: []int64{0, 2}}}}
	b, err := proto.Marshal(fv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filter.Config{ByValue: &kfilter.ValueOptions{Field: "chnid", Op: "not-in", OperandFile: path}}
	resolved, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if resolved.ByValue.OperandFile != "" || !slices.Equal(resolved.ByValue.Operands.Ints, []int64{0, 2}) || cfg.ByValue.OperandFile != path {
		t.Fatalf("resolved %+v (input now %+v)", *resolved.ByValue, *cfg.ByValue)
	}
	want := predSummaries(bs, func(e *examplepb.Example) bool { c := filtertest.LineID(e).GetChnid(); return c != 0 && c != 2 })
	filtertest.RunPipeline(t, filtertest.Records(bs), func(s beam.Scope, col beam.PCollection) {
		filtertest.ExpectSummaries(s, filter.Filter(s, col, cfg), want)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDefaultSeedLogged(t *testing.T) {
	for _, tc := range []struct {
		cfg    filter.Config
		logged bool
	}{
		{filter.Config{NegativeSample: &kfilter.NegativeSampleOptions{DropRate: 0.5}}, true},
		{filter.Config{SpecialStrategy: &kfilter.StrategyOptions{StrategyList: []int32{1}}}, true},
		{filter.Config{NegativeSample: &kfilter.NegativeSampleOptions{DropRate: 0.5, Seed: 3}}, false},
		{filter.Config{ByLabel: &kfilter.LabelFilterOptions{Thresholds: []float32{0}}}, false},
	} {
		filtertest.CheckDefaultSeedLog(t, tc.logged, func() (string, error) {
			var r filter.Runner
			err := r.Init(tc.cfg)
			return r.Op(), err
		})
	}
}

func TestRunnerErrors(t *testing.T) {
	var r filter.Runner
	bs := filtertest.MakeBatches(t, 7, 3)
	if _, err := r.Filter(bs[0].Rec); err == nil {
		t.Error("a Runner without Init filtered")
	}
	// A LineId that does not parse: the error names the op and the batch.
	exs := filtertest.GenExamples(rand.New(rand.NewPCG(1, 1)), 0, 3)
	bad, err := batchFromExamplesOpts(exs, true)
	if err != nil {
		t.Fatal(err)
	}
	lids := make([][]byte, bad.NumRows())
	for i := range lids {
		lids[i] = []byte{0xff, 0xff}
	}
	bad = replaceLineIDs(t, bad, lids)
	if err := r.Init(filter.Config{ByValue: &kfilter.ValueOptions{Field: "chnid", Op: "eq", Operands: kfilter.Operands{Ints: []int64{1}}}}); err != nil {
		t.Fatal(err)
	}
	_, err = r.Filter(bad)
	filtertest.CheckRowError(t, err, "filter_by_value: batch of 3 rows")
}
