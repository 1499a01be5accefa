package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// Models of the training section (pipelines/train's registry names).
const (
	modelFM     = "fm"
	modelDeepFM = "deepfm"
)

// trainHidden are the DeepFM MLP's hidden widths: those of
// pipelines/train/configs/planted_deepfm.yaml.
var trainHidden = []int{32, 16}

// Where a configuration's PS shards run.
const (
	// psInProcess: train.Run starts the shards in the training process (ps.shards). They
	// are gRPC servers on 127.0.0.1 like every shard: training always reaches its PS over
	// gRPC.
	psInProcess = "in process"
	// psByAddress: the training process starts the shards itself as `monolith ps` builds them,
	// gRPC servers on 127.0.0.1, and trains against ps.addrs (static discovery) as a
	// worker of a cluster does.
	psByAddress = "by address"
	// psCluster: `monolith cluster` runs the shards and the workers as processes of the
	// monolith binary.
	psCluster = "monolith cluster"
)

// Workers of the cluster configuration.
const clusterWorkers = 2

// clusterTimeout bounds one `monolith cluster` run (start-up, the epoch and the stop).
const clusterTimeout = 10 * time.Minute

// trainSetup is one configuration of the training section: the model, the PS shards and
// where they run.
type trainSetup struct {
	model  string // modelFM or modelDeepFM
	shards int
	where  string // psInProcess, psByAddress or psCluster
}

// trainBase is the configuration measured at every scale; its figures keep their names.
var trainBase = trainSetup{model: modelFM, shards: 2, where: psInProcess}

// trainSetups are the configurations measured at the largest training scale besides
// trainBase, each as the pipeline and the plain loop (psCluster runs apart: trainCluster).
var trainSetups = []trainSetup{
	{model: modelFM, shards: 1, where: psInProcess},
	{model: modelFM, shards: 2, where: psByAddress},
	{model: modelDeepFM, shards: 2, where: psInProcess},
}

// modelName is the model as figures name it.
func (t trainSetup) modelName() string {
	if t.model == modelDeepFM {
		return "DeepFM"
	}
	return strings.ToUpper(t.model)
}

// layout is the PS part of a figure's name: "1 PS shard in process",
// "2 PS shards by address", "2 workers, 2 PS shards (monolith cluster)".
func (t trainSetup) layout() string {
	s := fmt.Sprintf("%d PS shards", t.shards)
	if t.shards == 1 {
		s = "1 PS shard"
	}
	if t.where == psCluster {
		return fmt.Sprintf("%d workers, %s (%s)", clusterWorkers, s, psCluster)
	}
	return s + " " + t.where
}

// targeted reports whether the issue's per-core target applies (FM only).
func (t trainSetup) targeted() bool { return t.model == modelFM }

// trainJob is one training measurement: one epoch over a planted data set.
type trainJob struct {
	Data    string // a planted data set (synth.GeneratePlanted, feature_configs.pbtxt)
	Model   string // modelFM ("" too) or modelDeepFM
	Loop    bool   // the plain loop instead of the Beam pipeline on prism
	Threads int    // goroutines of each step (pipeline) or of the loop
	Shards  int    // PS shards, served in this process
	// ByAddress starts the shards before training, as `monolith ps` builds them, and trains
	// against their addresses (ps.addrs) instead of letting train.Run start them.
	ByAddress bool
}

// trainResult is what a training child reports.
type trainResult struct {
	Examples int64
	Steps    int64
	Seconds  float64 // the summary's train_seconds (the epoch, without start-up)
}

