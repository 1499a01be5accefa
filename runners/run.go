package runners

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// ErrUnreachable is wrapped by the errors of a job server or worker pool that did not
// answer within Options.ConnectTimeout.
var ErrUnreachable = errors.New("runners: unreachable")

// mu serializes runs: the SDK's job options are package-level variables.
var mu sync.Mutex

// prismEndpoint is the address of the embedded prism job server once started.
var prismEndpoint string

// Init initializes the Beam SDK for pipeline construction; it must run before the first
// pipeline is built (beam.Init). SDK logs below warn are dropped unless verbose. Only the
// first call has an effect: the SDK's log level is a package variable that the embedded
// runner's goroutines read while pipelines run.
func Init(verbose bool) {
	if beam.Initialized() {
		return
	}
	if verbose {
		beamlog.LogLevel = "info"
	} else {
		beamlog.LogLevel = "warn"
	}
	beam.Init()
}

// Run executes p on the selected engine and waits for it to finish. The result is nil
// only when the runner returns none (a dataflow dry run).
func Run(ctx context.Context, p *beam.Pipeline, o Options) (beam.PipelineResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !beam.Initialized() {
		Init(o.Verbose)
	}
	if err := preflight(ctx, o); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if o.EnvironmentType == Loopback && o.Runner != Dataflow {
		defer removeLoopbackMarkers(time.Now())
	}
	if err := setJobOptions(o); err != nil {
		return nil, err
	}
	switch o.Runner {
	case Universal, Flink, Spark:
		res, err := universal.Execute(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("runners: %s runner at %s: %w", o.Runner, o.Endpoint, err)
		}
		return res, nil
	case Dataflow:
		res, err := dataflow.Execute(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("runners: dataflow (project %s, region %s): %w", o.Dataflow.Project, o.Dataflow.Region, err)
		}
		return res, nil
	default:
		// prism.Execute starts the embedded server only when no endpoint is set; reuse it
		// for later runs, and never leak a universal endpoint into a prism run.
		*jobopts.Endpoint = prismEndpoint
		res, err := prism.Execute(ctx, p)
		prismEndpoint = *jobopts.Endpoint
		if err != nil {
			return nil, fmt.Errorf("runners: prism: %w", err)
		}
		return res, nil
	}
}

// setJobOptions sets the SDK's job flags for o (validated); the caller holds mu.
func setJobOptions(o Options) error {
	*jobopts.JobName = o.JobName
	*jobopts.Endpoint = o.Endpoint
	*jobopts.EnvironmentType = o.EnvironmentType
	*jobopts.EnvironmentConfig = o.EnvironmentConfig
	*jobopts.WorkerBinary = ""
	if o.EnvironmentType != Loopback {
		// The universal runner would otherwise compile a worker binary from source (the
		// SDK's IsWorkerCompatibleBinary never accepts the running one).
		bin := o.WorkerBinary
		if bin == "" {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("runners: the worker binary: %w", err)
			}
			bin = exe
		}
		*jobopts.WorkerBinary = bin
	}
	if o.Runner == Dataflow {
		return setDataflowFlags(o)
	}
	return nil
}

// setDataflowFlags sets the dataflow runner's flags, which it reads from the process's
// flag set (the package registers them there).
func setDataflowFlags(o Options) error {
	d := o.Dataflow
	for _, f := range []struct{ name, value string }{
		{"project", d.Project}, {"region", d.Region}, {"staging_location", d.StagingLocation},
		{"temp_location", o.TempLocation}, {"sdk_container_image", d.SDKContainerImage},
		{"service_account_email", d.ServiceAccountEmail}, {"worker_machine_type", d.WorkerMachineType},
		{"max_num_workers", strconv.FormatInt(d.MaxNumWorkers, 10)},
	} {
		if err := flag.CommandLine.Set(f.name, f.value); err != nil {
			return fmt.Errorf("runners: dataflow flag --%s: %w", f.name, err)
		}
	}
	// Dataflow runs the Go SDK container, named by --sdk_container_image or the
	// environment config (default: the SDK's image).
	*jobopts.EnvironmentType = ""
	return nil
}

