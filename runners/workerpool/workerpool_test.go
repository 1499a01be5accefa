package workerpool_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/monolith-go/monolith/internal/tlsconf/tlstest"
	"github.com/monolith-go/monolith/runners/workerpool"
)

// envHelper makes the test binary a fake worker (or, for the parent-death test, a pool):
//
//	wait    exit 0 on SIGTERM
//	ignore  ignore SIGTERM, sleep until killed
//	exit    exit 0 at once
//	pool    serve a pool, start one "wait" worker, print its pid, block
//
// A worker writes its arguments to $WORKERPOOL_ARGS_FILE when set.
const envHelper = "WORKERPOOL_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		helper(mode)
		return
	}
	goleak.VerifyTestMain(m)
}

func helper(mode string) {
	if f := os.Getenv("WORKERPOOL_ARGS_FILE"); f != "" {
		_ = os.WriteFile(f, []byte(strings.Join(os.Args[1:], "\n")), 0o644)
	}
	switch mode {
	case "wait":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		<-ctx.Done()
		os.Exit(0)
	case "ignore":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
	case "exit":
		os.Exit(0)
	case "pool":
		p, err := workerpool.New(workerpool.Options{Command: []string{os.Args[0]}, Env: []string{envHelper + "=wait"}}, nil)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if resp, err := p.StartWorker(context.Background(), request("w")); err != nil || resp.GetError() != "" {
			fmt.Println("error:", err, resp.GetError())
			os.Exit(1)
		}
		fmt.Printf("worker %s\n", strings.Trim(fmt.Sprint(children(os.Getpid())), "[]"))
		time.Sleep(time.Hour)
	}
	os.Exit(3)
}

// noRaceExitSleep spares the helpers the race detector's 1s sleep at exit, so that a
// worker that exits on SIGTERM does so within the tests' short grace periods.
const noRaceExitSleep = "GORACE=atexit_sleep_ms=0"

func endpoint(url string) *pipepb.ApiServiceDescriptor { return &pipepb.ApiServiceDescriptor{Url: url} }

func request(id string) *fnpb.StartWorkerRequest {
	return &fnpb.StartWorkerRequest{
		WorkerId:          id,
		ControlEndpoint:   endpoint("127.0.0.1:1001"),
		LoggingEndpoint:   endpoint("127.0.0.1:1002"),
		ArtifactEndpoint:  endpoint("127.0.0.1:1003"),
		ProvisionEndpoint: endpoint("127.0.0.1:1004"),
	}
}

// startPool serves a pool of helper workers in mode and returns a client of it; the pool
// is closed at the end of the test.
func startPool(t *testing.T, mode string, o workerpool.Options) (*workerpool.Pool, fnpb.BeamFnExternalWorkerPoolClient) {
	t.Helper()
	o.Command = []string{os.Args[0]}
	o.Env = append(o.Env, envHelper+"="+mode, noRaceExitSleep)
	p, err := workerpool.New(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx) }()
	conn, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return within 30s of the cancellation")
		}
	})
	return p, fnpb.NewBeamFnExternalWorkerPoolClient(conn)
}

func rpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return runtime.GOOS != "linux"
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// childPids returns the pids of the direct children of this process running the test binary.
func childPids(t *testing.T) []int {
	t.Helper()
	var pids []int
	for _, pid := range children(os.Getpid()) {
		if alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// children lists the processes whose parent is ppid, from /proc (Linux; none elsewhere).
func children(ppid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // the process ended
		}
		// pid (comm) state ppid …: the fields after the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) {
			continue
		}
		if pid, err := strconv.Atoi(strings.Fields(s)[0]); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitFor(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		o    workerpool.Options
	}{
		{"no command", workerpool.Options{Listen: "127.0.0.1:0", StopGrace: time.Second, KillWait: time.Second}},
		{"bad listen", workerpool.Options{Listen: "nope", Command: []string{"x"}, StopGrace: time.Second, KillWait: time.Second}},
		{"no grace", workerpool.Options{Listen: "127.0.0.1:0", Command: []string{"x"}, StopGrace: -1, KillWait: time.Second}},
	} {
		if err := c.o.Validate(); !errors.Is(err, workerpool.ErrOptions) {
			t.Errorf("%s: Validate() = %v, want ErrOptions", c.name, err)
		}
	}
	o := workerpool.DefaultOptions()
	o.Command = []string{"x"}
	if err := o.Validate(); err != nil {
		t.Errorf("defaults with a command: %v", err)
	}
	if o.Listen != "127.0.0.1:0" {
		t.Errorf("default listen %q, want the loopback interface", o.Listen)
	}
}

