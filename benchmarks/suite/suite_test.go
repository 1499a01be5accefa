package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var update = flag.Bool("update-golden", false, "rewrite testdata/report.golden.md (not -update: the Beam SDK's dataflow runner, linked in through runners, defines that flag)")

// TestMain lets the test binary serve as the suite's child process; as the parent, it
// fails the tests if a goroutine outlives them (goleak).
func TestMain(m *testing.M) {
	if served, err := MaybeChild(context.Background()); served {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Stat
	}{
		{[]float64{3, 1, 2}, Stat{2, 1, 3}},
		{[]float64{4, 1, 2, 3}, Stat{2.5, 1, 4}},
		{[]float64{7}, Stat{7, 7, 7}},
	} {
		if got := Summarize(tc.in); got != tc.want {
			t.Errorf("Summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	if s := Summarize(nil); !math.IsNaN(s.Med) {
		t.Errorf("Summarize(nil) = %+v, want NaN", s)
	}
}

func TestExponent(t *testing.T) {
	x := []float64{1, 2, 4, 8, 16}
	pow := func(k, c float64) []float64 {
		y := make([]float64, len(x))
		for i := range x {
			y[i] = c * math.Pow(x[i], k)
		}
		return y
	}
	for _, tc := range []struct {
		name string
		x, y []float64
		want float64
		err  string
	}{
		{"linear", x, pow(1, 3), 1, ""},
		{"quadratic", x, pow(2, 0.5), 2, ""},
		{"flat", x, pow(0, 9), 0, ""},
		{"one point", x[:1], pow(1, 1)[:1], 0, "need ≥ 2 pairs"},
		{"zero y", x[:2], []float64{1, 0}, 0, "not positive"},
		{"same x", []float64{2, 2}, []float64{1, 3}, 0, "every x is 2"},
	} {
		k, err := Exponent(tc.x, tc.y)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || math.Abs(k-tc.want) > 1e-9 {
			t.Errorf("%s: %g, %v; want %g", tc.name, k, err, tc.want)
		}
	}
}

func TestTargetMet(t *testing.T) {
	ge := Target{On: OnRatio, Op: ">=", Bound: 0.5}
	le := Target{On: OnValue, Op: "<=", Bound: 1.05}
	for _, tc := range []struct {
		t    Target
		v    float64
		want bool
	}{
		{ge, 0.5, true}, {ge, 0.49, false}, {ge, math.NaN(), false},
		{le, 1.05, true}, {le, 1.06, false}, {le, 0.2, true},
	} {
		if got := tc.t.Met(tc.v); got != tc.want {
			t.Errorf("%+v.Met(%g) = %v", tc.t, tc.v, got)
		}
	}
	f := Figure{Values: []float64{9, 11, 10}, Ratios: []float64{0.1, 0.6, 0.7}, Target: &ge}
	if !f.Met() || f.Judged() != 0.6 {
		t.Errorf("ratio target: judged %g, met %v", f.Judged(), f.Met())
	}
	f.Target = &Target{On: OnValue, Op: ">=", Bound: 10.5}
	if f.Met() || f.Judged() != 10 {
		t.Errorf("value target: judged %g, met %v", f.Judged(), f.Met())
	}
	if (Figure{Values: []float64{1}}).Met() {
		t.Error("a figure without a target is met")
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{1234567: "1 234 567", -2500: "-2 500", 123.4: "123", 12.34: "12.3", 1.234: "1.23", 0.01234: "0.0123", 0: "0"} {
		if got := num(v); got != want {
			t.Errorf("num(%g) = %q, want %q", v, got, want)
		}
	}
}

// sample is a fixed result covering every kind of row of the report.
func sample() *Results {
	return &Results{
		Suite: Quick, Command: "go run ./cmd/monolith bench --suite quick --out X", Machine: "2 CPUs \"test\"",
		Started: time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC), Took: 95 * time.Second, Others: 0.12,
		Sections: []string{SectionKernels, SectionPS, SectionScaling},
		Inputs:   []string{"kernels, s61: B=256"},
		Figures: []Figure{
			{Issue: 3, Section: SectionKernels, Name: "layout v5 forward, s61, 1 goroutine", Unit: "MB/s touched", Values: []float64{3000, 3200, 3100},
				Baseline: "memcpy MB/s", Base: []float64{6000, 6400, 6200}, RatioOf: "÷ memcpy", Ratios: []float64{0.5, 0.5, 0.5},
				Target: &Target{On: OnRatio, Op: ">=", Bound: 0.5, Text: "≥ 0.5× memcpy"}, Series: "fwd", X: 1, Others: 0.5},
			{Issue: 3, Section: SectionKernels, Name: "layout v5 forward, s61, 2 goroutines", Unit: "MB/s touched", Values: []float64{4000, 4100, 4200},
				Baseline: "1-goroutine MB/s", Base: []float64{3000, 3200, 3100}, RatioOf: "2 ÷ 1 goroutine", Ratios: []float64{1.33, 1.28, 1.35},
				Target: &Target{On: OnRatio, Op: ">=", Bound: 1.7, Text: "≥ 1.7× on 2 goroutines"}, Series: "fwd", X: 2},
			{Issue: 5, Section: SectionPS, Name: "find | ids", Unit: "M/s", Values: []float64{4.5}, Target: &Target{On: OnValue, Op: ">=", Bound: 10, Text: "≥ 10 M/s"}, Note: "N = 10^6"},
			{Issue: 7, Section: SectionScaling, Name: "scaling exponent of sharding", Unit: "k", Values: []float64{1.01, 0.99}, Target: &Target{On: OnValue, Op: "<=", Bound: 1.05, Text: "≤ 1.05"}},
		},
		Scaling: []ScalePoint{
			{Stage: stageShard, Scale: 1, Rows: 1024, Seconds: []float64{0.01, 0.011}, RSSMiB: []float64{90, 90}, Threads: 1},
			{Stage: stageShard, Scale: 2, Rows: 2048, Seconds: []float64{0.02, 0.021}, RSSMiB: []float64{91, 91}, Threads: 1},
		},
		BatchSize: []ScalePoint{
			{Stage: stageShard, Scale: 1, Rows: 256, Seconds: []float64{0.002}, Threads: 1},
			{Stage: stageShard, Scale: 2, Rows: 512, Seconds: []float64{0.004}, Threads: 1},
		},
	}
}

// TestReportGolden pins the Markdown of a fixed result (go test -run TestReportGolden -update-golden
// rewrites it).
func TestReportGolden(t *testing.T) {
	var b bytes.Buffer
	if err := Report(&b, sample(), []PlotFile{{Name: "p.png", Caption: "a plot"}}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden.md")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to create it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("report differs from %s:\n%s", golden, b.String())
	}
}

// TestPlots writes the plots of the sample and checks they are PNG files.
func TestPlots(t *testing.T) {
	dir := t.TempDir()
	plots, err := Plots(dir, sample())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"throughput-vs-batch-size.png", "throughput-vs-input-size.png", "throughput-vs-goroutines.png", "peak-rss-vs-input-size.png"}
	if len(plots) != len(want) {
		t.Fatalf("plots %+v, want %v", plots, want)
	}
	for i, p := range plots {
		if p.Name != want[i] {
			t.Errorf("plot %d is %s, want %s", i, p.Name, want[i])
		}
		b, err := os.ReadFile(filepath.Join(dir, p.Name))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n")) || len(b) < 2000 {
			t.Errorf("%s: not a PNG (%d bytes, %v)", p.Name, len(b), err)
		}
	}
}

