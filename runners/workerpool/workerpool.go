// Package workerpool serves Beam's BeamFnExternalWorkerPool gRPC service: a portable
// runner whose pipeline has an EXTERNAL environment (--environment_type=EXTERNAL
// --environment_config=HOST:PORT) asks the pool to start an SDK worker with
// StartWorker, hands it the job's endpoints, and ends it with StopWorker. It is the pool
// of the Go SDK's sdks/go/container/pool, with bounded stops and no leaks.
//
// # Workers
//
// Each StartWorker starts one OS process: Options.Command followed by the flags of Beam's
// container contract (Args: --id, --control_endpoint, --logging_endpoint,
// --artifact_endpoint, --provision_endpoint). The process runs the SDK harness for its
// job (monolith starts its own binary, `monolith worker-pool --worker …`, see
// runners.RunWorker) and usually ends when the runner closes its control stream.
//
// StopWorker sends the process SIGTERM and, if it has not exited after
// Options.StopGrace, SIGKILL; it returns once the process has exited, or after
// Options.KillWait more if even SIGKILL does not end it (a process stuck in the kernel),
// which is logged. Close stops every worker the same way, in parallel. On Linux a worker
// also gets SIGKILL when the pool process dies without stopping it (Pdeathsig).
//
// # Network
//
// The pool binds Options.Listen, 127.0.0.1:0 by default: a runner on another machine
// needs an explicit address (and then anyone who reaches it can start processes: the
// service has no authentication, as Beam's pools have none).
package workerpool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/internal/tlsconf"
)

// ErrOptions is wrapped by the errors of Options.Validate.
var ErrOptions = errors.New("runners/workerpool: invalid options")

// Options configures a Pool. The zero value is not valid: Command is required.
type Options struct {
	// Listen is the TCP address to serve on (default 127.0.0.1:0, an ephemeral port on
	// the loopback interface).
	Listen string
	// Command is the worker program and its leading arguments; the pool appends the
	// container-contract flags of each StartWorker request (Args). Required.
	Command []string
	// Env is added to the pool's environment for the workers.
	Env []string
	// Dir is the workers' working directory ("": the pool's).
	Dir string
	// StopGrace is how long a worker has to exit after SIGTERM before SIGKILL (default
	// 10s).
	StopGrace time.Duration
	// KillWait bounds the wait for a worker's exit after SIGKILL, and for its output to
	// drain after it exited (default 5s).
	KillWait time.Duration
	// Output receives the workers' stdout and stderr (nil: os.Stderr).
	Output io.Writer
	// TLS serves gRPC over TLS (internal/tlsconf; nil: plaintext, which is what Beam's
	// runners dial).
	TLS *tls.Config
}

// DefaultOptions returns the defaults, without a Command.
func DefaultOptions() Options {
	return Options{Listen: "127.0.0.1:0", StopGrace: 10 * time.Second, KillWait: 5 * time.Second}
}

// Validate checks o; New fills in the defaults of the zero fields first.
func (o Options) Validate() error {
	if len(o.Command) == 0 || o.Command[0] == "" {
		return fmt.Errorf("%w: no worker command", ErrOptions)
	}
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return fmt.Errorf("%w: listen address %q: %v", ErrOptions, o.Listen, err)
	}
	if o.StopGrace <= 0 || o.KillWait <= 0 {
		return fmt.Errorf("%w: stop grace %v and kill wait %v must be positive", ErrOptions, o.StopGrace, o.KillWait)
	}
	return nil
}

// Args returns the flags of Beam's container contract for req, as the Go SDK's pool passes
// them to its boot program.
func Args(req *fnpb.StartWorkerRequest) []string {
	return []string{
		"--id=" + req.GetWorkerId(),
		"--control_endpoint=" + req.GetControlEndpoint().GetUrl(),
		"--logging_endpoint=" + req.GetLoggingEndpoint().GetUrl(),
		"--artifact_endpoint=" + req.GetArtifactEndpoint().GetUrl(),
		"--provision_endpoint=" + req.GetProvisionEndpoint().GetUrl(),
	}
}

// Pool is a running worker pool. Its methods are safe for concurrent use.
type Pool struct {
	fnpb.UnimplementedBeamFnExternalWorkerPoolServer

	o   Options
	log *slog.Logger
	lis net.Listener
	srv *grpc.Server

	mu struct {
		sync.Mutex
		closed  bool
		workers map[string]*worker // running workers by id
	}
	reapers sync.WaitGroup // one per started worker, until its process is reaped

	closeOnce sync.Once
	closeErr  error
}

