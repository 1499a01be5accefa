package runners_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/runners/workerpool"
)

func init() {
	register.DoFn1x1[int, bool](&elsewhereFn{})
}

// elsewhereFn tells, for each element, whether it was processed in a process other than
// Driver.
type elsewhereFn struct {
	Driver int
}

func (f *elsewhereFn) ProcessElement(int) bool { return os.Getpid() != f.Driver }

// squares is the pipeline of the tests: 1, 2, 3 squared, asserted equal to want and,
// with elsewhere, asserted processed out of this process. (A failing pipeline has one
// assertion: prism leaks a goroutine of a job that fails with elements pending in
// another branch.)
func squares(elsewhere bool, want ...any) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	sq := beam.ParDo(s, square, beam.Create(s, 1, 2, 3))
	if len(want) > 0 {
		passert.Equals(s, sq, want...)
	}
	if elsewhere {
		passert.Equals(s, beam.ParDo(s, &elsewhereFn{Driver: os.Getpid()}, sq), true, true, true)
	}
	return p
}

// startPool serves a worker pool whose workers are this test binary in worker mode
// (envWorker); it is closed, its workers stopped, at the end of the test.
func startPool(t *testing.T) (string, *syncbuf.Buffer) {
	t.Helper()
	var logs syncbuf.Buffer
	p, err := workerpool.New(workerpool.Options{Command: []string{os.Args[0]}, Env: []string{envWorker + "=1"}, Output: &logs},
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("worker pool: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the worker pool did not stop within 30s")
		}
	})
	return p.Addr(), &logs
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestExternalPrism runs pipelines on the embedded prism runner with the workers of a
// worker pool: they run in other processes (elsewhereFn), and a failing assertion
// there fails the run. The same pipeline with LOOPBACK workers fails: they are in this
// process.
func TestExternalPrism(t *testing.T) {
	runners.Init(false)
	ctx := runCtx(t)
	pool, logs := startPool(t)
	o := runners.Options{EnvironmentType: runners.External, EnvironmentConfig: pool}
	start := time.Now()
	if _, err := runners.Run(ctx, squares(true, 1, 4, 9), o); err != nil {
		t.Fatalf("prism with the worker pool at %s: %v\npool log:\n%s", pool, err, logs.String())
	}
	t.Logf("prism + EXTERNAL: %v", time.Since(start))
	if !strings.Contains(logs.String(), "started worker") {
		t.Errorf("the pool started no worker:\n%s", logs.String())
	}
	if _, err := runners.Run(ctx, squares(false, 1, 4, 10), o); err == nil {
		t.Error("a failing passert did not fail the run on the worker pool")
	}
	if _, err := runners.Run(ctx, squares(true), runners.Options{}); err == nil {
		t.Error("LOOPBACK run: the out-of-process check passed in this process")
	}
}

// TestExternalUniversal submits to a prism job server with the workers of a worker pool.
// The job server's own address is not a worker pool: that fails before submission.
func TestExternalUniversal(t *testing.T) {
	runners.Init(false)
	ctx := runCtx(t)
	endpoint := beamtest.StartJobServer(t).Endpoint
	pool, logs := startPool(t)
	o := runners.Options{Runner: runners.Universal, Endpoint: endpoint, EnvironmentType: runners.External, EnvironmentConfig: pool}
	start := time.Now()
	if _, err := runners.Run(ctx, squares(true, 1, 4, 9), o); err != nil {
		t.Fatalf("universal at %s with the worker pool at %s: %v\npool log:\n%s", endpoint, pool, err, logs.String())
	}
	t.Logf("universal + EXTERNAL: %v", time.Since(start))

	o.EnvironmentConfig = endpoint
	if _, err := runners.Run(ctx, squares(true, 1, 4, 9), o); err == nil || !strings.Contains(err.Error(), "does not serve Beam's worker pool service") {
		t.Errorf("the job server as worker pool: err = %v, want one saying it is not a worker pool", err)
	}
}

// TestUnreachable: a worker pool or job server that nobody serves fails the run within
// the connect timeout, with an error naming its address.
func TestUnreachable(t *testing.T) {
	runners.Init(false)
	ctx := runCtx(t)
	const timeout = 3 * time.Second
	nobody := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	for _, c := range []struct {
		name, what string
		o          runners.Options
	}{
		{"pool", "worker pool", runners.Options{EnvironmentType: runners.External, EnvironmentConfig: nobody, ConnectTimeout: timeout}},
		{"universal", "job server", runners.Options{Runner: runners.Universal, Endpoint: nobody, ConnectTimeout: timeout}},
		{"flink", "job server", runners.Options{Runner: runners.Flink, Endpoint: nobody, EnvironmentType: runners.External, EnvironmentConfig: "localhost:50000", ConnectTimeout: timeout}},
	} {
		start := time.Now()
		_, err := runners.Run(ctx, squares(true, 1, 4, 9), c.o)
		el := time.Since(start)
		t.Logf("%s: failed in %v: %v", c.name, el, err)
		if !errors.Is(err, runners.ErrUnreachable) || !strings.Contains(err.Error(), nobody) || !strings.Contains(err.Error(), c.what) {
			t.Errorf("%s: err = %v, want ErrUnreachable naming the %s at %s", c.name, err, c.what, nobody)
		}
		if el < timeout-100*time.Millisecond || el > timeout+5*time.Second {
			t.Errorf("%s: failed after %v, want about the connect timeout %v", c.name, el, timeout)
		}
	}
}