// TestStartStop starts two workers, checks their arguments and the refusals, and stops
// them one by one.
func TestStartStop(t *testing.T) {
	args := filepath.Join(t.TempDir(), "args")
	p, c := startPool(t, "wait", workerpool.Options{Env: []string{"WORKERPOOL_ARGS_FILE=" + args}})
	ctx := rpcCtx(t)
	if resp, err := c.StartWorker(ctx, request("a")); err != nil || resp.GetError() != "" {
		t.Fatalf("StartWorker(a) = %v, %v", resp, err)
	}
	waitFor(t, "the worker's arguments", 10*time.Second, func() bool { _, err := os.Stat(args); return err == nil })
	b, _ := os.ReadFile(args)
	want := []string{"--id=a", "--control_endpoint=127.0.0.1:1001", "--logging_endpoint=127.0.0.1:1002",
		"--artifact_endpoint=127.0.0.1:1003", "--provision_endpoint=127.0.0.1:1004"}
	if got := strings.Split(string(b), "\n"); !slices.Equal(got, want) {
		t.Errorf("worker arguments %q, want %q", got, want)
	}
	if resp, err := c.StartWorker(ctx, request("b")); err != nil || resp.GetError() != "" {
		t.Fatalf("StartWorker(b) = %v, %v", resp, err)
	}
	if got := len(childPids(t)); got != 2 {
		t.Errorf("%d worker processes, want 2", got)
	}

	noControl := request("c")
	noControl.ControlEndpoint = nil
	secured := request("d")
	secured.LoggingEndpoint.Authentication = &pipepb.AuthenticationSpec{Urn: "beam:authentication:oauth2_client_credentials_grant:v1"}
	for name, req := range map[string]*fnpb.StartWorkerRequest{"duplicate": request("a"), "no control": noControl, "secured": secured, "no id": request("")} {
		if resp, err := c.StartWorker(ctx, req); err != nil || resp.GetError() == "" {
			t.Errorf("StartWorker(%s) = %v, %v; want a refusal in the response", name, resp, err)
		}
	}

	start := time.Now()
	if resp, err := c.StopWorker(ctx, &fnpb.StopWorkerRequest{WorkerId: "a"}); err != nil || resp.GetError() != "" {
		t.Fatalf("StopWorker(a) = %v, %v", resp, err)
	}
	t.Logf("StopWorker(a) took %v", time.Since(start))
	if ids := p.Workers(); !slices.Equal(ids, []string{"b"}) {
		t.Errorf("workers after stopping a: %v, want [b]", ids)
	}
	if resp, err := c.StopWorker(ctx, &fnpb.StopWorkerRequest{WorkerId: "a"}); err != nil || resp.GetError() == "" {
		t.Errorf("second StopWorker(a) = %v, %v; want an error in the response", resp, err)
	}
	if resp, err := c.StopWorker(ctx, &fnpb.StopWorkerRequest{WorkerId: "b"}); err != nil || resp.GetError() != "" {
		t.Fatalf("StopWorker(b) = %v, %v", resp, err)
	}
	if pids := childPids(t); len(pids) != 0 {
		t.Errorf("worker processes %v left after StopWorker", pids)
	}
}

// TestStopKillsStubbornWorker: a worker that ignores SIGTERM is killed after the grace.
func TestStopKillsStubbornWorker(t *testing.T) {
	const grace = 300 * time.Millisecond
	_, c := startPool(t, "ignore", workerpool.Options{StopGrace: grace, KillWait: 5 * time.Second})
	ctx := rpcCtx(t)
	if resp, err := c.StartWorker(ctx, request("s")); err != nil || resp.GetError() != "" {
		t.Fatalf("StartWorker = %v, %v", resp, err)
	}
	time.Sleep(200 * time.Millisecond) // let it install its SIGTERM handler
	start := time.Now()
	if resp, err := c.StopWorker(ctx, &fnpb.StopWorkerRequest{WorkerId: "s"}); err != nil || resp.GetError() != "" {
		t.Fatalf("StopWorker = %v, %v", resp, err)
	}
	el := time.Since(start)
	t.Logf("stopped a worker that ignores SIGTERM in %v (grace %v)", el, grace)
	if el < grace || el > grace+5*time.Second {
		t.Errorf("StopWorker took %v, want between the grace %v and grace + 5s", el, grace)
	}
	if pids := childPids(t); len(pids) != 0 {
		t.Errorf("worker processes %v left after StopWorker", pids)
	}
}

