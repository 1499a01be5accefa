package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/runners/workerpool"
)

// workerMode is the first argument of the pool's own workers: `monolith worker-pool
// --worker` followed by Beam's container-contract flags runs one SDK worker
// (runners.RunWorker) instead of a pool.
const workerMode = "--worker"

// runWorkerPool is `monolith worker-pool`: Beam's BeamFnExternalWorkerPool service for
// pipelines submitted with --environment_type=EXTERNAL --environment_config=ADDR. Each
// StartWorker starts this binary again as a worker process; StopWorker, and SIGTERM or
// SIGINT to the pool, stop them (package runners/workerpool).
func runWorkerPool(ctx context.Context, args []string, _, stderr io.Writer) error {
	if len(args) > 0 && args[0] == workerMode {
		c, err := runners.ParseWorkerArgs(args[1:])
		if err != nil {
			return fmt.Errorf("%w: worker-pool --worker: %v", errUsage, err)
		}
		return runners.RunWorker(ctx, c)
	}
	fs := newFlagSet("worker-pool", stderr)
	d := workerpool.DefaultOptions()
	listen := fs.String("listen", d.Listen, "address to serve on (HOST:PORT; port 0 picks a free one, printed on stderr)")
	grace := fs.Duration("stop-grace", d.StopGrace, "time a worker has to exit after SIGTERM before SIGKILL")
	dir := fs.String("dir", "", "working directory of the workers (default: the pool's)")
	verbose := fs.Bool("v", false, "log every worker start and stop")
	tlsc := tlsconf.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith worker-pool [--listen HOST:PORT] [flags]\n\n"+
			"Serves Beam's worker pool service (BeamFnExternalWorkerPool) until SIGTERM or SIGINT. A\n"+
			"runner given --environment_type=EXTERNAL --environment_config=HOST:PORT asks it for\n"+
			"workers: each is a process of this same binary, which must be the build that submitted\n"+
			"the job (the worker checks the staged binary's SHA-256). The pool binds 127.0.0.1 unless\n"+
			"told otherwise; it has no authentication.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: worker-pool: unexpected arguments %q", errUsage, fs.Args())
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("worker-pool: %w", err)
	}
	o := workerpool.Options{
		Listen:    *listen,
		Command:   []string{exe, "worker-pool", workerMode},
		Dir:       *dir,
		StopGrace: *grace,
		KillWait:  d.KillWait,
		Output:    stderr,
	}
	if o.TLS, err = tlsServer(tlsc); err != nil {
		return err
	}
	p, err := workerpool.New(o, loggerAt(stderr, *verbose, slog.LevelWarn))
	if errors.Is(err, workerpool.ErrOptions) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "worker pool listening on %s\n", p.Addr())
	return p.Serve(ctx)
}
