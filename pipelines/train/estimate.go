package train

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/monolith-go/monolith/pipelines/train/ckptstate"
	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/server"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/transforms/beamio"
)

// ErrCheckpoint is wrapped by the errors of a checkpoint that is missing or does not match
// the model.
var ErrCheckpoint = errors.New("pipelines/train: checkpoint")

// Restored is a model restored from a checkpoint of a model directory: in-process PS
// shards holding it (they do not save), a client of them, and the job to run over them.
type Restored struct {
	Checkpoint string // model.ckpt-{step} path
	Step       int64
	Prepared   *Prepared
	PS         *LocalPS
	Client     *client.Client
	metrics    *Metrics
}

// Close stops the shards and the client.
func (r *Restored) Close() error {
	return errors.Join(r.Client.Close(), r.PS.Stop())
}

// checkpointShards finds the shard folders beside a checkpoint: their count.
func checkpointShards(root string) (int, error) {
	dirs, err := checkpoint.ShardDirs(root)
	if err != nil {
		return 0, fmt.Errorf("%w %s: %v", ErrCheckpoint, root, err)
	}
	ns := slices.Sorted(maps.Keys(dirs))
	switch {
	case len(ns) == 0:
		return 0, fmt.Errorf("%w %s: no PS shard folders (shard-I-of-N)", ErrCheckpoint, root)
	case len(ns) > 1:
		return 0, fmt.Errorf("%w %s: shard folders of several shard counts %v", ErrCheckpoint, root, ns)
	}
	n := ns[0]
	for i := range n {
		if dirs[n][i] == "" {
			return 0, fmt.Errorf("%w %s: shard-%d-of-%d is missing", ErrCheckpoint, root, i, n)
		}
	}
	return n, nil
}

// Restore finds the checkpoint ckpt of c's model directory (c.Checkpoint.Dir; "" = the
// newest its checkpoint state names, else "model.ckpt-N" or a path to one), checks that it
// holds exactly the tables c's model needs with their widths, and starts in-process shards
// holding it. It reads no data: a missing or mismatching checkpoint fails first, naming the
// checkpoint and the table. The shard count is the checkpoint's; a ps.shards other than 1
// (the default) that disagrees is an error.
func Restore(ctx context.Context, c *Config, ckpt string, o Options) (*Restored, error) {
	at, err := locate(c, ckpt, o.Logger)
	if err != nil {
		return nil, err
	}
	path, step, n, folders, pr := at.path, at.step, len(at.folders), at.folders, at.pr
	m, err := NewMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	local, err := StartLocalPS(ctx, n, pr.Tables, LocalPSOptions{RestoreFrom: folders, Logger: o.Logger, Registry: o.Registry,
		Seed: c.PS.Seed, MemLimitBytes: o.PSMemLimitBytes})
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrCheckpoint, path, err)
	}
	pr.Job.PS = local.Addrs()
	pr.Job.RunID = newRunID()
	cl, err := client.New(pr.Job.PS, append(pr.Job.clientOptions(), client.WithMetrics(m.PS))...)
	if err != nil {
		_ = local.Stop()
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	return &Restored{Checkpoint: path, Step: step, Prepared: pr, PS: local, Client: cl, metrics: m}, nil
}

// located is a checkpoint of a model directory: its model.ckpt-{step} path, its step, one
// checkpoint folder per PS shard, and the model prepared for that shard count.
type located struct {
	path    string
	step    int64
	folders []string
	pr      *Prepared
}

// locate finds the checkpoint ckpt of c's model directory as Restore describes and checks
// it against the model, reading no table.
func locate(c *Config, ckpt string, log *slog.Logger) (*located, error) {
	dir := c.Checkpoint.Dir
	var path string
	switch {
	case ckpt == "" && dir == "":
		return nil, fmt.Errorf("%w: no model directory (checkpoint.dir or --checkpoint-dir) and no checkpoint named", ErrConfig)
	case ckpt == "":
		st, err := ckptstate.GetState(dir, "", ckptstate.Options{Mode: ckptstate.ModeEval, Log: log})
		if err != nil {
			return nil, fmt.Errorf("%w %s: %v", ErrCheckpoint, dir, err)
		}
		if st == nil || st.GetModelCheckpointPath() == "" {
			return nil, fmt.Errorf("%w %s: no checkpoint state (%s): train first, or name one", ErrCheckpoint, dir, ckptstate.StateName)
		}
		path = st.GetModelCheckpointPath()
	case filepath.Base(ckpt) == ckpt:
		if dir == "" {
			return nil, fmt.Errorf("%w %s: a checkpoint name needs the model directory (checkpoint.dir)", ErrCheckpoint, ckpt)
		}
		path = filepath.Join(dir, ckpt)
	default:
		path = ckpt
	}
	step, err := ckptstate.StepOf(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrCheckpoint, path, err)
	}
	root := filepath.Dir(path)
	n, err := checkpointShards(root)
	if err != nil {
		return nil, err
	}
	if c.PS.Shards > 1 && c.PS.Shards != n {
		return nil, fmt.Errorf("%w %s has %d PS shards, the config says ps.shards %d", ErrCheckpoint, path, n, c.PS.Shards)
	}
	cc := *c
	cc.PS.Shards, cc.PS.Addrs, cc.discovery = n, nil, ""
	pr, err := Prepare(&cc)
	if err != nil {
		return nil, err
	}
	folders := make([]string, n)
	for i := range folders {
		if folders[i], err = checkpoint.AtStep(server.ShardDir(root, i, n), step); err != nil {
			return nil, fmt.Errorf("%w %s: shard %d: %v", ErrCheckpoint, path, i, err)
		}
	}
	if err := matchTables(path, folders[0], pr); err != nil {
		return nil, err
	}
	return &located{path: path, step: step, folders: folders, pr: pr}, nil
}