// preflight checks that the job server and the worker pool o names answer.
func preflight(ctx context.Context, o Options) error {
	switch o.Runner {
	case Universal, Flink, Spark:
		if err := probe(ctx, "job server", o.Endpoint, o.ConnectTimeout, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := jobpb.NewJobServiceClient(cc).GetJobs(ctx, &jobpb.GetJobsRequest{})
			if status.Code(err) == codes.Unimplemented {
				return nil // a job server without GetJobs still answered
			}
			return err
		}); err != nil {
			return err
		}
	}
	// The pool of flink and spark workers is addressed from the cluster, where this
	// process may not reach it.
	if o.EnvironmentType == External && (o.Runner == Prism || o.Runner == Universal) {
		return probe(ctx, "worker pool", o.EnvironmentConfig, o.ConnectTimeout, func(ctx context.Context, cc *grpc.ClientConn) error {
			// Stopping a worker that does not exist is answered with an error in the
			// response, and has no effect.
			_, err := fnpb.NewBeamFnExternalWorkerPoolClient(cc).StopWorker(ctx, &fnpb.StopWorkerRequest{WorkerId: "monolith-runners-probe"})
			if status.Code(err) == codes.Unimplemented {
				return fmt.Errorf("runners: %s does not serve Beam's worker pool service (BeamFnExternalWorkerPool): %w", o.EnvironmentConfig, err)
			}
			return err
		})
	}
	return nil
}

// probe calls call on a connection to addr until it gets through (it returns nil or an
// error other than codes.Unavailable, returned as is), for at most timeout; then it fails
// with ErrUnreachable and the last error.
func probe(ctx context.Context, what, addr string, timeout time.Duration, call func(context.Context, *grpc.ClientConn) error) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("runners: %s at %s: %w", what, addr, err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		err := call(ctx, cc)
		if err == nil {
			return nil
		}
		if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded && c != codes.Canceled {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s at %s did not answer within %v: %v", ErrUnreachable, what, addr, timeout, err)
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// markerPrefix names the empty files the SDK's universal runner creates in the temp dir
// for every LOOPBACK run (runnerlib.Execute stages one as the unused worker binary) and
// never removes.
const markerPrefix = "beamloopbackworker-"

// markerSlack is how much older than the run a marker of the run may look: file times
// come from the kernel's coarse clock.
const markerSlack = time.Second

// markerStale is the age from which a marker is an orphan of an ended run (a process that
// exited or was killed before removing its own): staging reads a marker within moments
// of its creation.
const markerStale = time.Hour

// removeLoopbackMarkers deletes the markers of the run that started at start (runs in
// this process are serialized) — empty files created since — and orphans older than
// markerStale, unless another process holds them open: another process on the machine
// (a second worker of a cluster) may have created one and not staged it yet; the SDK
// never closes the file it creates, so its creator holds it open until it is staged (and
// later, until the file's finalizer runs). This runs after every pipeline: the temp dir
// is read once, unsorted, and other processes' file tables only for markers this process
// does not hold.
func removeLoopbackMarkers(start time.Time) {
	dir := os.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	cands := map[string]bool{}
	for _, n := range names {
		if !strings.HasPrefix(n, markerPrefix) {
			continue
		}
		p := filepath.Join(dir, n)
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() || st.Size() != 0 {
			continue
		}
		if t := st.ModTime(); !t.Before(start.Add(-markerSlack)) || t.Before(time.Now().Add(-markerStale)) {
			cands[p] = true
		}
	}
	if len(cands) == 0 {
		return
	}
	for p := range openBy(cands, "self") {
		_ = os.Remove(p)
		delete(cands, p)
	}
	if len(cands) == 0 {
		return
	}
	busy := openElsewhere(cands)
	for p := range cands {
		if !busy[p] {
			_ = os.Remove(p)
		}
	}
}

// openBy reports which of paths the process proc ("self" or a pid) holds open (Linux
// /proc; none elsewhere).
func openBy(paths map[string]bool, proc string) map[string]bool {
	out := map[string]bool{}
	fds, _ := os.ReadDir(filepath.Join("/proc", proc, "fd"))
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc", proc, "fd", fd.Name())); err == nil && paths[target] {
			out[target] = true
		}
	}
	return out
}

// openElsewhere reports which of paths another process holds open (Linux /proc; none
// elsewhere).
func openElsewhere(paths map[string]bool) map[string]bool {
	out := map[string]bool{}
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	for _, pd := range procs {
		if pd.Name() == self || pd.Name()[0] < '0' || pd.Name()[0] > '9' {
			continue
		}
		maps.Copy(out, openBy(paths, pd.Name()))
	}
	return out
}
