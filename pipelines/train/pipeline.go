package train

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/monolith-go/monolith/transforms/aggregate"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/filter"
	"github.com/monolith-go/monolith/transforms/label"
	"github.com/monolith-go/monolith/transforms/layout"
	"github.com/monolith-go/monolith/transforms/model"
	"github.com/monolith-go/monolith/transforms/shard"
)

// TrainPipeline builds one training epoch over files from the public transforms:
//
//	file names ─Reshuffle→ beamio.ReadFiles → the config's filters and label ops →
//	shard.Shard → Lookup → layout.Layout(FromTrain) → model.ForwardBackward →
//	layout.LayoutGrad(Attach) → aggregate.AggregateGrads → Apply
//
// Only file names cross a shuffle: a runner fuses every step after it into one stage, in
// which batches pass in memory and are never encoded. Decoding, sharding and the model
// step run on j.Parallelism goroutines per bundle, the PS steps, Lookup and Apply, on
// j.Parallelism and 2×j.Parallelism (their calls overlap), and the light compute steps
// (layout, layout gradient, aggregation) on the bundle's goroutine. Every goroutine of a
// step adds batches between their lookup and their apply, and the updates are
// asynchronous, so only the model step, DeepFM's critical path, runs in parallel:
// measured on the planted data, compute on two goroutines in every step cost 0.006–0.012
// of eval AUC; the model step alone on two costs 0.0006 of the median and makes a poor
// run about twice as likely, at 1.15–1.25× DeepFM's speed (benchmarks/NOTES.md, "One
// round of PS calls per batch" and "The model step on the pipeline's goroutines").
// Apply's counters (CounterNS) are the epoch's Stats.
func TrainPipeline(j Job, epoch int, files []string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	s = s.Scope("train")
	sharded := readAndShard(s, j, files)
	looked := Lookup(s, sharded, j, epoch, true)
	laid := layout.Layout(s, looked, j.Kernels, layout.FromTrain{}, layout.Parallelism(1))
	fb := model.ForwardBackward(s, laid, j.ModelSpec(), j.Kernels, model.Parallelism(j.Parallelism))
	grads := layout.LayoutGrad(s, fb, j.Kernels, layout.Attach(), layout.Parallelism(1))
	Discard(s, Apply(s, aggregate.AggregateGrads(s, grads), j))
	return p
}

// EvalPipeline builds the evaluation of files: the same reading, ops and sharding, a
// lookup that creates nothing, the layout, model.Predict and model.Evaluate, whose metrics
// carry the result to the driver (model.EvalResultOf). With dump set, the predictions are
// also written there (WritePredictions).
func EvalPipeline(j Job, files []string, dump string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	s = s.Scope("eval")
	sharded := readAndShard(s, j, files)
	looked := Lookup(s, sharded, j, 0, false)
	laid := layout.Layout(s, looked, j.Kernels, layout.FromTrain{}, layout.Parallelism(j.Parallelism))
	scores := model.Predict(s, laid, j.ModelSpec(), j.Kernels, model.Parallelism(j.Parallelism))
	all := model.Evaluate(s, scores)
	if dump != "" {
		WritePredictions(s, all, dump)
	}
	return p
}

// readAndShard reads the files (their names reshuffled, so that a runner spreads whole
// files over workers), applies the job's ops and shards the batches.
func readAndShard(s beam.Scope, j Job, files []string) beam.PCollection {
	names := beam.Reshuffle(s, beam.CreateList(s, files))
	read := j.Read
	read.Parallelism = j.Parallelism
	batches := beamio.ReadFiles(s, names, read)
	for _, op := range j.Ops {
		switch {
		case op.Filter != nil:
			batches = filter.Filter(s, batches, *op.Filter)
		case op.Label != nil:
			batches = label.Apply(s, batches, *op.Label)
		}
	}
	return shard.Shard(s, batches, j.Kernels, shard.Parallelism(j.Parallelism))
}