// matchTables checks the manifest of one shard's checkpoint against the model's tables.
func matchTables(path, folder string, pr *Prepared) error {
	man, err := checkpoint.ReadManifest(folder)
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrCheckpoint, path, err)
	}
	have := map[string]int32{}
	for _, t := range man.GetTables() {
		have[t.GetName()] = t.GetDim()
	}
	want := map[string]bool{}
	for _, spec := range pr.Tables.GetTables() {
		t, err := table.FromSpec(spec, 0)
		if err != nil {
			return fmt.Errorf("pipelines/train: table %q: %w", spec.GetName(), err)
		}
		want[spec.GetName()] = true
		dim, ok := have[spec.GetName()]
		switch {
		case !ok:
			return fmt.Errorf("%w %s does not match the model: it has no table %q", ErrCheckpoint, path, spec.GetName())
		case int(dim) != t.Dim():
			return fmt.Errorf("%w %s does not match the model: table %q has dim %d, the model's has %d", ErrCheckpoint, path, spec.GetName(), dim, t.Dim())
		}
	}
	for name := range have {
		if !want[name] {
			return fmt.Errorf("%w %s does not match the model: it holds table %q, which the model does not have", ErrCheckpoint, path, name)
		}
	}
	return nil
}

// engine runs pipelines over the restored shards.
func (r *Restored) engine(ctx context.Context, o Options) (context.Context, engine) {
	ctx = withRun(ctx, &runHandle{ps: r.Client, metrics: r.metrics})
	return ctx, engine{j: r.Prepared.Job, o: o, ps: r.Client, metrics: r.metrics}
}

// Evaluate evaluates a checkpoint of c's model directory (see Restore for ckpt) on
// c.EvalInput, as training's evaluation does, and returns the summary's eval figures with
// the checkpoint and its global step. It trains nothing and writes nothing into the model
// directory; with dump set it writes the predictions there.
func Evaluate(ctx context.Context, c *Config, o Options, ckpt, dump string) (*Summary, error) {
	wall := time.Now()
	if c.EvalInput == "" {
		return nil, fmt.Errorf("%w: evaluate needs eval_input (or data)", ErrConfig)
	}
	r, err := Restore(ctx, c, ckpt, o)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	ctx, eng := r.engine(ctx, o)
	sum := &Summary{Model: c.Model, PSShards: r.PS.NumShards(), BatchSize: c.BatchSize, GlobalStep: r.Step, StartStep: r.Step,
		Checkpoint: r.Checkpoint, NumWorkers: 1}
	if c.Planted != "" {
		if err := readPlanted(c.Planted, sum); err != nil {
			return nil, err
		}
	}
	if err := evaluate(ctx, c, eng, dump, sum); err != nil {
		return nil, err
	}
	sum.WallSecs = time.Since(wall).Seconds()
	return sum, nil
}

// Predict scores the rows of the files matching input (default c.EvalInput) with a
// checkpoint of c's model directory (see Restore) and writes one record per row, with its
// line id, to out in format (PredictionFormats); it returns the rows written. The data
// must carry labels (they are written beside the predictions).
func Predict(ctx context.Context, c *Config, o Options, ckpt, input, out, format string) (int64, error) {
	if input == "" {
		input = c.EvalInput
	}
	if input == "" {
		return 0, fmt.Errorf("%w: predict needs an input (or eval_input, or data)", ErrConfig)
	}
	if _, err := predictionEncoder(format); err != nil {
		return 0, err
	}
	if out == "" {
		return 0, fmt.Errorf("%w: predict needs an output file", ErrConfig)
	}
	r, err := Restore(ctx, c, ckpt, o)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	files, err := beamio.Files(ctx, input)
	if err != nil {
		return 0, fmt.Errorf("pipelines/train: predict input %s: %w", input, err)
	}
	ctx, _ = r.engine(ctx, o)
	res, err := runners.Run(ctx, PredictPipeline(r.Prepared.Job, files, out, format), o.Runner)
	if err != nil {
		return 0, fmt.Errorf("pipelines/train: predict: %w", err)
	}
	for _, cnt := range res.Metrics().AllMetrics().Counters() {
		if cnt.Key.Namespace == CounterNS && cnt.Key.Name == CounterPredictions {
			return cnt.Result(), nil
		}
	}
	return 0, errors.New("pipelines/train: predict: the runner reported no prediction count")
}
