package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/runners/beamtest"
)

// envTestMain makes the test binary behave as monolith itself, so that tests can run
// commands in child processes (the agent demo, TF Serving as `fake-tfserving`) without
// building the binary.
const envTestMain = "MONOLITH_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envTestMain) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	// Commands start servers and pipelines (prism, whose job server lives for the process).
	goleak.VerifyTestMain(m, beamtest.IgnorePrism())
}
