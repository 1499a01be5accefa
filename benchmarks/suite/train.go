package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/benchmarks/internal/child"
	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/runners"
)

// trainChildFunc is the child.Func name of trainChild.
const trainChildFunc = "train"

// Kinds of the training section.
const (
	trainLoop     = "train-loop"
	trainPipeline = "train-pipeline"
)

// trainJob is one training measurement: one epoch of FM over a planted data set.
type trainJob struct {
	Data    string // a planted data set (synth.GeneratePlanted, feature_configs.pbtxt)
	Loop    bool   // the plain loop instead of the Beam pipeline on prism
	Threads int    // goroutines of each step (pipeline) or of the loop
	Shards  int    // in-process PS shards
}

// trainResult is what a training child reports.
type trainResult struct {
	Examples int64
	Steps    int64
	Seconds  float64 // the summary's train_seconds (the epoch, without start-up)
}

// trainChild runs a trainJob in this process.
func trainChild(ctx context.Context, spec json.RawMessage) (any, error) {
	var job trainJob
	if err := json.Unmarshal(spec, &job); err != nil {
		return nil, fmt.Errorf("train child: %w", err)
	}
	c, err := trainConfig(job.Data, job.Threads, job.Shards)
	if err != nil {
		return nil, err
	}
	c.EvalInput, c.Planted = "", "" // training throughput only
	if !job.Loop {
		runners.Init(false)
	}
	sum, err := train.Run(ctx, c, train.Options{Loop: job.Loop, HealthEvery: -1})
	if err != nil {
		return nil, err
	}
	return trainResult{Examples: sum.Examples, Steps: sum.Steps, Seconds: sum.TrainSeconds}, nil
}

// trainConfig is the FM training config of the suite over a planted data set.
func trainConfig(data string, threads, shards int) (*train.Config, error) {
	c, err := train.ParseConfig([]byte(fmt.Sprintf(`{"model": "fm", "data": %q, "batch_size": 256, "epochs": 1, "threads": %d, "ps": {"shards": %d},
		"sparse": {"segments": [{"init": {"zeros": {}}, "optimizer": {"adagrad": {"learning_rate": 0.1, "initial_accumulator_value": 0.1}}},
		{"init": {"random_uniform": {"minval": -0.05, "maxval": 0.05}}, "optimizer": {"adagrad": {"learning_rate": 0.1, "initial_accumulator_value": 0.1}}}]},
		"dense": {"optimizer": {"adagrad": {"learning_rate": 0.1, "initial_accumulator_value": 0.1}}}}`, data, threads, shards)), false)
	if err != nil {
		return nil, err
	}
	if err := c.Normalize(); err != nil {
		return nil, err
	}
	return c, nil
}

// trainData writes the planted FM data set of rows training rows in files files, each
// feature's fids drawn from vocab.
func trainData(ctx context.Context, dir string, rows int64, files, vocab int) error {
	c := synth.DefaultConfig()
	c.Features, c.Shared, c.Dense, c.Tasks = 8, 0, 0, 1
	c.FidsMin, c.FidsMax, c.Vocab, c.Zipf, c.BatchRows = 1, 1, uint64(vocab), 1.05, 256
	c.Rows, c.Files, c.Seed = rows, files, 1
	const dim = 4
	m, err := synth.NewPlanted(synth.PlantedFM, c, dim, c.Seed)
	if err != nil {
		return err
	}
	if _, err := synth.GeneratePlanted(ctx, c, m, 2, 1, dir); err != nil {
		return err
	}
	fc, err := synth.PlantedFeatureConfigs(c, dim)
	if err != nil {
		return err
	}
	b, err := prototext.Marshal(fc)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "feature_configs.pbtxt"), b, 0o644)
}

