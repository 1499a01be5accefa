package runners_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/runners/beamtest"
)

// envWorker makes the test binary an SDK worker (runners.RunWorker) for the worker pools
// of the tests, which start it with the container-contract flags.
const envWorker = "RUNNERS_TEST_WORKER"

// TestMain fails the tests if a goroutine outlives them, but for the embedded prism job
// server, which runs for the life of the process by design of the Beam SDK.
func TestMain(m *testing.M) {
	if os.Getenv(envWorker) == "1" {
		os.Exit(worker())
	}
	goleak.VerifyTestMain(m, beamtest.IgnorePrism())
}

func worker() int {
	c, err := runners.ParseWorkerArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := runners.RunWorker(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