// trainChild runs a trainJob in this process.
func trainChild(ctx context.Context, spec json.RawMessage) (_ any, err error) {
	var job trainJob
	if err := json.Unmarshal(spec, &job); err != nil {
		return nil, fmt.Errorf("train child: %w", err)
	}
	if job.Model == "" {
		job.Model = modelFM
	}
	c, err := trainModelConfig(job.Model, trainDataInputs(job.Data), job.Threads, job.Shards)
	if err != nil {
		return nil, fmt.Errorf("train child: %w", err)
	}
	c.EvalInput, c.Planted = "", "" // training throughput only
	if job.ByAddress {
		// The shards `monolith ps` would serve (the tables `monolith cluster` writes for
		// them), here, so that this process's CPU time covers them too.
		pr, err := train.Prepare(c)
		if err != nil {
			return nil, fmt.Errorf("train child: PS tables: %w", err)
		}
		shards, err := train.StartLocalPS(ctx, job.Shards, pr.Tables, train.LocalPSOptions{Seed: c.PS.Seed})
		if err != nil {
			return nil, fmt.Errorf("train child: PS shards: %w", err)
		}
		defer func() {
			if serr := shards.Stop(); serr != nil && err == nil {
				err = fmt.Errorf("train child: stop the PS shards: %w", serr)
			}
		}()
		c.PS.Addrs = shards.Addrs()
	}
	if !job.Loop {
		runners.Init(false)
	}
	sum, err := train.Run(ctx, c, train.Options{Loop: job.Loop, HealthEvery: -1})
	if err != nil {
		return nil, fmt.Errorf("train child: %w", err)
	}
	return trainResult{Examples: sum.Examples, Steps: sum.Steps, Seconds: sum.TrainSeconds}, nil
}

// trainDataInputs is the "data" key of a planted data set: its training files, its eval
// files and its feature configs.
func trainDataInputs(data string) string { return fmt.Sprintf(`"data": %q`, data) }

// trainFileInputs are the training files and feature configs of a planted data set,
// without its eval files.
func trainFileInputs(data string) string {
	return fmt.Sprintf(`"train_input": %q, "feature_configs": %q`, filepath.Join(data, "train", "*"), filepath.Join(data, "feature_configs.pbtxt"))
}

// trainConfig is the FM training config of the suite over a planted data set.
func trainConfig(data string, threads, shards int) (*train.Config, error) {
	return trainModelConfig(modelFM, trainDataInputs(data), threads, shards)
}

// trainConfigJSON is the training config of the suite for model (modelFM or
// modelDeepFM) with inputs, the JSON keys of its data (trainDataInputs, trainFileInputs).
func trainConfigJSON(model, inputs string, threads, shards int) string {
	hidden := ""
	if model == modelDeepFM {
		b, _ := json.Marshal(trainHidden)
		hidden = fmt.Sprintf(`"hidden": %s, `, b)
	}
	return fmt.Sprintf(`{"model": %q, %s%s, "batch_size": 256, "epochs": 1, "threads": %d, "ps": {"shards": %d},
		"sparse": {"segments": [{"init": {"zeros": {}}, "optimizer": {"adagrad": {"learning_rate": 0.1, "initial_accumulator_value": 0.1}}},
		{"init": {"random_uniform": {"minval": -0.05, "maxval": 0.05}}, "optimizer": {"adagrad": {"learning_rate": 0.1, "initial_accumulator_value": 0.1}}}]},
		"dense": {"optimizer": {"adagrad": {"learning_rate": 0.1, "initial_accumulator_value": 0.1}}}}`, model, hidden, inputs, threads, shards)
}

