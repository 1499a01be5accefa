package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/io/tfevents"
)

// TestSummariesAndMetrics trains on prism with a model directory and a metrics registry:
// the event file holds the loss every save_summary_steps global steps up to the last step
// and an evaluation after each epoch (the last one equal to the summary's), and the
// registry, scraped over HTTP and parsed by the Prometheus text parser, counts every step
// and example the workers applied and every PS call they made.
func TestSummariesAndMetrics(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 20000)
	c.Threads = 2
	c.Checkpoint.Dir = filepath.Join(dir, "model")
	c.Runner.SaveSummarySteps = 20
	c.EvalEveryEpochs = 1
	reg := metricsrv.NewRegistry()
	srv, err := metricsrv.Listen("127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sum, err := Run(context.Background(), c, Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(sum.EventFile) != c.Checkpoint.Dir || !tfevents.IsEventFile(sum.EventFile) {
		t.Fatalf("event file %q, want an events.out.tfevents.* file in %s", sum.EventFile, c.Checkpoint.Dir)
	}
	points, err := tfevents.ReadFile(sum.EventFile)
	if err != nil {
		t.Fatal(err)
	}
	byTag := map[string][]tfevents.Point{}
	for _, p := range points {
		byTag[p.Tag] = append(byTag[p.Tag], p)
	}
	loss := byTag[TagLoss]
	// 156 steps at one summary per 20: the polling driver may merge intervals, never
	// invent or repeat one.
	if len(loss) < 3 {
		t.Fatalf("%d loss summaries over %d steps, want at least 3: %v", len(loss), sum.GlobalStep, loss)
	}
	for i, p := range loss {
		if i > 0 && p.Step <= loss[i-1].Step {
			t.Errorf("loss summary %d at step %d after step %d", i, p.Step, loss[i-1].Step)
		}
		if p.Value <= 0 || p.Value > 1 || math.IsNaN(p.Value) {
			t.Errorf("loss %v at step %d", p.Value, p.Step)
		}
	}
	if last := loss[len(loss)-1]; last.Step != sum.GlobalStep {
		t.Errorf("last loss summary at step %d, want the final global step %d", last.Step, sum.GlobalStep)
	}
	if n, m, a := len(byTag[TagExamplesPerSec]), len(byTag[TagGlobalStep]), len(byTag[TagAUC]); n != len(loss) || m != len(loss) || a != len(loss) {
		t.Errorf("%d examples/s, %d global step and %d auc summaries for %d loss summaries", n, m, a, len(loss))
	}
	// The streaming training AUC learns the planted signal as the eval AUC does, and its
	// last summary is the run's.
	if sum.TrainAUC == nil || *sum.TrainAUC < 0.6 || *sum.TrainAUC > 1 {
		t.Fatalf("train AUC %v, want a learned value in (0.6, 1]", sum.TrainAUC)
	}
	if a := byTag[TagAUC]; float32(a[len(a)-1].Value) != float32(*sum.TrainAUC) {
		t.Errorf("last auc summary %v, want the run's %v", a[len(a)-1].Value, *sum.TrainAUC)
	}
	for _, p := range byTag[TagGlobalStep] {
		if int64(p.Value) != p.Step {
			t.Errorf("global_step summary %v at step %d", p.Value, p.Step)
		}
	}
	auc := byTag[TagEvalAUC]
	if len(auc) != 2 || len(byTag[TagEvalLogLoss]) != 2 {
		t.Fatalf("eval summaries %v and %v, want two each (after epoch 1, at the end)", auc, byTag[TagEvalLogLoss])
	}
	if auc[0].Step != sum.GlobalStep/2 || auc[1].Step != sum.GlobalStep {
		t.Errorf("evaluations at steps %d and %d, want %d and %d", auc[0].Step, auc[1].Step, sum.GlobalStep/2, sum.GlobalStep)
	}
	if got, want := auc[1].Value, float64(float32(*sum.EvalAUC)); got != want {
		t.Errorf("final eval/auc summary %v, want the summary's %v", got, want)
	}
	if _, ok := byTag[TagBayesAUC]; ok {
		t.Error("a Bayes AUC summary without planted.json")
	}

	fams, err := metricsrv.Scrape(context.Background(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"monolith_train_steps_total", nil, float64(sum.Steps)},
		{"monolith_train_examples_total", nil, float64(sum.Examples)},
		{"monolith_train_global_step", nil, float64(sum.GlobalStep)},
		{"monolith_train_eval_auc", nil, *sum.EvalAUC},
		{"monolith_train_auc", nil, *sum.TrainAUC},
		{"monolith_train_eval_examples", nil, float64(sum.EvalExamples)},
		{"monolith_controller_saves_total", []string{"result", "ok"}, 1},
	} {
		if got, ok := metricsrv.Value(fams, w.name, w.labels...); !ok || got != w.want {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.want)
		}
	}
	if got, _ := metricsrv.Value(fams, "monolith_train_loss_sum_total"); math.Abs(got/float64(sum.Examples)-sum.TrainLogLoss) > 1e-9 {
		t.Errorf("loss sum %v over %d examples, want the mean %v", got, sum.Examples, sum.TrainLogLoss)
	}
	// A step's applies travel together: one RPC per shard, a batch where a shard holds
	// parts of several tables or parameters.
	plain, _ := metricsrv.Value(fams, "monolith_ps_client_call_seconds", "method", "ApplyGradients", "code", "OK")
	batch, _ := metricsrv.Value(fams, "monolith_ps_client_call_seconds", "method", "BatchApplyGradients", "code", "OK")
	if plain+batch < float64(sum.Steps) || batch == 0 {
		t.Errorf("%v ApplyGradients and %v BatchApplyGradients calls observed, want at least one per step (%d), batches among them", plain, batch, sum.Steps)
	}
	if got, _ := metricsrv.Value(fams, "monolith_ps_client_call_seconds", "method", "GlobalStep", "code", "OK"); got < float64(sum.Steps) {
		t.Errorf("%v GlobalStep calls observed, want at least one per step (%d)", got, sum.Steps)
	}
	if _, ok := metricsrv.Value(fams, "go_goroutines"); !ok {
		t.Error("go_goroutines missing")
	}
	// The in-process shards left the registry when they stopped; the barrier's gauges too.
	for _, name := range []string{"monolith_ps_table_entries", "monolith_controller_barrier_placed"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s still registered after the run", name)
		}
	}
	// A second run on the same registry adds to the process's counters.
	c2 := *c
	c2.Checkpoint.Dir, c2.EvalEveryEpochs = "", 0
	sum2, err := Run(context.Background(), &c2, Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if fams, err = metricsrv.Scrape(context.Background(), srv.Addr()); err != nil {
		t.Fatal(err)
	}
	if got, _ := metricsrv.Value(fams, "monolith_train_steps_total"); got != float64(sum.Steps+sum2.Steps) {
		t.Errorf("steps after two runs %v, want %d", got, sum.Steps+sum2.Steps)
	}
	if sum2.EventFile != "" {
		t.Errorf("event file %q without a model directory", sum2.EventFile)
	}
}

// TestUnwritableModelDir: a model directory that cannot be created fails Run before any
// PS starts or any step is taken, naming the directory.
func TestUnwritableModelDir(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 2000)
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.Checkpoint.Dir = filepath.Join(blocker, "model") // a folder under a regular file
	reg := metricsrv.NewRegistry()
	_, err := Run(context.Background(), c, Options{Registry: reg})
	if err == nil || !strings.Contains(err.Error(), c.Checkpoint.Dir) {
		t.Fatalf("Run with an unwritable model dir: %v, want an error naming %s", err, c.Checkpoint.Dir)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "monolith_ps_table_entries" {
			t.Error("a PS shard was started")
		}
		if f.GetName() == "monolith_train_steps_total" && f.GetMetric()[0].GetCounter().GetValue() != 0 {
			t.Error("steps were taken")
		}
	}
}
