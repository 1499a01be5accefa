// Package suite is `monolith bench`: it runs the kernel, decode, parameter-server,
// pipeline, NumPy-peer and scaling benchmarks, each figure next to a baseline measured in
// the same process and run, and writes RESULTS.md, results.json and PNG plots.
package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/monolith-go/monolith/benchmarks/internal/child"
	"github.com/monolith-go/monolith/benchmarks/pipeline"
)

// Suites.
const (
	Quick = "quick" // every measurement, small inputs: about a minute and a half here
	Full  = "full"  // the inputs of the issues' targets (10^7 PS entries, B=4096, 1M-row pipeline)
	// Tiny runs every section on minimal inputs with 2 repetitions: for tests of the
	// suite itself, not for figures.
	Tiny = "tiny"
)

// Options configure a run.
type Options struct {
	Suite string // Quick or Full
	Out   string // directory of RESULTS.md, results.json and the plots (created)
	// Only, when not empty, runs only these sections (SectionKernels, …); the report then
	// covers only them. For tests and for re-measuring one part.
	Only []string
	// Command is the command line printed in the report (default: monolith bench --suite S --out O).
	Command string
	// CPUProfile, when set, is a directory for CPU profiles of the pipeline section's child
	// processes (benchmarks/pipeline.Plan.CPUProfile).
	CPUProfile string
	// Monolith is the monolith binary the train section runs as `monolith cluster`
	// (default: this executable, which is monolith under `monolith bench`; a test binary
	// must set it).
	Monolith string
	Log      *slog.Logger
}

// Sections of a run, in report order.
const (
	SectionDecode   = "decode"
	SectionKernels  = "kernels"
	SectionPipeline = "pipeline"
	SectionTrain    = "train"
	SectionPS       = "ps"
	SectionPeer     = "peer"
	SectionScaling  = "scaling"
	SectionServe    = "serve"
)

// Sections lists every section in the order they run and are reported.
var Sections = []string{SectionDecode, SectionKernels, SectionPipeline, SectionTrain, SectionPS, SectionServe, SectionPeer, SectionScaling}

// size is what differs between the suites.
type size struct {
	reps        int
	budget      time.Duration // minimum time of one timed repetition of a kernel or read loop
	decodeRecs  int           // ExampleBatches of benchmarks.DefaultShape in each decode file
	kernelCases []string      // kernelbench cases timed against memcpy
	peerCases   []string      // cases run through the NumPy peer
	psN         int           // entries of the insert/find table
	psApplyN    int           // entries of the Adagrad apply table
	psGRPCN     int           // entries of the table served over gRPC
	pipe        pipeline.Shape
	pipeStartup bool
	scales      []int // input multiples of the scaling runs
	// the training section: rows and files at 1×, and its input multiples
	trainRows   int64
	trainFiles  int
	trainScales []int
	// repetitions of each other training configuration (trainSetups, the cluster), at the
	// largest training scale only
	trainConfigReps int
	kernelRows      int // batch rows of the batch-size sweep at 1×
	// the input-size scaling of the kernels: streams of streamBatches×scale batches of
	// streamRows rows, cycling through streamDistinct distinct batches
	streamRows, streamBatches, streamDistinct int
	quietWait                                 time.Duration // how long to wait for a quiet machine before a kernel figure
}

