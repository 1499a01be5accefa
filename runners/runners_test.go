package runners_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/monolith-go/monolith/runners"
)

func init() {
	register.Function1x1[int, int](square)
}

func square(x int) int { return x * x }

func TestValidate(t *testing.T) {
	df := runners.DataflowOptions{Project: "p", Region: "us-central1", StagingLocation: "gs://b/staging"}
	cases := []struct {
		name string
		o    runners.Options
		want string // runner after Validate, or a fragment of the error
		ok   bool
	}{
		{"zero is prism", runners.Options{}, runners.Prism, true},
		{"prism", runners.Options{Runner: "PRISM"}, runners.Prism, true},
		{"prism external", runners.Options{EnvironmentType: "external", EnvironmentConfig: "127.0.0.1:5000"}, runners.Prism, true},
		{"universal", runners.Options{Runner: "universal", Endpoint: "127.0.0.1:8099"}, runners.Universal, true},
		{"portable alias", runners.Options{Runner: "portable", Endpoint: "h:1", EnvironmentType: "docker"}, runners.Universal, true},
		{"flink", runners.Options{Runner: "flink", Endpoint: "localhost:8099"}, runners.Flink, true},
		{"spark", runners.Options{Runner: "Spark", Endpoint: "localhost:8099", EnvironmentType: "EXTERNAL", EnvironmentConfig: "localhost:50000"}, runners.Spark, true},
		{"dataflow", runners.Options{Runner: "dataflow", TempLocation: "gs://b/tmp", Dataflow: df}, runners.Dataflow, true},

		{"universal without endpoint", runners.Options{Runner: "universal"}, "--endpoint=HOST:PORT", false},
		{"endpoint not host:port", runners.Options{Runner: "universal", Endpoint: "localhost"}, "not HOST:PORT", false},
		{"prism with endpoint", runners.Options{Endpoint: "h:1"}, "--endpoint", false},
		{"prism with docker", runners.Options{EnvironmentType: "DOCKER"}, "LOOPBACK or EXTERNAL", false},
		{"external without pool", runners.Options{EnvironmentType: "EXTERNAL"}, "--environment_config=HOST:PORT", false},
		{"external pool not host:port", runners.Options{EnvironmentType: "EXTERNAL", EnvironmentConfig: "pool"}, "HOST:PORT of a worker pool", false},
		{"process without command", runners.Options{Runner: "universal", Endpoint: "h:1", EnvironmentType: "PROCESS"}, "command", false},
		{"flink without endpoint", runners.Options{Runner: "flink"}, "Flink job server (flink runs through the universal runner)", false},
		{"spark without endpoint", runners.Options{Runner: "spark"}, "Spark job server", false},
		{"unknown", runners.Options{Runner: "nope"}, "unknown runner", false},
		{"bad environment", runners.Options{Runner: "universal", Endpoint: "h:1", EnvironmentType: "VM"}, "environment type", false},
		{"negative connect timeout", runners.Options{ConnectTimeout: -time.Second}, "--connect_timeout", false},
		{"remote temp on prism", runners.Options{TempLocation: "gs://b/tmp"}, "--temp_location", false},
		{"remote temp on flink", runners.Options{Runner: "flink", Endpoint: "h:1", TempLocation: "hdfs://nn/tmp"}, "--temp_location", false},
		{"dataflow flag on prism", runners.Options{Dataflow: runners.DataflowOptions{Project: "p"}}, "--project", false},
		{"missing worker binary", runners.Options{Runner: "universal", Endpoint: "h:1", EnvironmentType: "EXTERNAL", EnvironmentConfig: "h:2", WorkerBinary: "/nonexistent/monolith"}, "--worker_binary", false},

		{"dataflow without project", runners.Options{Runner: "dataflow", TempLocation: "gs://b/tmp", Dataflow: runners.DataflowOptions{Region: "r", StagingLocation: "gs://b/s"}}, "--project", false},
		{"dataflow without region", runners.Options{Runner: "dataflow", TempLocation: "gs://b/tmp", Dataflow: runners.DataflowOptions{Project: "p", StagingLocation: "gs://b/s"}}, "--region", false},
		{"dataflow without staging", runners.Options{Runner: "dataflow", TempLocation: "gs://b/tmp", Dataflow: runners.DataflowOptions{Project: "p", Region: "r"}}, "--staging_location", false},
		{"dataflow local staging", runners.Options{Runner: "dataflow", TempLocation: "gs://b/tmp", Dataflow: runners.DataflowOptions{Project: "p", Region: "r", StagingLocation: "/tmp/s"}}, "--staging_location", false},
		{"dataflow without temp", runners.Options{Runner: "dataflow", Dataflow: df}, "--temp_location", false},
		{"dataflow local temp", runners.Options{Runner: "dataflow", TempLocation: "/tmp/x", Dataflow: df}, "--temp_location", false},
		{"dataflow with endpoint", runners.Options{Runner: "dataflow", Endpoint: "h:1", TempLocation: "gs://b/tmp", Dataflow: df}, "--endpoint", false},
		{"dataflow loopback", runners.Options{Runner: "dataflow", EnvironmentType: "LOOPBACK", TempLocation: "gs://b/tmp", Dataflow: df}, "DOCKER", false},
	}
	for _, c := range cases {
		err := c.o.Validate()
		if c.ok != (err == nil) {
			t.Errorf("%s: Validate() = %v", c.name, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, runners.ErrOptions) {
				t.Errorf("%s: %v does not wrap ErrOptions", c.name, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v does not mention %q", c.name, err, c.want)
			}
			continue
		}
		if c.o.Runner != c.want {
			t.Errorf("%s: runner %q, want %q", c.name, c.o.Runner, c.want)
		}
		again := c.o
		if err := again.Validate(); err != nil || again != c.o {
			t.Errorf("%s: Validate is not idempotent: %+v then %+v (%v)", c.name, c.o, again, err)
		}
	}
}

// TestValidateDefaults: the environment type defaults for the runner, the connect
// timeout is set, a local temp location becomes absolute.
func TestValidateDefaults(t *testing.T) {
	o := runners.Options{TempLocation: "rel/tmp"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if o.EnvironmentType != runners.Loopback || o.ConnectTimeout != runners.DefaultConnectTimeout || o.TempLocation != filepath.Join(wd, "rel/tmp") {
		t.Errorf("prism defaults: %+v", o)
	}
	d := runners.Options{Runner: "dataflow", TempLocation: "gs://b/tmp", Dataflow: runners.DataflowOptions{Project: "p", Region: "r", StagingLocation: "gs://b/s"}}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.EnvironmentType != runners.Docker || d.TempLocation != "gs://b/tmp" {
		t.Errorf("dataflow defaults: %+v", d)
	}
}

// TestRegisterFlags parses a command line of every runner flag.
func TestRegisterFlags(t *testing.T) {
	var o runners.Options
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.RegisterFlags(fs)
	err := fs.Parse([]string{"--runner=dataflow", "--project=p", "--region=r", "--staging_location=gs://b/s", "--temp_location=gs://b/t",
		"--sdk_container_image=img", "--service_account_email=sa@p", "--worker_machine_type=n2-standard-4", "--max_num_workers=7",
		"--job_name=j", "--connect_timeout=5s"})
	if err != nil {
		t.Fatal(err)
	}
	want := runners.Options{Runner: "dataflow", TempLocation: "gs://b/t", JobName: "j", ConnectTimeout: 5 * time.Second,
		Dataflow: runners.DataflowOptions{Project: "p", Region: "r", StagingLocation: "gs://b/s", SDKContainerImage: "img",
			ServiceAccountEmail: "sa@p", WorkerMachineType: "n2-standard-4", MaxNumWorkers: 7}}
	if o != want {
		t.Errorf("parsed %+v\nwant   %+v", o, want)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestPrismTwice runs two pipelines on the embedded runner: the second reuses its server.
// Neither run leaves a file in the temp dir (the SDK's loopback marker, see setJobOptions).
func TestPrismTwice(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	runners.Init(false)
	for i := 0; i < 2; i++ {
		p, s := beam.NewPipelineWithRoot()
		passert.Equals(s, beam.ParDo(s, square, beam.Create(s, 1, 2, 3)), 1, 4, 9)
		if _, err := runners.Run(context.Background(), p, runners.Options{}); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("the runs left %v in the temp dir (%v)", left, err)
	}
	// A failing assertion fails the run: the runner really executes the pipeline.
	p, s := beam.NewPipelineWithRoot()
	passert.Equals(s, beam.ParDo(s, square, beam.Create(s, 2)), 5)
	if _, err := runners.Run(context.Background(), p, runners.Options{}); err == nil {
		t.Fatal("a failing passert did not fail the prism run")
	}
}

// TestParseWorkerArgs parses the command lines a worker pool and prism's PROCESS
// environment start workers with.
func TestParseWorkerArgs(t *testing.T) {
	c, err := runners.ParseWorkerArgs([]string{"--id=w1", "--control_endpoint=h:1", "--logging_endpoint=h:2",
		"--artifact_endpoint=h:3", "--provision_endpoint=h:4", "--semi_persist_dir=/tmp"})
	want := runners.WorkerConfig{ID: "w1", ControlEndpoint: "h:1", LoggingEndpoint: "h:2", ArtifactEndpoint: "h:3", ProvisionEndpoint: "h:4"}
	if err != nil || c != want {
		t.Errorf("pool flags: %+v, %v; want %+v", c, err, want)
	}
	// prism quotes the id.
	c, err = runners.ParseWorkerArgs([]string{"--id='job-001[go]_go'", "--provision_endpoint=localhost:5"})
	if err != nil || c.ID != "job-001[go]_go" || c.ProvisionEndpoint != "localhost:5" {
		t.Errorf("prism PROCESS flags: %+v, %v", c, err)
	}
	for _, args := range [][]string{
		{"--id=w"},                   // no provision endpoint
		{"--provision_endpoint=h:4"}, // no id
		{"--id=w", "--provision_endpoint=h:4", "--bogus=1"},
		{"--id=w", "--provision_endpoint=h:4", "extra"},
	} {
		if _, err := runners.ParseWorkerArgs(args); err == nil {
			t.Errorf("ParseWorkerArgs(%q) accepted", args)
		}
	}
}

// TestMaybeWorkerCommands: a command line that starts with a command is never a worker's
// (a worker's would run the worker and exit).
func TestMaybeWorkerCommands(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"validate", "--worker"},
		{"worker-pool", "--worker", "--id=w", "--provision_endpoint=h:4"},
		{"--input=x"},
	} {
		if runners.MaybeWorker(args) {
			t.Errorf("MaybeWorker(%q) = true", args)
		}
	}
}