// train measures one training epoch as the Beam pipeline on prism against the plain loop
// (train.Options.Loop) with the same goroutines, steps and in-process PS shards, at every
// training input size, each run in its own child process, kinds interleaved per
// repetition. Throughput is examples over the epoch's time (the summary's train_seconds).
func (r *run) train(ctx context.Context) error {
	threads := runtime.GOMAXPROCS(0)
	const shards = 2
	r.res.Inputs = append(r.res.Inputs, fmt.Sprintf("train: planted FM (8 features of one fid each out of 300, Zipf 1.05, dim 4, ExampleBatch TFRecords of 256 rows), %d rows in %d files at 1×, up to %d×; one epoch, batch 256, Adagrad 0.1, %d in-process PS shards; %d goroutines per step (pipeline) and in the loop",
		r.sz.trainRows, r.sz.trainFiles, r.sz.trainScales[len(r.sz.trainScales)-1], shards, threads))
	for _, s := range r.sz.trainScales {
		dir := filepath.Join(r.tmp, fmt.Sprintf("train-%dx", s))
		if err := trainData(ctx, dir, r.sz.trainRows*int64(s), r.sz.trainFiles*s, 300); err != nil {
			return fmt.Errorf("train data: %w", err)
		}
		vals, perCPU := map[string][]float64{}, map[string][]float64{}
		var examples int64
		for rep := range r.sz.reps {
			for _, loop := range []bool{true, false} {
				kind := trainPipeline
				if loop {
					kind = trainLoop
				}
				var res trainResult
				u, err := child.Run(ctx, r.tmp, trainChildFunc, trainJob{Data: dir, Loop: loop, Threads: threads, Shards: shards}, &res)
				if err != nil {
					return fmt.Errorf("%s at %d×: %w", kind, s, err)
				}
				if res.Seconds <= 0 || res.Examples <= 0 {
					return fmt.Errorf("%s at %d×: %d examples in %v s", kind, s, res.Examples, res.Seconds)
				}
				if examples != 0 && res.Examples != examples {
					return fmt.Errorf("%s at %d×: trained %d examples, the other runs %d", kind, s, res.Examples, examples)
				}
				examples = res.Examples
				eps := float64(res.Examples) / res.Seconds
				vals[kind] = append(vals[kind], eps)
				if u.CPU > 0 {
					// Per core-equivalent: examples over the CPU time the whole run used.
					perCPU[kind] = append(perCPU[kind], float64(res.Examples)/u.CPU.Seconds())
				}
				r.log.Info("measured", "section", SectionTrain, "rep", rep, "scale", s, "kind", kind, "examples/s", int64(eps), "maxrss_mib", u.MaxRSS>>20, "others_cpus", u.Others)
			}
		}
		r.add(Figure{Issue: 18, Section: SectionTrain, Name: fmt.Sprintf("training pipeline vs loop, %d× (%d examples)", s, examples),
			Unit: "examples/s", Values: vals[trainPipeline], Baseline: "loop examples/s", Base: vals[trainLoop],
			RatioOf: "pipeline ÷ loop", Ratios: ratios(vals[trainPipeline], vals[trainLoop]),
			Target: &Target{On: OnRatio, Op: ">=", Bound: 0.9, Text: "≥ 0.9× the plain loop on as many goroutines"}})
		if s != r.sz.trainScales[len(r.sz.trainScales)-1] {
			continue
		}
		for _, kind := range []string{trainPipeline, trainLoop} {
			if len(perCPU[kind]) == 0 {
				continue
			}
			r.add(Figure{Issue: 22, Section: SectionTrain, Name: fmt.Sprintf("FM training examples per CPU-second, %s, %d× (%d examples)", kind, s, examples),
				Unit: "examples/s per core", Values: perCPU[kind],
				Target: &Target{On: OnValue, Op: ">=", Bound: 150_000, Text: "≥ 150k examples/s per core-equivalent"},
				Note:   "examples ÷ the CPU time of the whole training process (its in-process PS shards, start-up and the epoch's warm-up included)"})
		}
	}
	return nil
}
