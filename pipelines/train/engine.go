package train

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/transforms/aggregate"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/filter"
	"github.com/monolith-go/monolith/transforms/label"
	"github.com/monolith-go/monolith/transforms/layout"
	"github.com/monolith-go/monolith/transforms/model"
	"github.com/monolith-go/monolith/transforms/shard"
)

// engine runs epochs and evaluations: as Beam pipelines on the runner the options select,
// or, with Options.Loop, as a plain loop in this process over the same step bodies (the
// baseline of the training benchmark).
type engine struct {
	j       Job
	o       Options
	ps      *client.Client
	metrics *Metrics
}

// epoch trains one epoch over files.
func (e engine) epoch(ctx context.Context, epoch int, files []string) (Stats, error) {
	if e.o.Loop {
		return e.loopEpoch(ctx, epoch, files)
	}
	res, err := runners.Run(ctx, TrainPipeline(e.j, epoch, files), e.o.Runner)
	if err != nil {
		return Stats{}, err
	}
	return statsOf(res)
}

// statsOf reads an epoch's Stats from Apply's counters.
func statsOf(res beam.PipelineResult) (Stats, error) {
	if res == nil {
		return Stats{}, errors.New("pipelines/train: the runner returned no result to read the epoch's counters from")
	}
	var st Stats
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Key.Namespace != CounterNS {
			continue
		}
		v := c.Result()
		switch c.Key.Name {
		case CounterSteps:
			st.Steps += v
		case CounterExamples:
			st.Examples += v
		case CounterSkipped:
			st.Skipped += v
		case CounterLossNanos:
			st.LossSum += float64(v) / 1e9
		}
	}
	return st, nil
}

// eval evaluates the model on files.
func (e engine) eval(ctx context.Context, files []string, dump string) (model.EvalResult, error) {
	if e.o.Loop {
		return e.loopEval(ctx, files, dump)
	}
	res, err := runners.Run(ctx, EvalPipeline(e.j, files, dump), e.o.Runner)
	if err != nil {
		return model.EvalResult{}, fmt.Errorf("pipelines/train: eval: %w", err)
	}
	if res == nil {
		return model.EvalResult{}, errors.New("pipelines/train: eval: the runner returned no result")
	}
	r, ok := model.EvalResultOf(res.Metrics().AllMetrics())
	if !ok {
		return model.EvalResult{}, errors.New("pipelines/train: eval: the pipeline reported no result (no rows?)")
	}
	return r, nil
}

// Chain runs the steps of the training pipeline on one batch in plain Go, with the same
// bodies as the transforms (the plain-loop baseline, and tests). Not safe for concurrent
// use.
type Chain struct {
	ops    []chainOp
	shard  shard.Batcher
	lookup *LookupStep
	layout layout.Forward
	model  *model.Step
	grad   layout.Backward
	agg    aggregate.Aggregator
	apply  *ApplyStep
	seen   map[uint64]int
	epoch  int
	run    string
}

type chainOp interface {
	run(arrow.RecordBatch) (arrow.RecordBatch, error)
}

type filterOp struct{ r filter.Runner }

func (f *filterOp) run(rec arrow.RecordBatch) (arrow.RecordBatch, error) { return f.r.Filter(rec) }

type labelOp struct{ r label.Runner }

func (l *labelOp) run(rec arrow.RecordBatch) (arrow.RecordBatch, error) { return l.r.Apply(rec) }

// NewChain builds the chain of j against ps. With create the lookup creates fids and the
// chain can Train; gate and m may be nil; stopped is shared by the chains of one epoch.
func NewChain(j *Job, ps *client.Client, create bool, gate *controller.Gate, m *Metrics, stopped *atomic.Bool) (*Chain, error) {
	c := &Chain{seen: map[uint64]int{}, run: j.RunID}
	for _, op := range j.Ops {
		switch {
		case op.Filter != nil:
			f := &filterOp{}
			if err := f.r.Init(*op.Filter); err != nil {
				return nil, err
			}
			c.ops = append(c.ops, f)
		case op.Label != nil:
			l := &labelOp{}
			if err := l.r.Init(*op.Label); err != nil {
				return nil, err
			}
			c.ops = append(c.ops, l)
		}
	}
	if err := c.shard.Init(j.Kernels); err != nil {
		return nil, err
	}
	var err error
	if c.lookup, err = NewLookupStep(j, ps, create); err != nil {
		return nil, err
	}
	if err := c.layout.Init(j.Kernels, layout.FromTrain{}); err != nil {
		return nil, err
	}
	if c.model, err = model.NewStep(j.ModelSpec(), j.Kernels); err != nil {
		return nil, err
	}
	if err := c.grad.Init(j.Kernels); err != nil {
		return nil, err
	}
	if c.apply, err = NewApplyStep(j, ps, gate, m, stopped); err != nil {
		return nil, err
	}
	return c, nil
}

