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
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/atomicfile"
	pb "github.com/monolith-go/monolith/schemas/controllerpb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// AddrFile is the file in the model directory that holds the controller's address.
const AddrFile = "controller_server_addr.txt"

// ErrAlreadyPlaced reports a barrier placed twice.
var ErrAlreadyPlaced = errors.New("barrier is placed already")

// Barrier is the BarrierOp: a placed flag with its action, and one blocked flag per worker.
// Its methods are safe for concurrent use.
type Barrier struct {
	mu        sync.Mutex
	placed    bool
	action    string
	blocked   []bool
	removed   chan struct{} // closed when the barrier is removed; replaced at Place
	callbacks []func(action string)
}

// NewBarrier returns a removed barrier for capacity workers (indices 0 … capacity-1).
func NewBarrier(capacity int) (*Barrier, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("controller: barrier capacity %d is not positive", capacity)
	}
	r := make(chan struct{})
	close(r)
	return &Barrier{blocked: make([]bool, capacity), removed: r}, nil
}

// Capacity is the number of workers.
func (b *Barrier) Capacity() int { return len(b.blocked) }

// OnAction registers a callback run with the action when the barrier is placed and when a
// worker starts waiting.
func (b *Barrier) OnAction(fn func(action string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.callbacks = append(b.callbacks, fn)
}

// Place places the barrier with action; ErrAlreadyPlaced when it is placed.
func (b *Barrier) Place(action string) error {
	b.mu.Lock()
	if b.placed {
		b.mu.Unlock()
		return ErrAlreadyPlaced
	}
	b.placed, b.action, b.removed = true, action, make(chan struct{})
	cbs := append([]func(string){}, b.callbacks...)
	b.mu.Unlock()
	for _, cb := range cbs {
		cb(action)
	}
	return nil
}

// Remove removes the barrier (nothing happens when it is not placed).
func (b *Barrier) Remove() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.placed {
		b.placed = false
		close(b.removed)
	}
}

// Placed reports whether the barrier is placed.
func (b *Barrier) Placed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.placed
}

// Wait is a worker's step boundary: when the barrier is placed it marks worker index
// blocked, runs the callbacks with the action and waits until the barrier is removed or
// ctx ends; then it clears the mark. It returns at once when the barrier is not placed.
func (b *Barrier) Wait(ctx context.Context, index int) error {
	b.mu.Lock()
	if index < 0 || index >= len(b.blocked) {
		b.mu.Unlock()
		return fmt.Errorf("controller: worker index %d outside 0…%d", index, len(b.blocked)-1)
	}
	if !b.placed {
		b.mu.Unlock()
		return nil
	}
	b.blocked[index] = true
	action, removed := b.action, b.removed
	cbs := append([]func(string){}, b.callbacks...)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.blocked[index] = false
		b.mu.Unlock()
	}()
	for _, cb := range cbs {
		cb(action)
	}
	select {
	case <-removed:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// BlockStatus lists the blocked and the other workers, ascending.
func (b *Barrier) BlockStatus() (blocked, unblocked []int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, v := range b.blocked {
		if v {
			blocked = append(blocked, int32(i))
		} else {
			unblocked = append(unblocked, int32(i))
		}
	}
	return blocked, unblocked
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
	barrier *Barrier
	trainer Trainer
	log     *slog.Logger
	lis     net.Listener
	srv     *grpc.Server
	done    chan struct{}
	once    sync.Once
}

// Serve binds listen ("127.0.0.1:0" when empty), serves the controller in a goroutine and
// writes its address atomically to {modelDir}/controller_server_addr.txt (creating
// modelDir).
func Serve(listen, modelDir string, barrier *Barrier, trainer Trainer, log *slog.Logger) (*Server, error) {
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
	s := &Server{barrier: barrier, trainer: trainer, log: log, lis: lis, srv: grpc.NewServer(), done: make(chan struct{})}
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

// Stop stops serving, letting calls in flight finish for up to grace (the reference: 20 s).
func (s *Server) Stop(grace time.Duration) {
	s.once.Do(func() {
		t := time.AfterFunc(grace, s.srv.Stop)
		s.srv.GracefulStop()
		t.Stop()
		<-s.done
	})
}

// StopTraining places the barrier.
func (s *Server) StopTraining(context.Context, *pb.StopTrainingRequest) (*pb.StopTrainingResponse, error) {
	if err := s.barrier.Place(""); err != nil {
		return nil, status.Error(codes.AlreadyExists, "Barrier is placed already.")
	}
	s.log.Info("controller: training stopped (barrier placed)")
	return &pb.StopTrainingResponse{}, nil
}

// ResumeTraining removes the barrier.
func (s *Server) ResumeTraining(context.Context, *pb.ResumeTrainingRequest) (*pb.ResumeTrainingResponse, error) {
	s.barrier.Remove()
	s.log.Info("controller: training resumed (barrier removed)")
	return &pb.ResumeTrainingResponse{}, nil
}

// GetBlockStatus lists the paused workers.
func (s *Server) GetBlockStatus(context.Context, *pb.GetBlockStatusRequest) (*pb.GetBlockStatusResponse, error) {
	b, u := s.barrier.BlockStatus()
	return &pb.GetBlockStatusResponse{BlockedIndices: b, UnblockedIndices: u}, nil
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
// (client_lib.get_stub_from_model_dir).
func Dial(modelDir string) (*Client, error) {
	b, err := os.ReadFile(filepath.Join(modelDir, AddrFile))
	if err != nil {
		return nil, fmt.Errorf("controller: no running training job in %s: %w", modelDir, err)
	}
	addr := strings.TrimSpace(string(b))
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("controller: %s holds %q, not host:port", filepath.Join(modelDir, AddrFile), addr)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	return &Client{ControllerClient: pb.NewControllerClient(cc), cc: cc, Addr: addr}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cc.Close() }

// PSClient is the part of ps/client.Client a PSTrainer uses.
type PSClient interface {
	GlobalStep(ctx context.Context, increment int64, requestID string) (int64, error)
	Save(ctx context.Context) ([]*pspb.SaveResponse, error)
}

// PSTrainer is the Trainer of a job whose state lives on parameter servers: the global
// step is the PS's, and a checkpoint is a PS save of every shard.
type PSTrainer struct{ PS PSClient }

// GlobalStep reads the PS global step.
func (t PSTrainer) GlobalStep(ctx context.Context) (int64, error) { return t.PS.GlobalStep(ctx, 0, "") }

// SaveCheckpoint asks every PS shard for a checkpoint.
func (t PSTrainer) SaveCheckpoint(ctx context.Context) error {
	_, err := t.PS.Save(ctx)
	return err
}
