//go:build !race

// The race phase of make test skips this file (its child processes and pipelines gain
// nothing from -race in the test binary, which costs a minute); the non-race phase runs
// its tests (Makefile, NORACE_RUN).

package main

import (
	"context"
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

	"github.com/monolith-go/monolith/internal/tlsconf/tlstest"
)

// runDemo runs scripts/<script> with this test binary as monolith and returns its output;
// its failure fails the test. On timeout the whole process group (ZooKeeper, the agent, TF
// Serving) is killed, and pipes a leftover process still holds are not waited for.
func runDemo(t *testing.T, script string, limit time.Duration, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/"+script, os.Args[0])
	cmd.Env = append(append(os.Environ(), envTestMain+"=1"), env...)
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
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return out
}

// TestAgentDemo runs the README's serving-agent demo (scripts/agent-demo.sh) with this test
// binary as monolith: a real ZooKeeper, fake-export, agent-controller decl and pub, a v3
// agent with fake-tfserving, agent-client hb showing every published sub-graph with the
// agent's TF Serving address, unpub removing them, and SIGTERM ending the agent with 0.
func TestAgentDemo(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("the demo needs ZooKeeper (java): run `sudo apt-get install zookeeper`: %v", err)
	}
	text := string(runDemo(t, "agent-demo.sh", 3*time.Minute))
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
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plaintext", false}, {"mutual TLS", true}} {
		t.Run(tc.name, func(t *testing.T) { serveDemo(t, tc.tls) })
	}
}

// serveDemo runs scripts/serve-demo.sh, with the agent, its `monolith serve` and every
// client on mutual TLS when tls is set, and checks what it served.
func serveDemo(t *testing.T, tls bool) {
	keep := t.TempDir()
	env := []string{"DEMO_KEEP=" + keep}
	if tls {
		env = append(env, "DEMO_TLS="+strings.Join(tlstest.New(t).Good.Args(), " "))
	}
	out := runDemo(t, "serve-demo.sh", 4*time.Minute, env...)
	// tfs-client prints protobuf text, whose spacing Go's prototext varies on purpose.
	if !regexp.MustCompile(`state:\s+AVAILABLE`).Match(out) || !strings.Contains(string(out), "agent stopped (exit 0)") {
		t.Errorf("the demo did not serve the version and stop cleanly:\n%s", out)
	}
	if tls && !strings.Contains(string(out), "refused a plaintext client") {
		t.Errorf("under TLS the demo did not check that a plaintext client is refused:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(keep, "evaluate.json"))
	if err != nil {
		t.Fatal(err)
	}
	ev := decodeSummary(t, string(b))
	served := checkServed(t, filepath.Join(keep, "served.jsonl"), filepath.Join(keep, "local.jsonl"), ev, "served through the agent")
	// agent-client predict: the first 8 eval rows through the agent's HeartBeat address,
	// the same predictions as predict --server's first 8 rows.
	b, err = os.ReadFile(filepath.Join(keep, "agent-predict.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, m := range regexp.MustCompile(`float_val:\s+(\S+)`).FindAllSubmatch(b, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 32)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if len(got) != 8 {
		t.Fatalf("agent-client predict: %d predictions, want 8:\n%s", len(got), b)
	}
	for i, v := range got {
		if math.Abs(v-float64(served[i])) > 1e-6 {
			t.Errorf("agent-client predict row %d: %v, predict --server %v", i, v, served[i])
		}
	}
}