func sizeOf(suite string) (size, error) {
	s := size{
		reps:        5,
		kernelCases: []string{"s61", "large"},
		scales:      []int{1, 2, 4, 8, 16},
		kernelRows:  256,
		pipe:        pipeline.Shape{PS: 4, Version: 5, Unique: true},
	}
	switch suite {
	case Quick:
		s.budget = 40 * time.Millisecond
		s.decodeRecs = 4
		s.peerCases = []string{"s61"}
		s.psN, s.psApplyN, s.psGRPCN = 1_000_000, 200_000, 200_000
		s.quietWait = 0 // a quiet-machine check costs a second per figure; the load is recorded instead
		s.streamRows, s.streamBatches, s.streamDistinct = 256, 4, 4
		s.streamRows, s.streamBatches, s.streamDistinct = 256, 4, 4
		s.pipe.BaseRows, s.pipe.BaseFiles = 4096, 2
		s.trainRows, s.trainFiles, s.trainScales, s.trainConfigReps = 32768, 2, []int{1, 4}, 5
	case Full:
		s.budget = 300 * time.Millisecond
		s.decodeRecs = 8
		s.peerCases = []string{"s61", "large"}
		s.psN, s.psApplyN, s.psGRPCN = 10_000_000, 1_000_000, 1_000_000
		// 1× is the training section's 1×: issue 4 counts an input for the pipeline ÷ loop
		// target only when prism's start-up is under 10 % of its run, and at 65 536 rows
		// it was 10–13 % on the 2-core machines (benchmarks/NOTES.md, "The 1× input").
		s.pipe.BaseRows, s.pipe.BaseFiles = 131072, 8
		s.trainRows, s.trainFiles, s.trainScales, s.trainConfigReps = 131072, 2, []int{1, 4}, 5
		s.pipeStartup = true
		s.quietWait = 30 * time.Second
		s.streamRows, s.streamBatches, s.streamDistinct = 1024, 8, 8
		s.streamRows, s.streamBatches, s.streamDistinct = 1024, 8, 8
	case Tiny:
		s.reps = 2
		s.budget = time.Millisecond
		s.decodeRecs = 1
		s.kernelCases = []string{"s61"}
		s.peerCases = []string{"s61"}
		s.psN, s.psApplyN, s.psGRPCN = 20_000, 5_000, 5_000
		s.pipe.BaseRows, s.pipe.BaseFiles = 512, 1
		// 2 files: each worker of the cluster configuration reads whole files
		s.trainRows, s.trainFiles, s.trainScales, s.trainConfigReps = 2048, 2, []int{1}, 1
		s.scales = []int{1, 2}
		s.kernelRows = 16
		s.streamRows, s.streamBatches, s.streamDistinct = 16, 2, 2
	default:
		return s, fmt.Errorf("bench: unknown suite %q (want %s or %s)", suite, Quick, Full)
	}
	s.pipe.MaxScale = slices.Max(s.scales)
	s.pipe.BaseRows = max(s.pipe.BaseRows, int64(s.pipe.BaseFiles))
	return s, nil
}

// Target is a goal of an issue for a figure's median.
type Target struct {
	On    string  // OnRatio or OnValue: which median the bound applies to
	Op    string  // ">=" or "<="
	Bound float64 // the bound
	Text  string  // the goal as the issue states it
}

// What a target bounds.
const (
	OnRatio = "ratio"
	OnValue = "value"
)

// Met reports whether v meets the target.
func (t Target) Met(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	if t.Op == "<=" {
		return v <= t.Bound
	}
	return v >= t.Bound
}

// Figure is one measured quantity, every repetition kept, with its same-run baseline and
// their ratio per repetition.
type Figure struct {
	Issue    int       `json:"issue"`
	Section  string    `json:"section"`
	Name     string    `json:"name"`
	Unit     string    `json:"unit"`
	Values   []float64 `json:"values"`
	Baseline string    `json:"baseline,omitempty"` // what Base measures, with its unit
	Base     []float64 `json:"base,omitempty"`
	RatioOf  string    `json:"ratio_of,omitempty"` // what Ratios are: "÷ memcpy", "2 ÷ 1 goroutine"
	Ratios   []float64 `json:"ratios,omitempty"`
	Target   *Target   `json:"target,omitempty"`
	Note     string    `json:"note,omitempty"`
	// Series and X place the figure's median value in a plot (Series "" = not plotted).
	Series string  `json:"series,omitempty"`
	X      float64 `json:"x,omitempty"`
	// Others is the CPUs other processes used while the figure was measured (-1 unknown,
	// 0 also when not measured).
	Others float64 `json:"others_cpus,omitempty"`
}

// Judged is the median the figure's target applies to.
func (f Figure) Judged() float64 {
	if f.Target != nil && f.Target.On == OnValue {
		return Summarize(f.Values).Med
	}
	return Summarize(f.Ratios).Med
}

// Met reports whether the figure meets its target (false without one).
func (f Figure) Met() bool { return f.Target != nil && f.Target.Met(f.Judged()) }

// ScalePoint is one stage measured at one input multiple.
type ScalePoint struct {
	Stage   string    `json:"stage"`
	Scale   int       `json:"scale"`
	Rows    int64     `json:"rows"`
	Seconds []float64 `json:"seconds"` // per repetition
	RSSMiB  []float64 `json:"rss_mib"` // peak RSS of the process(es) that measured it
	Threads int       `json:"threads"` // goroutines (kernels) or loop workers
	Note    string    `json:"note,omitempty"`
}

// Results is everything a run measured.
type Results struct {
	Suite     string        `json:"suite"`
	Command   string        `json:"command"`
	Machine   string        `json:"machine"`
	Started   time.Time     `json:"started"`
	Took      time.Duration `json:"took_ns"`
	Others    float64       `json:"others_cpus"` // CPUs other processes used during the run, -1 unknown
	Figures   []Figure      `json:"figures"`
	Scaling   []ScalePoint  `json:"scaling"`    // against input size
	BatchSize []ScalePoint  `json:"batch_size"` // kernels against batch size
	Inputs    []string      `json:"inputs"`     // one line per input, for the report
	Sections  []string      `json:"sections"`
}

