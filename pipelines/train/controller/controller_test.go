package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/internal/tlsconf/tlstest"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/pause"
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
	c, err := client.New([]string{startPSAddr(t, ckptDir)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startPSAddr serves one real PS shard (checkpointing into ckptDir unless "") and returns
// its address.
func startPSAddr(t *testing.T, ckptDir string) string {
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
	return s.Addr()
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
	b := ps.TrainingBarrier() // the PS-hosted barrier, for the controller and the workers
	g0, err := JoinGate(callCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	g1, err := JoinGate(callCtx(t), b)
	if err != nil || g0.Index() != 0 || g1.Index() != 1 {
		t.Fatalf("joined as %d and %v (%v), want 0 and 1", g0.Index(), g1, err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	ms, err := metricsrv.Listen("127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	srv, err := Serve("", modelDir, b, &Saver{PS: ps, Metrics: m}, m, nil, nil) // no save barrier: the workers here do not step
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(time.Second)
	if got, _ := os.ReadFile(filepath.Join(modelDir, AddrFile)); string(got) != srv.Addr() {
		t.Fatalf("%s holds %q, want %q", AddrFile, got, srv.Addr())
	}
	c, err := Dial(modelDir, nil)
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
	// Worker 0 learns of the barrier with its next global step and pauses at the boundary
	// (worker 0 is a worker like any other, C2).
	gs, err := ps.GlobalStepState(callCtx(t), 1, "")
	if err != nil || !gs.GetBarrierPlaced() || gs.GetStep() != 8 {
		t.Fatalf("GlobalStepState after stop = %v, %v; want step 8 with the barrier placed", gs, err)
	}
	g0.Observe(gs.GetBarrierPlaced(), gs.GetBarrierAction())
	waited := make(chan error, 1)
	go func() {
		stop, err := g0.Boundary(context.Background())
		if stop {
			err = errors.New("Boundary says stop for a pause")
		}
		waited <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.GetBlockStatus(callCtx(t), &pb.GetBlockStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(st.GetBlockedIndices(), []int32{0}) && slices.Equal(st.GetUnblockedIndices(), []int32{1}) {
			// The metrics report the same state, read at scrape time.
			wantMetrics(t, ms.Addr(), []sample{
				{"monolith_controller_barrier_up", nil, 1},
				{"monolith_controller_barrier_placed", []string{"action", ""}, 1},
				{"monolith_controller_workers", []string{"state", "blocked"}, 1},
				{"monolith_controller_workers", []string{"state", "running"}, 1},
			})
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
	if g0.Placed() {
		t.Error("worker 0 still sees the barrier placed after resume")
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
	ts, err := c.GetTrainingStatus(callCtx(t), &pb.GetTrainingStatusRequest{})
	if err != nil || ts.GetGlobalStep() != 8 {
		t.Errorf("GetTrainingStatus = %v, %v; want global step 8", ts, err)
	}
	wantMetrics(t, ms.Addr(), []sample{
		{"monolith_controller_barrier_placed", []string{"action", ""}, 0},
		{"monolith_controller_workers", []string{"state", "blocked"}, 0},
		{"monolith_controller_workers", []string{"state", "running"}, 2},
		{"monolith_controller_saves_total", []string{"result", "ok"}, 1},
		{"monolith_controller_saves_total", []string{"result", "error"}, 0},
		{"monolith_controller_save_seconds", nil, 1},
		{"monolith_controller_requests_total", []string{"method", "/Controller/StopTraining", "code", "OK"}, 1},
		{"monolith_controller_requests_total", []string{"method", "/Controller/StopTraining", "code", "AlreadyExists"}, 1},
		{"monolith_controller_requests_total", []string{"method", "/Controller/SaveCheckpoint", "code", "OK"}, 1},
	})
	// A leaving worker frees its index; the next one takes the lowest free index.
	if err := g0.Close(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.GetBlockStatus(callCtx(t), &pb.GetBlockStatusRequest{}); !slices.Equal(st.GetUnblockedIndices(), []int32{1}) {
		t.Errorf("block status after worker 0 left: %v", st)
	}
	if g, err := JoinGate(callCtx(t), b); err != nil || g.Index() != 0 {
		t.Errorf("rejoin: %v, %v; want index 0", g, err)
	}
}

type sample struct {
	name   string
	labels []string
	value  float64
}

// wantMetrics scrapes addr with the Prometheus text parser and checks the samples.
func wantMetrics(t *testing.T, addr string, want []sample) {
	t.Helper()
	fams, err := metricsrv.Scrape(callCtx(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if got, ok := metricsrv.Value(fams, w.name, w.labels...); !ok || got != w.value {
			t.Errorf("/metrics %s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
}

// TestBarrierPausesWorker ports barrier_ops_test.py: with two workers, a placed barrier
// stops worker 1 after its step, the callback sees the action, removing the barrier lets
// the worker finish its 5 steps, and no worker is blocked at the end. The ActionStop
// action stops a worker instead, and a pausing worker gives up when its context ends.
func TestBarrierPausesWorker(t *testing.T) {
	b := NewLocal()
	ctx := context.Background()
	if _, err := JoinGate(ctx, b); err != nil { // worker 0, never stepping here
		t.Fatal(err)
	}
	g, err := JoinGate(ctx, b)
	if err != nil || g.Index() != 1 {
		t.Fatalf("JoinGate = %v, %v; want index 1", g, err)
	}
	var seen atomic.Value
	g.OnAction = func(a string) { seen.Store(a) }
	var steps atomic.Int32
	placed := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := range 5 {
			steps.Add(1)
			if i == 0 {
				<-placed
			}
			g.Observe(b.B.Placed()) // what the step's GlobalStep response says
			if _, err := g.Boundary(ctx); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if err := b.Place(ctx, "pause"); err != nil {
		t.Fatal(err)
	}
	close(placed)
	deadline := time.Now().Add(10 * time.Second)
	for st := b.B.Status(); !slices.Equal(st.Blocked, []int32{1}); st = b.B.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("worker 1 never blocked: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := steps.Load(); n != 1 {
		t.Errorf("worker ran %d steps before pausing, want 1", n)
	}
	if a, _ := seen.Load().(string); a != "pause" {
		t.Errorf("callback saw action %q", a)
	}
	if err := b.Place(ctx, "again"); !errors.Is(err, pause.ErrAlreadyPlaced) {
		t.Errorf("second Place: %v", err)
	}
	if err := b.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || steps.Load() != 5 {
		t.Errorf("worker after Remove: %v, %d steps", err, steps.Load())
	}
	if st := b.B.Status(); len(st.Blocked) != 0 || !slices.Equal(st.Unblocked, []int32{0, 1}) {
		t.Errorf("status at the end: %+v", st)
	}

	// ActionStop: the worker stops at the boundary instead of pausing.
	if err := b.Place(ctx, ActionStop); err != nil {
		t.Fatal(err)
	}
	g.Observe(b.B.Placed())
	if stop, err := g.Boundary(ctx); !stop || err != nil {
		t.Errorf("Boundary under %q = %v, %v; want stop", ActionStop, stop, err)
	}
	b.B.Remove()

	// A pausing worker gives up when its context ends.
	_ = b.Place(ctx, "")
	g.Observe(b.B.Placed())
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := g.Boundary(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Boundary with an ending context: %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Dial(dir, nil); err == nil {
		t.Error("Dial without an address file succeeded")
	}
	if err := os.WriteFile(filepath.Join(dir, AddrFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(dir, nil); err == nil {
		t.Error("Dial of a malformed address succeeded")
	}
}

// TestGateRejoinsRestartedShard: the training barrier lives on PS shard 0; when that
// shard restarts it forgets the workers, so a worker whose WAIT answers "not joined" joins
// the new shard's barrier and pauses there, and leaving a barrier that forgot it is no
// error.
func TestGateRejoinsRestartedShard(t *testing.T) {
	ctx := callCtx(t)
	first := startPSAddr(t, "")
	c, err := client.New([]string{first})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	b := c.TrainingBarrier()
	if _, _, err := b.Join(ctx); err != nil { // index 0: another worker
		t.Fatal(err)
	}
	g, err := JoinGate(ctx, b)
	if err != nil || g.Index() != 1 {
		t.Fatalf("JoinGate = %v, %v; want index 1", g, err)
	}
	// Shard 0 restarts elsewhere; the chief places the barrier for a save there.
	if err := c.SetShards([]string{startPSAddr(t, "")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.WaitOnce(ctx, 1); !errors.Is(err, pause.ErrNotJoined) {
		t.Fatalf("WaitOnce of a forgotten index: %v, want pause.ErrNotJoined", err)
	}
	if err := b.Place(ctx, "save"); err != nil {
		t.Fatal(err)
	}
	g.Observe(true, "save")
	done := make(chan error, 1)
	go func() {
		_, err := g.Boundary(ctx)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := b.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(st.Blocked, []int32{0}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never paused on the restarted barrier: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := b.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || g.Index() != 0 {
		t.Fatalf("Boundary across the restart: %v, index %d; want nil, 0", err, g.Index())
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(ctx); err != nil { // gone already: nothing to leave
		t.Fatalf("leaving a barrier that forgot the worker: %v", err)
	}
}

// TestControllerTLS: a controller serving mutual TLS answers a client with a certificate
// of its CA and refuses a plaintext one.
func TestControllerTLS(t *testing.T) {
	files := tlstest.New(t)
	st, err := files.Good.Server()
	if err != nil {
		t.Fatal(err)
	}
	ct, err := files.Good.Client()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ps := startPS(t, filepath.Join(dir, "ps"))
	b := ps.TrainingBarrier()
	srv, err := Serve("", dir, b, &Saver{PS: ps}, nil, nil, st)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(time.Second)
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		ok   bool
	}{{"mutual TLS", ct, true}, {"plaintext", nil, false}} {
		c, err := Dial(dir, tc.tls)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.GetBlockStatus(callCtx(t), &pb.GetBlockStatusRequest{})
		c.Close()
		if (err == nil) != tc.ok {
			t.Errorf("%s: GetBlockStatus: %v (want ok %v)", tc.name, err, tc.ok)
		}
	}
}
