package train

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/metrics"
	"github.com/monolith-go/monolith/pipelines/train/ckptstate"
	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/discovery"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/transforms/beamio"
	tshard "github.com/monolith-go/monolith/transforms/shard"
)

// plantedData writes a small planted-FM data set into dir (train/, eval/,
// feature_configs.pbtxt) and returns a config over it.
func plantedData(t *testing.T, dir string, rows int64) *Config {
	t.Helper()
	c := synth.DefaultConfig()
	c.Type, c.Record.Framing = batch.SourceExampleBatch, recordio.TFRecord
	c.Features, c.Shared, c.Dense, c.Tasks = 6, 0, 0, 1
	c.FidsMin, c.FidsMax, c.Vocab, c.Zipf = 1, 1, 50, 1.0
	c.Rows, c.Files, c.BatchRows, c.Seed = rows, 2, 128, 7
	const dim = 4
	m, err := synth.NewPlanted(synth.PlantedFM, c, dim, 7)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := synth.PlantedFeatureConfigs(c, dim)
	if err != nil {
		t.Fatal(err)
	}
	train, eval := c, c
	eval.Seed, eval.Rows, eval.Files = 8, rows/4, 1
	tm, em := *m, *m
	train.Labeler, eval.Labeler = &tm, &em
	ctx := context.Background()
	if _, err := synth.Generate(ctx, train, filepath.Join(dir, "train")); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Generate(ctx, eval, filepath.Join(dir, "eval")); err != nil {
		t.Fatal(err)
	}
	b, err := prototext.Marshal(fc)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "feature_configs.pbtxt", b)
	cfg, err := ParseConfig([]byte(`
model: fm
data: `+dir+`
batch_size: 128
epochs: 2
sparse:
  segments:
    - {init: {zeros: {}}, optimizer: {adagrad: {learning_rate: 0.1, initial_accumulator_value: 0.1}}}
    - {init: {random_uniform: {minval: -0.05, maxval: 0.05}}, optimizer: {adagrad: {learning_rate: 0.1, initial_accumulator_value: 0.1}}}
`), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// localPS prepares c and starts n in-process shards of its tables, stopped at the end.
func localPS(t *testing.T, c *Config, n int) (*Prepared, *LocalPS) {
	t.Helper()
	pr, err := Prepare(c)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := StartLocalPS(context.Background(), n, pr.Tables, LocalPSOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Stop() })
	return pr, ps
}

// TestTrainBeatsConstant trains on prism (and in the plain loop) against an in-process PS
// and checks that the held-out AUC and log loss clearly beat the constant predictor.
func TestTrainBeatsConstant(t *testing.T) {
	dir := t.TempDir()
	base := plantedData(t, dir, 20000)
	for _, tc := range []struct {
		name    string
		model   string
		threads int
		loop    bool
		minAUC  float64
	}{
		{"fm", "fm", 2, false, 0.7},
		{"fm loop", "fm", 1, true, 0.7},
		{"lr", "lr", 1, false, 0.6},
		{"deepfm", "deepfm", 2, false, 0.7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *base
			c.Model, c.Threads, c.Hidden = tc.model, tc.threads, []int{16, 8}
			c.Checkpoint.Dir = filepath.Join(t.TempDir(), "ckpt")
			c.Checkpoint.EverySteps = 100
			sum, err := Run(context.Background(), &c, Options{Loop: tc.loop})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("examples/s %.0f, eval AUC %.4f, log loss %.4f (constant %.4f)", sum.ExamplesPerSec, *sum.EvalAUC, *sum.EvalLogLoss, *sum.EvalConstLogLoss)
			if sum.Examples != 2*20000 || sum.Epochs != 2 {
				t.Errorf("examples %d over %d epochs, want 40000 over 2", sum.Examples, sum.Epochs)
			}
			wantSteps := int64(2 * 2 * math.Ceil(10000/128.0)) // 2 epochs × 2 files of 10000 rows
			if sum.Steps != wantSteps || sum.GlobalStep != wantSteps || sum.StartStep != 0 {
				t.Errorf("steps %d, global step %d (from %d), want %d from 0", sum.Steps, sum.GlobalStep, sum.StartStep, wantSteps)
			}
			if sum.EvalExamples != 5000 {
				t.Errorf("eval examples %d, want 5000", sum.EvalExamples)
			}
			if *sum.EvalAUC < tc.minAUC {
				t.Errorf("eval AUC %.4f, want ≥ %.2f", *sum.EvalAUC, tc.minAUC)
			}
			if *sum.EvalLogLoss > *sum.EvalConstLogLoss-0.03 {
				t.Errorf("eval log loss %.4f does not beat the constant predictor's %.4f by 0.03", *sum.EvalLogLoss, *sum.EvalConstLogLoss)
			}
			// Periodic and final checkpoints went through the PS.
			if _, err := checkpoint.Latest(filepath.Join(c.Checkpoint.Dir, "shard-0-of-1")); err != nil {
				t.Errorf("no checkpoint: %v", err)
			}
		})
	}
}

