package hostcall

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/kernels/metrics"
)

// TestComputeNewValue ports base_embedding_host_call_test.py test_compute_new_value (the
// first three cases, each on the previous result) and adds wrapping and errors.
func TestComputeNewValue(t *testing.T) {
	base := make([]int32, 10)
	delta := []int32{1, 1}
	for _, tc := range []struct {
		offset int
		want   []int32
	}{
		{1, []int32{0, 1, 1, 0, 0, 0, 0, 0, 0, 0}},
		{5, []int32{0, 1, 1, 0, 0, 1, 1, 0, 0, 0}},
		{6, []int32{0, 1, 1, 0, 0, 1, 2, 1, 0, 0}},
		{9, []int32{1, 1, 1, 0, 0, 1, 2, 1, 0, 1}},  // wraps, as tf.roll does
		{-1, []int32{2, 1, 1, 0, 0, 1, 2, 1, 0, 2}}, // negative shifts rotate left
		{23, []int32{2, 1, 1, 1, 1, 1, 2, 1, 0, 2}}, // modulo the length
	} {
		got, err := ComputeNewValue(base, delta, tc.offset)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("offset %d: %v, %v; want %v", tc.offset, got, err, tc.want)
		}
		base = got
	}
	f, err := ComputeNewValue([]float32{0.5, 0}, []float32{0.25}, 1)
	if err != nil || !reflect.DeepEqual(f, []float32{0.5, 0.25}) {
		t.Errorf("float32: %v, %v", f, err)
	}
	if _, err := ComputeNewValue([]int64{0}, []int64{1, 2}, 0); !errors.Is(err, ErrInput) {
		t.Errorf("delta longer than base: %v", err)
	}
	if got, err := ComputeNewValue([]int64{}, nil, 3); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v", got, err)
	}
}

func TestKeep(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		scalarMetrics, caching bool
		want                   bool
	}{
		{"loss_avg", false, false, false},
		{"loss_avg", true, false, true},
		{"loss_avg", true, true, true},
		{LabelsForAUC, false, false, true},
		{LabelsForAUC, false, true, false},
		{UIDBucket, true, true, false},
		{LabelsVar, false, true, false}, // as in the reference: dropped without scalar metrics
		{LabelsVar, true, true, true},
	} {
		if got := Keep(tc.name, tc.scalarMetrics, tc.caching); got != tc.want {
			t.Errorf("Keep(%s, %v, %v) = %v", tc.name, tc.scalarMetrics, tc.caching, got)
		}
	}
}

