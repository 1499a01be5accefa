package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/server"
	pb "github.com/monolith-go/monolith/schemas/controllerpb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

const tables = `tables {
  name: "t"
  config {
    entry_config { segments { dim_size: 2 init_config { zeros {} } opt_config { sgd { learning_rate: 0.1 } } } }
    cuckoo {}
  }
  filter { type: NONE }
}`

// startPS serves one real PS shard checkpointing into ckptDir and returns its client.
func startPS(t *testing.T, ckptDir string) *client.Client {
	t.Helper()
	var tc pspb.TablesConfig
	if err := prototext.Unmarshal([]byte(tables), &tc); err != nil {
		t.Fatal(err)
	}
	o := server.DefaultOptions()
	o.Shard, o.NumShards, o.Tables, o.CheckpointDir = 0, 1, &tc, ckptDir
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); s.Close(); <-done })
	c, err := client.New([]string{s.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestControllerService ports server_lib_test.py over gRPC and the address file: stop,
// a second stop is ALREADY_EXISTS, a worker at its step boundary shows as blocked, resume
// releases it, save writes a PS checkpoint, status reports the PS global step.
func TestControllerService(t *testing.T) {
	modelDir := filepath.Join(t.TempDir(), "model")
	ckpt := t.TempDir()
	ps := startPS(t, ckpt)
	if _, err := ps.GlobalStep(callCtx(t), 7, "warm-up"); err != nil {
		t.Fatal(err)
	}
	b, err := NewBarrier(2)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve("", modelDir, b, PSTrainer{PS: ps}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(time.Second)
	if got, _ := os.ReadFile(filepath.Join(modelDir, AddrFile)); string(got) != srv.Addr() {
		t.Fatalf("%s holds %q, want %q", AddrFile, got, srv.Addr())
	}
	c, err := Dial(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if _, err := c.StopTraining(callCtx(t), &pb.StopTrainingRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StopTraining(callCtx(t), &pb.StopTrainingRequest{}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("second StopTraining: %v, want AlreadyExists", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- b.Wait(context.Background(), 0) }() // worker 0 is a worker (C2)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.GetBlockStatus(callCtx(t), &pb.GetBlockStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(st.GetBlockedIndices(), []int32{0}) && slices.Equal(st.GetUnblockedIndices(), []int32{1}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("block status %v, want worker 0 blocked", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.ResumeTraining(callCtx(t), &pb.ResumeTrainingRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Errorf("worker wait after resume: %v", err)
	}
	st, _ := c.GetBlockStatus(callCtx(t), &pb.GetBlockStatusRequest{})
	if len(st.GetBlockedIndices()) != 0 || !slices.Equal(st.GetUnblockedIndices(), []int32{0, 1}) {
		t.Errorf("block status after resume %v", st)
	}

	if _, err := c.SaveCheckpoint(callCtx(t), &pb.SaveCheckpointRequest{}); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(ckpt); len(ents) == 0 {
		t.Error("SaveCheckpoint wrote nothing in the PS checkpoint folder")
	}
	gs, err := c.GetTrainingStatus(callCtx(t), &pb.GetTrainingStatusRequest{})
	if err != nil || gs.GetGlobalStep() != 7 {
		t.Errorf("GetTrainingStatus = %v, %v; want global step 7", gs, err)
	}
}

// TestBarrierPausesWorker ports barrier_ops_test.py: with capacity 2, a placed barrier
// stops worker 1 after its step, the callback sees the action, removing the barrier lets
// the worker finish its 5 steps, and no worker is blocked at the end.
func TestBarrierPausesWorker(t *testing.T) {
	b, err := NewBarrier(2)
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Value
	b.OnAction(func(a string) { seen.Store(a) })
	var steps atomic.Int32
	placed := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := range 5 {
			steps.Add(1)
			if i == 0 {
				<-placed
			}
			if err := b.Wait(context.Background(), 1); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if err := b.Place("pause"); err != nil {
		t.Fatal(err)
	}
	close(placed)
	deadline := time.Now().Add(10 * time.Second)
	for blocked, _ := b.BlockStatus(); !slices.Equal(blocked, []int32{1}); blocked, _ = b.BlockStatus() {
		if time.Now().After(deadline) {
			t.Fatal("worker 1 never blocked")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := steps.Load(); n != 1 {
		t.Errorf("worker ran %d steps before pausing, want 1", n)
	}
	if a, _ := seen.Load().(string); a != "pause" {
		t.Errorf("callback saw action %q", a)
	}
	if err := b.Place("again"); !errors.Is(err, ErrAlreadyPlaced) {
		t.Errorf("second Place: %v", err)
	}
	b.Remove()
	if err := <-done; err != nil || steps.Load() != 5 {
		t.Errorf("worker after Remove: %v, %d steps", err, steps.Load())
	}
	if blocked, _ := b.BlockStatus(); len(blocked) != 0 {
		t.Errorf("blocked at the end: %v", blocked)
	}
	if err := b.Wait(context.Background(), 2); err == nil {
		t.Error("Wait(2) on a barrier of capacity 2 succeeded")
	}
	if _, err := NewBarrier(0); err == nil {
		t.Error("NewBarrier(0) succeeded")
	}
	// A waiting worker gives up when its context ends.
	_ = b.Place("")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Wait(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with an ending context: %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Dial(dir); err == nil {
		t.Error("Dial without an address file succeeded")
	}
	if err := os.WriteFile(filepath.Join(dir, AddrFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(dir); err == nil {
		t.Error("Dial of a malformed address succeeded")
	}
}