// prepare runs the ops, sharding and lookup of one batch; nil when the ops drop every row.
func (c *Chain) prepare(ctx context.Context, rec arrow.RecordBatch) (*element.Sharded, error) {
	for _, op := range c.ops {
		out, err := op.run(rec)
		if err != nil || out == nil {
			return nil, err
		}
		rec = out
	}
	r, err := c.shard.Shard(rec)
	if err != nil {
		return nil, err
	}
	r = r.Clone()
	h := batchHash(r)
	n := c.seen[h]
	c.seen[h] = n + 1
	in := &element.Sharded{Batch: rec, Shard: r, Train: &element.TrainState{ID: batchID(c.run, c.epoch, h, n)}}
	return c.lookup.Run(ctx, in)
}

// Train runs one training step on rec.
func (c *Chain) Train(ctx context.Context, rec arrow.RecordBatch) error {
	if c.apply.Stopped() {
		c.apply.stats.Skipped++
		return nil
	}
	in, err := c.prepare(ctx, rec)
	if err != nil || in == nil {
		return err
	}
	t, err := c.layout.Run(ctx, in)
	if err != nil {
		return err
	}
	in = &element.Sharded{Batch: in.Batch, Shard: in.Shard, Tensors: t, Train: in.Train}
	if in, err = c.model.Train(in); err != nil {
		return err
	}
	if in, err = c.grad.RunElement(in); err != nil {
		return err
	}
	if in, err = c.agg.AggregateStep(in); err != nil {
		return err
	}
	return c.apply.Run(ctx, in)
}

// Eval returns the scores of rec's rows.
func (c *Chain) Eval(ctx context.Context, rec arrow.RecordBatch) (model.Scores, error) {
	in, err := c.prepare(ctx, rec)
	if err != nil || in == nil {
		return model.Scores{}, err
	}
	t, err := c.layout.Run(ctx, in)
	if err != nil {
		return model.Scores{}, err
	}
	return c.model.Predict(&element.Sharded{Batch: in.Batch, Shard: in.Shard, Tensors: t, Train: in.Train})
}

// Stats are the counters of the batches this chain applied or skipped.
func (c *Chain) Stats() Stats { return c.apply.Stats() }

// loopFiles runs fn over every batch of files on j.Parallelism goroutines, each with its
// own chain, taking files from a shared queue as pipeline workers take bundles.
func (e engine) loopFiles(ctx context.Context, files []string, create bool, epoch int, gate *controller.Gate,
	fn func(ctx context.Context, c *Chain, rec arrow.RecordBatch) error) ([]*Chain, error) {
	workers := max(1, min(e.j.parallelism(), len(files)))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var stopped atomic.Bool
	chains := make([]*Chain, workers)
	for i := range chains {
		c, err := NewChain(&e.j, e.ps, create, gate, e.metrics, &stopped)
		if err != nil {
			return nil, err
		}
		c.epoch = epoch
		chains[i] = c
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, c := range chains {
		wg.Go(func() {
			bufs := dataset.NewBuffers()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) || ctx.Err() != nil {
					return
				}
				err := beamio.ReadFile(ctx, files[i], e.j.Read, bufs, func(rec arrow.RecordBatch) error {
					defer rec.Release()
					return fn(ctx, c, rec)
				})
				if err != nil {
					cancel(fmt.Errorf("pipelines/train: %s: %w", files[i], err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	return chains, ctx.Err()
}

// loopEpoch trains one epoch in this process; the loop is one worker of the training
// barrier meanwhile, like a bundle of the pipeline.
func (e engine) loopEpoch(ctx context.Context, epoch int, files []string) (Stats, error) {
	gate, err := controller.JoinGate(ctx, e.ps.TrainingBarrier())
	if err != nil {
		return Stats{}, fmt.Errorf("pipelines/train: %w", err)
	}
	chains, err := e.loopFiles(ctx, files, true, epoch, gate, func(ctx context.Context, c *Chain, rec arrow.RecordBatch) error {
		return c.Train(ctx, rec)
	})
	err = errors.Join(err, leaveGate(gate))
	var st Stats
	for _, c := range chains {
		st.Add(c.Stats())
	}
	return st, err
}

// loopEval evaluates in this process.
func (e engine) loopEval(ctx context.Context, files []string, dump string) (model.EvalResult, error) {
	var mu sync.Mutex
	var all model.Scores
	_, err := e.loopFiles(ctx, files, false, 0, nil, func(ctx context.Context, c *Chain, rec arrow.RecordBatch) error {
		sc, err := c.Eval(ctx, rec)
		if err != nil {
			return err
		}
		mu.Lock()
		all.Preds, all.Labels = append(all.Preds, sc.Preds...), append(all.Labels, sc.Labels...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return model.EvalResult{}, err
	}
	if dump != "" {
		if err := dumpPredictions(dump, all.Preds, all.Labels); err != nil {
			return model.EvalResult{}, err
		}
	}
	return model.Result(all)
}