func TestCache(t *testing.T) {
	c, err := NewCache(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		step          int64
		labels, preds []float32
		uids          []int32
		req           []int64
		rate          []float32
		wantLabels    []float32
		wantUIDs      []int32
		wantReq       []int64
		wantCounter   int32
	}
	for i, s := range []step{
		{1, []float32{1, 0}, []float32{.9, .1}, []int32{5, 50}, []int64{100}, []float32{.5},
			[]float32{1, 0, 0, 0, 0, 0}, []int32{5, 50, 0, 0, 0, 0}, []int64{100, 0, 0}, 1},
		{2, []float32{0, 1}, []float32{.2, .8}, []int32{6, 60}, []int64{200}, []float32{.5},
			[]float32{1, 0, 0, 1, 0, 0}, []int32{5, 50, 6, 60, 0, 0}, []int64{100, 200, 0}, 2},
		{3, []float32{1, 1}, []float32{.7, .6}, []int32{7, 70}, []int64{300}, []float32{.5},
			[]float32{1, 0, 0, 1, 1, 1}, []int32{5, 50, 6, 60, 7, 70}, []int64{100, 200, 300}, 3},
		// 4 ≡ 1 (mod 3): cleared first.
		{4, []float32{0, 1}, []float32{.3, .4}, []int32{8, 80}, []int64{400}, []float32{.25},
			[]float32{0, 1, 0, 0, 0, 0}, []int32{8, 80, 0, 0, 0, 0}, []int64{400, 0, 0}, 1},
		// A step ≢ 1 with a full cache wraps to the start, as tf.roll does.
		{5, []float32{1, 1}, []float32{.5, .5}, []int32{9, 90}, []int64{500}, []float32{.25},
			[]float32{0, 1, 1, 1, 0, 0}, []int32{8, 80, 9, 90, 0, 0}, []int64{400, 500, 0}, 2},
		// Negative steps use Python's floor modulo: -2 ≡ 1 (mod 3).
		{-2, []float32{1, 0}, []float32{.5, .5}, []int32{1, 2}, []int64{600}, []float32{.25},
			[]float32{1, 0, 0, 0, 0, 0}, []int32{1, 2, 0, 0, 0, 0}, []int64{600, 0, 0}, 1},
	} {
		if err := c.Update(s.step, s.labels, s.preds, s.uids, s.req, s.rate); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !reflect.DeepEqual(c.Labels, s.wantLabels) || !reflect.DeepEqual(c.UIDBuckets, s.wantUIDs) ||
			!reflect.DeepEqual(c.ReqTimes, s.wantReq) || c.Counter != s.wantCounter {
			t.Fatalf("after step %d: labels %v uids %v req %v counter %d", s.step, c.Labels, c.UIDBuckets, c.ReqTimes, c.Counter)
		}
	}
	before := *c
	for _, bad := range []func() error{
		func() error {
			return c.Update(2, []float32{1}, []float32{1, 1}, []int32{1, 1}, []int64{1}, []float32{1})
		},
		func() error {
			return c.Update(2, []float32{1, 1}, []float32{1, 1}, []int32{1, 1}, []int64{1, 2, 3, 4}, []float32{1})
		},
	} {
		if err := bad(); !errors.Is(err, ErrInput) {
			t.Errorf("bad update: %v", err)
		}
	}
	if !reflect.DeepEqual(before, *c) {
		t.Error("a failed update changed the cache")
	}
	for _, args := range [][2]int{{2, 1}, {0, 3}} {
		if _, err := NewCache(args[0], args[1]); !errors.Is(err, ErrInput) {
			t.Errorf("NewCache%v: %v", args, err)
		}
	}
}

// naiveAUC is tf.compat.v1.metrics.auc written out literally: every threshold against every
// row, then the trapezoids.
func naiveAUC(labels, preds []float32, n int) float64 {
	th := make([]float32, n)
	th[0] = float32(-1e-7)
	for i := 1; i < n-1; i++ {
		th[i] = float32(float64(i) / float64(n-1))
	}
	th[n-1] = float32(1 + 1e-7)
	tp, fn, tn, fp := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for j, t := range th {
		for i, p := range preds {
			pos, over := labels[i] != 0, p > t
			switch {
			case pos && over:
				tp[j]++
			case pos:
				fn[j]++
			case over:
				fp[j]++
			default:
				tn[j]++
			}
		}
	}
	var auc float64
	for i := 0; i < n-1; i++ {
		x0, x1 := fp[i]/(fp[i]+tn[i]+1e-6), fp[i+1]/(fp[i+1]+tn[i+1]+1e-6)
		y0, y1 := (tp[i]+1e-6)/(tp[i]+fn[i]+1e-6), (tp[i+1]+1e-6)/(tp[i+1]+fn[i+1]+1e-6)
		auc += (x0 - x1) * (y0 + y1) / 2
	}
	return auc
}

