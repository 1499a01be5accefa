// Package controller is the training controller of spec §2.1–2.2: the barrier that pauses
// workers at a step boundary (BarrierOp), the /Controller gRPC service operators call, the
// controller_server_addr.txt file that names it in the model directory, and its client.
//
// Decision C2: StopTraining pauses every worker at its next step boundary and
// ResumeTraining releases them; worker index 0 is a worker like any other (the reference
// reserved flag 0 for "placed", so its chief never paused and GetBlockStatus listed 0 as
// blocked as soon as the barrier was placed); placing twice is ALREADY_EXISTS and changes
// nothing. The service binds 127.0.0.1 unless told otherwise (the reference: every
// interface) and the address file holds "host:port" without a newline, as the reference's.
package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/ps/pause"
	pb "github.com/monolith-go/monolith/schemas/controllerpb"
)

// AddrFile is the file in the model directory that holds the controller's address.
const AddrFile = "controller_server_addr.txt"

// ActionStop is the barrier action that ends training instead of pausing it: a worker that
// meets it at a step boundary stops (Monolith's ControllerHook "Stop"). The PS health
// checker places it.
const ActionStop = "Stop"

// Barrier is the controller's side of the training barrier: the PS-hosted one
// (ps/client.TrainingBarrier) or a Local one.
type Barrier interface {
	// Place places the barrier; an error wrapping pause.ErrAlreadyPlaced when it is placed.
	Place(ctx context.Context, action string) error
	// Remove removes it.
	Remove(ctx context.Context) error
	// Status is the barrier's state and the joined workers' block status.
	Status(ctx context.Context) (pause.Status, error)
	// Leave frees index i (the saver frees the slots of workers that never paused).
	Leave(ctx context.Context, i int) error
}

// WorkerBarrier is a worker's side of the training barrier.
type WorkerBarrier interface {
	// Join adds a worker and returns its index and the barrier's state.
	Join(ctx context.Context) (int, pause.Status, error)
	// WaitOnce pauses worker i for at most a few seconds: it returns placed false once the
	// barrier is removed, else placed true and the current action.
	WaitOnce(ctx context.Context, i int) (placed bool, action string, err error)
	// Leave frees index i.
	Leave(ctx context.Context, i int) error
}

// Local is an in-process training barrier for both sides.
type Local struct{ B *pause.Barrier }

// NewLocal returns a removed Local barrier with no workers.
func NewLocal() Local { return Local{B: pause.New()} }

// localHold is how long a Local WaitOnce waits.
const localHold = 5 * time.Second

// Place places the barrier.
func (l Local) Place(_ context.Context, action string) error { return l.B.Place(action) }

// Remove removes the barrier.
func (l Local) Remove(context.Context) error { l.B.Remove(); return nil }

// Status returns a snapshot.
func (l Local) Status(context.Context) (pause.Status, error) { return l.B.Status(), nil }

// Join joins a worker.
func (l Local) Join(context.Context) (int, pause.Status, error) { return l.B.Join(), l.B.Status(), nil }

// WaitOnce waits at most localHold.
func (l Local) WaitOnce(ctx context.Context, i int) (bool, string, error) {
	return l.B.Wait(ctx, i, localHold)
}

// Leave frees index i.
func (l Local) Leave(_ context.Context, i int) error { return l.B.Leave(i) }

// Gate is one worker's step boundary (BarrierHook): it records the barrier state the
// worker learns with each global step, and at the next boundary pauses the worker while
// the barrier is placed. Its methods are safe for concurrent use by the worker's trainers;
// one of them waits for all.
type Gate struct {
	b      WorkerBarrier
	index  atomic.Int64
	placed atomic.Bool
	action atomic.Pointer[string]
	mu     sync.Mutex // held by the trainer that waits
	// OnAction, when set, runs with the action before the worker pauses (the barrier
	// callbacks of BarrierOp).
	OnAction func(action string)
}

// JoinGate joins b and returns the worker's gate.
func JoinGate(ctx context.Context, b WorkerBarrier) (*Gate, error) {
	i, st, err := b.Join(ctx)
	if err != nil {
		return nil, fmt.Errorf("controller: join the training barrier: %w", err)
	}
	g := &Gate{b: b}
	g.index.Store(int64(i))
	g.Observe(st.Placed, st.Action)
	return g, nil
}

