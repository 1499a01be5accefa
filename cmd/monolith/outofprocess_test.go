//go:build !race

// The race phase of make test skips this file (its child processes and pipelines gain
// nothing from -race in the test binary, which costs a minute); the non-race phase runs
// its tests (Makefile, NORACE_RUN).

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/pipelines/validate"
	"github.com/monolith-go/monolith/runners"
)

// poolProcess is `monolith worker-pool` running as a child process of the test: this
// test binary in main mode (envTestMain), whose workers are the same binary again.
type poolProcess struct {
	addr string
	logs *syncbuf.Buffer
	cmd  *exec.Cmd
	done chan struct{} // closed once the process is reaped; err is set then
	err  error
}

// poolWait bounds every wait on the pool process: its start, and its exit after a signal.
const poolWait = 30 * time.Second

// startPoolProcess starts `worker-pool --listen 127.0.0.1:0 -v` in a working directory
// of its own (the workers must not depend on the driver's) and waits for the address it
// prints. At cleanup it sends SIGTERM, and fails the test unless the pool exits cleanly
// within poolWait (it is killed then).
func startPoolProcess(t *testing.T) *poolProcess {
	t.Helper()
	p := &poolProcess{logs: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "worker-pool", "--listen", "127.0.0.1:0", "--stop-grace", "3s", "-v")
	p.cmd.Env = append(os.Environ(), envTestMain+"=1")
	p.cmd.Dir = t.TempDir()
	// Not an *os.File: exec copies the output through a pipe, which the workers inherit
	// too; WaitDelay bounds the wait for them to close it once the pool has exited.
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return // it exited (or was killed) during the test, which checked it
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.err != nil {
				t.Errorf("worker pool after SIGTERM: %v\n%s", p.err, p.logs.String())
			}
		case <-time.After(poolWait):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("the worker pool did not exit within %v of SIGTERM; killed\n%s", poolWait, p.logs.String())
		}
	})
	const prefix = "worker pool listening on "
	deadline := time.Now().Add(poolWait)
	for {
		if _, rest, ok := strings.Cut(p.logs.String(), prefix); ok {
			if line, _, ok := strings.Cut(rest, "\n"); ok {
				p.addr = strings.TrimSpace(line)
				return p
			}
		}
		select {
		case <-p.done:
			t.Fatalf("the worker pool exited before listening: %v\n%s", p.err, p.logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker pool printed no address within %v:\n%s", poolWait, p.logs.String())
		}
	}
}

// workersStarted counts the workers the pool logged starting.
func (p *poolProcess) workersStarted() int {
	return strings.Count(p.logs.String(), "worker pool: started worker")
}

// kill ends the pool with SIGKILL (its workers die with it: Pdeathsig) and waits for it.
func (p *poolProcess) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(poolWait):
		t.Fatalf("the worker pool did not exit within %v of SIGKILL", poolWait)
	}
}

// runBounded runs a monolith command in this process (the driver) within limit.
func runBounded(t *testing.T, limit time.Duration, args ...string) (stdout, stderr string, el time.Duration, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var so, se bytes.Buffer
	start := time.Now()
	err = run(ctx, args, &so, &se)
	return so.String(), se.String(), time.Since(start), err
}

