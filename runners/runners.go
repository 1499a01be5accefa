// Package runners picks the engine a monolith-go pipeline runs on: the embedded prism
// runner in this process (the default), any portable Beam runner through its job server
// (universal, and flink and spark, which are the universal runner pointed at Beam's Flink
// or Spark job server), or Google Cloud Dataflow through the Go SDK's dataflow runner.
// See README.md, "Runners".
//
// # Engines
//
//	prism      Beam's Go runner, started inside this process on first use and reused by
//	           later pipelines. Workers run in-process (LOOPBACK), or in a worker pool
//	           (EXTERNAL: --environment_config=HOST:PORT of `monolith worker-pool`).
//	universal  submits the pipeline to a Beam job server at --endpoint (a prism job
//	           server, Flink's or Spark's job server, …). LOOPBACK workers run in this
//	           process; EXTERNAL ones in a worker pool; DOCKER and PROCESS environments
//	           start this same binary in worker mode (MaybeWorker).
//	flink      universal with the endpoint of Beam's Flink job server.
//	spark      universal with the endpoint of Beam's Spark job server.
//	dataflow   the Go SDK's dataflow runner: the job runs on Dataflow's VMs in the Go SDK
//	           container, which starts this binary (staged to --staging_location).
//
// # Workers outside this process
//
// With any environment but LOOPBACK the runner stages this executable (or
// --worker_binary) as the job's worker binary, and the workers must run that same build:
// a worker started by `monolith worker-pool` or a PROCESS environment checks the staged
// binary's SHA-256 against its own (RunWorker). Paths the pipeline reads or writes must
// be visible to the workers: the commands make their paths absolute, and a shared
// --temp_location carries results that go through files.
//
// Before submitting, Run checks that the job server and (prism and universal) the worker
// pool answer, for at most --connect_timeout, and fails with an error naming the address
// otherwise: prism panics when a worker pool refuses or cannot be reached, which would end
// this process when prism is embedded.
//
// # Global state
//
// The Beam SDK keeps its job options (endpoint, environment, worker binary, the dataflow
// flags) in package-level flag variables. Run sets them under a package mutex
// immediately before submission, so runs are serialized per process; nothing else in
// monolith-go touches them.
//
// Beam's embedded prism job server listens on an ephemeral TCP port on all interfaces for
// the life of the process (the SDK gives no way to choose the address); the loopback
// worker pool listens on localhost only.
package runners

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Runner names.
const (
	Prism     = "prism"
	Universal = "universal"
	Flink     = "flink"
	Spark     = "spark"
	Dataflow  = "dataflow"
)

// Environment types of portable workers.
const (
	Loopback = "LOOPBACK"
	Docker   = "DOCKER"
	Process  = "PROCESS"
	External = "EXTERNAL"
)

var environmentTypes = []string{Loopback, Docker, Process, External}

// DefaultConnectTimeout bounds the wait for a job server or worker pool to answer.
const DefaultConnectTimeout = 30 * time.Second

// ErrOptions is wrapped by option validation errors.
var ErrOptions = errors.New("runners: invalid options")

// Options selects the engine. The zero value runs on prism with LOOPBACK workers.
type Options struct {
	Runner            string // prism (default), universal, flink, spark or dataflow
	Endpoint          string // job server HOST:PORT (universal, flink, spark)
	EnvironmentType   string // LOOPBACK (default; DOCKER on dataflow), DOCKER, PROCESS or EXTERNAL
	EnvironmentConfig string // image, command or worker pool HOST:PORT for the environment type
	JobName           string
	// TempLocation is a directory for results that go through files, shared by the
	// workers and this process (Beam's --temp_location). Validate makes a local path
	// absolute; only dataflow takes a remote one (gs://…), which it requires.
	TempLocation string
	// WorkerBinary is the binary staged for workers outside this process (default: this
	// executable).
	WorkerBinary string
	// ConnectTimeout bounds the wait for the job server and the worker pool to answer
	// before submission (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	Dataflow       DataflowOptions // --runner=dataflow only
	Verbose        bool            // keep the SDK's info logs
}

// DataflowOptions are the Go SDK dataflow runner's flags that monolith passes on (the
// runner's own names); Project, Region and StagingLocation are required with
// --runner=dataflow, and so is Options.TempLocation.
type DataflowOptions struct {
	Project             string // GCP project
	Region              string // Dataflow regional endpoint, e.g. us-central1
	StagingLocation     string // gs:// prefix for the worker binary and the job graph
	SDKContainerImage   string // worker container (default: the Go SDK's image of this Beam version)
	ServiceAccountEmail string
	WorkerMachineType   string
	MaxNumWorkers       int64
}

