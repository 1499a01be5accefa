package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/syncbuf"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/tfs"
)

var fakeListeningRE = regexp.MustCompile(`fake-tfserving listening on ([0-9.:]+)`)

// TestFakeTFServingCommand runs `monolith fake-tfserving` with the flags the v3 agent
// passes (§1.8), watches a model load over gRPC and stops it by cancelling the context.
func TestFakeTFServingCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "entry", "3"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "model.cfg")
	text := fmt.Sprintf("model_config_list { config { name: \"m:entry\" base_path: %q model_platform: \"tensorflow\" } }\n", filepath.Join(dir, "entry"))
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--model_config_file=" + cfg, "--port=0", "--rest_api_port=0",
		"--model_config_file_poll_wait_seconds=60", "--archon_port=0", "--archon_rpc_psm=", "--archon_rpc_cluster=",
		"--metrics_namespace_prefix=", "--archon_entry_to_ps_rpc_timeout=1000", "--conf_file=conf/service.conf",
		"--log_conf=conf/log4j.properties", "--enable_batching=true", "--platform_config_file=conf/platform_config_file.cfg",
		"--fake_step=5ms"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan error, 1)
	go func() { done <- runFakeTFServing(ctx, args, nil, stderr) }()

	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := fakeListeningRE.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("fake-tfserving returned early: %v\n%s", err, stderr)
		default:
		}
	}
	if addr == "" {
		t.Fatalf("no listening line:\n%s", stderr)
	}
	mon, err := tfs.DialMonitor(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	st, err := mon.WaitState(wctx, "m:entry", pb.ModelVersionStatus_AVAILABLE, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetVersion() != 3 {
		t.Fatalf("status %v, want version 3", st)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fake-tfserving did not stop")
	}
}

func TestFakeTFServingFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name  string
		args  []string
		usage bool
		fail  bool
	}{
		{name: "no models", args: nil},
		{name: "single model", args: []string{"--model_name=m", "--model_base_path=" + dir}},
		{name: "ignored TF Serving flags", args: []string{"--tensorflow_intra_op_parallelism=4", "--allow_growth=false", "--version=1.2", "--enable_model_warmup=true"}},
		{name: "unknown flag", args: []string{"--no_such_flag=1"}, usage: true},
		{name: "argument", args: []string{"extra"}, usage: true},
		{name: "both config forms", args: []string{"--model_config_file=x", "--model_base_path=y"}, usage: true},
		{name: "missing config file", args: []string{"--model_config_file=" + filepath.Join(dir, "missing")}, fail: true},
		{name: "bad step", args: []string{"--fake_step=-1s"}, usage: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // serve nothing: returns once the server is built
			err := runFakeTFServing(ctx, append([]string{"--port=0"}, tt.args...), nil, &syncbuf.Buffer{})
			switch {
			case tt.usage:
				if !errors.Is(err, errUsage) {
					t.Fatalf("err %v, want a usage error", err)
				}
			case tt.fail:
				if err == nil || errors.Is(err, errUsage) {
					t.Fatalf("err %v, want a failure", err)
				}
			case err != nil:
				t.Fatal(err)
			}
		})
	}
}

// TestServeHelp: `monolith serve --help` lists the TF Serving flags it takes and those it
// accepts and ignores, as the agent passes them.
func TestServeHelp(t *testing.T) {
	var so, se bytes.Buffer
	err := run(context.Background(), []string{"serve", "--help"}, &so, &se)
	if exitCode(err) != 2 {
		t.Fatalf("serve --help: %v", err)
	}
	for _, f := range []string{"-port", "-model_config_file", "-model_config_file_poll_wait_seconds", "-model_base_path",
		"-file_system_poll_wait_seconds", "-platform_config_file", "-rest_api_port", "-max_rows", "-tls-ca"} {
		if !strings.Contains(se.String(), f+" ") && !strings.Contains(se.String(), f+"\n") {
			t.Errorf("serve --help does not list %s:\n%s", f, se.String())
		}
	}
}
