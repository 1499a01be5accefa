package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/monolith-go/monolith/benchmarks/internal/child"
	"github.com/monolith-go/monolith/benchmarks/pipeline"
	"github.com/monolith-go/monolith/kernels/kernelbench"
	"github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/kernels/shard"
)

// Kernel stages of the scaling runs.
const (
	stageShard    = "sharding"
	stageForward  = "layout forward"
	stageBackward = "layout gradient"
)

// kernelJob is what a kernel scaling child runs: one stage over a stream of Batches
// batches of the large shape with Rows rows, cycling through Distinct distinct batches
// (generated before timing), the whole stream timed Reps times.
type kernelJob struct {
	Stage    string
	Rows     int
	Batches  int
	Distinct int
	Reps     int
}

// kernelChildFunc is the child.Func name of kernelChild.
const kernelChildFunc = "kernel"

// stageFunc builds the input of the large shape with rows rows and seed, shards it (v5,
// unique) and, for the layout stages, arranges its embeddings; it returns one call of
// stage on that batch.
func stageFunc(stage string, rows int, seed uint64) (func() error, error) {
	c := kernelbench.LargeRows(seed, rows)
	s, err := shard.New(c.Cfg, shard.Options{PS: c.PS, Version: 5, Unique: true})
	if err != nil {
		return nil, err
	}
	res, err := s.Shard(c.In)
	if err != nil {
		return nil, err
	}
	switch stage {
	case stageShard:
		return func() error { _, err := s.Shard(c.In); return err }, nil
	case stageForward, stageBackward:
		res = res.Clone()
		emb, err := layout.Arrange(5, c.Cfg, res, layout.ListBuffers(c.Cfg, res, layout.SyntheticValue))
		if err != nil {
			return nil, err
		}
		l, err := layout.New(c.Cfg, layout.Options{Version: 5, PS: c.PS})
		if err != nil {
			return nil, err
		}
		req := []layout.Sharded{layout.FromShard(res)}
		out := l.Outputs(c.In.Rows)
		if stage == stageForward {
			return func() error { return l.Forward(req, emb, out) }, nil
		}
		eg := layout.Zeros(emb)
		return func() error { return l.Backward(req, out, eg) }, nil
	}
	return nil, fmt.Errorf("unknown kernel stage %q", stage)
}

// kernelChild runs a kernelJob and returns the seconds of every repetition of the stream.
func kernelChild(ctx context.Context, spec json.RawMessage) (any, error) {
	var job kernelJob
	if err := json.Unmarshal(spec, &job); err != nil {
		return nil, fmt.Errorf("kernel job: %w", err)
	}
	if job.Distinct < 1 || job.Batches < 1 || job.Reps < 1 {
		return nil, fmt.Errorf("kernel job: %+v needs at least one batch, distinct batch and repetition", job)
	}
	fs := make([]func() error, job.Distinct)
	for i := range fs {
		var err error
		if fs[i], err = stageFunc(job.Stage, job.Rows, uint64(i+1)); err != nil {
			return nil, err
		}
	}
	var secs []float64
	for range job.Reps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		for b := range job.Batches {
			if err := fs[b%len(fs)](); err != nil {
				return nil, err
			}
		}
		secs = append(secs, time.Since(t0).Seconds())
	}
	return secs, nil
}

// MaybeChild serves the suite's child measurements (kernel scaling runs and the pipeline
// benchmark's jobs) when this process is a benchmark child, and reports whether it was.
// The caller exits afterwards, with status 1 if err is not nil.
func MaybeChild(ctx context.Context) (bool, error) {
	return child.Serve(ctx, map[string]child.Func{kernelChildFunc: kernelChild, pipeline.ChildFunc: pipeline.Child, trainChildFunc: trainChild, serveLoadChildFunc: serveLoadChild})
}

