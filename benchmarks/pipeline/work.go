package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/pipelines/readlayout"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/parse"
)

// Modes of a measurement.
const (
	// ModeLoop chains the kernels in plain Go, files spread over Job.Workers goroutines.
	ModeLoop = "loop"
	// ModePipeline runs the Beam pipeline on the embedded prism runner.
	ModePipeline = "pipeline"
)

// Job is one measurement: what a child process runs.
type Job struct {
	Mode       string         // ModeLoop or ModePipeline
	Files      []string       // input files (ExampleBatch PB streams)
	Kernels    config.Kernels // sharding and layout configuration
	Parse      parse.Config   // the parse request
	Workers    int            // goroutines of the loop (ModeLoop); ≤ 0 means GOMAXPROCS
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
	Bundles  int64 // pipeline: bundles of the fused read…count stage
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
			var c readlayout.Chain
			if err := c.Init(job.config()); err != nil {
				fail(err)
				return
			}
			bufs := dataset.NewBuffers()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(job.Files) || ctx.Err() != nil {
					return
				}
				err := beamio.ReadFile(ctx, job.Files[i], cfg, bufs, func(rec arrow.RecordBatch) error {
					h, err := c.Batch(ctx, rec)
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

// config is the readlayout job of job.
func (job Job) config() readlayout.Config {
	return readlayout.Config{Files: job.Files, Kernels: job.Kernels, Parse: job.Parse}
}

// runPipeline runs the readlayout job on prism.
func runPipeline(ctx context.Context, job Job) (Result, error) {
	start := time.Now()
	t, err := readlayout.Run(ctx, job.config(), runners.Options{Runner: runners.Prism, JobName: "pipeline-benchmark"})
	if err != nil {
		return Result{}, fmt.Errorf("benchmarks/pipeline: %w", err)
	}
	return Result{Mode: job.Mode, Rows: t.Rows, Batches: t.Batches, Checksum: t.Checksum, Bundles: t.Bundles, Wall: time.Since(start)}, nil
}
