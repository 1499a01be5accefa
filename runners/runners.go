// Package runners picks the engine a monolith-go pipeline runs on: the embedded prism
// runner in this process (the default), or any portable Beam runner through its job
// server (--runner=universal --endpoint=HOST:PORT). See README.md for Flink, Spark and
// Dataflow.
//
// # Engines
//
//	prism      Beam's Go runner, started inside this process on first use and reused by
//	           later pipelines; workers run in-process (LOOPBACK).
//	universal  submits the pipeline to a Beam job server (a prism job server, Flink's or
//	           Spark's job server, …). With --environment_type=LOOPBACK the workers run in
//	           this process, so local files and the process's memory are used; DOCKER or
//	           PROCESS environments start this same binary in worker mode (see MaybeWorker).
//
// # Global state
//
// The Beam SDK keeps its job options (endpoint, environment) in package-level flag
// variables. Run sets them under a package mutex immediately before submission, so runs
// are serialized per process; nothing else in monolith-go touches them.
//
// Beam's embedded prism job server listens on an ephemeral TCP port on all interfaces for
// the life of the process (the SDK gives no way to choose the address); the loopback
// worker pool listens on localhost only.
package runners

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
)

// Runner names.
const (
	Prism     = "prism"
	Universal = "universal"
)

// Environment types of portable workers.
var environmentTypes = []string{"LOOPBACK", "DOCKER", "PROCESS", "EXTERNAL"}

// ErrOptions is wrapped by option validation errors.
var ErrOptions = errors.New("runners: invalid options")

// Options selects the engine. The zero value runs on prism.
type Options struct {
	Runner            string // prism (default) or universal
	Endpoint          string // job server HOST:PORT (universal)
	EnvironmentType   string // LOOPBACK (default), DOCKER, PROCESS or EXTERNAL
	EnvironmentConfig string // image, command or address for the environment type
	JobName           string
	Verbose           bool // keep the SDK's info logs
}

// RegisterFlags adds --runner, --endpoint, --environment_type, --environment_config and
// --job_name to fs.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Runner, "runner", Prism, "pipeline engine: prism (embedded, default) or universal (a Beam job server at --endpoint)")
	fs.StringVar(&o.Endpoint, "endpoint", "", "Beam job server HOST:PORT (with --runner=universal)")
	fs.StringVar(&o.EnvironmentType, "environment_type", "LOOPBACK", "worker environment for --runner=universal: LOOPBACK, DOCKER, PROCESS or EXTERNAL")
	fs.StringVar(&o.EnvironmentConfig, "environment_config", "", "worker environment configuration (image, command or address)")
	fs.StringVar(&o.JobName, "job_name", "", "job name shown by the runner")
}

// Validate checks the options and fills in defaults.
func (o *Options) Validate() error {
	o.Runner = strings.ToLower(strings.TrimSpace(o.Runner))
	if o.Runner == "" {
		o.Runner = Prism
	}
	if o.EnvironmentType == "" {
		o.EnvironmentType = "LOOPBACK"
	}
	o.EnvironmentType = strings.ToUpper(o.EnvironmentType)
	ok := false
	for _, e := range environmentTypes {
		ok = ok || e == o.EnvironmentType
	}
	if !ok {
		return fmt.Errorf("%w: environment type %q (want one of %s)", ErrOptions, o.EnvironmentType, strings.Join(environmentTypes, ", "))
	}
	switch o.Runner {
	case Prism:
		if o.Endpoint != "" {
			return fmt.Errorf("%w: --endpoint %q needs --runner=universal (prism runs in-process)", ErrOptions, o.Endpoint)
		}
		if o.EnvironmentType != "LOOPBACK" {
			return fmt.Errorf("%w: the embedded prism runner uses LOOPBACK workers, not %s", ErrOptions, o.EnvironmentType)
		}
	case Universal, "portable":
		o.Runner = Universal
		if o.Endpoint == "" {
			return fmt.Errorf("%w: --runner=universal needs --endpoint=HOST:PORT of a Beam job server", ErrOptions)
		}
	case "flink", "spark":
		return fmt.Errorf("%w: --runner=%s: submit through the runner's job server with --runner=universal --endpoint=HOST:PORT (see README.md)", ErrOptions, o.Runner)
	case "dataflow":
		return fmt.Errorf("%w: --runner=dataflow: not implemented: Dataflow needs the Go SDK's dataflow runner with GCP credentials and a staging bucket (see README.md)", ErrOptions)
	default:
		return fmt.Errorf("%w: unknown runner %q (want prism or universal)", ErrOptions, o.Runner)
	}
	return nil
}

// mu serializes runs: the SDK's job options are package-level variables.
var mu sync.Mutex

// prismEndpoint is the address of the embedded prism job server once started.
var prismEndpoint string

// Init initializes the Beam SDK for pipeline construction; it must run before the first
// pipeline is built (beam.Init). SDK logs below warn are dropped unless verbose.
func Init(verbose bool) {
	if verbose {
		beamlog.LogLevel = "info"
	} else {
		beamlog.LogLevel = "warn"
	}
	beam.Init()
}

// Run executes p on the selected engine and waits for it to finish.
func Run(ctx context.Context, p *beam.Pipeline, o Options) (beam.PipelineResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !beam.Initialized() {
		Init(o.Verbose)
	}
	mu.Lock()
	defer mu.Unlock()
	*jobopts.JobName = o.JobName
	*jobopts.EnvironmentConfig = o.EnvironmentConfig
	switch o.Runner {
	case Universal:
		*jobopts.Endpoint = o.Endpoint
		*jobopts.EnvironmentType = o.EnvironmentType
		res, err := universal.Execute(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("runners: universal runner at %s: %w", o.Endpoint, err)
		}
		return res, nil
	default:
		// prism.Execute starts the embedded server only when no endpoint is set; reuse it
		// for later runs, and never leak a universal endpoint into a prism run.
		*jobopts.Endpoint = prismEndpoint
		*jobopts.EnvironmentType = "LOOPBACK"
		res, err := prism.Execute(ctx, p)
		prismEndpoint = *jobopts.Endpoint
		if err != nil {
			return nil, fmt.Errorf("runners: prism: %w", err)
		}
		return res, nil
	}
}

// MaybeWorker runs the Beam worker harness and exits when args (without the program
// name) ask for worker mode (--worker), as a portable runner does when it starts this
// binary in a DOCKER or PROCESS environment. It returns false otherwise.
func MaybeWorker(args []string) bool {
	worker := false
	for _, a := range args {
		if a == "--worker" || a == "-worker" || strings.HasPrefix(a, "--worker=") {
			worker = true
		}
	}
	if !worker {
		return false
	}
	if err := flag.CommandLine.Parse(args); err != nil {
		return false
	}
	beamlog.LogLevel = "warn"
	beam.Init() // runs the harness and exits the process
	return true
}
