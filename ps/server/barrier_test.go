package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/schemas/pspb"
)

func breq(id string, w, n int32, timeout time.Duration) *pspb.BarrierRequest {
	return &pspb.BarrierRequest{BarrierId: id, WorkerId: w, NumWorkers: n, TimeoutMs: timeout.Milliseconds()}
}

// arriveAll calls the barrier for every worker concurrently over gRPC.
func arriveAll(t *testing.T, stub pspb.ParameterServerClient, id string, n int32, timeout time.Duration) []*pspb.BarrierResponse {
	t.Helper()
	resps := make([]*pspb.BarrierResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() { resps[w], errs[w] = stub.Barrier(testCtx(t), breq(id, w, n, timeout)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return resps
}

// waitArrived polls until worker w of barrier id is in the arrived set.
func waitArrived(t *testing.T, s *Server, id string, w int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s.barriers.mu.Lock()
		st := s.barriers.mu.m[id]
		ok := false
		if st != nil {
			_, ok = st.arrived[w]
		}
		s.barriers.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("worker %d never arrived at %q", w, id)
}

// arrivedCount is the size of the current generation's arrived set (-1: unknown id).
func arrivedCount(s *Server, id string) int {
	s.barriers.mu.Lock()
	defer s.barriers.mu.Unlock()
	st := s.barriers.mu.m[id]
	if st == nil {
		return -1
	}
	return len(st.arrived)
}

// async runs one barrier call in the background.
func async(ctx context.Context, s *Server, req *pspb.BarrierRequest) <-chan *pspb.BarrierResponse {
	ch := make(chan *pspb.BarrierResponse, 1)
	go func() {
		resp, err := s.Barrier(ctx, req)
		if err != nil {
			resp = &pspb.BarrierResponse{StatusCode: -1, ErrorMessage: err.Error()}
		}
		ch <- resp
	}()
	return ch
}

func recv(t *testing.T, ch <-chan *pspb.BarrierResponse) *pspb.BarrierResponse {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("barrier call did not return")
		return nil
	}
}

func TestBarrierReleaseAndReuse(t *testing.T) {
	r := start(t, testOptions(t))
	for gen := range int64(3) {
		for w, resp := range arriveAll(t, r.stub, "step", 4, 10*time.Second) {
			if resp.StatusCode != 0 || resp.Generation != gen {
				t.Fatalf("round %d worker %d: %v", gen, w, resp)
			}
		}
	}
	if n := arrivedCount(r.srv, "step"); n != 0 {
		t.Fatalf("arrived set has %d workers after release", n)
	}
	// A single-worker barrier releases at once.
	resp, err := r.stub.Barrier(testCtx(t), breq("solo", 0, 1, time.Second))
	if err != nil || resp.StatusCode != 0 {
		t.Fatalf("solo barrier: %v %v", resp, err)
	}
}

func TestBarrierRejections(t *testing.T) {
	s := start(t, testOptions(t)).srv
	ctx := testCtx(t)
	waiter := async(ctx, s, breq("b", 0, 2, 10*time.Second))
	waitArrived(t, s, "b", 0)

	for _, tc := range []struct {
		name string
		req  *pspb.BarrierRequest
		want []string
	}{
		{"mismatched num_workers", breq("b", 1, 3, time.Second), []string{"num_workers 3", "differs from 2"}},
		{"duplicate arrival", breq("b", 0, 2, time.Second), []string{"worker 0 already arrived", "generation 0"}},
		{"zero workers", breq("b", 0, 0, time.Second), []string{"num_workers 0"}},
		{"negative worker", breq("b", -1, 2, time.Second), []string{"worker_id -1 out of range [0, 2)"}},
		{"worker past the end", breq("b", 2, 2, time.Second), []string{"worker_id 2 out of range [0, 2)"}},
		{"zero timeout", &pspb.BarrierRequest{BarrierId: "b", WorkerId: 1, NumWorkers: 2}, []string{"timeout_ms 0"}},
		{"negative timeout", &pspb.BarrierRequest{BarrierId: "b", WorkerId: 1, NumWorkers: 2, TimeoutMs: -5}, []string{"timeout_ms -5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.Barrier(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 1 {
				t.Fatalf("status %d, want 1: %s", resp.StatusCode, resp.ErrorMessage)
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.ErrorMessage, w) {
					t.Errorf("message %q does not contain %q", resp.ErrorMessage, w)
				}
			}
			if n := arrivedCount(s, "b"); n != 1 {
				t.Fatalf("arrived set has %d workers, want 1 (state mutated)", n)
			}
		})
	}
	// Invalid requests for an unknown id create no state.
	for _, req := range []*pspb.BarrierRequest{breq("fresh", 0, 0, time.Second), breq("fresh", 5, 2, time.Second), breq("fresh", 0, 2, 0)} {
		if resp, _ := s.Barrier(ctx, req); resp.StatusCode != 1 {
			t.Fatalf("%v: status %d", req, resp.StatusCode)
		}
	}
	if n := arrivedCount(s, "fresh"); n != -1 {
		t.Fatalf("invalid requests created barrier state (%d arrived)", n)
	}
	// The waiter is still released by the right second worker.
	resp, err := s.Barrier(ctx, breq("b", 1, 2, time.Second))
	if err != nil || resp.StatusCode != 0 {
		t.Fatalf("second worker: %v %v", resp, err)
	}
	if w := recv(t, waiter); w.StatusCode != 0 || w.Generation != 0 {
		t.Fatalf("waiter: %v", w)
	}
}