var _ fnpb.BeamFnExternalWorkerPoolServer = (*Pool)(nil)

// worker is one worker process.
type worker struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process is reaped
	err  error         // cmd.Wait's result, set before done is closed
}

// New binds o.Listen and returns the pool; Serve serves it. logger may be nil.
func New(o Options, logger *slog.Logger) (*Pool, error) {
	d := DefaultOptions()
	if o.Listen == "" {
		o.Listen = d.Listen
	}
	if o.StopGrace == 0 {
		o.StopGrace = d.StopGrace
	}
	if o.KillWait == 0 {
		o.KillWait = d.KillWait
	}
	if o.Output == nil {
		o.Output = os.Stderr
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("runners/workerpool: %w", err)
	}
	p := &Pool{o: o, log: logger, lis: lis, srv: grpc.NewServer(tlsconf.ServerOption(o.TLS))}
	p.mu.workers = map[string]*worker{}
	fnpb.RegisterBeamFnExternalWorkerPoolServer(p.srv, p)
	return p, nil
}

// Addr is the address the pool listens on (HOST:PORT).
func (p *Pool) Addr() string { return p.lis.Addr().String() }

// Serve serves the pool until ctx ends or Close is called, then closes it (stopping its
// workers). It returns nil on ctx cancellation or Close, and the joined serve and close
// errors otherwise.
func (p *Pool) Serve(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- p.srv.Serve(p.lis) }()
	select {
	case <-ctx.Done():
		cerr := p.Close()
		return errors.Join(ignoreStopped(<-served), cerr)
	case err := <-served:
		return errors.Join(ignoreStopped(err), p.Close())
	}
}

func ignoreStopped(err error) error {
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Close refuses new workers, stops the running ones (see the package doc; in parallel,
// each within StopGrace+KillWait) and the gRPC server, and waits for every worker
// process to be reaped, at most KillWait more. It is idempotent; later calls return the
// first call's error.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.mu.closed = true
		ws := make([]*worker, 0, len(p.mu.workers))
		for _, w := range p.mu.workers {
			ws = append(ws, w)
		}
		p.mu.Unlock()

		var errs []error
		var stops sync.WaitGroup
		stopErrs := make([]error, len(ws))
		for i, w := range ws {
			stops.Go(func() { stopErrs[i] = p.stop(w) })
		}
		stops.Wait()
		errs = append(errs, stopErrs...)

		// GracefulStop waits for the handlers in flight (a StopWorker waits at most
		// StopGrace+KillWait); Stop cuts them off after that.
		stopped := make(chan struct{})
		go func() { p.srv.GracefulStop(); close(stopped) }()
		t := time.NewTimer(p.o.StopGrace + p.o.KillWait)
		select {
		case <-stopped:
		case <-t.C:
			p.srv.Stop()
			<-stopped
		}
		t.Stop()
		if err := p.lis.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("runners/workerpool: %w", err))
		}

		reaped := make(chan struct{})
		go func() { p.reapers.Wait(); close(reaped) }()
		t = time.NewTimer(p.o.KillWait)
		select {
		case <-reaped:
		case <-t.C:
			errs = append(errs, errors.New("runners/workerpool: some worker processes were not reaped"))
		}
		t.Stop()
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// Workers returns the ids of the running workers.
func (p *Pool) Workers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.mu.workers))
	for id := range p.mu.workers {
		ids = append(ids, id)
	}
	return ids
}

