package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/ps/checkpoint"
)

// TestCtlAgainstTrain is the operator's session of the README against a real `monolith
// train` process on prism: ctl stop pauses it (status: paused, the global step stands
// still), ctl save writes a checkpoint at that step, ctl resume lets it go on, and the job
// ends normally having trained every step of every epoch.
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

	cmd := exec.Command(os.Args[0], "train", "--config", cfg, "--progress", "never")
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	var stdout, stderr bytes.Buffer
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
		Steps      int64 `json:"steps"`
		GlobalStep int64 `json:"global_step"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	want := int64(epochs * 2 * math.Ceil(4000/float64(batch))) // 2 files of 4000 rows per epoch
	if sum.Steps != want || sum.GlobalStep != want {
		t.Errorf("summary: %d steps, global step %d; want %d (nothing lost to the pause)", sum.Steps, sum.GlobalStep, want)
	}
	if _, err := os.Stat(filepath.Join(modelDir, controller.AddrFile)); !os.IsNotExist(err) {
		t.Errorf("the address file outlived the job: %v", err)
	}
	if _, _, err := runCLI(t, "ctl", "status", "--model-dir", modelDir); err == nil || !strings.Contains(err.Error(), "no running training job") {
		t.Errorf("ctl status after the job: %v", err)
	}
}