func TestBarrierTimeoutThenRetry(t *testing.T) {
	r := start(t, testOptions(t))
	ctx := testCtx(t)
	start := time.Now()
	resp, err := r.stub.Barrier(ctx, breq("t", 0, 2, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 2 || !strings.Contains(resp.ErrorMessage, "timed out") {
		t.Fatalf("want status 2 timeout, got %v", resp)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("timed out after %v, before 50ms", el)
	}
	if n := arrivedCount(r.srv, "t"); n != 0 {
		t.Fatalf("timed-out worker still arrived (%d)", n)
	}
	// Worker 0 retries (not a duplicate arrival) and both are released.
	for _, resp := range arriveAll(t, r.stub, "t", 2, 10*time.Second) {
		if resp.StatusCode != 0 || resp.Generation != 0 {
			t.Fatalf("retry: %v", resp)
		}
	}
}

// TestBarrierTimeoutRacingRelease releases the waiter's generation after its timer fired
// and before it re-checks under the lock: the waiter must answer OK.
func TestBarrierTimeoutRacingRelease(t *testing.T) {
	s := start(t, testOptions(t)).srv
	gaveUp, proceed := make(chan struct{}), make(chan struct{})
	s.barriers.testHookGaveUp = func() { close(gaveUp); <-proceed } // set before the waiter starts
	ch := async(testCtx(t), s, breq("race", 0, 2, 20*time.Millisecond))
	select {
	case <-gaveUp: // the waiter's timer fired
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter's timer never fired")
	}
	s.barriers.mu.Lock()
	s.barriers.mu.m["race"].releaseLocked()
	s.barriers.mu.Unlock()
	close(proceed)
	if resp := recv(t, ch); resp.StatusCode != 0 || resp.Generation != 0 {
		t.Fatalf("timeout racing release: %v, want OK in generation 0", resp)
	}
	if n := arrivedCount(s, "race"); n != 0 {
		t.Fatalf("arrived %d after release", n)
	}
}

func TestBarrierContextAndShutdown(t *testing.T) {
	r := start(t, testOptions(t))
	// A cancelled RPC leaves the arrived set.
	ctx, cancel := context.WithCancel(context.Background())
	ch := async(ctx, r.srv, breq("c", 0, 2, 10*time.Second))
	waitArrived(t, r.srv, "c", 0)
	cancel()
	if resp := recv(t, ch); resp.StatusCode != -1 || !strings.Contains(resp.ErrorMessage, "canceled") {
		t.Fatalf("cancelled waiter: %v", resp)
	}
	if n := arrivedCount(r.srv, "c"); n != 0 {
		t.Fatalf("cancelled worker still arrived (%d)", n)
	}
	// A waiter over gRPC is answered Unavailable when the server stops.
	errc := make(chan error, 1)
	go func() {
		_, err := r.stub.Barrier(context.Background(), breq("s", 0, 2, time.Minute))
		errc <- err
	}()
	waitArrived(t, r.srv, "s", 0)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("waiter at shutdown: %v, want Unavailable", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("waiter not released at shutdown")
	}
}

func TestBarrierBookkeepingBounded(t *testing.T) {
	s := start(t, testOptions(t)).srv
	ctx := testCtx(t)
	waiter := async(ctx, s, breq("keep", 0, 2, 30*time.Second))
	waitArrived(t, s, "keep", 0)
	for i := range 3 * maxIdleBarriers {
		if resp, _ := s.Barrier(ctx, breq(fmt.Sprint("once-", i), 0, 1, time.Second)); resp.StatusCode != 0 {
			t.Fatalf("barrier %d: %v", i, resp)
		}
	}
	if n := s.barriers.len(); n > maxIdleBarriers {
		t.Fatalf("%d barrier ids remembered, want at most %d", n, maxIdleBarriers)
	}
	if resp, _ := s.Barrier(ctx, breq("keep", 1, 2, time.Second)); resp.StatusCode != 0 {
		t.Fatalf("barrier with a waiter was forgotten: %v", resp)
	}
	if resp := recv(t, waiter); resp.StatusCode != 0 {
		t.Fatalf("waiter: %v", resp)
	}
}

// len is the number of barrier ids remembered.
func (b *barriers) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.mu.m)
}