// StartWorker starts a worker process for req (BeamFnExternalWorkerPool.StartWorker).
// Refusals (a duplicate id, missing or secured endpoints, a closed pool, a program that
// cannot start) are in the response's Error, as Beam's pools report them.
func (p *Pool) StartWorker(_ context.Context, req *fnpb.StartWorkerRequest) (*fnpb.StartWorkerResponse, error) {
	id := req.GetWorkerId()
	refuse := func(format string, args ...any) (*fnpb.StartWorkerResponse, error) {
		msg := fmt.Sprintf(format, args...)
		p.log.Warn("worker pool: refused to start a worker", "id", id, "reason", msg)
		return &fnpb.StartWorkerResponse{Error: msg}, nil
	}
	switch {
	case id == "":
		return refuse("no worker id")
	case req.GetControlEndpoint().GetUrl() == "":
		return refuse("no control endpoint for worker %q", id)
	case req.GetLoggingEndpoint().GetUrl() == "":
		return refuse("no logging endpoint for worker %q", id)
	case req.GetProvisionEndpoint().GetUrl() == "":
		return refuse("no provision endpoint for worker %q", id)
	case req.GetControlEndpoint().GetAuthentication() != nil || req.GetLoggingEndpoint().GetAuthentication() != nil:
		return refuse("secured endpoints are not supported (worker %q)", id)
	}
	cmd := exec.Command(p.o.Command[0], append(append([]string(nil), p.o.Command[1:]...), Args(req)...)...)
	cmd.Env = append(os.Environ(), p.o.Env...)
	cmd.Dir = p.o.Dir
	cmd.Stdout, cmd.Stderr = p.o.Output, p.o.Output
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = p.o.KillWait
	w := &worker{id: id, cmd: cmd, done: make(chan struct{})}

	// Start under the lock: Close either sees the worker in the map or refuses it.
	// Starting is a fork and exec, it does not wait for the program.
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return refuse("worker pool shutting down")
	}
	if _, ok := p.mu.workers[id]; ok {
		p.mu.Unlock()
		return refuse("worker %q already exists", id)
	}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return refuse("cannot start worker %q: %v", id, err)
	}
	p.mu.workers[id] = w
	p.reapers.Add(1)
	p.mu.Unlock()

	go p.reap(w)
	p.log.Info("worker pool: started worker", "id", id, "pid", cmd.Process.Pid)
	return &fnpb.StartWorkerResponse{}, nil
}

// reap waits for w's process and forgets it.
func (p *Pool) reap(w *worker) {
	defer p.reapers.Done()
	w.err = w.cmd.Wait()
	// Forgotten before done closes: StopWorker returns on done, and then the id is free.
	p.mu.Lock()
	if p.mu.workers[w.id] == w {
		delete(p.mu.workers, w.id)
	}
	p.mu.Unlock()
	close(w.done)
	p.log.Info("worker pool: worker exited", "id", w.id, "status", exitStatus(w.err))
}

func exitStatus(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// StopWorker stops the worker req names (BeamFnExternalWorkerPool.StopWorker) and
// returns once it has exited (see the package doc for the bounds). An unknown or already
// exited worker is reported in the response's Error.
func (p *Pool) StopWorker(_ context.Context, req *fnpb.StopWorkerRequest) (*fnpb.StopWorkerResponse, error) {
	p.mu.Lock()
	w, ok := p.mu.workers[req.GetWorkerId()]
	p.mu.Unlock()
	if !ok {
		return &fnpb.StopWorkerResponse{Error: fmt.Sprintf("no worker with id %q running", req.GetWorkerId())}, nil
	}
	if err := p.stop(w); err != nil {
		return &fnpb.StopWorkerResponse{Error: err.Error()}, nil
	}
	return &fnpb.StopWorkerResponse{}, nil
}

// stop ends w: SIGTERM, SIGKILL after StopGrace, then at most KillWait for the reaper.
// It returns an error only when the process outlives SIGKILL's wait.
func (p *Pool) stop(w *worker) error {
	select {
	case <-w.done:
		return nil
	default:
	}
	p.log.Info("worker pool: stopping worker", "id", w.id)
	// A process that has just exited makes Signal fail with os.ErrProcessDone: the reaper
	// closes done.
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(p.o.StopGrace)
	defer t.Stop()
	select {
	case <-w.done:
		return nil
	case <-t.C:
	}
	p.log.Warn("worker pool: worker ignored SIGTERM; killing it", "id", w.id, "grace", p.o.StopGrace)
	_ = w.cmd.Process.Kill()
	t.Reset(p.o.KillWait)
	select {
	case <-w.done:
		return nil
	case <-t.C:
		p.log.Error("worker pool: worker did not exit after SIGKILL", "id", w.id, "pid", w.cmd.Process.Pid)
		return fmt.Errorf("runners/workerpool: worker %q (pid %d) did not exit within %v of SIGKILL", w.id, w.cmd.Process.Pid, p.o.KillWait)
	}
}
