package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/io/beamio"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/layout"
	"github.com/monolith-go/monolith/transforms/parse"
	"github.com/monolith-go/monolith/transforms/shard"
)

func init() {
	register.DoFn3x1[context.Context, *element.Sharded, func(Totals), error](&countFn{})
	register.Emitter1[Totals]()
	register.Function2x0(addCounters)
}

// Modes of a measurement.
const (
	// ModeLoop chains the kernels in plain Go, files spread over Job.Workers goroutines.
	ModeLoop = "loop"
	// ModePipeline runs the Beam pipeline on the embedded prism runner.
	ModePipeline = "pipeline"
)

// counterNS is the namespace of the pipeline's counters.
const counterNS = "monolith.benchmarks.pipeline"

// Job is one measurement: what a child process runs.
type Job struct {
	Mode       string         // ModeLoop or ModePipeline
	Files      []string       // input files (ExampleBatch PB streams)
	Kernels    config.Kernels // sharding and layout configuration
	Parse      parse.Config   // the parse request
	Workers    int            // goroutines of the loop (ModeLoop); ≤ 0 means GOMAXPROCS
	Sink       string         // how the pipeline ends (ModePipeline): SinkTotals ("") or SinkNoOutput
	Branches   int            // pipeline: independent chains the files are dealt to (≤ 1: one, beamio.Read)
	CPUProfile string         // child processes: write a CPU profile of the run here ("" = none)
}

// Result is what one measurement did and how long it took. Wall is measured inside the
// process, from before the first kernel is initialised (loop) or the pipeline is built
// (pipeline) to the end of the last batch, so process start-up is excluded from both;
// the pipeline's figure includes the start-up of the prism runner.
type Result struct {
	Mode     string
	Rows     int64 // rows through the layout
	Batches  int64 // batches through the layout
	Checksum int64 // sum over batches of the 32-bit hash of their layout tensors
	Bundles  int64 // pipeline: bundles of the fused read…count stages, all branches (SinkTotals only)
	Wall     time.Duration

	// Filled by the parent from the child's rusage and /proc/stat.
	MaxRSS  int64         // peak resident set size, bytes
	CPU     time.Duration // user + system time
	ProcRun time.Duration // wall time of the whole child process
	Others  float64       // CPUs used by other processes during the child (-1: unknown)
}

// Run executes job in this process.
func Run(ctx context.Context, job Job) (Result, error) {
	switch job.Mode {
	case ModeLoop:
		return runLoop(ctx, job)
	case ModePipeline:
		return runPipeline(ctx, job)
	}
	return Result{}, fmt.Errorf("benchmarks/pipeline: unknown mode %q (want %s or %s)", job.Mode, ModeLoop, ModePipeline)
}

// tensorHash is the checksum of one batch's layout outputs: FNV-1a over the bits of every
// float of every tensor, in column order, folded to 32 bits so that a sum over up to 2^31
// batches cannot overflow an int64 counter (the sum does not depend on batch order).
func tensorHash(rec arrow.RecordBatch) (int64, error) {
	ts, err := element.Tensors(rec)
	if err != nil {
		return 0, fmt.Errorf("benchmarks/pipeline: layout output: %w", err)
	}
	h := uint64(14695981039346656037)
	for _, t := range ts {
		for _, v := range t.Data {
			h ^= uint64(math.Float32bits(v))
			h *= 1099511628211
		}
	}
	return int64(uint32(h ^ h>>32)), nil
}

// chain is the loop's per-goroutine state: the same kernel wrappers the pipeline's DoFns
// use, initialised once.
type chain struct {
	parser parse.Parser
	shard  shard.Batcher
	layout layout.Forward
}

func (c *chain) init(job Job) error {
	if err := c.parser.Init(job.Parse); err != nil {
		return err
	}
	if err := c.shard.Init(job.Kernels); err != nil {
		return err
	}
	return c.layout.Init(job.Kernels, layout.Synthetic{})
}

// batch runs parse → shard → layout on one batch and returns its checksum.
func (c *chain) batch(ctx context.Context, rec arrow.RecordBatch) (int64, error) {
	parsed, err := c.parser.Parse(rec)
	if err != nil {
		return 0, err
	}
	r, err := c.shard.Shard(parsed)
	if err != nil {
		return 0, err
	}
	t, err := c.layout.Run(ctx, &element.Sharded{Shard: r})
	if err != nil {
		return 0, err
	}
	return tensorHash(t)
}

