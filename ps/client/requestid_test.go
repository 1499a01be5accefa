package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// loseFirstResponse is a client interceptor that forwards the first call of method to
// each server (so the server applies it) and then answers codes.Unavailable, as if the
// response had been lost on the way back; the client retries. lost counts the injections.
func loseFirstResponse(method string) (opt grpc.DialOption, lost *atomic.Int64) {
	var (
		mu   sync.Mutex
		seen = map[string]bool{} // by server address
	)
	lost = new(atomic.Int64)
	opt = grpc.WithUnaryInterceptor(func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, m, req, reply, cc, opts...)
		if m != method || err != nil {
			return err
		}
		mu.Lock()
		first := !seen[cc.Target()]
		seen[cc.Target()] = true
		mu.Unlock()
		if !first {
			return nil
		}
		lost.Add(1)
		return status.Error(codes.Unavailable, "injected: response lost after the server applied the request")
	})
	return opt, lost
}

// duplicatesOnShards is GetStats' duplicate_requests of every shard.
func duplicatesOnShards(t *testing.T, c *client.Client) []int64 {
	t.Helper()
	all, err := c.GetStatsAll(ctx(t), false)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(all))
	for k, st := range all {
		out[k] = st.GetDuplicateRequests()
	}
	return out
}

// TestApplyRetryAfterLostResponse injects a retry: every shard's first ApplyGradients is
// applied, its answer replaced by Unavailable, and the client retries the same request.
// With a request id the shards answer duplicate and the update lands once (SGD, lr 1,
// gradient g: -g); without one it lands twice (-2g), which shows the test can fail.
func TestApplyRetryAfterLostResponse(t *testing.T) {
	const g = 0.25
	fids := []int64{1, 2} // shard 1 and shard 0 of 2
	for _, tc := range []struct {
		name       string
		requestID  string
		want       float32
		duplicates int
	}{
		{"with a request id", "worker-0/sgd/step-7", -g, 2},
		{"without a request id", "", -2 * g, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addrs := cluster(t, 2)
			lossy, lost := loseFirstResponse(pspb.ParameterServer_ApplyGradients_FullMethodName)
			c := newClient(t, addrs, client.WithBackoff(time.Millisecond, 4*time.Millisecond), client.WithDialOptions(lossy))
			res, err := c.Apply(ctx(t), client.ApplyRequest{
				Table: "sgd", Dim: 2, Fids: fids, Grads: []float32{g, g, g, g}, LRs: []float32{1}, Step: 7, RequestID: tc.requestID,
			})
			if err != nil {
				t.Fatal(err)
			}
			if lost.Load() != 2 {
				t.Fatalf("%d responses lost, want one per shard", lost.Load())
			}
			if res.Duplicates != tc.duplicates {
				t.Errorf("result %+v: %d duplicates, want %d", res, res.Duplicates, tc.duplicates)
			}
			lk, err := c.Lookup(ctx(t), "sgd", 2, fids, client.LookupOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range lk.Embeddings {
				if v != tc.want {
					t.Fatalf("weight %d of fid %d is %v, want %v (embeddings %v)", i%2, fids[i/2], v, tc.want, lk.Embeddings)
				}
			}
			want := int64(tc.duplicates / 2)
			if d := duplicatesOnShards(t, c); d[0] != want || d[1] != want {
				t.Errorf("GetStats duplicate_requests per shard %v, want %d each", d, want)
			}
		})
	}
}

