//go:build !race

// The race phase of make test skips this file (its tests run child processes of this
// binary, which gain nothing from -race); the non-race phase runs them (Makefile,
// NORACE_RUN).

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/internal/zktest"
	kmetrics "github.com/monolith-go/monolith/kernels/metrics"
	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/ps/discovery/discoverytest"
)

// clusterData writes a planted data set of rows training rows in 4 files and a config
// over it with a model directory; it returns the config's path.
func clusterData(t *testing.T, dir string, rows, epochs int) string {
	t.Helper()
	data := filepath.Join(dir, "data")
	runGenCLI(t, "--planted", "fm", "--seed", "3", "--out", data, "--rows", strconv.Itoa(rows), "--files", "4",
		"--vocab", "50", "--eval-rows", "4000")
	cfg := filepath.Join(dir, "fm.yaml")
	text := fmt.Sprintf("model: fm\ndata: data\nbatch_size: 128\nepochs: %d\nthreads: 1\ncheckpoint: {dir: ckpt}\n"+
		"sparse:\n  segments:\n    - {init: {zeros: {}}, optimizer: {adagrad: {learning_rate: 0.1}}}\n"+
		"    - {init: {random_uniform: {minval: -0.05, maxval: 0.05}}, optimizer: {adagrad: {learning_rate: 0.1}}}\n", epochs)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// decodeSummary parses the one summary line of stdout.
func decodeSummary(t *testing.T, out string) train.Summary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var s train.Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	return s
}