// trainModelConfig is trainConfigJSON parsed and normalized.
func trainModelConfig(model, inputs string, threads, shards int) (*train.Config, error) {
	c, err := train.ParseConfig([]byte(trainConfigJSON(model, inputs, threads, shards)), false)
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

// trainRuns are the repetitions of one configuration: examples/s and examples per
// CPU-second per kind, and the CPUs other processes used meanwhile.
type trainRuns struct {
	eps, perCPU map[string][]float64
	others      []float64
	examples    int64 // every run's
}

func newTrainRuns() *trainRuns {
	return &trainRuns{eps: map[string][]float64{}, perCPU: map[string][]float64{}}
}

// record checks one run (positive examples and times, the same examples as the runs
// before) and keeps it.
func (t *trainRuns) record(what, kind string, examples int64, seconds float64, cpu time.Duration, others float64) error {
	if seconds <= 0 || examples <= 0 || cpu <= 0 {
		return fmt.Errorf("%s: %d examples in %v s, %v CPU", what, examples, seconds, cpu)
	}
	if t.examples != 0 && examples != t.examples {
		return fmt.Errorf("%s: trained %d examples, the other runs %d", what, examples, t.examples)
	}
	t.examples = examples
	t.eps[kind] = append(t.eps[kind], float64(examples)/seconds)
	// Per core-equivalent: examples over the CPU time the whole run used.
	t.perCPU[kind] = append(t.perCPU[kind], float64(examples)/cpu.Seconds())
	if others >= 0 {
		t.others = append(t.others, others)
	}
	return nil
}

// meanOthers is the mean of the runs' others-CPUs (0 when unknown).
func (t *trainRuns) meanOthers() float64 {
	var sum float64
	for _, o := range t.others {
		sum += o
	}
	return sum / float64(max(1, len(t.others)))
}

// trainOnce runs one epoch of setup (psInProcess or psByAddress) over dir in a child process
// and records it into into.
func (r *run) trainOnce(ctx context.Context, dir string, s int, setup trainSetup, loop bool, threads int, into *trainRuns) error {
	kind := trainPipeline
	if loop {
		kind = trainLoop
	}
	what := fmt.Sprintf("%s, %s, %s at %d×", kind, setup.modelName(), setup.layout(), s)
	var res trainResult
	job := trainJob{Data: dir, Model: setup.model, Loop: loop, Threads: threads, Shards: setup.shards, ByAddress: setup.where == psByAddress}
	u, err := child.Run(ctx, r.tmp, trainChildFunc, job, &res)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := into.record(what, kind, res.Examples, res.Seconds, u.CPU, u.Others); err != nil {
		return err
	}
	r.log.Info("measured", "section", SectionTrain, "scale", s, "kind", kind, "model", setup.model, "ps", setup.layout(),
		"examples/s", int64(float64(res.Examples)/res.Seconds), "cpu_s", u.CPU.Seconds(), "maxrss_mib", u.MaxRSS>>20, "others_cpus", u.Others)
	return nil
}

// train measures one training epoch as the Beam pipeline on prism against the plain loop
// (train.Options.Loop) with the same goroutines, steps and in-process PS shards, at every
// training input size, each run in its own child process, kinds interleaved per
// repetition. Throughput is examples over the epoch's time (the summary's train_seconds).
// At the largest size it also measures the other configurations of issue 22 (trainSetups
// and `monolith cluster`; trainConfigs).
func (r *run) train(ctx context.Context) error {
	threads := runtime.GOMAXPROCS(0)
	last := r.sz.trainScales[len(r.sz.trainScales)-1]
	r.res.Inputs = append(r.res.Inputs, fmt.Sprintf("train: planted FM (8 features of one fid each out of 300, Zipf 1.05, dim 4, ExampleBatch TFRecords of 256 rows), %d rows in %d files at 1×, up to %d×; one epoch, batch 256, Adagrad 0.1, %d in-process PS shards; %d goroutines per step (pipeline) and in the loop",
		r.sz.trainRows, r.sz.trainFiles, last, trainBase.shards, threads),
		fmt.Sprintf("train configurations at %d× only, %d repetitions each: FM with 1 in-process PS shard; FM with 2 PS shards the training process serves over gRPC on 127.0.0.1 and finds through ps.addrs; DeepFM (MLP %v) with 2 in-process PS shards; and FM as monolith cluster, %d worker processes (threads %d each) and 2 PS processes",
			last, r.sz.trainConfigReps, trainHidden, clusterWorkers, max(1, threads/clusterWorkers)))
	for _, s := range r.sz.trainScales {
		dir := filepath.Join(r.tmp, fmt.Sprintf("train-%dx", s))
		if err := trainData(ctx, dir, r.sz.trainRows*int64(s), r.sz.trainFiles*s, 300); err != nil {
			return fmt.Errorf("train data: %w", err)
		}
		runs := newTrainRuns()
		for range r.sz.reps {
			for _, loop := range []bool{true, false} {
				if err := r.trainOnce(ctx, dir, s, trainBase, loop, threads, runs); err != nil {
					return err
				}
			}
		}
		r.trainFigures(trainBase, s, runs, s == last)
		if s == last {
			if err := r.trainConfigs(ctx, dir, s, threads, runs.examples); err != nil {
				return err
			}
		}
	}
	return nil
}

// trainConfigs measures trainSetups and the cluster over dir, repetitions interleaved
// across the configurations; every run must train examples examples.
func (r *run) trainConfigs(ctx context.Context, dir string, s, threads int, examples int64) error {
	runs := make([]*trainRuns, len(trainSetups))
	for i := range runs {
		runs[i] = newTrainRuns()
		runs[i].examples = examples
	}
	cluster := newTrainRuns()
	cluster.examples = examples
	exe, err := r.monolith()
	if err != nil {
		return err
	}
	cfg := filepath.Join(r.tmp, fmt.Sprintf("cluster-%dx.json", s))
	if err := os.WriteFile(cfg, []byte(trainConfigJSON(modelFM, trainFileInputs(dir), threads, 2)), 0o644); err != nil {
		return fmt.Errorf("train: cluster config: %w", err)
	}
	for rep := range r.sz.trainConfigReps {
		for i, setup := range trainSetups {
			for _, loop := range []bool{true, false} {
				if err := r.trainOnce(ctx, dir, s, setup, loop, threads, runs[i]); err != nil {
					return err
				}
			}
		}
		if err := r.trainCluster(ctx, exe, cfg, filepath.Join(r.tmp, fmt.Sprintf("cluster-%dx-%d", s, rep)), s, cluster); err != nil {
			return err
		}
	}
	for i, setup := range trainSetups {
		r.trainFigures(setup, s, runs[i], true)
	}
	setup := trainSetup{model: modelFM, shards: 2, where: psCluster}
	r.add(Figure{Issue: 22, Section: SectionTrain, Name: fmt.Sprintf("%s training examples/s, %s, %d× (%d examples)", setup.modelName(), setup.layout(), s, examples),
		Unit: "examples/s", Values: cluster.eps[trainPipeline], Others: cluster.meanOthers(),
		Note: "the merged summary's examples (every worker's) ÷ the chief's train_seconds; no plain-loop baseline: the workers are monolith train, which runs the pipeline"})
	r.add(Figure{Issue: 22, Section: SectionTrain, Name: fmt.Sprintf("%s training examples per CPU-second, %s, %d× (%d examples)", setup.modelName(), setup.layout(), s, examples),
		Unit: "examples/s per core", Values: cluster.perCPU[trainPipeline], Others: cluster.meanOthers(),
		Target: &Target{On: OnValue, Op: ">=", Bound: 150_000, Text: "≥ 150k examples/s per core-equivalent"},
		Note:   "examples ÷ the CPU time of monolith cluster and every process it ran (the PS shards, the workers with their prism runners; start-up and the shards' stop included)"})
	return nil
}

// trainFigures adds the figures of one configuration: pipeline against loop, and with
// perCPU the examples per CPU-second of each kind. trainBase's keep the names they have
// always had.
func (r *run) trainFigures(setup trainSetup, s int, runs *trainRuns, perCPU bool) {
	issue, label := 22, setup.modelName()+", "+setup.layout()+", "
	note := "examples ÷ the CPU time of the whole training process (its in-process PS shards, start-up and the epoch's warm-up included)"
	switch {
	case setup == trainBase:
		issue, label = 18, ""
	case setup.where == psByAddress:
		note = "examples ÷ the CPU time of the whole training process (the PS shards it serves over gRPC, start-up and the epoch's warm-up included)"
	}
	r.add(Figure{Issue: issue, Section: SectionTrain, Name: fmt.Sprintf("training pipeline vs loop, %s%d× (%d examples)", label, s, runs.examples),
		Unit: "examples/s", Values: runs.eps[trainPipeline], Baseline: "loop examples/s", Base: runs.eps[trainLoop],
		RatioOf: "pipeline ÷ loop", Ratios: ratios(runs.eps[trainPipeline], runs.eps[trainLoop]), Others: runs.meanOthers(),
		Target: &Target{On: OnRatio, Op: ">=", Bound: 0.9, Text: "≥ 0.9× the plain loop on as many goroutines"}})
	if !perCPU {
		return
	}
	ps := ""
	if setup != trainBase {
		ps = setup.layout() + ", "
	}
	for _, kind := range []string{trainPipeline, trainLoop} {
		f := Figure{Issue: 22, Section: SectionTrain, Name: fmt.Sprintf("%s training examples per CPU-second, %s, %s%d× (%d examples)", setup.modelName(), kind, ps, s, runs.examples),
			Unit: "examples/s per core", Values: runs.perCPU[kind], Others: runs.meanOthers(), Note: note}
		if setup.targeted() {
			f.Target = &Target{On: OnValue, Op: ">=", Bound: 150_000, Text: "≥ 150k examples/s per core-equivalent"}
		}
		r.add(f)
	}
}

// monolith is the monolith binary the cluster configuration runs: Options.Monolith, else
// this executable (`monolith bench`'s); a test binary is not one.
func (r *run) monolith() (string, error) {
	if r.opts.Monolith != "" {
		return r.opts.Monolith, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("train: the monolith binary: %w", err)
	}
	if strings.HasSuffix(filepath.Base(exe), ".test") {
		return "", fmt.Errorf("train: %s is a test binary, not monolith: set Options.Monolith for the monolith cluster configuration", exe)
	}
	return exe, nil
}

// trainCluster runs `monolith cluster` (clusterWorkers workers, 2 PS shards) on the
// config cfg with its logs in logDir, and records the merged summary and the CPU time of
// the cluster and of every process it ran (wait4's rusage of a process includes its
// children that it waited for, and the cluster waits for all of them).
func (r *run) trainCluster(ctx context.Context, exe, cfg, logDir string, s int, into *trainRuns) error {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "cluster", "--config", cfg, "--workers", strconv.Itoa(clusterWorkers), "--ps", "2", "--log-dir", logDir)
	// On timeout, a SIGTERM: the cluster stops its children (within its --stop-grace of
	// 10s) before it exits; a SIGKILL only if it has not after WaitDelay.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	others := othersMeter()
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (timeout %v)", err, clusterTimeout)
		}
		logs := stderr.Bytes()
		logs = logs[max(0, len(logs)-4096):]
		return fmt.Errorf("train: monolith cluster at %d×: %w\n%s", s, err, logs)
	}
	wall := time.Since(t0)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return fmt.Errorf("train: monolith cluster at %d×: no rusage", s)
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	var sum train.Summary
	line := bytes.TrimSpace(stdout.Bytes())
	if k := bytes.LastIndexByte(line, '\n'); k >= 0 {
		line = line[k+1:]
	}
	if err := json.Unmarshal(line, &sum); err != nil {
		return fmt.Errorf("train: monolith cluster at %d×: summary %q: %w", s, line, err)
	}
	if sum.NumWorkers != clusterWorkers || sum.PSShards != 2 {
		return fmt.Errorf("train: monolith cluster at %d×: a summary of %d workers and %d PS shards, want %d and 2", s, sum.NumWorkers, sum.PSShards, clusterWorkers)
	}
	what := fmt.Sprintf("monolith cluster at %d×", s)
	// The other processes: the machine's busy time less this process's and its waited-for
	// children's, which include the cluster's.
	o := others()
	if err := into.record(what, trainPipeline, sum.Examples, sum.TrainSeconds, cpu, o); err != nil {
		return err
	}
	r.log.Info("measured", "section", SectionTrain, "scale", s, "kind", trainPipeline, "model", modelFM, "ps", psCluster,
		"examples/s", int64(float64(sum.Examples)/sum.TrainSeconds), "cpu_s", cpu.Seconds(), "wall_s", wall.Seconds(), "others_cpus", o)
	return nil
}