func (d DataflowOptions) set() []string {
	var names []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"project", d.Project != ""}, {"region", d.Region != ""}, {"staging_location", d.StagingLocation != ""},
		{"sdk_container_image", d.SDKContainerImage != ""}, {"service_account_email", d.ServiceAccountEmail != ""},
		{"worker_machine_type", d.WorkerMachineType != ""}, {"max_num_workers", d.MaxNumWorkers != 0},
	} {
		if f.set {
			names = append(names, "--"+f.name)
		}
	}
	return names
}

// RegisterFlags adds the runner flags to fs: --runner, --endpoint, --environment_type,
// --environment_config, --job_name, --temp_location, --worker_binary, --connect_timeout
// and the dataflow flags --project, --region, --staging_location, --sdk_container_image,
// --service_account_email, --worker_machine_type and --max_num_workers.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Runner, "runner", Prism, "pipeline engine: prism (embedded, default), universal (a Beam job server at --endpoint), flink or spark (their Beam job server at --endpoint) or dataflow")
	fs.StringVar(&o.Endpoint, "endpoint", "", "Beam job server HOST:PORT (universal, flink, spark)")
	fs.StringVar(&o.EnvironmentType, "environment_type", "", "worker environment: LOOPBACK (default: workers in this process), EXTERNAL (a worker pool), DOCKER (default on dataflow) or PROCESS")
	fs.StringVar(&o.EnvironmentConfig, "environment_config", "", "worker environment configuration: the worker pool HOST:PORT (EXTERNAL), an image (DOCKER) or {\"command\": …} (PROCESS)")
	fs.StringVar(&o.JobName, "job_name", "", "job name shown by the runner")
	fs.StringVar(&o.TempLocation, "temp_location", "", "directory for results that go through files, shared by the workers and this process (gs://… on dataflow, where it is required)")
	fs.StringVar(&o.WorkerBinary, "worker_binary", "", "binary staged for workers outside this process (default: this executable)")
	fs.DurationVar(&o.ConnectTimeout, "connect_timeout", DefaultConnectTimeout, "how long to wait for the job server and the worker pool to answer before submitting")
	fs.StringVar(&o.Dataflow.Project, "project", "", "GCP project (dataflow)")
	fs.StringVar(&o.Dataflow.Region, "region", "", "Dataflow region, e.g. us-central1 (dataflow)")
	fs.StringVar(&o.Dataflow.StagingLocation, "staging_location", "", "gs:// prefix for the staged worker binary and job graph (dataflow)")
	fs.StringVar(&o.Dataflow.SDKContainerImage, "sdk_container_image", "", "worker container image (dataflow; default: the Beam Go SDK image)")
	fs.StringVar(&o.Dataflow.ServiceAccountEmail, "service_account_email", "", "worker service account (dataflow)")
	fs.StringVar(&o.Dataflow.WorkerMachineType, "worker_machine_type", "", "GCE machine type of the workers (dataflow)")
	fs.Int64Var(&o.Dataflow.MaxNumWorkers, "max_num_workers", 0, "maximum number of workers when autoscaling (dataflow)")
}

