// Command monolith is the command-line interface of monolith-go: it inspects, converts and
// generates Monolith training data, runs the sharding and layout kernels on it, and validates
// a FeatureConfigs against a data set. Run `monolith help` for the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/monolith-go/monolith/benchmarks/suite"
	"github.com/monolith-go/monolith/runners"
)

func main() {
	// A portable runner with a DOCKER or PROCESS environment starts this binary as a Beam
	// worker (--worker); that never returns.
	runners.MaybeWorker(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// `monolith bench` runs measurements in child processes of this binary.
	if served, err := suite.MaybeChild(ctx); served {
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
		os.Exit(exitCode(err))
	}
}