// runLoop reads every file with beamio.ReadFile and chains the kernels in plain Go. Files
// are taken one at a time from a shared queue by job.Workers goroutines, each with its
// own kernel state, as pipeline workers would take them.
func runLoop(ctx context.Context, job Job) (Result, error) {
	start := time.Now()
	workers := job.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(job.Files)))
	cfg := beamio.DefaultReadConfig()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next               atomic.Int64
		rows, batches, sum atomic.Int64
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		errs               []error
	)
	for range workers {
		wg.Go(func() {
			fail := func(err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
			var c chain
			if err := c.init(job); err != nil {
				fail(err)
				return
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(job.Files) || ctx.Err() != nil {
					return
				}
				err := beamio.ReadFile(ctx, job.Files[i], cfg, func(rec arrow.RecordBatch) error {
					h, err := c.batch(ctx, rec)
					if err != nil {
						return err
					}
					rows.Add(rec.NumRows())
					batches.Add(1)
					sum.Add(h)
					return nil
				})
				if err != nil {
					fail(fmt.Errorf("benchmarks/pipeline: loop: %s: %w", job.Files[i], err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: loop: %w", err)
	}
	return Result{Mode: ModeLoop, Rows: rows.Load(), Batches: batches.Load(), Checksum: sum.Load(), Wall: time.Since(start)}, nil
}

// Totals are the rows, batches and checksum of some batches.
type Totals struct {
	Rows, Batches, Checksum int64
}

func (t *Totals) add(rows, h int64) {
	t.Rows += rows
	t.Batches++
	t.Checksum += h
}

// incCounters adds t to the pipeline's counters.
func incCounters(ctx context.Context, t Totals) {
	beam.NewCounter(counterNS, "rows").Inc(ctx, t.Rows)
	beam.NewCounter(counterNS, "batches").Inc(ctx, t.Batches)
	beam.NewCounter(counterNS, "checksum").Inc(ctx, t.Checksum)
}

// addCounters adds the Totals of one bundle to the pipeline's counters.
func addCounters(ctx context.Context, t Totals) {
	incCounters(ctx, t)
	beam.NewCounter(counterNS, "bundles").Inc(ctx, 1)
}

// countFn ends the chain: it adds up the rows, batches and checksums of the elements of a
// bundle and emits the bundle's Totals when the bundle finishes, so that its stage has an
// output (see Sink). With NoOutput it adds to the counters directly and emits nothing.
type countFn struct {
	NoOutput bool

	t Totals
}

func (f *countFn) StartBundle(func(Totals)) { f.t = Totals{} }

func (f *countFn) ProcessElement(ctx context.Context, in *element.Sharded, _ func(Totals)) error {
	if in.Tensors == nil {
		return fmt.Errorf("benchmarks/pipeline: element of %d rows has no layout tensors", in.Rows())
	}
	h, err := tensorHash(in.Tensors)
	if err != nil {
		return err
	}
	if f.NoOutput {
		incCounters(ctx, Totals{Rows: int64(in.Rows()), Batches: 1, Checksum: h})
		return nil
	}
	f.t.add(int64(in.Rows()), h)
	return nil
}

func (f *countFn) FinishBundle(emit func(Totals)) {
	if !f.NoOutput && f.t.Batches > 0 {
		emit(f.t)
	}
}

// Sinks: how the pipeline ends.
const (
	// SinkTotals emits one Totals per bundle, reshuffled to a stage that adds them to
	// the counters.
	SinkTotals = "totals"
	// SinkNoOutput adds to the counters in the last DoFn of the fused stage, which then
	// has no output PCollection. Prism (v2.77.0) busy-waits on such bundles: its progress
	// loop selects on the bundle's already-closed data channel until the bundle ends,
	// burning a core (runners/prism/internal/stage.go, stage.Execute).
	SinkNoOutput = "no-output"
)

// Build adds read → parse → shard → layout → count over job.Files to s. With
// job.Branches > 1 the files are dealt round-robin to that many independent chains (each
// its own fused stage after its own reshuffle of file names), which prism runs as
// concurrent bundles; otherwise beamio.Read reads them all.
//
// Every chain sends its Totals through its own reshuffle to addCounters. They are not
// flattened first: on prism (v2.77.0) elements emitted by FinishBundle (event time 0) into
// a Flatten of several stages are intermittently lost, apparently dropped as late once
// the first input stage has finished (one branch's totals went missing in 6 of 15 runs).
func Build(s beam.Scope, job Job) {
	chain := func(s beam.Scope, recs beam.PCollection) {
		parsed := parse.Parse(s, recs, job.Parse)
		sharded := shard.Shard(s, parsed, job.Kernels)
		out := layout.Layout(s, sharded, job.Kernels, layout.Synthetic{})
		cs := s.Scope("count")
		totals := beam.ParDo(cs, &countFn{NoOutput: job.Sink == SinkNoOutput}, out)
		if job.Sink != SinkNoOutput {
			beam.ParDo0(cs, addCounters, beam.Reshuffle(cs, totals))
		}
	}
	if job.Branches <= 1 {
		chain(s, beamio.Read(s, strings.Join(job.Files, ","))) // Read starts from DefaultReadConfig
		return
	}
	cfg := beamio.DefaultReadConfig()
	for b := range min(job.Branches, len(job.Files)) {
		var files []string
		for i := b; i < len(job.Files); i += job.Branches {
			files = append(files, job.Files[i])
		}
		bs := s.Scope(fmt.Sprintf("branch%d", b))
		chain(bs, beamio.ReadFiles(bs, beam.Reshuffle(bs, beam.CreateList(bs, files)), cfg))
	}
}

// runPipeline builds the pipeline and runs it on prism.
func runPipeline(ctx context.Context, job Job) (Result, error) {
	for _, f := range job.Files {
		if strings.Contains(f, ",") {
			return Result{}, fmt.Errorf("benchmarks/pipeline: file name %q contains a comma", f)
		}
	}
	if !beam.Initialized() {
		runners.Init(false)
	}
	start := time.Now()
	p, s := beam.NewPipelineWithRoot()
	Build(s, job)
	res, err := runners.Run(ctx, p, runners.Options{Runner: runners.Prism, JobName: "pipeline-benchmark"})
	if err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: %w", err)
	}
	wall := time.Since(start)
	out := Result{Mode: job.Mode, Wall: wall}
	got := map[string]bool{}
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() != counterNS {
			continue
		}
		got[c.Name()] = true
		switch c.Name() {
		case "rows":
			out.Rows += c.Result()
		case "batches":
			out.Batches += c.Result()
		case "checksum":
			out.Checksum += c.Result()
		case "bundles":
			out.Bundles += c.Result()
		}
	}
	if !got["rows"] {
		return Result{}, errors.New("benchmarks/pipeline: the runner reported no row counter")
	}
	return out, nil
}