// TestGlobalStepRetryAfterLostResponse: the same injected retry on GlobalStep. With a
// request id the retry returns the step of the first attempt and the counter moved once.
func TestGlobalStepRetryAfterLostResponse(t *testing.T) {
	for _, tc := range []struct {
		name       string
		requestID  string
		want       int64
		duplicates int64
	}{
		{"with a request id", "chief/step", 5, 1},
		{"without a request id", "", 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addrs := cluster(t, 2)
			lossy, lost := loseFirstResponse(pspb.ParameterServer_GlobalStep_FullMethodName)
			c := newClient(t, addrs, client.WithBackoff(time.Millisecond, 4*time.Millisecond), client.WithDialOptions(lossy))
			step, err := c.GlobalStep(ctx(t), 5, tc.requestID)
			if err != nil {
				t.Fatal(err)
			}
			if lost.Load() != 1 {
				t.Fatalf("%d responses lost, want 1", lost.Load())
			}
			if step != tc.want {
				t.Errorf("GlobalStep returned %d, want %d", step, tc.want)
			}
			if now, err := c.GlobalStep(ctx(t), 0, ""); err != nil || now != tc.want {
				t.Errorf("counter reads %d, %v; want %d", now, err, tc.want)
			}
			if d := duplicatesOnShards(t, c); d[0] != tc.duplicates || d[1] != 0 {
				t.Errorf("GetStats duplicate_requests per shard %v, want [%d 0]", d, tc.duplicates)
			}
		})
	}
}

func TestGlobalStep(t *testing.T) {
	shards, addrs := cluster(t, 2)
	c := newClient(t, addrs)
	for i, step := range []struct {
		inc  int64
		id   string
		want int64
	}{
		{0, "", 0},
		{3, "a", 3},
		{3, "a", 3},
		{4, "", 7},
		{0, "a", 3},
	} {
		got, err := c.GlobalStep(ctx(t), step.inc, step.id)
		if err != nil || got != step.want {
			t.Fatalf("call %d: GlobalStep(%d, %q) = %d, %v; want %d", i, step.inc, step.id, got, err, step.want)
		}
	}
	// Shard 0 keeps it; shard 1's counter is untouched.
	for k, want := range []int64{7, 0} {
		resp, err := shards[k].srv.GlobalStep(ctx(t), &pspb.GlobalStepRequest{})
		if err != nil || resp.Step != want {
			t.Errorf("shard %d: %v, %v; want step %d", k, resp, err, want)
		}
	}
	var ic *client.InvalidConfigError
	if _, err := c.GlobalStep(ctx(t), -1, ""); !errors.As(err, &ic) {
		t.Fatalf("negative increment: %v", err)
	}
}

// TestApplyGradientsIsApply: the positional ApplyGradients and Apply without an id are one
// code path: the same counts, and a repeat applies again.
func TestApplyGradientsIsApply(t *testing.T) {
	_, addrs := cluster(t, 3)
	c := newClient(t, addrs)
	fids := []int64{1, 2, 3, 4, 4}
	grads := make([]float32, len(fids)*2)
	for i := range grads {
		grads[i] = 1
	}
	a, err := c.ApplyGradients(ctx(t), "sgd", 2, fids, grads, nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Apply(ctx(t), client.ApplyRequest{Table: "sgd", Dim: 2, Fids: fids, Grads: grads, Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	if *a != (client.ApplyResult{NumUpdated: 4, NumCreated: 4}) || *b != (client.ApplyResult{NumUpdated: 4}) {
		t.Fatalf("ApplyGradients %+v, Apply %+v", a, b)
	}
	// Bad requests are rejected before sending, by both.
	var ic *client.InvalidConfigError
	if _, err := c.Apply(ctx(t), client.ApplyRequest{Table: "sgd", Dim: 2, Fids: fids, Grads: grads[:3], RequestID: "x"}); !errors.As(err, &ic) {
		t.Fatalf("short gradients: %v", err)
	}
	// An id applies once per shard it reaches.
	for i, want := range []int{0, 3} {
		res, err := c.Apply(ctx(t), client.ApplyRequest{Table: "sgd", Dim: 2, Fids: fids, Grads: grads, RequestID: "once"})
		if err != nil || res.Duplicates != want {
			t.Fatalf("apply %d with one id: %+v, %v; want %d duplicates", i, res, err, want)
		}
	}
}