// Stat is a median with its range.
type Stat struct{ Med, Lo, Hi float64 }

// Summarize returns the median, minimum and maximum of v (NaN for an empty v).
func Summarize(v []float64) Stat {
	if len(v) == 0 {
		return Stat{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{med, s[0], s[len(s)-1]}
}

// Exponent fits log y = k·log x + c by least squares and returns k: how y grows with x
// (1.0 is linear). It needs two distinct positive x and positive y.
func Exponent(x, y []float64) (float64, error) {
	if len(x) != len(y) || len(x) < 2 {
		return 0, fmt.Errorf("exponent: %d x and %d y values, need ≥ 2 pairs", len(x), len(y))
	}
	var sx, sy, sxx, sxy float64
	n := float64(len(x))
	for i := range x {
		if x[i] <= 0 || y[i] <= 0 {
			return 0, fmt.Errorf("exponent: point %d (%g, %g) is not positive", i, x[i], y[i])
		}
		lx, ly := math.Log(x[i]), math.Log(y[i])
		sx, sy, sxx, sxy = sx+lx, sy+ly, sxx+lx*lx, sxy+lx*ly
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0, fmt.Errorf("exponent: every x is %g", x[0])
	}
	return (n*sxy - sx*sy) / d, nil
}

// run carries one run's state.
type run struct {
	opts Options
	sz   size
	tmp  string
	log  *slog.Logger
	res  *Results
}

func (r *run) add(f Figure) { r.res.Figures = append(r.res.Figures, f) }

// Run measures every section of the suite and writes the report into opts.Out.
func Run(ctx context.Context, opts Options) (*Results, error) {
	sz, err := sizeOf(opts.Suite)
	if err != nil {
		return nil, err
	}
	if opts.Out == "" {
		return nil, fmt.Errorf("bench: no output directory")
	}
	sections := Sections
	if len(opts.Only) > 0 {
		for _, s := range opts.Only {
			if !slices.Contains(Sections, s) {
				return nil, fmt.Errorf("bench: unknown section %q (want one of %v)", s, Sections)
			}
		}
		sections = slices.DeleteFunc(slices.Clone(Sections), func(s string) bool { return !slices.Contains(opts.Only, s) })
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Command == "" {
		opts.Command = fmt.Sprintf("go run ./cmd/monolith bench --suite %s --out %s", opts.Suite, opts.Out)
	}
	if err := os.MkdirAll(opts.Out, 0o777); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	tmp, err := os.MkdirTemp("", "monolith-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(tmp)
	r := &run{opts: opts, sz: sz, tmp: tmp, log: log, res: &Results{
		Suite: opts.Suite, Command: opts.Command, Machine: child.Machine(), Started: time.Now(), Sections: sections,
	}}
	busy0, ok0 := child.MachineBusy()
	self0 := selfCPU()
	for _, s := range sections {
		t0 := time.Now()
		log.Info("bench: section", "section", s)
		var err error
		switch s {
		case SectionDecode:
			err = r.decode(ctx)
		case SectionKernels:
			err = r.kernels(ctx)
		case SectionPipeline:
			err = r.pipeline(ctx)
		case SectionTrain:
			err = r.train(ctx)
		case SectionPS:
			err = r.ps(ctx)
		case SectionServe:
			err = r.serve(ctx)
		case SectionPeer:
			err = r.peer(ctx)
		case SectionScaling:
			err = r.scaling(ctx)
		}
		if err != nil {
			return r.res, fmt.Errorf("bench: %s: %w", s, err)
		}
		log.Info("bench: section done", "section", s, "took", time.Since(t0).Round(time.Millisecond))
	}
	r.res.Took = time.Since(r.res.Started)
	r.res.Others = -1
	if busy1, ok1 := child.MachineBusy(); ok0 && ok1 && r.res.Took > 0 {
		// Everything but this process and its children (children's CPU is in the
		// rusage of this process only once they are waited for, which they all are).
		used := busy1 - busy0 - (selfCPU() - self0)
		r.res.Others = max(0, used.Seconds()/r.res.Took.Seconds())
	}
	if err := Write(opts.Out, r.res); err != nil {
		return r.res, err
	}
	return r.res, nil
}

// WriteJSON writes res as indented JSON to path.
func WriteJSON(path string, res *Results) error {
	b, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := os.WriteFile(path, b, 0o666); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// Write writes RESULTS.md, results.json and the plots of res into dir.
func Write(dir string, res *Results) error {
	if err := WriteJSON(filepath.Join(dir, "results.json"), res); err != nil {
		return err
	}
	plots, err := Plots(dir, res)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := Report(f, res, plots); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}
