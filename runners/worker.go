package runners

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// ErrWorkerBinary is wrapped by the error of a worker whose binary is not the one the job
// was submitted with.
var ErrWorkerBinary = errors.New("runners: worker binary mismatch")

// DefaultWorkerConnectTimeout bounds a worker's wait for the runner's provision service.
const DefaultWorkerConnectTimeout = time.Minute

// WorkerConfig is what a runner or a worker pool gives one SDK worker: the flags of
// Beam's container contract (https://s.apache.org/beam-fn-api-container-contract).
type WorkerConfig struct {
	ID                string // worker id, sent to the runner with every call
	ProvisionEndpoint string // required: the job's options and endpoints come from there
	// ControlEndpoint and LoggingEndpoint are used when the provision info has none.
	ControlEndpoint string
	LoggingEndpoint string
	// ArtifactEndpoint is where the staged worker binary could be fetched; the worker
	// does not fetch it (it is this binary, checked by SHA-256).
	ArtifactEndpoint string
	// ConnectTimeout bounds the wait for the provision service (default
	// DefaultWorkerConnectTimeout).
	ConnectTimeout time.Duration
}

// ParseWorkerArgs parses the container-contract flags a runner's PROCESS environment or a
// worker pool passes (--id, --provision_endpoint, --control_endpoint,
// --logging_endpoint, --artifact_endpoint, --semi_persist_dir, which is ignored).
func ParseWorkerArgs(args []string) (WorkerConfig, error) {
	var c WorkerConfig
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.ID, "id", "", "worker id")
	fs.StringVar(&c.ProvisionEndpoint, "provision_endpoint", "", "provision service")
	fs.StringVar(&c.ControlEndpoint, "control_endpoint", "", "control service")
	fs.StringVar(&c.LoggingEndpoint, "logging_endpoint", "", "logging service")
	fs.StringVar(&c.ArtifactEndpoint, "artifact_endpoint", "", "artifact service")
	fs.String("semi_persist_dir", "", "ignored")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("runners: worker flags: %w", err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("runners: worker flags: unexpected arguments %q", fs.Args())
	}
	// prism's PROCESS environment passes --id='ID', quotes included.
	c.ID = strings.Trim(c.ID, "'")
	if c.ID == "" || c.ProvisionEndpoint == "" {
		return c, errors.New("runners: worker flags: --id and --provision_endpoint are required")
	}
	return c, nil
}

// MaybeWorker runs a Beam SDK worker and exits the process when args (without the
// program name) are a worker's command line, and returns false otherwise (then args[0]
// is a command, or there are no worker flags):
//
//   - --worker=true … is how the Go SDK container's boot program starts the staged binary
//     (DOCKER environments, Dataflow): the SDK's own harness runs (beam.Init).
//   - --id=… --provision_endpoint=… is how a runner starts the command of a PROCESS
//     environment: RunWorker runs, until the runner ends the worker or SIGTERM.
func MaybeWorker(args []string) bool {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return false
	}
	switch {
	case hasFlag(args, "worker"):
		if err := flag.CommandLine.Parse(args); err != nil {
			return false
		}
		beamlog.LogLevel = "warn"
		beam.Init() // runs the harness and exits the process
		return true
	case hasFlag(args, "provision_endpoint"):
		c, err := ParseWorkerArgs(args)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = RunWorker(ctx, c)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	return false
}

// hasFlag reports whether args hold -name or --name, with or without a value.
func hasFlag(args []string, name string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		return a == name || strings.HasPrefix(a, name+"=")
	})
}