// Index is the worker's index in the barrier.
func (g *Gate) Index() int { return int(g.index.Load()) }

// Observe records the barrier state the worker learned (with a global step).
func (g *Gate) Observe(placed bool, action string) {
	if placed {
		g.action.Store(&action)
	}
	g.placed.Store(placed)
}

// Placed reports whether the worker last saw the barrier placed.
func (g *Gate) Placed() bool { return g.placed.Load() }

// Boundary is the step boundary: while the barrier is placed the worker pauses here. It
// returns stop true when the action is ActionStop (the worker must stop training), and an
// error when ctx ends or the barrier cannot be reached.
func (g *Gate) Boundary(ctx context.Context) (stop bool, err error) {
	if !g.placed.Load() {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	action := ""
	if a := g.action.Load(); a != nil {
		action = *a
	}
	for g.placed.Load() {
		if action == ActionStop {
			return true, nil
		}
		if g.OnAction != nil {
			g.OnAction(action)
		}
		placed, a, err := g.b.WaitOnce(ctx, g.Index())
		if errors.Is(err, pause.ErrNotJoined) {
			// The barrier's shard restarted and forgot the worker: join again and wait
			// under the new index.
			i, st, jerr := g.b.Join(ctx)
			if jerr != nil {
				return false, fmt.Errorf("controller: worker %d rejoining the training barrier: %w", g.Index(), jerr)
			}
			g.index.Store(int64(i))
			placed, a, err = st.Placed, st.Action, nil
		}
		if err != nil {
			return false, fmt.Errorf("controller: worker %d at the training barrier: %w", g.Index(), err)
		}
		g.Observe(placed, a)
		action = a
		if placed {
			if err := context.Cause(ctx); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

// Close leaves the barrier; a barrier that no longer knows the worker (its shard
// restarted) has nothing to leave.
func (g *Gate) Close(ctx context.Context) error {
	if err := g.b.Leave(ctx, g.Index()); err != nil && !errors.Is(err, pause.ErrNotJoined) {
		return err
	}
	return nil
}

// Trainer is what the controller asks of the training job.
type Trainer interface {
	// GlobalStep is the current global step.
	GlobalStep(ctx context.Context) (int64, error)
	// SaveCheckpoint writes a checkpoint and returns once it is written.
	SaveCheckpoint(ctx context.Context) error
}

// Server is the /Controller gRPC service of one training job.
type Server struct {
	pb.UnimplementedControllerServer
	barrier  Barrier
	trainer  Trainer
	modelDir string
	log      *slog.Logger
	lis      net.Listener
	srv      *grpc.Server
	done     chan struct{}
	once     sync.Once
}

// Serve binds listen ("127.0.0.1:0" when empty), serves the controller in a goroutine and
// writes its address atomically to {modelDir}/controller_server_addr.txt (creating
// modelDir). Its RPCs are counted in m (nil: not counted). It serves TLS with tc
// (internal/tlsconf), plaintext when nil.
func Serve(listen, modelDir string, barrier Barrier, trainer Trainer, m *Metrics, log *slog.Logger, tc *tls.Config) (*Server, error) {
	if barrier == nil || trainer == nil {
		return nil, errors.New("controller: Serve needs a barrier and a trainer")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("controller: listen %s: %w", listen, err)
	}
	s := &Server{barrier: barrier, trainer: trainer, modelDir: modelDir, log: log, lis: lis, srv: grpc.NewServer(grpc.UnaryInterceptor(m.interceptor), tlsconf.ServerOption(tc)), done: make(chan struct{})}
	pb.RegisterControllerServer(s.srv, s)
	if err := writeAddr(modelDir, lis.Addr().String()); err != nil {
		_ = lis.Close()
		return nil, err
	}
	go func() {
		_ = s.srv.Serve(lis)
		close(s.done)
	}()
	log.Info("controller serving", "addr", lis.Addr().String(), "model_dir", modelDir)
	return s, nil
}

// writeAddr writes addr to {modelDir}/controller_server_addr.txt through a rename.
func writeAddr(modelDir, addr string) error {
	if err := os.MkdirAll(modelDir, 0o755); err != nil {
		return fmt.Errorf("controller: model dir: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(modelDir, AddrFile), []byte(addr)); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	return nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Stop stops serving, letting calls in flight finish for up to grace (the reference: 20 s),
// and removes the address file when it still names this server, so that ctl reports no
// running job instead of a refused connection.
func (s *Server) Stop(grace time.Duration) {
	s.once.Do(func() {
		path := filepath.Join(s.modelDir, AddrFile)
		if b, err := os.ReadFile(path); err == nil && string(b) == s.Addr() {
			_ = os.Remove(path)
		}
		t := time.AfterFunc(grace, s.srv.Stop)
		s.srv.GracefulStop()
		t.Stop()
		<-s.done
	})
}

// StopTraining places the barrier.
func (s *Server) StopTraining(ctx context.Context, _ *pb.StopTrainingRequest) (*pb.StopTrainingResponse, error) {
	switch err := s.barrier.Place(ctx, ""); {
	case errors.Is(err, pause.ErrAlreadyPlaced):
		return nil, status.Error(codes.AlreadyExists, "Barrier is placed already.")
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "place the barrier: %v", err)
	}
	s.log.Info("controller: training stopped (barrier placed)")
	return &pb.StopTrainingResponse{}, nil
}

// ResumeTraining removes the barrier.
func (s *Server) ResumeTraining(ctx context.Context, _ *pb.ResumeTrainingRequest) (*pb.ResumeTrainingResponse, error) {
	if err := s.barrier.Remove(ctx); err != nil {
		return nil, status.Errorf(codes.Unavailable, "remove the barrier: %v", err)
	}
	s.log.Info("controller: training resumed (barrier removed)")
	return &pb.ResumeTrainingResponse{}, nil
}

// GetBlockStatus lists the paused workers.
func (s *Server) GetBlockStatus(ctx context.Context, _ *pb.GetBlockStatusRequest) (*pb.GetBlockStatusResponse, error) {
	st, err := s.barrier.Status(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "barrier status: %v", err)
	}
	return &pb.GetBlockStatusResponse{BlockedIndices: st.Blocked, UnblockedIndices: st.Unblocked}, nil
}

// SaveCheckpoint writes a checkpoint.
func (s *Server) SaveCheckpoint(ctx context.Context, _ *pb.SaveCheckpointRequest) (*pb.SaveCheckpointResponse, error) {
	if err := s.trainer.SaveCheckpoint(ctx); err != nil {
		return nil, status.Errorf(codes.Internal, "save checkpoint: %v", err)
	}
	return &pb.SaveCheckpointResponse{}, nil
}

// GetTrainingStatus answers the global step.
func (s *Server) GetTrainingStatus(ctx context.Context, _ *pb.GetTrainingStatusRequest) (*pb.GetTrainingStatusResponse, error) {
	step, err := s.trainer.GlobalStep(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "global step: %v", err)
	}
	return &pb.GetTrainingStatusResponse{GlobalStep: step}, nil
}

// Client is a Controller client.
type Client struct {
	pb.ControllerClient
	cc   *grpc.ClientConn
	Addr string
}

// Dial reads {modelDir}/controller_server_addr.txt and returns a client of that address
// (client_lib.get_stub_from_model_dir), over TLS with tc when it is not nil.
func Dial(modelDir string, tc *tls.Config) (*Client, error) {
	b, err := os.ReadFile(filepath.Join(modelDir, AddrFile))
	if err != nil {
		return nil, fmt.Errorf("controller: no running training job in %s: %w", modelDir, err)
	}
	addr := strings.TrimSpace(string(b))
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("controller: %s holds %q, not host:port", filepath.Join(modelDir, AddrFile), addr)
	}
	cc, err := grpc.NewClient(addr, tlsconf.DialOption(tc))
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	return &Client{ControllerClient: pb.NewControllerClient(cc), cc: cc, Addr: addr}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cc.Close() }