func TestStreamingAUC(t *testing.T) {
	for _, tc := range []struct {
		name          string
		labels, preds []float32
		want          float64
		tol           float64
	}{
		{"separated", []float32{1, 1, 0, 0}, []float32{.9, .8, .2, .1}, 1, 1e-5},
		{"reversed", []float32{0, 0, 1, 1}, []float32{.9, .8, .2, .1}, 0, 1e-5},
		{"all tied", []float32{1, 0, 1, 0}, []float32{.5, .5, .5, .5}, .5, 1e-5},
		{"one bucket apart is not enough", []float32{1, 0}, []float32{.5021, .5022}, .5, 1e-5},
		{"edges 0 and 1", []float32{0, 1}, []float32{0, 1}, 1, 1e-5},
		{"no rows", nil, nil, 0, 0},
	} {
		got, err := BucketedAUC(tc.labels, tc.preds)
		if err != nil || math.Abs(got-tc.want) > tc.tol {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
		if n := naiveAUC(tc.labels, tc.preds, DefaultThresholds); len(tc.labels) > 0 && math.Abs(n-got) > 1e-12 {
			t.Errorf("%s: %v, naive %v", tc.name, got, n)
		}
	}
}

// TestStreamingAUCRandom: against the naive form on random data, streamed in pieces; and,
// with predictions at bucket centres (no two buckets share a threshold interval), against
// the exact AUC of kernels/metrics.
func TestStreamingAUCRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for round := 0; round < 20; round++ {
		n := 1 + rng.IntN(500)
		th := 2 + rng.IntN(300)
		labels, preds, centred := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range labels {
			if rng.IntN(3) == 0 {
				labels[i] = 1
			}
			preds[i] = rng.Float32()
			if rng.IntN(20) == 0 {
				preds[i] = float32(rng.IntN(2)) // exact 0 and 1
			}
			b := rng.IntN(DefaultThresholds - 1)
			centred[i] = float32((float64(b) + 0.5) / float64(DefaultThresholds-1))
		}
		a, err := NewStreamingAUC(th)
		if err != nil {
			t.Fatal(err)
		}
		cut := rng.IntN(n + 1)
		if err := a.Update(labels[:cut], preds[:cut]); err != nil {
			t.Fatal(err)
		}
		if err := a.Update(labels[cut:], preds[cut:]); err != nil {
			t.Fatal(err)
		}
		if got, want := a.Value(), naiveAUC(labels, preds, th); math.Abs(got-want) > 1e-9 {
			t.Fatalf("round %d (%d rows, %d thresholds): %v, naive %v", round, n, th, got, want)
		}
		got, err := BucketedAUC(labels, centred)
		if err != nil {
			t.Fatal(err)
		}
		exact, err := metrics.AUC(centred, labels)
		if errors.Is(err, metrics.ErrInput) {
			continue // one class only: the exact AUC is undefined
		}
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-exact) > 1e-4 {
			t.Fatalf("round %d: bucketed %v, exact %v", round, got, exact)
		}
	}
}

func TestStreamingAUCErrors(t *testing.T) {
	a, _ := NewStreamingAUC(DefaultThresholds)
	for _, tc := range []struct {
		labels, preds []float32
		err           string
	}{
		{[]float32{1}, []float32{1, 0}, "1 labels, 2 predictions"},
		{[]float32{1}, []float32{1.5}, "outside [0, 1]"},
		{[]float32{1}, []float32{-0.1}, "outside [0, 1]"},
		{[]float32{1}, []float32{float32(math.NaN())}, "outside [0, 1]"},
	} {
		if err := a.Update(tc.labels, tc.preds); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Update(%v, %v) = %v", tc.labels, tc.preds, err)
		}
	}
	if a.Value() != 0 {
		t.Error("a failed update was counted")
	}
	if _, err := NewStreamingAUC(1); !errors.Is(err, ErrInput) {
		t.Errorf("1 threshold: %v", err)
	}
}

func scalarsOf(s Summary) map[string]float64 {
	m := map[string]float64{}
	for _, sc := range s.Scalars {
		m[sc.Name] = sc.Value
	}
	return m
}

func names(s Summary) string {
	var out []string
	for _, sc := range s.Scalars {
		out = append(out, sc.Name)
	}
	return strings.Join(out, " ")
}

