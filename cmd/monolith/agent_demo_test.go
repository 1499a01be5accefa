//go:build !race

// The race phase of make test skips this file (its child processes and pipelines gain
// nothing from -race in the test binary, which costs a minute); the non-race phase runs
// its tests (Makefile, NORACE_RUN).

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAgentDemo runs the README's serving-agent demo (scripts/agent-demo.sh) with this test
// binary as monolith: a real ZooKeeper, fake-export, agent-controller decl and pub, a v3
// agent with fake-tfserving, agent-client hb showing every published sub-graph with the
// agent's TF Serving address, unpub removing them, and SIGTERM ending the agent with 0.
func TestAgentDemo(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("the demo needs ZooKeeper (java): run `sudo apt-get install zookeeper`: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/agent-demo.sh", os.Args[0])
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	// On timeout kill the whole process group (ZooKeeper, the agent, TF Serving), and do not
	// wait for pipes a leftover process still holds.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	defer func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent-demo.sh: %v\n%s", err, out)
	}
	text := string(out)
	before, after, ok := strings.Cut(text, "--cmd unpub")
	if !ok {
		t.Fatalf("no unpub step in the demo output:\n%s", text)
	}
	for _, key := range []string{"test_ffm_model:entry", "test_ffm_model:ps_0", "test_ffm_model:ps_1"} {
		if !strings.Contains(before, key+"  -> (1)") {
			t.Errorf("hb after pub lacks %q:\n%s", key, before)
		}
		if strings.Contains(after, key+"  -> ") {
			t.Errorf("hb after unpub still shows %q:\n%s", key, after)
		}
	}
	if !strings.Contains(after, "agent stopped (exit 0)") {
		t.Errorf("the agent did not stop cleanly:\n%s", text)
	}
}

// TestServeDemo runs scripts/serve-demo.sh, the README's serving end to end on a real
// ZooKeeper: the agent starts `monolith serve`, the exported version is AVAILABLE, and the
// predictions through the server equal predict's on the checkpoint (within 1e-6), with the
// AUC evaluate reports.
func TestServeDemo(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("the demo needs ZooKeeper (java): run `sudo apt-get install zookeeper`: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	keep := t.TempDir()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/serve-demo.sh", os.Args[0])
	cmd.Env = append(os.Environ(), envTestMain+"=1", "DEMO_KEEP="+keep)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	defer func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("serve-demo.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "state: AVAILABLE") || !strings.Contains(string(out), "agent stopped (exit 0)") {
		t.Errorf("the demo did not serve the version and stop cleanly:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(keep, "evaluate.json"))
	if err != nil {
		t.Fatal(err)
	}
	ev := decodeSummary(t, string(b))
	checkServed(t, filepath.Join(keep, "served.jsonl"), filepath.Join(keep, "local.jsonl"), ev, "served through the agent")
}