// TestRetriedBatchAppliesOnce trains the same batch in a second bundle of the same epoch
// (a retried bundle: the same batch id): neither the embeddings nor the global step move.
// The same batch in another epoch applies again.
func TestRetriedBatchAppliesOnce(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 512)
	ctx := context.Background()
	pr, ps := localPS(t, c, 2)
	j := pr.Job
	j.PS, j.RunID = ps.Addrs(), "test"
	cl, err := client.New(ps.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	files, err := beamio.Files(ctx, c.TrainInput)
	if err != nil {
		t.Fatal(err)
	}
	var rec arrow.RecordBatch
	if err := beamio.ReadFile(ctx, files[0], j.Read, nil, func(r arrow.RecordBatch) error {
		if rec == nil {
			rec = r
		} else {
			r.Release()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	// The batch's fids, as the chain's sharding lists them.
	var b tshard.Batcher
	if err := b.Init(j.Kernels); err != nil {
		t.Fatal(err)
	}
	r, err := b.Shard(rec)
	if err != nil {
		t.Fatal(err)
	}
	var fids []int64
	for p := range r.PS {
		for _, v := range r.List(0, p) {
			fids = append(fids, int64(v))
		}
	}
	if len(fids) == 0 {
		t.Fatal("the batch has no fids")
	}
	snapshot := func() ([]float32, int64) {
		t.Helper()
		res, err := cl.Lookup(ctx, "emb", 5, fids, client.LookupOptions{})
		if err != nil {
			t.Fatal(err)
		}
		step, err := cl.GlobalStep(ctx, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return res.Embeddings, step
	}
	bundle := func(epoch int) Stats {
		t.Helper()
		ch, err := NewChain(&j, cl, true, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ch.epoch = epoch
		if err := ch.Train(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return ch.Stats()
	}
	bundle(1)
	e1, s1 := snapshot()
	bundle(1) // the retry
	e2, s2 := snapshot()
	if s2 != s1 || s1 != 1 {
		t.Errorf("global step %d after the first try and %d after the retry, want 1 and 1", s1, s2)
	}
	for i := range e1 {
		if math.Float32bits(e1[i]) != math.Float32bits(e2[i]) {
			t.Fatalf("embedding float %d moved on the retry: %v → %v", i, e1[i], e2[i])
		}
	}
	bundle(2) // another epoch: a new batch id applies again, so the test can fail
	e3, s3 := snapshot()
	if s3 != 2 {
		t.Errorf("global step %d after the next epoch, want 2", s3)
	}
	moved := false
	for i := range e1 {
		moved = moved || e1[i] != e3[i]
	}
	if !moved {
		t.Errorf("the next epoch did not change the embeddings")
	}
}

// TestOutOfProcessPS trains against two PS shards running as separate processes.
func TestOutOfProcessPS(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 4000)
	c.Epochs, c.MaxSteps = 1, 20
	c.PS.Shards = 2
	pr, err := Prepare(c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := prototext.Marshal(pr.Tables)
	if err != nil {
		t.Fatal(err)
	}
	c.PS.Addrs = startChildPS(t, writeFile(t, dir, "tables.pbtxt", b), 2)
	sum, err := Run(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 20 batches of at most 128 rows (a file's last batch is shorter).
	if sum.PSShards != 2 || sum.Steps != 20 || sum.Examples > 20*128 || sum.Examples < 19*128 {
		t.Errorf("summary %+v: want 2 shards, 20 steps of up to 128 rows", sum)
	}
	// Both shards hold embeddings.
	cl, err := client.New(c.PS.Addrs)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stats, err := cl.GetStatsAll(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	for k, s := range stats {
		var n int64
		for _, tb := range s.GetTables() {
			if tb.GetName() == "emb" {
				n = tb.GetSize()
			}
		}
		if n == 0 {
			t.Errorf("shard %d holds no embeddings", k)
		}
	}
}

// TestZooKeeperPS trains against two shards that registered in a real ZooKeeper under
// Monolith's layout (/monolith/{job}/ps.{index}).
func TestZooKeeperPS(t *testing.T) {
	zk := zktest.Start(t)
	dir := t.TempDir()
	c := plantedData(t, dir, 2000)
	c.Epochs, c.EvalInput, c.PS.Shards = 1, "", 2
	ctx := context.Background()
	_, ps := localPS(t, c, 2)
	reg, err := discovery.NewZK(ctx, "train-test", zk.Addr(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for i, addr := range ps.Addrs() {
		if err := reg.Register(ctx, "ps", i, addr); err != nil {
			t.Fatal(err)
		}
	}
	c.Runner.DiscoveryType, c.Runner.ZKServer, c.Runner.DeepInsightName = "zk", zk.Addr(), "train-test"
	c.MarkRunnerSet("discovery_type")
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(ctx, c, Options{DiscoveryWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sum.PSShards != 2 || sum.Examples != 2000 {
		t.Errorf("summary %+v: want 2 shards and 2000 examples", sum)
	}
	for i, s := range ps.Servers {
		if n := s.Tables()[0].Size(); n == 0 {
			t.Errorf("shard %d holds no embeddings", i)
		}
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "fc.pbtxt", []byte(`feature_configs { key: "a" value { table: "t" slice_dims: 1 slice_dims: 2 } }
feature_configs { key: "b" value { table: "t" slice_dims: 1 slice_dims: 2 } }
out_configs { key: "bias" value { out_type: ADDN slice_configs { feature_name: "a" start: 0 end: 1 } slice_configs { feature_name: "b" start: 0 end: 1 } shape { dims: -1 dims: 1 } } }
out_configs { key: "vec" value { out_type: CONCAT slice_configs { feature_name: "a" start: 1 end: 3 } slice_configs { feature_name: "b" start: 1 end: 3 } shape { dims: -1 dims: 4 } } }
`))
	for _, tc := range []struct {
		name, file, text string
		err              string // substring of the error; "" = valid
	}{
		{"yaml", "c.yaml", "model: deepfm\nhidden: [8]\ntrain_input: data/*\nfeature_configs: fc.pbtxt\n", ""},
		{"json", "c.json", `{"model": "lr", "train_input": "x", "feature_configs": "fc.pbtxt", "tables": [{"name": "t", "filter": {"type": "PROBABILISTIC"}}]}`, ""},
		{"unknown key", "c.yaml", "model: fm\nbatchsize: 3\ntrain_input: x\nfeature_configs: fc.pbtxt\n", "batchsize"},
		{"bad optimizer", "c.yaml", "train_input: x\nfeature_configs: fc.pbtxt\ndense: {optimizer: {adagrd: {}}}\n", "dense.optimizer"},
		{"no optimizer", "c.yaml", "train_input: x\nfeature_configs: fc.pbtxt\ndense: {optimizer: {}}\n", "no optimizer set"},
		{"no input", "c.yaml", "feature_configs: fc.pbtxt\n", "train_input"},
		{"negative", "c.yaml", "train_input: x\nfeature_configs: fc.pbtxt\nbatch_size: -1\n", "negative"},
		{"addrs vs shards", "c.yaml", "train_input: x\nfeature_configs: fc.pbtxt\nps: {shards: 3, addrs: [a, b]}\n", "ps.shards"},
		{"unknown table override", "c.yaml", "train_input: x\nfeature_configs: fc.pbtxt\ntables: [{name: zz}]\n", `"zz"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, dir, tc.file, []byte(tc.text))
			c, err := LoadConfig(p)
			if err == nil {
				_, err = Prepare(c)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one naming %q", err, tc.err)
			case tc.err != "" && !errors.Is(err, ErrConfig):
				t.Fatalf("error %v does not wrap ErrConfig", err)
			case err != nil:
				return
			}
			if !filepath.IsAbs(c.FeatureConfigs) && !strings.HasPrefix(c.FeatureConfigs, dir) {
				t.Errorf("feature_configs %q not resolved against %s", c.FeatureConfigs, dir)
			}
		})
	}
}

func TestTablesConfig(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 256)
	c.Model, c.Hidden = "deepfm", []int{8, 4}
	pr, err := Prepare(c)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int32{}
	for _, s := range pr.Tables.GetTables() {
		for _, seg := range s.GetConfig().GetEntryConfig().GetSegments() {
			got[s.GetName()] = append(got[s.GetName()], seg.GetDimSize())
		}
	}
	// emb: segments [1, 4]; dense: w0 [1], mlp0 24→8, mlp1 8→4, mlp2 4→1 (weights Cols wide).
	want := map[string][]int32{"emb": {1, 4}, "dense_w0": {1}, "dense_mlp0_w": {8}, "dense_mlp0_b": {8},
		"dense_mlp1_w": {4}, "dense_mlp1_b": {4}, "dense_mlp2_w": {1}, "dense_mlp2_b": {1}}
	if len(got) != len(want) {
		t.Fatalf("tables %v, want %v", got, want)
	}
	for k, v := range want {
		if len(got[k]) != len(v) || got[k][0] != v[0] || got[k][len(v)-1] != v[len(v)-1] {
			t.Errorf("table %s segments %v, want %v", k, got[k], v)
		}
	}
	// The first emb segment starts at zero, the second is uniform, as configured.
	segs := pr.Tables.GetTables()[0].GetConfig().GetEntryConfig().GetSegments()
	if segs[0].GetInitConfig().GetZeros() == nil || segs[1].GetInitConfig().GetRandomUniform() == nil {
		t.Errorf("initializers %v", segs)
	}
	// A table whose features have the same width but other segments is rejected: a PS
	// table has one segment layout.
	fc := pr.Features.Source()
	fc.FeatureConfigs["f_2"].SliceDims = []int32{1, 2, 2}
	cfg, err := featcfg.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = sparseTables(cfg); err == nil || !strings.Contains(err.Error(), "slice dims") {
		t.Errorf("mixed slice dims: %v", err)
	}
}

// TestPSHealthStopsTraining: with a PS memory limit every process exceeds, the health
// check reports once, the workers stop at a step boundary, and Run returns ErrPSUnhealthy
// long before the 40 epochs are done; the job can then be run again on the same PS.
func TestPSHealthStopsTraining(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 4000)
	c.Epochs, c.EvalInput = 40, ""
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, loop := range []bool{false, true} {
		t.Run(fmt.Sprintf("loop=%v", loop), func(t *testing.T) {
			before := strings.Count(logs.String(), "PS are not healthy")
			sum, err := Run(context.Background(), c, Options{Loop: loop, HealthEvery: 100 * time.Millisecond, PSMemLimitBytes: 1, Logger: logger})
			t.Logf("Run: %v", err)
			if !errors.Is(err, ErrPSUnhealthy) || sum != nil {
				t.Fatalf("Run = %v, %v; want ErrPSUnhealthy", sum, err)
			}
			if !strings.Contains(err.Error(), "OUT_OF_MEMORY") || !strings.Contains(err.Error(), "PS 0:") || strings.Contains(err.Error(), "after 40 epochs") {
				t.Errorf("error %q: want the PS 0 OUT_OF_MEMORY report before epoch 40", err)
			}
			if n := strings.Count(logs.String(), "PS are not healthy") - before; n != 1 {
				t.Errorf("reported %d times, want once:\n%s", n, logs.String())
			}
		})
	}
}

// TestPredictionDump: the evaluation's predictions reach part-00000 through io/fileops, one
// "prediction<TAB>label" line per eval row, in the same order as the metrics saw them.
func TestPredictionDump(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 2000)
	c.Epochs = 1
	out := filepath.Join(dir, "dump", "preds")
	sum, err := Run(context.Background(), c, Options{Loop: true, PredictionDump: out})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "part-00000"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if int64(len(lines)) != sum.EvalExamples || sum.EvalExamples != 500 {
		t.Fatalf("%d lines for %d eval rows, want 500", len(lines), sum.EvalExamples)
	}
	var preds, labels []float32
	for i, l := range lines {
		var p, y float32
		if _, err := fmt.Sscanf(l, "%g\t%g", &p, &y); err != nil || p <= 0 || p >= 1 || (y != 0 && y != 1) {
			t.Fatalf("line %d %q: %v", i+1, l, err)
		}
		preds, labels = append(preds, p), append(labels, y)
	}
	auc, err := metrics.AUC(preds, labels)
	if err != nil || math.Abs(auc-*sum.EvalAUC) > 1e-12 {
		t.Errorf("AUC of the dump %v (%v), summary %v", auc, err, *sum.EvalAUC)
	}
}

// TestRestoreDir: job B starts from an older checkpoint of job A (checkpoint.restore_dir and
// restore_ckpt, spec §3.4–3.5): B's global step starts at that checkpoint's step, B's
// model dir records its own checkpoints (with ckpt.info files), and a rerun of B resumes
// from B's newest checkpoint, not from A's again.
func TestRestoreDir(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 2000)
	c.Epochs, c.EvalInput = 1, ""
	c.Checkpoint.Dir, c.Checkpoint.Keep = filepath.Join(dir, "a"), 10
	var a *Summary
	for range 3 { // three runs of job A: three final checkpoints
		var err error
		if a, err = Run(context.Background(), c, Options{Loop: true}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := ckptstate.ReadState(c.Checkpoint.Dir, "")
	if err != nil || st == nil || len(st.AllModelCheckpointPaths) < 3 {
		t.Fatalf("job A's checkpoint state: %v, %v", st, err)
	}
	if base := filepath.Base(st.ModelCheckpointPath); base != ckptstate.CheckpointName(a.GlobalStep) {
		t.Fatalf("job A's latest %s, want model.ckpt-%d", base, a.GlobalStep)
	}
	older := filepath.Base(st.AllModelCheckpointPaths[1])
	olderStep, _ := ckptstate.StepOf(older)

	b := *c
	b.Checkpoint.Dir, b.Checkpoint.RestoreDir, b.Checkpoint.RestoreCkpt, b.Checkpoint.Info = filepath.Join(dir, "b"), c.Checkpoint.Dir, older, true
	sum, err := Run(context.Background(), &b, Options{Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.StartStep != olderStep {
		t.Errorf("job B started at step %d, want %d (%s of job A)", sum.StartStep, olderStep, older)
	}
	for _, f := range []string{ckptstate.MonolithStateName, ckptstate.StateName, "ckpt.info-" + strconv.FormatInt(sum.GlobalStep, 10)} {
		if _, err := os.Stat(filepath.Join(b.Checkpoint.Dir, f)); err != nil {
			t.Errorf("job B's %s: %v", f, err)
		}
	}
	info, _ := os.ReadFile(filepath.Join(b.Checkpoint.Dir, "ckpt.info-"+strconv.FormatInt(sum.GlobalStep, 10)))
	if !strings.HasPrefix(string(info), "slot_counts {\n  key: ") {
		t.Errorf("ckpt.info: %q", info)
	}
	again, err := Run(context.Background(), &b, Options{Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	if again.StartStep != sum.GlobalStep {
		t.Errorf("rerun of job B started at %d, want its own newest step %d", again.StartStep, sum.GlobalStep)
	}
	// External shards cannot take restore_dir.
	ext := b
	ext.PS.Addrs = []string{"127.0.0.1:1"}
	if _, err := Run(context.Background(), &ext, Options{}); !errors.Is(err, ErrConfig) {
		t.Errorf("restore_dir with external shards: %v", err)
	}
}

// TestRunnerSection: the runner section takes Monolith's RunnerConfig names over its
// defaults, fills checkpoint.dir / restore_dir / info when the checkpoint section leaves
// them, and rejects unknown keys and bad values by name.
func TestRunnerSection(t *testing.T) {
	c, err := ParseConfig([]byte("model: fm\ntrain_input: x\nfeature_configs: y\nrunner:\n  model_dir: /m\n  restore_dir: /r\n  restore_ckpt: model.ckpt-3\n"+
		"  enable_model_ckpt_info: true\n  connect_retries: 2\n  retry_backoff_ms: 50\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if c.Checkpoint.Dir != "/m" || c.Checkpoint.RestoreDir != "/r" || c.Checkpoint.RestoreCkpt != "model.ckpt-3" || !c.Checkpoint.Info {
		t.Errorf("checkpoint section %+v", c.Checkpoint)
	}
	if r, b := c.Runner.Retry(); r != 2 || b != 50*time.Millisecond || c.Runner.BarrierTimeoutMs != 10000 || c.Runner.NumWorkers != 1 {
		t.Errorf("runner %+v", c.Runner)
	}
	for in, want := range map[string]string{
		"runner: {nope: 1}":                "nope",
		"runner: {discovery_type: etcd}":   "discovery_type",
		"runner: {barrier_timeout_ms: -1}": "barrier_timeout_ms",
	} {
		c, err := ParseConfig([]byte("model: fm\ntrain_input: x\nfeature_configs: y\n"+in), true)
		if err == nil {
			err = c.Normalize()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", in, err, want)
		}
	}
}