// plainColumns is a host call of 2 cores, top k 2: core 0 and core 1 rows of each tensor.
func plainColumns() []Column {
	return []Column{
		{Name: GlobalStepName, Cores: 2, Width: 1, Data: []int64{40, 40}},
		{Name: "loss_avg", Cores: 2, Width: 1, Data: []float32{1, 2}},
		{Name: "steps_sum", Cores: 2, Width: 1, Data: []int32{3, 4}},
		{Name: "norm_max", Cores: 2, Width: 2, Data: []float64{1, 5, 2, 3}},
		{Name: "count_avg", Cores: 2, Width: 1, Data: []int64{3, 4}}, // integer mean truncates: 3
		{Name: "lr", Cores: 2, Width: 1, Data: []float32{0.25, 0.5}},
		{Name: LabelsForAUC, Cores: 2, Width: 2, Data: []float32{1, 0, 1, 0}},
		{Name: PredsForAUC, Cores: 2, Width: 2, Data: []float32{.9, .2, .4, .6}},
		{Name: ReqTime, Cores: 2, Width: 1, Data: []int64{1000, 2001}},
		{Name: SampleRate, Cores: 2, Width: 1, Data: []float32{.5, .25}},
		{Name: UIDBucket, Cores: 2, Width: 2, Data: []int32{3, 700, 9, 10}},
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name        string
		deepInsight bool
		noUIDs      bool
		want        map[string]float64
		wantNames   string
		sampled     []float32
		sampledReq  []int64
	}{
		{
			name: "uid sampled", want: map[string]float64{
				"loss_avg": 1.5, "steps_sum": 7, "norm_max": 5, "count_avg": 3, "lr": 0.25,
				"sampled_labels_variable_avg": 1, "sampled_preds_variable_avg": float64(float32(.9)+float32(.4)) / 2,
				"req_times_variable_avg": 1500, "sample_rates_variable_avg": .375,
			},
			wantNames: "loss_avg steps_sum norm_max count_avg lr auc sampled_labels_variable_avg sampled_preds_variable_avg req_times_variable_avg sample_rates_variable_avg",
			sampled:   []float32{1, 1},
		},
		{
			name: "deep insight", deepInsight: true,
			want:       map[string]float64{"req_times_variable_avg": 1500}, // mean of the sampled, repeated times (1000, 2001)
			sampled:    []float32{1, 1},
			sampledReq: []int64{1000, 2001},
		},
		{
			name: "no uid buckets", noUIDs: true,
			want: map[string]float64{"sampled_labels_variable_avg": .5, "auc": 0.75}, // 3 of 4 pairs ordered
		},
	} {
		cols := plainColumns()
		if tc.noUIDs {
			cols = cols[:len(cols)-1]
		}
		auc, _ := NewStreamingAUC(DefaultThresholds)
		s, err := Summarize(cols, auc, Options{TopK: 2, DeepInsight: tc.deepInsight})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := scalarsOf(s)
		for k, v := range tc.want {
			if math.Abs(got[k]-v) > 1e-6 {
				t.Errorf("%s: %s = %v, want %v", tc.name, k, got[k], v)
			}
		}
		if tc.wantNames != "" && names(s) != tc.wantNames {
			t.Errorf("%s: scalars %s", tc.name, names(s))
		}
		if s.Step != 40 || !reflect.DeepEqual(s.SampledLabels, tc.sampled) || !reflect.DeepEqual(s.SampledReqTimes, tc.sampledReq) {
			t.Errorf("%s: step %d sampled %v req %v", tc.name, s.Step, s.SampledLabels, s.SampledReqTimes)
		}
		if tc.deepInsight != (s.SampleRates != nil) {
			t.Errorf("%s: sample rates %v", tc.name, s.SampleRates)
		}
		// Only positives sampled: the AUC has no negatives; recall 1, false positive rate 0.
		if !tc.noUIDs && math.Abs(got["auc"]-0) > 1e-5 && math.Abs(got["auc"]-1) > 1e-5 {
			t.Errorf("%s: auc %v", tc.name, got["auc"])
		}
	}
}

func TestSummarizeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func([]Column) []Column
		err  string
	}{
		{"no labels", func(c []Column) []Column { return append(c[:6:6], c[7:]...) }, "needs labels"},
		{"no request times", func(c []Column) []Column { return append(c[:8:8], c[9:]...) }, "needs request times"},
		{"labels of int", func(c []Column) []Column { c[6].Data = []int32{1, 0, 1, 0}; return c }, "want []float32"},
		{"uid buckets of float", func(c []Column) []Column { c[10].Data = []float32{1, 2, 3, 4}; return c }, "want an integer column"},
		{"prediction out of range", func(c []Column) []Column { c[7].Data = []float32{2, 0, 0, 0}; return c }, "outside [0, 1]"},
		{"empty first-value tensor", func(c []Column) []Column { c[5].Data = []float32{}; return c }, "lr is empty"},
		{"no global step", func(c []Column) []Column { return c[1:] }, "global_step"},
	} {
		auc, _ := NewStreamingAUC(DefaultThresholds)
		_, err := Summarize(tc.edit(plainColumns()), auc, Options{TopK: 2})
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

// cachedColumns: 2 cores, top k 2, every n 3, 2 steps cached on core 0.
func cachedColumns(stop bool) []Column {
	cols := []Column{
		{Name: GlobalStepName, Cores: 2, Width: 1, Data: []int64{9, 9}},
		{Name: "loss_avg", Cores: 2, Width: 1, Data: []float32{1, 3}},
		{Name: LabelsForAUC, Cores: 2, Width: 2, Data: []float32{1, 1, 1, 1}}, // deprecated: nothing written
		{Name: "lr", Cores: 2, Width: 1, Data: []float32{0.5, 0.5}},
		{Name: LabelsVar, Cores: 2, Width: 6, Data: []float32{1, 0, 0, 1, 9, 9, 1, 1, 0, 0, 9, 9}},
		{Name: PredsVar, Cores: 2, Width: 6, Data: []float32{.9, .1, .2, .8, 0, 0, .7, .6, .3, .4, 0, 0}},
		{Name: UIDBucketsVar, Cores: 2, Width: 6, Data: []int32{1, 500, 2, 3, 0, 0, 4, 5, 600, 6, 0, 0}},
		{Name: ReqTimesVar, Cores: 2, Width: 3, Data: []int64{10, 20, 99, 30, 40, 99}},
		{Name: SampleRatesVar, Cores: 2, Width: 3, Data: []float32{.5, .5, 9, .25, .25, 9}},
		{Name: CounterVar, Cores: 2, Width: 1, Data: []int32{2, 3}},
	}
	if stop {
		cols = append(cols, Column{Name: "stopping_signals", Cores: 2, Width: 1, Data: []bool{false, true}})
	}
	return cols
}

func TestSummarizeCached(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stop      bool
		want      map[string]float64
		wantNames string
		sampled   []float32
		req       []int64
	}{
		{
			name: "used part sampled",
			want: map[string]float64{
				"loss_avg": 2, "lr": .5,
				// used uid buckets 1 500 2 3 | 4 5 600 6: sum 1121 / 8 truncated.
				"uid_buckets_tpu_variable_avg": 140, "accumulated_times_tpu_variable_avg": 2, "used_slice_len_avg": 4,
				"sampled_labels_variable_avg": 4.0 / 6, "req_times_variable_avg": 25, "sample_rates_variable_avg": .375,
			},
			wantNames: "loss_avg lr uid_buckets_tpu_variable_avg accumulated_times_tpu_variable_avg used_slice_len_avg auc sampled_labels_variable_avg sampled_preds_variable_avg req_times_variable_avg sample_rates_variable_avg",
			sampled:   []float32{1, 0, 1, 1, 1, 0},
			req:       []int64{10, 20, 20, 30, 30, 40},
		},
		{
			name: "stopping signals drop every row", stop: true,
			want:      map[string]float64{"stopping_signals_sum": 1},
			wantNames: "loss_avg lr uid_buckets_tpu_variable_avg accumulated_times_tpu_variable_avg used_slice_len_avg stopping_signals_sum auc sampled_labels_variable_avg sampled_preds_variable_avg req_times_variable_avg sample_rates_variable_avg",
			sampled:   []float32{},
			req:       []int64{},
		},
	} {
		auc, _ := NewStreamingAUC(DefaultThresholds)
		s, err := SummarizeCached(cachedColumns(tc.stop), auc, Options{TopK: 2, EveryN: 3, DeepInsight: true})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := scalarsOf(s)
		for k, v := range tc.want {
			if math.Abs(got[k]-v) > 1e-6 {
				t.Errorf("%s: %s = %v, want %v", tc.name, k, got[k], v)
			}
		}
		if names(s) != tc.wantNames {
			t.Errorf("%s: scalars %s", tc.name, names(s))
		}
		if !reflect.DeepEqual(s.SampledLabels, tc.sampled) || !reflect.DeepEqual(s.SampledReqTimes, tc.req) {
			t.Errorf("%s: sampled %v req %v", tc.name, s.SampledLabels, s.SampledReqTimes)
		}
		if tc.stop && !math.IsNaN(got["sampled_labels_variable_avg"]) {
			t.Errorf("%s: mean of no rows = %v, want NaN", tc.name, got["sampled_labels_variable_avg"])
		}
	}
}

func TestSummarizeCachedErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func([]Column) []Column
		err  string
	}{
		{"missing counter", func(c []Column) []Column { return c[:9] }, "no " + CounterVar},
		{"wrong width", func(c []Column) []Column { c[4].Width = 5; return c }, "5 wide, want every_n·top_k = 6"},
		{"wrong req width", func(c []Column) []Column { c[7].Width = 2; return c }, "want every_n = 3"},
		{"counter too big", func(c []Column) []Column { c[9].Data = []int32{4, 4}; return c }, "4 steps cached"},
		{"counter of float", func(c []Column) []Column { c[9].Data = []float32{1, 1}; return c }, "one integer per core"},
	} {
		auc, _ := NewStreamingAUC(DefaultThresholds)
		_, err := SummarizeCached(tc.edit(cachedColumns(false)), auc, Options{TopK: 2, EveryN: 3})
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

// TestCacheToSummary runs the caching path end to end: two cores cache two steps, record
// their variables, compress, gather, decompress and summarize.
func TestCacheToSummary(t *testing.T) {
	var perCore [][]any
	var layout Layout
	for core := 0; core < 2; core++ {
		c, _ := NewCache(2, 3)
		for step := int64(1); step <= 2; step++ {
			v := float32(core) / 4
			if err := c.Update(step, []float32{1, 0}, []float32{.9 - v, .1 + v}, []int32{int32(core), 500},
				[]int64{step * 10}, []float32{.5}); err != nil {
				t.Fatal(err)
			}
		}
		r := NewRecorder(true, 2)
		for _, ten := range []Tensor{{LabelsVar, c.Labels}, {PredsVar, c.Preds}, {UIDBucketsVar, c.UIDBuckets},
			{ReqTimesVar, c.ReqTimes}, {SampleRatesVar, c.SampleRates}, {CounterVar, c.Counter}} {
			if err := r.Record(ten.Name, ten.Data); err != nil {
				t.Fatal(err)
			}
		}
		l, rows, err := Compress(r.Tensors())
		if err != nil {
			t.Fatal(err)
		}
		layout = l
		perCore = append(perCore, rows)
	}
	gathered := perCore[0]
	for g := range gathered {
		gathered[g] = appendData(gathered[g], perCore[1][g])
	}
	cols, err := layout.Decompress(gathered, 2)
	if err != nil {
		t.Fatal(err)
	}
	auc, _ := NewStreamingAUC(DefaultThresholds)
	s, err := SummarizeCached(cols, auc, Options{TopK: 2, EveryN: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := scalarsOf(s)
	// Sampled: uid buckets 0 and 1 (label 1) — every positive, no negative.
	if !reflect.DeepEqual(s.SampledLabels, []float32{1, 1, 1, 1}) || got["used_slice_len_avg"] != 4 || got["req_times_variable_avg"] != 15 {
		t.Errorf("summary %+v", s)
	}
}