// TestWorkerExits: a worker that ends by itself is forgotten.
func TestWorkerExits(t *testing.T) {
	p, c := startPool(t, "exit", workerpool.Options{})
	ctx := rpcCtx(t)
	if resp, err := c.StartWorker(ctx, request("x")); err != nil || resp.GetError() != "" {
		t.Fatalf("StartWorker = %v, %v", resp, err)
	}
	waitFor(t, "the worker to be forgotten", 10*time.Second, func() bool { return len(p.Workers()) == 0 })
	// Its id is free again.
	if resp, err := c.StartWorker(ctx, request("x")); err != nil || resp.GetError() != "" {
		t.Fatalf("StartWorker again = %v, %v", resp, err)
	}
}

// TestCloseStopsWorkers: ending Serve's context stops every worker, even one that
// ignores SIGTERM, within the grace and the kill wait, and refuses new ones.
func TestCloseStopsWorkers(t *testing.T) {
	for _, mode := range []string{"wait", "ignore"} {
		t.Run(mode, func(t *testing.T) {
			o := workerpool.Options{Command: []string{os.Args[0]}, Env: []string{envHelper + "=" + mode, noRaceExitSleep}, StopGrace: 300 * time.Millisecond, KillWait: 5 * time.Second}
			p, err := workerpool.New(o, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- p.Serve(ctx) }()
			for _, id := range []string{"1", "2", "3"} {
				if resp, err := p.StartWorker(ctx, request(id)); err != nil || resp.GetError() != "" {
					t.Fatalf("StartWorker(%s) = %v, %v", id, resp, err)
				}
			}
			time.Sleep(200 * time.Millisecond)
			pids := childPids(t)
			if len(pids) != 3 {
				t.Fatalf("%d worker processes, want 3", len(pids))
			}
			start := time.Now()
			cancel()
			select {
			case err := <-served:
				if err != nil {
					t.Fatalf("Serve: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Serve did not return within 30s")
			}
			el := time.Since(start)
			t.Logf("closed a pool of 3 %q workers in %v", mode, el)
			if mode == "wait" && el >= o.StopGrace {
				t.Errorf("closing workers that exit on SIGTERM took %v, not less than the grace %v", el, o.StopGrace)
			}
			for _, pid := range pids {
				if alive(pid) {
					t.Errorf("worker %d alive after Close", pid)
				}
			}
			if resp, err := p.StartWorker(context.Background(), request("4")); err != nil || resp.GetError() == "" {
				t.Errorf("StartWorker after Close = %v, %v; want a refusal", resp, err)
			}
			if err := p.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// TestWorkerDiesWithPool: a pool killed with SIGKILL (no chance to stop its workers)
// takes its workers with it (Linux: Pdeathsig).
func TestWorkerDiesWithPool(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waits for Linux: Pdeathsig and /proc are Linux only")
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envHelper+"=pool")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Scan()
		lines <- sc.Text()
		_, _ = io.Copy(io.Discard, out)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("the pool did not report its worker within 30s")
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "worker "))
	if err != nil || !alive(pid) {
		t.Fatalf("pool said %q (%v)", line, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killed = true
	waitFor(t, fmt.Sprintf("worker %d to die with its pool", pid), 10*time.Second, func() bool { return !alive(pid) })
}

// TestPoolTLS: the worker pool serves mutual TLS when asked.
func TestPoolTLS(t *testing.T) {
	files := tlstest.New(t)
	st, err := files.Good.Server()
	if err != nil {
		t.Fatal(err)
	}
	p, err := workerpool.New(workerpool.Options{Command: []string{os.Args[0]}, TLS: st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	tlstest.Check(t, files, p.Addr(), func(ctx context.Context, cc *grpc.ClientConn) error {
		// Stopping a worker that does not exist is answered with an error message.
		_, err := fnpb.NewBeamFnExternalWorkerPoolClient(cc).StopWorker(ctx, &fnpb.StopWorkerRequest{WorkerId: "none"})
		return err
	})
}