// scaling measures sharding and the layout forward and gradient two ways. Input size: a
// stream of 1×…16× the base number of batches, each (stage, size) in its own child
// process for its peak RSS, and the exponent of time against input fitted for them and
// for the pipeline section's stages. Batch size: one batch of 1×…16× the base rows, in
// this process, for the throughput-against-batch-size plot.
func (r *run) scaling(ctx context.Context) error {
	rows, base, distinct := r.sz.streamRows, r.sz.streamBatches, r.sz.streamDistinct
	r.res.Inputs = append(r.res.Inputs,
		fmt.Sprintf("scaling with input size: streams of %d × %v batches of the large kernel shape with B = %d (kernels/kernelbench.LargeRows), cycling through %d distinct batches, 1 goroutine; each stage and size in its own process", base, r.sz.scales, rows, distinct),
		fmt.Sprintf("scaling with batch size: one batch of the large kernel shape with B = %d × %v rows, 1 goroutine", r.sz.kernelRows, r.sz.scales))
	for _, stage := range []string{stageShard, stageForward, stageBackward} {
		for _, s := range r.sz.scales {
			if err := ctx.Err(); err != nil {
				return err
			}
			job := kernelJob{Stage: stage, Rows: rows, Batches: base * s, Distinct: distinct, Reps: r.sz.reps}
			var secs []float64
			u, err := child.Run(ctx, r.tmp, kernelChildFunc, job, &secs)
			if err != nil {
				return fmt.Errorf("%s at %d×: %w", stage, s, err)
			}
			rss := make([]float64, len(secs))
			for i := range rss {
				rss[i] = float64(u.MaxRSS) / (1 << 20)
			}
			r.res.Scaling = append(r.res.Scaling, ScalePoint{Stage: stage, Scale: s, Rows: int64(rows * job.Batches), Seconds: secs, RSSMiB: rss, Threads: 1,
				Note: fmt.Sprintf("%d batches; one process for all repetitions", job.Batches)})
			r.log.Debug("bench: scaling", "stage", stage, "scale", s, "seconds", Summarize(secs).Med, "rss_mib", u.MaxRSS>>20)
		}
	}
	for _, stage := range []string{stageShard, stageForward, stageBackward, stageLoop, stageLoop1, stagePipeline} {
		f, ok, err := exponentFigure(r.res.Scaling, stage)
		if err != nil {
			return err
		}
		if ok {
			r.add(f)
		}
		if rf, ok := rssFigure(r.res.Scaling, stage); ok && stage != stageLoop && stage != stageLoop1 && stage != stagePipeline {
			r.add(rf) // the pipeline section reports its own kinds' RSS (issue 4)
		}
	}
	// Batch size, in process.
	for _, stage := range []string{stageShard, stageForward, stageBackward} {
		for _, s := range r.sz.scales {
			n := r.sz.kernelRows * s
			f, err := stageFunc(stage, n, 1)
			if err != nil {
				return fmt.Errorf("%s, B = %d: %w", stage, n, err)
			}
			var secs []float64
			for range r.sz.reps {
				t, err := timeLoop(r.sz.budget, f)
				if err != nil {
					return fmt.Errorf("%s, B = %d: %w", stage, n, err)
				}
				secs = append(secs, t)
			}
			r.res.BatchSize = append(r.res.BatchSize, ScalePoint{Stage: stage, Scale: s, Rows: int64(n), Seconds: secs, Threads: 1})
		}
	}
	return nil
}

// rssFigure compares the peak RSS of stage at its largest and smallest input.
func rssFigure(points []ScalePoint, stage string) (Figure, bool) {
	var lo, hi *ScalePoint
	for i := range points {
		p := &points[i]
		if p.Stage != stage {
			continue
		}
		if lo == nil || p.Scale < lo.Scale {
			lo = p
		}
		if hi == nil || p.Scale > hi.Scale {
			hi = p
		}
	}
	if lo == nil || lo == hi {
		return Figure{}, false
	}
	f := Figure{Issue: 7, Section: SectionScaling, Name: fmt.Sprintf("peak RSS of %s, %d× vs %d× input", stage, hi.Scale, lo.Scale), Unit: "MiB",
		Values: hi.RSSMiB, Baseline: fmt.Sprintf("MiB at %d×", lo.Scale), Base: lo.RSSMiB, RatioOf: fmt.Sprintf("%d× ÷ %d×", hi.Scale, lo.Scale), Ratios: ratios(hi.RSSMiB, lo.RSSMiB)}
	if stage == stagePipeline {
		f.Target = &Target{On: OnRatio, Op: "<=", Bound: 1.25, Text: "flat in input size (≤ 1.25× from 1× to 16×)"}
	}
	return f, true
}

// exponentFigure fits the exponent of the median seconds of stage against its rows, one
// value per repetition (the repetition's times at every size) and one for the medians.
func exponentFigure(points []ScalePoint, stage string) (Figure, bool, error) {
	var pts []ScalePoint
	for _, p := range points {
		if p.Stage == stage {
			pts = append(pts, p)
		}
	}
	if len(pts) < 2 {
		return Figure{}, false, nil
	}
	x := make([]float64, len(pts))
	for i, p := range pts {
		x[i] = float64(p.Rows)
	}
	var per []float64
	for rep := range len(pts[0].Seconds) {
		y := make([]float64, len(pts))
		for i, p := range pts {
			if rep >= len(p.Seconds) {
				return Figure{}, false, fmt.Errorf("scaling %s: %d× has %d repetitions", stage, p.Scale, len(p.Seconds))
			}
			y[i] = p.Seconds[rep]
		}
		k, err := Exponent(x, y)
		if err != nil {
			return Figure{}, false, fmt.Errorf("scaling %s: %w", stage, err)
		}
		per = append(per, k)
	}
	note := fmt.Sprintf("time ∝ rows^k over %d–%d rows", pts[0].Rows, pts[len(pts)-1].Rows)
	if stage == stagePipeline {
		note += "; the fixed start-up of prism pulls k below 1"
	}
	return Figure{Issue: 7, Section: SectionScaling, Name: "scaling exponent of " + stage, Unit: "k", Values: per, Note: note,
		Target: &Target{On: OnValue, Op: "<=", Bound: 1.05, Text: "≤ 1.05"}}, true, nil
}
