//go:build !race

// The race phase of make test skips this file (its child processes and pipelines gain
// nothing from -race in the test binary, which costs a minute); the non-race phase runs
// its tests (Makefile, NORACE_RUN).

package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/ps/checkpoint"
)

// TestCtlAgainstTrain is the operator's session of the README against a real `monolith
// train` process on prism: ctl stop pauses it (status: paused, the global step stands
// still, and its /metrics, scraped over HTTP, says so), ctl save writes a checkpoint at
// that step, ctl resume lets it go on, and the job ends normally having trained every step
// of every epoch, leaving an event file that monolith inspect reads and the --plot PNGs.
func TestCtlAgainstTrain(t *testing.T) {
	dir := t.TempDir()
	runGenCLI(t, "--planted", "fm", "--seed", "5", "--out", filepath.Join(dir, "data"), "--rows", "8000", "--vocab", "50", "--eval-rows", "1000")
	const epochs, batch = 12, 128
	cfg := filepath.Join(dir, "fm.yaml")
	if err := os.WriteFile(cfg, []byte("model: fm\ndata: data\nbatch_size: 128\nepochs: 12\nthreads: 2\nps: {shards: 2}\ncheckpoint: {dir: model}\n"+
		"sparse:\n  segments:\n    - {init: {zeros: {}}, optimizer: {adagrad: {learning_rate: 0.1}}}\n"+
		"    - {init: {random_uniform: {minval: -0.05, maxval: 0.05}}, optimizer: {adagrad: {learning_rate: 0.1}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	modelDir := filepath.Join(dir, "model")

	cmd := exec.Command(os.Args[0], "train", "--config", cfg, "--progress", "never", "--metrics-listen", "127.0.0.1:0", "--plot")
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	finished := false
	t.Cleanup(func() {
		if !finished {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
		}
	})

	ctl := func(args ...string) map[string]any {
		t.Helper()
		out, errOut, err := runCLI(t, append([]string{"ctl"}, append(args, "--model-dir", modelDir)...)...)
		if err != nil {
			t.Fatalf("ctl %v: %v\n%s\ntrain stderr:\n%s", args, err, errOut, stderr.String())
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("ctl %v output %q: %v", args, out, err)
		}
		return m
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !ok() {
			select {
			case err := <-exited:
				finished = true
				t.Fatalf("train exited (%v) while waiting for %s:\n%s", err, what, stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	step := func(st map[string]any) int64 { return int64(st["global_step"].(float64)) }

	waitFor("the controller address file", func() bool {
		_, err := os.Stat(filepath.Join(modelDir, controller.AddrFile))
		return err == nil
	})
	waitFor("the first steps", func() bool { return step(ctl("status")) > 0 })
	ctl("stop")
	var paused map[string]any
	waitFor("a paused worker", func() bool { paused = ctl("status"); return paused["paused"] == true })
	// Workers finish the step in flight, then stand still.
	time.Sleep(300 * time.Millisecond)
	s1 := step(ctl("status"))
	time.Sleep(500 * time.Millisecond)
	if st := ctl("status"); step(st) != s1 || st["paused"] != true {
		t.Fatalf("paused job moved: global step %d then %v", s1, st)
	}
	t.Logf("paused at global step %d: %v", s1, paused)

	// The paused job's metrics: steps so far, the barrier and its blocked worker, the PS
	// calls' latency histograms (client and in-process servers), the Go runtime.
	addr := regexp.MustCompile(`train: metrics at http://([0-9.:]+)/metrics`).FindStringSubmatch(stderr.String())
	if addr == nil {
		t.Fatalf("no metrics address on stderr:\n%s", stderr.String())
	}
	fams, err := metricsrv.Scrape(t.Context(), addr[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name   string
		labels []string
		min    float64
	}{
		{"monolith_train_steps_total", nil, 1},
		{"monolith_train_examples_total", nil, batch},
		{"monolith_controller_barrier_placed", []string{"action", ""}, 1},
		{"monolith_controller_workers", []string{"state", "blocked"}, 1},
		{"monolith_ps_client_call_seconds", []string{"method", "ApplyGradients", "code", "OK"}, 1},
		{"monolith_ps_lookup_latency_seconds", []string{"shard", "0", "num_shards", "2"}, 1},
		{"monolith_ps_apply_latency_seconds", []string{"shard", "1", "num_shards", "2"}, 1},
		{"go_goroutines", nil, 1},
	} {
		if got, ok := metricsrv.Value(fams, w.name, w.labels...); !ok || got < w.min {
			t.Errorf("/metrics %s%v = %v (present %v), want ≥ %v", w.name, w.labels, got, ok, w.min)
		}
	}
	for _, h := range []string{"monolith_ps_client_call_seconds", "monolith_ps_lookup_latency_seconds"} {
		if fams[h].GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("%s is a %v, want a histogram", h, fams[h].GetType())
		}
	}

	ctl("save")
	shard0 := filepath.Join(modelDir, "shard-0-of-2")
	latest, err := checkpoint.Latest(shard0)
	if err != nil {
		t.Fatalf("no checkpoint after ctl save: %v", err)
	}
	if want := "-step-" + strconv.FormatInt(s1, 10); !strings.HasSuffix(latest, want) {
		t.Errorf("latest checkpoint %s, want one taken at the paused step (%s)", latest, want)
	}

	ctl("resume")
	waitFor("training to go on", func() bool { return step(ctl("status")) > s1 })
	select {
	case err := <-exited:
		finished = true
		if err != nil {
			t.Fatalf("train: %v\n%s", err, stderr.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("train did not finish within 3 minutes after resume")
	}
	var sum struct {
		Steps      int64    `json:"steps"`
		GlobalStep int64    `json:"global_step"`
		EventFile  string   `json:"event_file"`
		Plots      []string `json:"plots"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	want := int64(epochs * 2 * math.Ceil(4000/float64(batch))) // 2 files of 4000 rows per epoch
	if sum.Steps != want || sum.GlobalStep != want {
		t.Errorf("summary: %d steps, global step %d; want %d (nothing lost to the pause)\n%s", sum.Steps, sum.GlobalStep, want, stderr.String())
	}
	// The event file: inspect prints its scalars, the last loss at the final step.
	if filepath.Dir(sum.EventFile) != modelDir {
		t.Errorf("event file %q, want one in %s", sum.EventFile, modelDir)
	}
	out, errOut, err := runCLI(t, "inspect", modelDir)
	if err != nil {
		t.Fatalf("inspect %s: %v\n%s", modelDir, err, errOut)
	}
	if re := regexp.MustCompile(`(?m)^` + strconv.FormatInt(want, 10) + `\s+loss\s+0\.\d+`); !re.MatchString(out) {
		t.Errorf("inspect does not show the loss at the final step %d:\n%s", sum.GlobalStep, out)
	}
	if len(sum.Plots) != 2 || filepath.Base(sum.Plots[0]) != "loss.png" || filepath.Base(sum.Plots[1]) != "auc.png" {
		t.Errorf("plots %v, want loss.png and auc.png", sum.Plots)
	}
	for _, p := range sum.Plots {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(modelDir, controller.AddrFile)); !os.IsNotExist(err) {
		t.Errorf("the address file outlived the job: %v", err)
	}
	if _, _, err := runCLI(t, "ctl", "status", "--model-dir", modelDir); err == nil || !strings.Contains(err.Error(), "no running training job") {
		t.Errorf("ctl status after the job: %v", err)
	}
}
