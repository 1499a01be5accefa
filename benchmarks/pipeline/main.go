// Command pipeline is the end-to-end benchmark of the Beam data path: it measures the
// throughput and peak memory of read → parse → shard → layout run as a Beam pipeline on
// the embedded prism runner, against the same kernels chained in a plain Go loop over the
// same files, in the same run, at several input sizes.
//
// Usage:
//
//	go run ./benchmarks/pipeline [-rows N] [-files F] [-scales 1,4,16] [-reps 3] [-raw FILE]
//	go run ./benchmarks/pipeline -from FILE,FILE...   (report earlier -raw files)
//
// It generates one synthetic data set (io/synth defaults: ExampleBatch records of 256 rows
// in uncompressed PB streams) of max(scales)×rows rows in F×max(scales) files, scale s
// reading the first F×s files, in a temporary directory removed at the end. Every
// measurement runs in its own child process (this executable, re-run with the job in the
// environment) so that its peak RSS (the child's rusage) is its own. Kinds are interleaved,
// in an order rotated every repetition, so that ratios are measured side by side:
//
//	loop               beamio.ReadFile → parse.Parser → shard.Batcher → layout.Forward per
//	                   file, the files shared by -workers goroutines (default GOMAXPROCS),
//	                   each with its own kernel state: the code of the pipeline's DoFns,
//	                   without Beam
//	loop1              the same on one goroutine (-loop1, default on)
//	pipeline           beamio.Read → parse.Parse → shard.Shard → layout.Layout → a counting
//	                   DoFn, on prism: one fused stage after the reshuffle of file names
//	pipeline-split     the same chain built -workers times, the files dealt round-robin to
//	                   the copies (-split, default on): prism runs one bundle per copy
//	pipeline-nooutput  the pipeline ending in a DoFn without output (-nooutput), which
//	                   prism busy-waits on
//
// Every kind computes the same checksum of the layout outputs; the run fails if two
// disagree. Start-up runs on a one-batch input show the fixed cost of each kind. The
// machine is shared, so every measurement first waits for other processes to go quiet
// (-quiet) and records the CPU they used meanwhile; the summary is printed in Markdown for
// all measurements and for the quiet ones (-clean). Results are in benchmarks/RESULTS.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monolith-go/monolith/runners"
)