// RunWorker runs one SDK worker in this process for the job c points at, as the Go SDK
// container's boot program and the harness it starts do, but without fetching a worker
// binary: it asks the provision service for the job's options and endpoints, checks that
// this executable is the binary the job was staged with (ErrWorkerBinary otherwise),
// and runs the harness until the runner closes the control stream (nil) or ctx ends
// (nil: the pool or runner stopped the worker). The Beam SDK is initialized if needed.
func RunWorker(ctx context.Context, c WorkerConfig) error {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultWorkerConnectTimeout
	}
	if !beam.Initialized() {
		Init(false)
	}
	ctx = grpcx.WriteWorkerID(ctx, c.ID)
	info, err := provisionInfo(ctx, c)
	if err != nil {
		return err
	}
	if err := checkWorkerBinary(info); err != nil {
		return fmt.Errorf("runners: worker %s: %w", c.ID, err)
	}
	opts, err := importOptions(info)
	if err != nil {
		return fmt.Errorf("runners: worker %s: %w", c.ID, err)
	}
	control := firstSet(info.GetControlEndpoint().GetUrl(), c.ControlEndpoint)
	logging := firstSet(info.GetLoggingEndpoint().GetUrl(), c.LoggingEndpoint)
	if control == "" || logging == "" {
		return fmt.Errorf("runners: worker %s: no control or logging endpoint (flags or provision info)", c.ID)
	}
	err = harness.MainWithOptions(ctx, logging, control, opts)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("runners: worker %s: %w", c.ID, err)
	}
	return nil
}

// firstSet returns the first non-empty string.
func firstSet(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// provisionInfo asks the provision service, waiting at most c.ConnectTimeout for it.
func provisionInfo(ctx context.Context, c WorkerConfig) (*fnpb.ProvisionInfo, error) {
	cc, err := grpc.NewClient(c.ProvisionEndpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("runners: worker %s: provision service at %s: %w", c.ID, c.ProvisionEndpoint, err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.ConnectTimeout)
	defer cancel()
	resp, err := fnpb.NewProvisionServiceClient(cc).GetProvisionInfo(ctx, &fnpb.GetProvisionInfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, fmt.Errorf("runners: worker %s: provision service at %s: %w", c.ID, c.ProvisionEndpoint, err)
	}
	if resp.GetInfo() == nil {
		return nil, fmt.Errorf("runners: worker %s: provision service at %s sent no info", c.ID, c.ProvisionEndpoint)
	}
	return resp.GetInfo(), nil
}

// checkWorkerBinary compares this executable with the Go worker binary the job staged,
// when the provision info names it with its SHA-256.
func checkWorkerBinary(info *fnpb.ProvisionInfo) error {
	deps := info.GetDependencies()
	want := ""
	for _, d := range deps {
		if d.GetTypeUrn() != graphx.URNArtifactFileType || (len(deps) > 1 && d.GetRoleUrn() != graphx.URNArtifactGoWorkerRole) {
			continue
		}
		var fp pipepb.ArtifactFilePayload
		if err := proto.Unmarshal(d.GetTypePayload(), &fp); err == nil {
			want = fp.GetSha256()
		}
	}
	if want == "" {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	got, err := fileSHA256(exe)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: this worker runs %s (sha256 %s), the job was submitted with a binary of sha256 %s: run the same monolith build in the worker pool and the submitting process", ErrWorkerBinary, exe, got, want)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// importOptions loads the job's pipeline options into the SDK (as the harness's init hook
// does with --options) and returns the harness options of info.
func importOptions(info *fnpb.ProvisionInfo) (harness.Options, error) {
	opts := harness.Options{
		StatusEndpoint:     info.GetStatusEndpoint().GetUrl(),
		RunnerCapabilities: slices.Clone(info.GetRunnerCapabilities()),
	}
	if info.GetPipelineOptions() == nil {
		return opts, nil
	}
	b, err := protojson.Marshal(info.GetPipelineOptions())
	if err != nil {
		return opts, fmt.Errorf("pipeline options: %w", err)
	}
	var w runtime.RawOptionsWrapper
	if err := json.Unmarshal(b, &w); err != nil {
		return opts, fmt.Errorf("pipeline options: %w", err)
	}
	runtime.GlobalOptions.Import(w.Options)
	if slices.Contains(strings.Split(w.Options.Options["experiments"], ","), "enable_data_sampling") {
		opts.RunnerCapabilities = append(opts.RunnerCapabilities, graphx.URNDataSampling)
	}
	return opts, nil
}
