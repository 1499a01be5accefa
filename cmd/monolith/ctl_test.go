package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pipelines/train/controller"
)

// stepTrainer is a Trainer with a fixed global step that counts saves.
type stepTrainer struct{ saves int }

func (s *stepTrainer) GlobalStep(context.Context) (int64, error) { return 42, nil }
func (s *stepTrainer) SaveCheckpoint(context.Context) error      { s.saves++; return nil }

// TestCtl: stop, status (paused once a worker waits), resume, save, through the address
// file; usage errors for a missing --model-dir, an unknown command and no running job.
func TestCtl(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	b := controller.NewLocal()
	g, err := controller.JoinGate(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	tr := &stepTrainer{}
	srv, err := controller.Serve("", dir, b, tr, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(time.Second)
	ctl := func(args ...string) map[string]any {
		t.Helper()
		out, stderr, err := runCLI(t, append([]string{"ctl"}, append(args, "--model-dir", dir)...)...)
		if err != nil {
			t.Fatalf("ctl %v: %v\n%s", args, err, stderr)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("ctl %v output %q: %v", args, out, err)
		}
		return m
	}
	ctl("stop")
	waited := make(chan error, 1)
	g.Observe(b.B.Placed())
	go func() { _, err := g.Boundary(context.Background()); waited <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for st := ctl("status"); st["paused"] != true; st = ctl("status") {
		if time.Now().After(deadline) {
			t.Fatalf("status never paused: %v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := ctl("status"); st["global_step"] != float64(42) || len(st["blocked"].([]any)) != 1 {
		t.Errorf("status %v", st)
	}
	if _, _, err := runCLI(t, "ctl", "stop", "--model-dir", dir); err == nil || !strings.Contains(err.Error(), "AlreadyExists") {
		t.Errorf("second stop: %v", err)
	}
	ctl("resume")
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	ctl("save")
	if tr.saves != 1 {
		t.Errorf("%d saves, want 1", tr.saves)
	}
	for _, args := range [][]string{{"ctl", "stop"}, {"ctl", "jump", "--model-dir", dir}, {"ctl", "status", "--model-dir", t.TempDir()}, {"ctl"}} {
		if _, _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v succeeded", args)
		}
	}
}