func main() {
	if runners.MaybeWorker(os.Args[1:]) {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if child, err := MaybeChild(ctx); child {
		if err != nil {
			log.Error("child failed", "err", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, os.Args[1:], log); err != nil {
		log.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	shape      Shape
	scales     string
	reps       int
	workers    int
	loop1      bool
	noOutput   bool
	split      bool
	startup    bool
	dir        string
	keep       bool
	cpuprofile string
	raw        string
	quiet      float64
	quietWait  time.Duration
	clean      float64
	from       string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("pipeline", flag.ContinueOnError)
	fs.Int64Var(&o.shape.BaseRows, "rows", 196608, "rows at scale 1×")
	fs.IntVar(&o.shape.BaseFiles, "files", 4, "files at scale 1× (scale s reads s× as many)")
	fs.IntVar(&o.shape.PS, "ps", 4, "parameter-server shards")
	fs.IntVar(&o.shape.Version, "version", 5, "op version of sharding and layout")
	fs.BoolVar(&o.shape.Unique, "unique", true, "deduplicate fids per feature (training mode)")
	fs.StringVar(&o.scales, "scales", "1,4,16", "comma-separated input scales")
	fs.IntVar(&o.reps, "reps", 3, "repetitions of every measurement")
	fs.IntVar(&o.workers, "workers", 0, "goroutines of the loop (0: GOMAXPROCS)")
	fs.BoolVar(&o.loop1, "loop1", true, "also measure the loop on one goroutine (the pipeline's parallelism on prism, see RESULTS.md)")
	fs.BoolVar(&o.noOutput, "nooutput", false, "also measure the pipeline ending in a stage without output (prism busy-waits on it)")
	fs.BoolVar(&o.split, "split", true, "also measure the pipeline with the files dealt to -workers independent chains")
	fs.BoolVar(&o.startup, "startup", true, "also measure every kind on a one-batch input")
	fs.StringVar(&o.dir, "dir", "", "directory for the data set (default: a temporary directory, removed at the end)")
	fs.BoolVar(&o.keep, "keep", false, "keep the data set")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of every child into this directory")
	fs.StringVar(&o.raw, "raw", "", "write one line per measurement to this file")
	fs.Float64Var(&o.quiet, "quiet", 0.3, "before every measurement, wait until other processes use fewer CPUs than this (0: do not wait)")
	fs.Float64Var(&o.clean, "clean", 0.2, "also report only the measurements during which other processes used fewer CPUs than this (0: do not)")
	fs.StringVar(&o.from, "from", "", "do not measure: report the comma-separated -raw files (merged; repetitions kept apart)")
	fs.DurationVar(&o.quietWait, "quiet-wait", 2*time.Minute, "longest wait for a quiet machine before a measurement")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.reps <= 0 {
		return o, fmt.Errorf("-reps %d must be positive", o.reps)
	}
	return o, nil
}

func parseScales(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad scale %q in %q", p, s)
		}
		out = append(out, v)
	}
	return out, nil
}

func run(ctx context.Context, args []string, log *slog.Logger) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.from != "" {
		return reportFiles(os.Stdout, strings.Split(o.from, ","), o.clean)
	}
	scales, err := parseScales(o.scales)
	if err != nil {
		return err
	}
	o.shape.MaxScale = 1
	for _, s := range scales {
		o.shape.MaxScale = max(o.shape.MaxScale, s)
	}
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pipeline-bench-"); err != nil {
			return fmt.Errorf("benchmarks/pipeline: %w", err)
		}
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	if o.cpuprofile != "" {
		if err := os.MkdirAll(o.cpuprofile, 0o777); err != nil {
			return fmt.Errorf("benchmarks/pipeline: %w", err)
		}
	}
	workers := o.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}

	start := time.Now()
	d, err := Prepare(ctx, o.shape, filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	tinyShape := Shape{BaseRows: int64(d.Synth.BatchRows), BaseFiles: 1, MaxScale: 1, PS: o.shape.PS, Version: o.shape.Version, Unique: o.shape.Unique}
	tiny, err := Prepare(ctx, tinyShape, filepath.Join(dir, "tiny"))
	if err != nil {
		return err
	}
	log.Info("generated", "rows", d.Synth.Rows, "files", len(d.Files), "bytes", d.Bytes, "took", time.Since(start).Round(time.Millisecond))

	kinds := []Kind{{Name: ModeLoop, Mode: ModeLoop, Workers: workers}}
	if o.loop1 {
		kinds = append(kinds, Kind{Name: "loop1", Mode: ModeLoop, Workers: 1})
	}
	kinds = append(kinds, Kind{Name: ModePipeline, Mode: ModePipeline, Sink: SinkTotals})
	if o.split {
		kinds = append(kinds, Kind{Name: "pipeline-split", Mode: ModePipeline, Sink: SinkTotals, Branch: workers})
	}
	if o.noOutput {
		kinds = append(kinds, Kind{Name: "pipeline-nooutput", Mode: ModePipeline, Sink: SinkNoOutput})
	}
	plan := Plan{Scales: scales, Reps: o.reps, Kinds: kinds, StartupRun: o.startup, CPUProfile: o.cpuprofile,
		Quiet: o.quiet, QuietWait: o.quietWait}
	tmp := filepath.Join(dir, "results")
	if err := os.MkdirAll(tmp, 0o777); err != nil {
		return fmt.Errorf("benchmarks/pipeline: %w", err)
	}
	ms, err := Bench(ctx, d, tiny, plan, tmp, log)
	if err != nil {
		return err
	}
	if err := Check(ms); err != nil {
		return err
	}
	if o.raw != "" {
		f, err := os.Create(o.raw)
		if err != nil {
			return fmt.Errorf("benchmarks/pipeline: %w", err)
		}
		Raw(f, ms)
		if err := f.Close(); err != nil {
			return fmt.Errorf("benchmarks/pipeline: %w", err)
		}
	}
	w := os.Stdout
	fmt.Fprintf(w, "Machine: %s, GOMAXPROCS %d, %s %s/%s; loop goroutines %d.\n", machine(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, workers)
	fmt.Fprintf(w, "Input: %d rows per 1× in %d files (%d rows per file, %.1f MB per 1×), ExampleBatch of %d rows, %d+%d sparse features of %d–%d fids; PS %d, version %d, unique %v. Total run %s.\n\n",
		o.shape.BaseRows, o.shape.BaseFiles, o.shape.BaseRows/int64(o.shape.BaseFiles), float64(d.Bytes)/float64(o.shape.MaxScale)/1e6,
		d.Synth.BatchRows, d.Synth.Features, d.Synth.Shared, d.Synth.FidsMin, d.Synth.FidsMax, o.shape.PS, o.shape.Version, o.shape.Unique, time.Since(start).Round(time.Second))
	report(w, ms, kinds, o.clean)
	return nil
}

// report writes the table of all measurements, then of the quiet ones.
func report(w io.Writer, ms []Measurement, kinds []Kind, clean float64) {
	refs := []string{ModeLoop}
	if slices.ContainsFunc(kinds, func(k Kind) bool { return k.Name == "loop1" }) {
		refs = append(refs, "loop1")
	}
	fmt.Fprintf(w, "All measurements:\n\n")
	Report(w, ms, kinds, refs...)
	if clean > 0 {
		fmt.Fprintf(w, "\nOnly measurements during which other processes used fewer than %.2f CPUs (ratios only between such runs of one repetition):\n\n", clean)
		Report(w, Quiet(ms, clean), kinds, refs...)
	}
}

// reportFiles reports the measurements of raw files.
func reportFiles(w io.Writer, files []string, clean float64) error {
	var ms []Measurement
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("benchmarks/pipeline: %w", err)
		}
		part, err := ReadRaw(f, 1000*i)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		ms = append(ms, part...)
	}
	if err := Check(ms); err != nil {
		return err
	}
	report(w, ms, KindsOf(ms), clean)
	return nil
}

// machine describes the CPU and memory from /proc (Linux), or "" elsewhere.
func machine() string {
	var model, mem string
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
				}
			}
		}
	}
	return fmt.Sprintf("%d CPUs %q, %s", runtime.NumCPU(), model, mem)
}