// Validate checks the options and fills in defaults: the runner and environment names
// are normalized, the environment type defaults for the runner, a local --temp_location
// and --worker_binary become absolute. It is idempotent.
func (o *Options) Validate() error {
	o.Runner = strings.ToLower(strings.TrimSpace(o.Runner))
	switch o.Runner {
	case "":
		o.Runner = Prism
	case "portable":
		o.Runner = Universal
	}
	o.EnvironmentType = strings.ToUpper(strings.TrimSpace(o.EnvironmentType))
	if o.EnvironmentType == "" {
		o.EnvironmentType = Loopback
		if o.Runner == Dataflow {
			o.EnvironmentType = Docker
		}
	}
	ok := false
	for _, e := range environmentTypes {
		ok = ok || e == o.EnvironmentType
	}
	if !ok {
		return fmt.Errorf("%w: environment type %q (want one of %s)", ErrOptions, o.EnvironmentType, strings.Join(environmentTypes, ", "))
	}
	if o.ConnectTimeout < 0 {
		return fmt.Errorf("%w: --connect_timeout %v is negative", ErrOptions, o.ConnectTimeout)
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if set := o.Dataflow.set(); len(set) > 0 && o.Runner != Dataflow {
		return fmt.Errorf("%w: %s: dataflow flags, but --runner=%s", ErrOptions, strings.Join(set, ", "), o.Runner)
	}
	switch o.Runner {
	case Prism:
		if o.Endpoint != "" {
			return fmt.Errorf("%w: --endpoint %q needs --runner=universal (prism runs in-process)", ErrOptions, o.Endpoint)
		}
		if o.EnvironmentType != Loopback && o.EnvironmentType != External {
			return fmt.Errorf("%w: the embedded prism runner takes LOOPBACK or EXTERNAL workers, not %s (use --runner=universal with a job server)", ErrOptions, o.EnvironmentType)
		}
	case Universal, Flink, Spark:
		if o.Endpoint == "" {
			what := "a Beam job server"
			if o.Runner != Universal {
				what = "Beam's " + strings.ToUpper(o.Runner[:1]) + o.Runner[1:] + " job server (" + o.Runner + " runs through the universal runner)"
			}
			return fmt.Errorf("%w: --runner=%s needs --endpoint=HOST:PORT of %s", ErrOptions, o.Runner, what)
		}
		if _, _, err := net.SplitHostPort(o.Endpoint); err != nil {
			return fmt.Errorf("%w: --endpoint %q is not HOST:PORT: %v", ErrOptions, o.Endpoint, err)
		}
	case Dataflow:
		if err := o.validateDataflow(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown runner %q (want prism, universal, flink, spark or dataflow)", ErrOptions, o.Runner)
	}
	switch o.EnvironmentType {
	case External:
		if o.EnvironmentConfig == "" {
			return fmt.Errorf("%w: --environment_type=EXTERNAL needs --environment_config=HOST:PORT of a worker pool (monolith worker-pool)", ErrOptions)
		}
		if _, _, err := net.SplitHostPort(o.EnvironmentConfig); err != nil {
			return fmt.Errorf("%w: --environment_config %q is not the HOST:PORT of a worker pool: %v", ErrOptions, o.EnvironmentConfig, err)
		}
	case Process:
		if o.EnvironmentConfig == "" {
			return fmt.Errorf("%w: --environment_type=PROCESS needs --environment_config='{\"command\": \"/path/to/monolith\"}'", ErrOptions)
		}
	}
	if remote(o.TempLocation) {
		if o.Runner != Dataflow {
			return fmt.Errorf("%w: --temp_location %q is remote: the workers of --runner=%s write results with the local file system; give a directory they share with this process", ErrOptions, o.TempLocation, o.Runner)
		}
	} else if o.TempLocation != "" {
		abs, err := filepath.Abs(o.TempLocation)
		if err != nil {
			return fmt.Errorf("%w: --temp_location: %v", ErrOptions, err)
		}
		o.TempLocation = abs
	}
	if o.WorkerBinary != "" {
		abs, err := filepath.Abs(o.WorkerBinary)
		if err != nil {
			return fmt.Errorf("%w: --worker_binary: %v", ErrOptions, err)
		}
		if st, err := os.Stat(abs); err != nil || st.IsDir() {
			return fmt.Errorf("%w: --worker_binary %s is not a file", ErrOptions, o.WorkerBinary)
		}
		o.WorkerBinary = abs
	}
	return nil
}

// validateDataflow checks the flags the dataflow runner needs, naming the missing one.
func (o *Options) validateDataflow() error {
	d := o.Dataflow
	switch {
	case o.Endpoint != "":
		return fmt.Errorf("%w: --runner=dataflow takes no --endpoint (it submits to Dataflow's API)", ErrOptions)
	case o.EnvironmentType != Docker:
		return fmt.Errorf("%w: --runner=dataflow runs DOCKER workers (the Go SDK container), not %s", ErrOptions, o.EnvironmentType)
	case d.Project == "":
		return fmt.Errorf("%w: --runner=dataflow needs --project (the GCP project)", ErrOptions)
	case d.Region == "":
		return fmt.Errorf("%w: --runner=dataflow needs --region (e.g. us-central1)", ErrOptions)
	case d.StagingLocation == "":
		return fmt.Errorf("%w: --runner=dataflow needs --staging_location=gs://BUCKET/PATH", ErrOptions)
	case !strings.HasPrefix(d.StagingLocation, "gs://"):
		return fmt.Errorf("%w: --staging_location %q must be gs://BUCKET/PATH on dataflow", ErrOptions, d.StagingLocation)
	case o.TempLocation == "":
		return fmt.Errorf("%w: --runner=dataflow needs --temp_location=gs://BUCKET/PATH", ErrOptions)
	case !strings.HasPrefix(o.TempLocation, "gs://"):
		return fmt.Errorf("%w: --temp_location %q must be gs://BUCKET/PATH on dataflow (its workers cannot reach this machine's files)", ErrOptions, o.TempLocation)
	case d.MaxNumWorkers < 0:
		return fmt.Errorf("%w: --max_num_workers %d is negative", ErrOptions, d.MaxNumWorkers)
	case o.WorkerBinary == "" && (runtime.GOOS != "linux" || runtime.GOARCH != "amd64"):
		return fmt.Errorf("%w: --runner=dataflow needs a linux/amd64 worker binary: this one is %s/%s, build one and pass --worker_binary", ErrOptions, runtime.GOOS, runtime.GOARCH)
	}
	return nil
}

// remote reports whether path names a location by URL scheme (gs://…) rather than a
// local path.
func remote(path string) bool {
	i := strings.Index(path, "://")
	return i > 0 && !strings.ContainsAny(path[:i], `/\`)
}