// TestOutOfProcess runs `monolith validate` and `monolith train` on the embedded prism
// runner twice on the same data: with its SDK workers in this process (LOOPBACK, the
// default), and with EXTERNAL workers that a `monolith worker-pool` child process starts
// as processes of their own. Their results reach this process (the driver) through Beam
// (train's counters and eval metrics) or through the --temp_location the user names
// (validate's merged state), never through the driver's temp dir; the figures must be
// those of the embedded run. Then the failures: a pool address nobody serves, and the
// pool killed, fail the next run within the connect timeout, naming the address.
func TestOutOfProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a run without -short: starts a worker pool process and runs pipelines on it")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// Two training files, which validate splits over bundles, and one eval file.
	runGenCLI(t, "--planted", "fm", "--seed", "11", "--out", data, "--rows", "6000", "--files", "2",
		"--vocab", "50", "--eval-rows", "2000", "--eval-files", "1")
	cfg := filepath.Join(dir, "fm.yaml")
	if err := os.WriteFile(cfg, []byte(trainConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := startPoolProcess(t)
	t.Logf("worker pool at %s (pid %d)", pool.addr, pool.cmd.Process.Pid)
	external := []string{"--environment_type=EXTERNAL", "--environment_config=" + pool.addr}

	// The driver's temp dir: an empty one of its own (the pool, already started, keeps
	// the test's). EXTERNAL runs must leave nothing there. (Beam's universal runner leaves
	// an empty beamloopbackworker-* file there on every LOOPBACK run: runnerlib.Execute.)
	driverTmp := filepath.Join(dir, "driver-tmp")
	if err := os.Mkdir(driverTmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", driverTmp)

	// runMode runs a command embedded (extra nil) or with the pool's workers, and checks
	// that the pool started workers exactly for the latter, and that an EXTERNAL run
	// left nothing in the driver's temp dir.
	runMode := func(t *testing.T, what string, extra []string, args ...string) string {
		t.Helper()
		tmpBefore := dirNames(t, driverTmp)
		started := pool.workersStarted()
		so, se, el, err := runBounded(t, 45*time.Second, append(args, extra...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s\npool:\n%s", what, err, so, se, pool.logs.String())
		}
		started = pool.workersStarted() - started
		t.Logf("%s: %v, %d workers started by the pool", what, el.Round(time.Millisecond), started)
		if ext := extra != nil; ext != (started > 0) {
			t.Errorf("%s: the pool started %d workers", what, started)
		}
		if tmp := dirNames(t, driverTmp); extra != nil && !reflect.DeepEqual(tmp, tmpBefore) {
			t.Errorf("%s: the driver's temp dir went from %q to %q", what, tmpBefore, tmp)
		}
		return so
	}

	t.Run("validate", func(t *testing.T) {
		input := filepath.Join(data, "train", "*")
		configs := filepath.Join(data, "feature_configs.pbtxt")
		temp := filepath.Join(dir, "validate-temp")
		var reps [2]*validate.Report
		var texts [2][]byte
		for i, extra := range [][]string{nil, append([]string{"--temp_location=" + temp}, external...)} {
			what := "validate " + strings.Join(extra, " ")
			out := filepath.Join(dir, fmt.Sprintf("validate-%d", i))
			runMode(t, what, extra, "validate", "--input", input, "--feature-configs", configs, "--ps-num", "2", "--out", out)
			jp, tp, _ := validate.Files(out)
			b, err := os.ReadFile(jp)
			if err != nil {
				t.Fatal(err)
			}
			reps[i] = &validate.Report{}
			if err := json.Unmarshal(b, reps[i]); err != nil {
				t.Fatalf("%s: %v", jp, err)
			}
			if texts[i], err = os.ReadFile(tp); err != nil {
				t.Fatal(err)
			}
			// The merged state is gone: only the three reports are left.
			if names := dirNames(t, out); len(names) != 3 {
				t.Errorf("%s: %s holds %q, want the 3 reports", what, out, names)
			}
		}
		if names := dirNames(t, temp); len(names) != 0 {
			t.Errorf("--temp_location holds %q after the run, want nothing", names)
		}
		emb, ext := reps[0], reps[1]
		if emb.Status != validate.Pass || emb.Rows != 6000 || emb.Files != 2 || len(emb.Features) != 8 {
			t.Fatalf("embedded report: status %s, %d rows, %d files, %d features\n%s", emb.Status, emb.Rows, emb.Files, len(emb.Features), texts[0])
		}
		// Everything the report holds: the rows and batches, every check's findings, every
		// feature's counts and histograms, every layout's runs.
		if !reflect.DeepEqual(ext, emb) || !bytes.Equal(texts[1], texts[0]) {
			t.Errorf("the EXTERNAL report differs from the embedded one:\n%s\nembedded:\n%s", texts[1], texts[0])
		}
		t.Logf("validate: %d rows, %d batches, %d features, %d layouts, %d checks: same report", emb.Rows, emb.Batches, len(emb.Features), len(emb.Layouts), len(emb.Checks))
	})

	t.Run("train", func(t *testing.T) {
		var sums [2]train.Summary
		for i, extra := range [][]string{nil, external} {
			what := "train " + strings.Join(extra, " ")
			so := runMode(t, what, extra, "train", "--config", cfg, "--progress", "never", "--health-every", "0")
			if err := json.Unmarshal([]byte(so), &sums[i]); err != nil {
				t.Fatalf("%s: summary %q: %v", what, so, err)
			}
			t.Logf("%s: %s", what, strings.TrimSpace(so))
		}
		emb, ext := sums[0], sums[1]
		for _, s := range sums {
			if s.EvalAUC == nil || s.EvalLogLoss == nil || s.EvalConstLogLoss == nil || s.BayesAUC == nil || s.BayesLogLoss == nil {
				t.Fatalf("summary without eval figures: %+v", s)
			}
			// Both runs trained: better than the constant predictor, by a margin well
			// above the tolerance below.
			if *s.EvalAUC < 0.65 || *s.EvalLogLoss > *s.EvalConstLogLoss-0.02 {
				t.Errorf("eval AUC %.4f, log loss %.4f (constant %.4f): not trained", *s.EvalAUC, *s.EvalLogLoss, *s.EvalConstLogLoss)
			}
		}
		// Exact: the counts come from Apply's Beam counters and the eval's metrics, the
		// constant log loss and the Bayes figures from the data alone.
		type exact struct {
			Model                                     string
			PSShards, BatchSize, Epochs               int
			Examples, Steps, GlobalStep, EvalExamples int64
			ConstLogLoss, BayesAUC, BayesLogLoss      float64
		}
		ex := func(s train.Summary) exact {
			return exact{s.Model, s.PSShards, s.BatchSize, s.Epochs, s.Examples, s.Steps, s.GlobalStep, s.EvalExamples,
				*s.EvalConstLogLoss, *s.BayesAUC, *s.BayesLogLoss}
		}
		if ex(emb) != ex(ext) || emb.Examples != 6000 || emb.EvalExamples != 2000 || emb.Steps != 48 { // 2 files of 3000 rows: 24 batches each
			t.Errorf("exact figures differ or are wrong:\nembedded %+v\nexternal %+v", ex(emb), ex(ext))
		}
		// The streaming train AUC is kept by the workers of the driver's process only.
		if emb.TrainAUC == nil || ext.TrainAUC != nil {
			t.Errorf("train_auc: embedded %v, external %v: want it from the embedded run only", emb.TrainAUC, ext.TrainAUC)
		}
		// Training is asynchronous: Apply runs 2×threads PS updates at once, and a batch's
		// lookup does not wait for the previous batch's apply, so the figures differ from
		// run to run in either mode, even with threads: 1 and one file. Over 33 runs of this
		// configuration (with and without -race, embedded and EXTERNAL alike) they spread
		// over 0.007 (eval AUC), 0.003 (eval log loss) and 0.0054 (train log loss); the
		// tolerances are about three times that, and still well below what training gains
		// (eval AUC 0.5 → 0.69, log loss 0.550 → 0.513).
		for _, f := range []struct {
			name     string
			emb, ext float64
			tol      float64
		}{
			{"train_logloss", emb.TrainLogLoss, ext.TrainLogLoss, 0.015},
			{"eval_auc", *emb.EvalAUC, *ext.EvalAUC, 0.02},
			{"eval_logloss", *emb.EvalLogLoss, *ext.EvalLogLoss, 0.008},
		} {
			t.Logf("%s: embedded %.5f, external %.5f", f.name, f.emb, f.ext)
			if math.Abs(f.emb-f.ext) > f.tol {
				t.Errorf("%s: embedded %.5f, external %.5f: more than %v apart", f.name, f.emb, f.ext, f.tol)
			}
		}
	})

	// A pool nobody serves, and the pool killed (SIGKILL: its workers die with it), fail
	// validate and train within the connect timeout. The runs wait concurrently.
	t.Run("faults", func(t *testing.T) {
		pool.kill(t)
		nobody := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		for _, c := range []struct{ name, addr string }{{"unreachable", nobody}, {"killed", pool.addr}} {
			for _, cmd := range []string{"validate", "train"} {
				t.Run(c.name+"-"+cmd, func(t *testing.T) {
					t.Parallel()
					checkUnreachable(t, cmd, c.addr, cfg, dir, data)
				})
			}
		}
	})
}

// trainConfig trains the planted FM model of ../data for one epoch, one goroutine per
// step (the least asynchronous setting), on two PS shards with a fixed initializer seed.
const trainConfig = "model: fm\ndata: data\nbatch_size: 128\nepochs: 1\nthreads: 1\nps: {shards: 2, seed: 7}\n"

// checkUnreachable runs cmd (validate or train) with EXTERNAL workers at addr, where
// nobody serves a pool, and checks that it fails within the connect timeout and a margin,
// with runners.ErrUnreachable naming addr.
func checkUnreachable(t *testing.T, cmd, addr, cfg, dir, data string) {
	const timeout = 2 * time.Second
	args := []string{"train", "--config", cfg, "--progress", "never", "--health-every", "0"}
	if cmd == "validate" {
		args = []string{"validate", "--input", filepath.Join(data, "train", "*"), "--feature-configs",
			filepath.Join(data, "feature_configs.pbtxt"), "--out", filepath.Join(dir, "unreachable-"+addr)}
	}
	args = append(args, "--environment_type=EXTERNAL", "--environment_config="+addr, "--connect_timeout="+timeout.String())
	_, _, el, err := runBounded(t, 30*time.Second, args...)
	t.Logf("failed after %v: %v", el.Round(time.Millisecond), err)
	if !errors.Is(err, runners.ErrUnreachable) || !strings.Contains(err.Error(), "worker pool at "+addr) {
		t.Errorf("err = %v, want runners.ErrUnreachable naming the worker pool at %s", err, addr)
	}
	if el < timeout-100*time.Millisecond || el > 15*time.Second {
		t.Errorf("failed after %v, want about the connect timeout %v", el, timeout)
	}
}

// dirNames lists dir ("" entries when it does not exist).
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