// TestRunTiny runs every section of the suite, children and NumPy peer included, on
// minimal inputs, and checks what it wrote.
func TestRunTiny(t *testing.T) {
	out := t.TempDir()
	res, err := Run(context.Background(), Options{Suite: Tiny, Out: out, Monolith: buildMonolith(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkTrainFigures(t, res.Figures)
	sections := map[string]int{}
	for _, f := range res.Figures {
		sections[f.Section]++
		if len(f.Values) == 0 || len(f.Base) != len(f.Ratios) && len(f.Base) > 0 {
			t.Errorf("%s: %d values, %d base, %d ratios", f.Name, len(f.Values), len(f.Base), len(f.Ratios))
		}
		for i, r := range f.Ratios {
			if !(r > 0) || math.IsInf(r, 0) {
				t.Errorf("%s: ratio %d is %g", f.Name, i, r)
			}
		}
	}
	for _, s := range Sections {
		if sections[s] == 0 {
			t.Errorf("section %s has no figures", s)
		}
	}
	for _, p := range res.Scaling {
		if len(p.Seconds) != 2 || len(p.RSSMiB) != 2 || p.RSSMiB[0] < 5 || p.RSSMiB[0] > 4000 {
			t.Errorf("scaling point %+v: want 2 repetitions with a plausible peak RSS", p)
		}
	}
	doc, err := os.ReadFile(filepath.Join(out, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Benchmark results", "## Targets", "## Issue 3", "## Issue 7 — layout against a NumPy peer", "NumPy time ÷ Go time", "![", "scaling exponent of sharding"} {
		if !bytes.Contains(doc, []byte(want)) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	var back Results
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err == nil {
		err = json.Unmarshal(b, &back)
	}
	if err != nil || len(back.Figures) != len(res.Figures) {
		t.Fatalf("results.json: %v, %d figures, want %d", err, len(back.Figures), len(res.Figures))
	}
}

// buildMonolith builds the monolith binary, which the train section runs as `monolith
// cluster` (this test binary is not one).
func buildMonolith(t *testing.T) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build monolith: %v", err)
	}
	exe := filepath.Join(t.TempDir(), "monolith")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, gocmd, "build", "-o", exe, "github.com/monolith-go/monolith/cmd/monolith").CombinedOutput(); err != nil {
		t.Fatalf("go build monolith: %v\n%s", err, out)
	}
	return exe
}

// checkTrainFigures checks that the train section measured every configuration of
// issue 22, under the names RESULTS.md's history uses, each with positive values.
func checkTrainFigures(t *testing.T, figs []Figure) {
	t.Helper()
	sz, err := sizeOf(Tiny)
	if err != nil {
		t.Fatal(err)
	}
	examples := fmt.Sprintf("(%d examples)", sz.trainRows*int64(sz.trainScales[len(sz.trainScales)-1]))
	want := []string{
		"training pipeline vs loop, 1× (",
		"FM training examples per CPU-second, train-pipeline, 1× (",
		"FM training examples per CPU-second, train-loop, 1× (",
		"training pipeline vs loop, FM, 1 PS shard in process, 1× (",
		"FM training examples per CPU-second, train-pipeline, 1 PS shard in process, 1× (",
		"FM training examples per CPU-second, train-loop, 1 PS shard in process, 1× (",
		"training pipeline vs loop, FM, 2 PS shards by address, 1× (",
		"FM training examples per CPU-second, train-pipeline, 2 PS shards by address, 1× (",
		"FM training examples per CPU-second, train-loop, 2 PS shards by address, 1× (",
		"training pipeline vs loop, DeepFM, 2 PS shards in process, 1× (",
		"DeepFM training examples per CPU-second, train-pipeline, 2 PS shards in process, 1× (",
		"DeepFM training examples per CPU-second, train-loop, 2 PS shards in process, 1× (",
		"FM training examples/s, 2 workers, 2 PS shards (monolith cluster), 1× (",
		"FM training examples per CPU-second, 2 workers, 2 PS shards (monolith cluster), 1× (",
	}
	var train []Figure
	for _, f := range figs {
		if f.Section == SectionTrain {
			train = append(train, f)
		}
	}
	if len(train) != len(want) {
		t.Errorf("train section: %d figures, want %d", len(train), len(want))
	}
	for _, prefix := range want {
		var found []Figure
		for _, f := range train {
			if strings.HasPrefix(f.Name, prefix) {
				found = append(found, f)
			}
		}
		if len(found) != 1 {
			t.Errorf("%d train figures named %q…, want 1", len(found), prefix)
			continue
		}
		f := found[0]
		if !strings.HasSuffix(f.Name, examples) {
			t.Errorf("%s: want every run's %s", f.Name, examples)
		}
		if len(f.Values) == 0 {
			t.Errorf("%s: no values", f.Name)
		}
		for _, v := range append(slices.Clone(f.Values), f.Base...) {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("%s: value %g", f.Name, v)
			}
		}
		if strings.HasPrefix(f.Name, "training pipeline vs loop") && (len(f.Base) != len(f.Values) || len(f.Ratios) != len(f.Values)) {
			t.Errorf("%s: %d values, %d loop values, %d ratios", f.Name, len(f.Values), len(f.Base), len(f.Ratios))
		}
		fm := strings.HasPrefix(f.Name, "FM training examples per CPU-second")
		if per := f.Target != nil && f.Target.On == OnValue; per != fm {
			t.Errorf("%s: the per-core target %v, want it on FM's per-CPU figures only", f.Name, f.Target)
		}
	}
}

// TestTrainRunsRecord checks the checks of the training runs: positive examples, times
// and CPU, and the same examples in every run.
func TestTrainRunsRecord(t *testing.T) {
	runs := newTrainRuns()
	if err := runs.record("a", trainLoop, 100, 0.5, time.Second, 0.2); err != nil {
		t.Fatal(err)
	}
	if err := runs.record("b", trainPipeline, 100, 0.25, 2*time.Second, -1); err != nil {
		t.Fatal(err)
	}
	if got := runs.eps[trainPipeline]; len(got) != 1 || got[0] != 400 {
		t.Errorf("pipeline examples/s %v, want [400]", got)
	}
	if got := runs.perCPU[trainLoop]; len(got) != 1 || got[0] != 100 {
		t.Errorf("loop examples per CPU-second %v, want [100]", got)
	}
	if runs.meanOthers() != 0.2 {
		t.Errorf("others %g, want 0.2 (the unknown one left out)", runs.meanOthers())
	}
	for _, tc := range []struct {
		examples int64
		seconds  float64
		cpu      time.Duration
		want     string
	}{
		{99, 1, time.Second, "trained 99 examples, the other runs 100"},
		{0, 1, time.Second, "0 examples"},
		{100, 0, time.Second, "in 0 s"},
		{100, 1, 0, "0s CPU"},
	} {
		if err := runs.record("c", trainLoop, tc.examples, tc.seconds, tc.cpu, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc, err, tc.want)
		}
	}
}

// TestMonolithBinary checks that the cluster configuration refuses a test binary as
// monolith.
func TestMonolithBinary(t *testing.T) {
	if _, err := (&run{}).monolith(); err == nil || !strings.Contains(err.Error(), "test binary") {
		t.Errorf("monolith() in a test binary: %v, want a refusal", err)
	}
	if exe, err := (&run{opts: Options{Monolith: "/bin/monolith"}}).monolith(); err != nil || exe != "/bin/monolith" {
		t.Errorf("Options.Monolith: %q, %v", exe, err)
	}
}

func TestRunErrors(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Suite: "huge", Out: t.TempDir()}, `unknown suite "huge"`},
		{Options{Suite: Quick}, "no output directory"},
		{Options{Suite: Quick, Out: t.TempDir(), Only: []string{"gpu"}}, `unknown section "gpu"`},
	} {
		if _, err := Run(context.Background(), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}