// TestCluster runs `monolith cluster` with 2 workers × 2 PS processes and checks the
// merged summary, the evaluation against the Bayes AUC and the checkpoints.
func TestCluster(t *testing.T) {
	t.Setenv(envTestMain, "1") // the children are this binary in main mode
	dir := t.TempDir()
	cfg := clusterData(t, dir, 16000, 2)
	var so, se syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := run(ctx, []string{"cluster", "--config", cfg, "--workers", "2", "--ps", "2"}, &so, &se); err != nil {
		t.Fatalf("cluster: %v\n%s", err, se.String())
	}
	s := decodeSummary(t, so.String())
	if s.NumWorkers != 2 || s.PSShards != 2 || s.Worker != 0 {
		t.Errorf("summary: %d workers, %d shards, from worker %d; want 2, 2, 0", s.NumWorkers, s.PSShards, s.Worker)
	}
	if s.Examples != 2*16000 || s.GlobalStep != s.Steps {
		t.Errorf("summary: %d examples (want 32000, both workers' two epochs), global step %d, steps %d", s.Examples, s.GlobalStep, s.Steps)
	}
	// One process on the same config and data: the cluster reaches the same AUC.
	var so1, se1 bytes.Buffer
	if err := run(ctx, []string{"train", "--config", cfg, "--shards", "2", "--checkpoint-dir", filepath.Join(dir, "single"), "--progress", "never"}, &so1, &se1); err != nil {
		t.Fatalf("train: %v\n%s", err, se1.String())
	}
	one := decodeSummary(t, so1.String())
	t.Logf("eval AUC: cluster %s, one process %s, Bayes %s", fmtPtr(s.EvalAUC), fmtPtr(one.EvalAUC), fmtPtr(s.BayesAUC))
	if s.EvalAUC == nil || one.EvalAUC == nil || *s.EvalAUC < *one.EvalAUC-0.03 || *s.EvalAUC < 0.65 {
		t.Errorf("eval AUC %s of the cluster against %s of one process\n%s", fmtPtr(s.EvalAUC), fmtPtr(one.EvalAUC), so.String())
	}
	ckpt := filepath.Join(dir, "ckpt")
	for _, f := range []string{"checkpoint", "shard-0-of-2/LATEST", "shard-1-of-2/LATEST", "cluster/worker-1.log", "cluster/ps-0.log"} {
		if _, err := os.Stat(filepath.Join(ckpt, f)); err != nil {
			t.Errorf("model directory: %v", err)
		}
	}
	if !strings.Contains(se.String(), "2 PS shards at 127.0.0.1:") {
		t.Errorf("stderr does not report the shards:\n%s", se.String())
	}

	// evaluate and predict reproduce the chief's evaluation from its checkpoint.
	var eo, ee bytes.Buffer
	if err := run(ctx, []string{"evaluate", "--config", cfg}, &eo, &ee); err != nil {
		t.Fatalf("evaluate: %v\n%s", err, ee.String())
	}
	ev := decodeSummary(t, eo.String())
	if ev.EvalAUC == nil || math.Abs(*ev.EvalAUC-*s.EvalAUC) > 1e-9 || ev.GlobalStep != s.GlobalStep {
		t.Errorf("evaluate: AUC %s at step %d; the cluster's %s at step %d", fmtPtr(ev.EvalAUC), ev.GlobalStep, fmtPtr(s.EvalAUC), s.GlobalStep)
	}
	pred := filepath.Join(dir, "pred.jsonl")
	eo.Reset()
	if err := run(ctx, []string{"predict", "--config", cfg, "--out", pred}, &eo, &ee); err != nil {
		t.Fatalf("predict: %v\n%s", err, ee.String())
	}
	b, err := os.ReadFile(pred)
	if err != nil {
		t.Fatal(err)
	}
	var preds, labels []float32
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var row struct {
			LineID     json.RawMessage `json:"line_id"`
			Prediction float32         `json:"prediction"`
			Label      float32         `json:"label"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil || len(row.LineID) < 3 {
			t.Fatalf("predict line %q: %v", line, err)
		}
		preds, labels = append(preds, row.Prediction), append(labels, row.Label)
	}
	auc, err := kmetrics.AUC(preds, labels)
	if err != nil || math.Abs(auc-*s.EvalAUC) > 1e-9 || !strings.Contains(eo.String(), fmt.Sprintf("%d rows", len(preds))) {
		t.Errorf("predict: %d rows, AUC %v (%v); the cluster's %s\n%s", len(preds), auc, err, fmtPtr(s.EvalAUC), eo.String())
	}
	for _, args := range [][]string{
		{"evaluate"}, {"predict", "--config", cfg}, {"evaluate", "--config", cfg, "extra"},
		{"cluster"}, {"cluster", "--config", cfg, "--workers", "0"}, {"cluster", "--config", cfg, "--discovery", "consul"},
	} {
		if err := run(ctx, args, &eo, &ee); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestClusterInterrupt sends SIGINT to a running `monolith cluster` process: every child
// stops within the 10 s grace, and the shards save on the way out.
func TestClusterInterrupt(t *testing.T) {
	dir := t.TempDir()
	cfg := clusterData(t, dir, 40000, 50)
	logs := &syncbuf.Buffer{}
	cmd := exec.Command(os.Args[0], "cluster", "--config", cfg, "--workers", "2", "--ps", "2")
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		for _, pid := range procsWith(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(logs.String(), "train: epoch 1:") {
		if time.Now().After(deadline) {
			t.Fatalf("the chief finished no epoch in 90 s:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err == nil {
			t.Errorf("an interrupted cluster exited 0")
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the cluster did not exit within 15 s of SIGINT:\n%s", logs.String())
	}
	took := time.Since(start)
	if left := procsWith(dir); len(left) > 0 {
		t.Errorf("children still running after the cluster exited: %v", left)
	}
	if took > 12*time.Second {
		t.Errorf("stopping took %v, want ≤ 10 s grace (+ slack)", took)
	}
	for _, f := range []string{"shard-0-of-2/LATEST", "shard-1-of-2/LATEST"} {
		if _, err := os.Stat(filepath.Join(dir, "ckpt", f)); err != nil {
			t.Errorf("no final save: %v\n%s", err, logs.String())
		}
	}
}

// freeAddrs returns n loopback addresses with ports that were free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ln.Addr().String())
		ln.Close()
	}
	return out
}

// proc is a child process of the test: this binary in main mode.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  syncbuf.Buffer
	errb syncbuf.Buffer
	done chan error
}

func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(append(os.Environ(), envTestMain+"=1"), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, p.errb.String())
		}
	})
	return p
}

// wait waits (bounded) for the process to exit and returns its error.
func (p *proc) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(limit):
		t.Fatalf("%s did not exit within %v:\n%s", p.name, limit, p.errb.String())
		return nil
	}
}

// TestHandStartedProcesses starts two `monolith ps` and two `monolith train` processes by
// hand, as on separate machines, through each discovery backend that runs here, and checks
// that the two workers trained one job: the chief's global step counts both.
func TestHandStartedProcesses(t *testing.T) {
	dir := t.TempDir()
	cfg := clusterData(t, dir, 4000, 1)
	tables := filepath.Join(dir, "tables.pbtxt")
	var so, se bytes.Buffer
	if err := run(context.Background(), []string{"train", "--config", cfg, "--shards", "2", "--write-tables", tables}, &so, &se); err != nil {
		t.Fatalf("write tables: %v\n%s", err, se.String())
	}
	zk := zktest.Start(t)
	consul := discoverytest.NewConsul(t)
	for _, tc := range []struct {
		name string
		// ps and worker return the discovery flags and environment of shard or worker i.
		ps, worker func(i int) ([]string, []string)
	}{
		{"static", nil, nil}, // filled below: the workers need the shards' addresses
		{"zk", func(int) ([]string, []string) {
			return []string{"--discovery", "zk", "--zk", zk.Addr(), "--job", "hand"}, nil
		}, func(int) ([]string, []string) {
			return []string{"--discovery", "zk", "--zk", zk.Addr(), "--job", "hand"}, nil
		}},
		{"consul", func(int) ([]string, []string) {
			return []string{"--discovery", "consul", "--job", "hand.psm"}, consul.Env()
		}, func(int) ([]string, []string) {
			return []string{"--discovery", "consul", "--job", "hand.psm"}, consul.Env()
		}},
		{"tf_config", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ckpt := filepath.Join(dir, "ckpt-"+tc.name)
			psFlags, workerFlags := tc.ps, tc.worker
			var addrFiles []string
			switch tc.name {
			case "static":
				psFlags = func(int) ([]string, []string) { return []string{"--discovery", "static"}, nil }
			case "tf_config":
				ps, workers := freeAddrs(t, 2), freeAddrs(t, 2)
				spec := func(typ string, i int) string {
					b, _ := json.Marshal(map[string]any{"cluster": map[string]any{"ps": ps, "chief": workers[:1], "worker": workers[1:]},
						"task": map[string]any{"type": typ, "index": i}})
					return string(b)
				}
				psFlags = func(i int) ([]string, []string) { return nil, []string{"TF_CONFIG=" + spec("ps", i)} }
				workerFlags = func(i int) ([]string, []string) {
					if i == 0 {
						return []string{"--discovery", "tf_config"}, []string{"TF_CONFIG=" + spec("chief", 0)}
					}
					return []string{"--discovery", "tf_config"}, []string{"TF_CONFIG=" + spec("worker", 0)}
				}
			}
			var shards []*proc
			for i := range 2 {
				f, env := psFlags(i)
				args := []string{"ps", "--tables", tables, "--checkpoint-dir", ckpt}
				if tc.name == "tf_config" {
					args = append(args, "--discovery", "tf_config") // shard, shard count and address from TF_CONFIG
				} else {
					addrFile := filepath.Join(dir, fmt.Sprintf("%s-ps-%d.addr", tc.name, i))
					addrFiles = append(addrFiles, addrFile)
					args = append(args, "--shard", strconv.Itoa(i), "--num-shards", "2", "--listen", "127.0.0.1:0", "--addr-file", addrFile)
				}
				shards = append(shards, startProc(t, fmt.Sprintf("ps-%d", i), env, append(args, f...)...))
			}
			if tc.name == "static" {
				var addrs []string
				for i, f := range addrFiles {
					deadline := time.Now().Add(30 * time.Second)
					for {
						b, err := os.ReadFile(f)
						if err == nil && len(b) > 0 {
							addrs = append(addrs, strings.TrimSpace(string(b)))
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("ps-%d wrote no address:\n%s", i, shards[i].errb.String())
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
				workerFlags = func(int) ([]string, []string) { return []string{"--ps", strings.Join(addrs, ",")}, nil }
			}
			var workers []*proc
			for i := range 2 {
				f, env := workerFlags(i)
				args := []string{"train", "--config", cfg, "--checkpoint-dir", ckpt, "--shards", "2", "--progress", "never"}
				if tc.name != "tf_config" {
					args = append(args, "--index", strconv.Itoa(i), "--num_workers", "2")
				}
				workers = append(workers, startProc(t, fmt.Sprintf("worker-%d", i), env, append(args, f...)...))
			}
			var sums []train.Summary
			for i, w := range workers {
				if err := w.wait(t, 2*time.Minute); err != nil {
					t.Fatalf("worker %d: %v\n%s", i, err, w.errb.String())
				}
				sums = append(sums, decodeSummary(t, w.out.String()))
			}
			chief, other := sums[0], sums[1]
			if chief.NumWorkers != 2 || other.Worker != 1 || chief.PSShards != 2 {
				t.Errorf("chief %+v, other %+v: want 2 workers and 2 shards", chief, other)
			}
			if chief.Examples+other.Examples != 4000 || chief.GlobalStep != chief.Steps+other.Steps {
				t.Errorf("examples %d + %d (want 4000), global step %d (want %d + %d)", chief.Examples, other.Examples, chief.GlobalStep, chief.Steps, other.Steps)
			}
			if chief.EvalAUC == nil || *chief.EvalAUC < 0.6 {
				t.Errorf("chief's eval AUC %v", chief.EvalAUC)
			}
			for i, s := range shards {
				_ = s.cmd.Process.Signal(syscall.SIGTERM)
				if err := s.wait(t, 15*time.Second); err != nil {
					t.Errorf("ps-%d: %v", i, err)
				}
			}
		})
	}
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatFloat(*p, 'f', 4, 64)
}

// TestClusterZooKeeper: with --discovery zk and no --zk, the cluster starts a ZooKeeper of
// its own, the shards register in it and the workers find them there.
func TestClusterZooKeeper(t *testing.T) {
	t.Setenv(envTestMain, "1")
	dir := t.TempDir()
	cfg := clusterData(t, dir, 4000, 1)
	var so, se syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := run(ctx, []string{"cluster", "--config", cfg, "--workers", "2", "--ps", "2", "--discovery", "zk", "--job", "zkjob"}, &so, &se); err != nil {
		t.Fatalf("cluster: %v\n%s", err, se.String())
	}
	s := decodeSummary(t, so.String())
	if s.NumWorkers != 2 || s.Examples != 4000 || s.EvalAUC == nil {
		t.Errorf("summary %s", so.String())
	}
	if !strings.Contains(se.String(), "cluster: ZooKeeper at 127.0.0.1:") {
		t.Errorf("no ZooKeeper of its own:\n%s", se.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "ckpt", "cluster", "ps-0.log"))
	if err != nil || !strings.Contains(string(b), "name=ps.0") || !strings.Contains(string(b), "job=zkjob") {
		t.Errorf("ps-0 did not register in ZooKeeper: %v\n%s", err, b)
	}
	if left := procsWith(filepath.Join(dir, "ckpt", "cluster", "zookeeper")); len(left) > 0 {
		t.Errorf("the cluster's ZooKeeper still runs: %v", left)
	}
}

// TestClusterChildFails: a worker that fails stops the cluster, which names it and shows
// the end of its log, and leaves no child behind.
func TestClusterChildFails(t *testing.T) {
	t.Setenv(envTestMain, "1")
	dir := t.TempDir()
	cfg := clusterData(t, dir, 4000, 1)
	var so, se syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, []string{"cluster", "--config", cfg, "--workers", "2", "--ps", "1", "--", "--no-such-flag"}, &so, &se)
	if err == nil || !strings.Contains(err.Error(), "worker-") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("cluster with failing workers: %v", err)
	}
	if left := procsWith(dir); len(left) > 0 {
		t.Errorf("children left running: %v", left)
	}
}

// TestClusterSurvivesPSKill: a PS shard killed with SIGKILL mid-training in a `monolith
// cluster --discovery zk` run is restarted on another port, restores its last checkpoint
// and registers its new address; the workers wait for it, follow it there and finish, and
// the model still reaches the Bayes AUC within 0.02. Shard 0 also holds the global step
// and the training barrier, which the workers join again.
func TestClusterSurvivesPSKill(t *testing.T) {
	t.Setenv(envTestMain, "1")
	for _, shard := range []int{1, 0} { // 0 also holds the global step and the barriers
		t.Run("shard"+strconv.Itoa(shard), func(t *testing.T) { clusterSurvivesPSKill(t, shard) })
	}
}

func clusterSurvivesPSKill(t *testing.T, shard int) {
	dir := t.TempDir()
	const rows, epochs = 200000, 5
	cfg := clusterData(t, dir, rows, epochs)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("checkpoint: {dir: ckpt}"), []byte("checkpoint: {dir: ckpt, every_steps: 200}"), 1)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var so, se syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"cluster", "--config", cfg, "--workers", "2", "--ps", "2", "--discovery", "zk", "--job", "killjob"}, &so, &se)
	}()
	t.Cleanup(func() {
		for _, pid := range procsWith(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	logDir := filepath.Join(dir, "ckpt", "cluster")
	addrFile := filepath.Join(logDir, fmt.Sprintf("ps-%d.addr", shard))
	// Once the shard has a checkpoint, kill it.
	var victim int
	var oldAddr []byte
	deadline := time.Now().Add(2 * time.Minute)
	for victim == 0 {
		select {
		case err := <-done:
			t.Fatalf("the cluster ended (%v) before shard %d checkpointed:\n%s", err, shard, se.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard %d wrote no checkpoint in 2 min:\n%s", shard, se.String())
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := os.Stat(filepath.Join(dir, "ckpt", fmt.Sprintf("shard-%d-of-2", shard), "LATEST")); err != nil {
			continue
		}
		oldAddr, _ = os.ReadFile(addrFile)
		for _, pid := range procsWith(dir) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			if bytes.Contains(cmdline, []byte(fmt.Sprintf("\x00ps\x00--shard\x00%d\x00", shard))) {
				victim = pid
			}
		}
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed shard %d (pid %d, %s)", shard, victim, bytes.TrimSpace(oldAddr))
	if err := <-done; err != nil {
		t.Fatalf("cluster after the kill: %v\n%s\n%s", err, se.String(), logTails(logDir, 3000))
	}
	s := decodeSummary(t, so.String())
	newAddr, _ := os.ReadFile(addrFile)
	t.Logf("eval AUC %s, Bayes %s; shard %d back at %s", fmtPtr(s.EvalAUC), fmtPtr(s.BayesAUC), shard, bytes.TrimSpace(newAddr))
	if s.EvalAUC == nil || s.BayesAUC == nil || *s.EvalAUC < *s.BayesAUC-0.02 {
		t.Errorf("eval AUC %s, want ≥ Bayes %s − 0.02\n%s", fmtPtr(s.EvalAUC), fmtPtr(s.BayesAUC), so.String())
	}
	if s.Examples != rows*epochs {
		t.Errorf("%d examples trained, want %d: the workers lost data on the way", s.Examples, rows*epochs)
	}
	if !strings.Contains(se.String(), fmt.Sprintf("cluster: ps-%d exited (signal: killed) while training ran: restarting it on a new port", shard)) {
		t.Errorf("the cluster did not say it restarts shard %d:\n%s", shard, se.String())
	}
	if len(bytes.TrimSpace(newAddr)) == 0 || bytes.Equal(newAddr, oldAddr) {
		t.Errorf("shard %d at %q before the kill and %q after: want a new address", shard, oldAddr, newAddr)
	}
	ps1, _ := os.ReadFile(filepath.Join(logDir, fmt.Sprintf("ps-%d.log", shard)))
	if !strings.Contains(string(ps1), "restored") {
		t.Errorf("the restarted shard %d restored no checkpoint; its log:\n%s", shard, ps1)
	}
	var moved bool
	var wlogs []byte
	for _, w := range []string{"worker-0.log", "worker-1.log"} {
		b, _ := os.ReadFile(filepath.Join(logDir, w))
		moved = moved || strings.Contains(string(b), "PS shard moved")
		wlogs = append(wlogs, b...)
	}
	if os.Getenv("SHOWLOGS") != "" {
		t.Logf("%s", wlogs)
	}
	if !moved {
		t.Errorf("no worker logged following shard %d to its new address:\n%s", shard, wlogs)
	}
	if left := procsWith(dir); len(left) > 0 {
		t.Errorf("children still running: %v", left)
	}
}

// logTails is the last n bytes of every child's log in a cluster's log folder, for a
// failure's message: the chief's stderr alone cannot say why another worker hangs.
func logTails(dir string, n int) string {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var out strings.Builder
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			fmt.Fprintf(&out, "== %s: %v\n", filepath.Base(l), err)
			continue
		}
		fmt.Fprintf(&out, "== %s (last %d of %d bytes)\n%s\n", filepath.Base(l), min(n, len(b)), len(b), b[max(0, len(b)-n):])
	}
	return out.String()
}
