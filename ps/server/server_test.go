package server

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/schemas/pspb"
)

func TestValidate(t *testing.T) {
	ok := testOptions(t)
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string // "" means valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"zero fields take defaults", func(o *Options) { o.Listen, o.MaxFidsPerRequest, o.KeepCheckpoints = "", 0, 0 }, ""},
		{"no shards", func(o *Options) { o.NumShards = 0 }, "num shards 0"},
		{"shard out of range", func(o *Options) { o.Shard, o.NumShards = 2, 2 }, "shard 2 out of range [0, 2)"},
		{"negative shard", func(o *Options) { o.Shard = -1 }, "shard -1 out of range"},
		{"no tables", func(o *Options) { o.Tables = nil }, "no tables"},
		{"duplicate table", func(o *Options) {
			o.Tables = proto.Clone(o.Tables).(*pspb.TablesConfig)
			o.Tables.Tables[1].Name = "emb"
		}, `table "emb" configured twice`},
		{"save without dir", func(o *Options) { o.SaveEvery = time.Second }, "needs a checkpoint directory"},
		{"negative save", func(o *Options) { o.SaveEvery = -1 }, "negative"},
		{"negative max fids", func(o *Options) { o.MaxFidsPerRequest = -1 }, "max fids per request -1"},
		{"negative mem limit", func(o *Options) { o.MemLimitBytes = -1 }, "memory limit -1"},
		{"bad listen", func(o *Options) { o.Listen = "nope" }, "listen address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.mod(&o)
			err := o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("Validate() = %v, does not match ErrInvalidOptions", err)
			}
		})
	}
	if _, err := New(Options{}); err == nil || !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("New(Options{}) = %v, want ErrInvalidOptions", err)
	}
}

func TestLookupApply(t *testing.T) {
	r := start(t, testOptions(t))
	ctx := testCtx(t)
	// Monolith mode: lookups of absent fids are zeros and create nothing.
	lr, err := r.stub.Lookup(ctx, &pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 2, 1}, WantFound: true})
	if err != nil || lr.StatusCode != 0 {
		t.Fatal(lr, err)
	}
	if len(lr.Embeddings) != 12 || lr.NumFound != 0 || lr.NumInitialized != 0 || !slices.Equal(lr.Found, []bool{false, false, false}) {
		t.Fatalf("lookup of absent fids: %v", lr)
	}
	for _, v := range lr.Embeddings {
		if v != 0 {
			t.Fatalf("absent fid reads %v", lr.Embeddings)
		}
	}
	// An apply creates and steps; duplicates are summed (fid 1: g = 1+1 → w = -0.1*2).
	grads := []float32{1, 2, 3, 4, 10, 10, 10, 10, 1, 2, 3, 4}
	ar, err := r.stub.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 2, 1}, Gradients: grads, GlobalStep: 7})
	if err != nil || ar.StatusCode != 0 {
		t.Fatal(ar, err)
	}
	if ar.NumUpdated != 2 || ar.NumCreated != 2 || ar.NumNotFound != 0 {
		t.Fatalf("apply counts: %v", ar)
	}
	lr, err = r.stub.Lookup(ctx, &pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: []int64{2, 1, 3}, WantFound: true})
	if err != nil || lr.StatusCode != 0 {
		t.Fatal(lr, err)
	}
	want := []float32{-1, -1, -1, -1, -0.2, -0.4, -0.6, -0.8, 0, 0, 0, 0}
	if !approx(lr.Embeddings, want) || lr.NumFound != 2 || !slices.Equal(lr.Found, []bool{true, true, false}) {
		t.Fatalf("lookup after apply: %v, want %v", lr, want)
	}
	// create_if_missing counts per position.
	lr, err = r.stub.Lookup(ctx, &pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: []int64{5, 1, 5}, CreateIfMissing: true})
	if err != nil || lr.StatusCode != 0 || lr.NumFound != 1 || lr.NumInitialized != 2 || lr.Found != nil {
		t.Fatalf("create_if_missing: %v %v", lr, err)
	}
	if s := r.srv.step.Load(); s != 7 {
		t.Fatalf("step %d, want 7", s)
	}
}

func approx(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-5 || d < -1e-5 {
			return false
		}
	}
	return true
}

func TestRequestValidation(t *testing.T) {
	s := start(t, testOptions(t)).srv
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		req  *pspb.LookupRequest
		want string
	}{
		{"unknown table", &pspb.LookupRequest{Table: "nope", DimSize: 4, Fids: []int64{1}}, `unknown table "nope"`},
		{"zero dim", &pspb.LookupRequest{Table: "emb", Fids: []int64{1}}, "dim_size 0 does not match the table dim 4"},
		{"wrong dim", &pspb.LookupRequest{Table: "two", DimSize: 4, Fids: []int64{1}}, `table "two": dim_size 4 does not match the table dim 3`},
		{"negative dim", &pspb.LookupRequest{Table: "emb", DimSize: -4}, "dim_size -4"},
	} {
		t.Run("lookup "+tc.name, func(t *testing.T) {
			resp, err := s.Lookup(ctx, tc.req)
			if err != nil || resp.StatusCode != 1 || !strings.Contains(resp.ErrorMessage, tc.want) || len(resp.Embeddings) != 0 {
				t.Fatalf("got %v %v, want status 1 with %q", resp, err, tc.want)
			}
		})
	}
	before := count(s.metrics.applies)
	for _, tc := range []struct {
		name string
		req  *pspb.ApplyGradientsRequest
		want string
	}{
		{"unknown table", &pspb.ApplyGradientsRequest{Table: "nope", DimSize: 4}, `unknown table "nope"`},
		{"wrong dim", &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 3, Fids: []int64{1}, Gradients: []float32{1, 2, 3}}, "dim_size 3 does not match the table dim 4"},
		{"short gradients", &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 2}, Gradients: make([]float32, 7)}, "7 gradients for 2 fids of dim 4, want 8"},
		{"long gradients", &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1}, Gradients: make([]float32, 5)}, "5 gradients"},
		{"learning rates", &pspb.ApplyGradientsRequest{Table: "two", DimSize: 3, Fids: []int64{1}, Gradients: make([]float32, 3), LearningRates: []float32{1}}, "1 learning rates, the table has 2 segments"},
		{"huge global step", &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1}, Gradients: make([]float32, 4), GlobalStep: math.MaxInt64}, "global_step 9223372036854775807 outside [0, 9007199254740992]"},
		{"update time in ms", &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1}, Gradients: make([]float32, 4), UpdateTime: time.Now().UnixMilli()}, "is not Unix seconds up to a day ahead"},
		{"NaN gradient", &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 9}, Gradients: []float32{0, 0, 0, 0, 0, float32(math.NaN()), 0, 0}}, "gradient 5 (fid 9) is NaN: non-finite gradients are rejected"},
		{"Inf gradient", &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1}, Gradients: []float32{float32(math.Inf(-1)), 0, 0, 0}}, "gradient 0 (fid 1) is -Inf"},
		{"Inf learning rate", &pspb.ApplyGradientsRequest{Table: "two", DimSize: 3, Fids: []int64{1}, Gradients: make([]float32, 3), LearningRates: []float32{1, float32(math.Inf(1))}}, "learning rate 1 is +Inf"},
	} {
		t.Run("apply "+tc.name, func(t *testing.T) {
			resp, err := s.ApplyGradients(ctx, tc.req)
			if err != nil || resp.StatusCode != 1 || !strings.Contains(resp.ErrorMessage, tc.want) {
				t.Fatalf("got %v %v, want status 1 with %q", resp, err, tc.want)
			}
		})
	}
	// Nothing was touched, and failures count as applies (§8.3).
	for _, tb := range s.Tables() {
		if n := tb.Stats().Size; n != 0 {
			t.Fatalf("table %s has %d entries after rejected requests", tb.Name(), n)
		}
	}
	if got := count(s.metrics.applies) - before; got != 10 {
		t.Fatalf("apply count grew by %d, want 10", got)
	}
	if got := count(s.metrics.nonFinite); got != 3 {
		t.Fatalf("non-finite rejections %d, want 3", got)
	}
	if sum, n := read(s.metrics.applyLatency); count(s.metrics.applyErrors) != 10 || n != 10 || sum <= 0 {
		t.Fatalf("apply errors %d, latency histogram %d samples summing %v s", count(s.metrics.applyErrors), n, sum)
	}
	// The right number of learning rates is accepted: one per segment.
	resp, err := s.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "two", DimSize: 3, Fids: []int64{1}, Gradients: []float32{1, 1, 1}, LearningRates: []float32{0.5, 0.1}})
	if err != nil || resp.StatusCode != 0 || resp.NumUpdated != 1 {
		t.Fatal(resp, err)
	}
}

// TestNonFiniteSkipPolicy: with the skip policy a NaN or infinite gradient leaves out the
// fids whose rows hold one and applies the others, counting the skipped fids; an unknown
// policy is an invalid option.
func TestNonFiniteSkipPolicy(t *testing.T) {
	o := testOptions(t)
	o.NonFiniteGradients = NonFiniteSkip
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	resp, err := s.ApplyGradients(testCtx(t), &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 2, 3, 4},
		Gradients: []float32{1, 1, 1, 1, 1, nan, 1, 1, 1, 1, 1, 1, inf, 1, 1, 1}})
	if err != nil || resp.StatusCode != 0 || resp.NumUpdated != 2 {
		t.Fatalf("skip policy: %v, %v; want 2 fids updated", resp, err)
	}
	if got := count(s.metrics.nonFiniteSkipped); got != 2 {
		t.Errorf("skipped fids counted %d, want 2", got)
	}
	if got := count(s.metrics.nonFinite); got != 0 {
		t.Errorf("rejections counted %d under the skip policy", got)
	}
	if n := s.Tables()[0].Stats().Size; n != 2 {
		t.Errorf("%d entries, want fids 1 and 3 only", n)
	}
	bad := testOptions(t)
	bad.NonFiniteGradients = "ignore"
	if _, err := New(bad); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), `"ignore"`) {
		t.Errorf("policy ignore: %v", err)
	}
}

func TestBatchMixedValidity(t *testing.T) {
	r := start(t, testOptions(t))
	ctx := testCtx(t)
	ok := func(table string, dim int32, fids []int64, g float32) *pspb.ApplyGradientsRequest {
		grads := make([]float32, len(fids)*int(dim))
		for i := range grads {
			grads[i] = g
		}
		return &pspb.ApplyGradientsRequest{Table: table, DimSize: dim, Fids: fids, Gradients: grads}
	}
	breq := &pspb.BatchApplyGradientsRequest{Requests: []*pspb.ApplyGradientsRequest{
		ok("emb", 4, []int64{1, 2}, 1),
		{Table: "missing", DimSize: 4, Fids: []int64{1}, Gradients: make([]float32, 4)},
		{Table: "emb", DimSize: 0, Fids: []int64{1}},
		{Table: "emb", DimSize: 4, Fids: []int64{3}, Gradients: make([]float32, 3)},
		{Table: "two", DimSize: 3, Fids: []int64{3}, Gradients: make([]float32, 3), LearningRates: []float32{1, 2, 3}},
		ok("two", 3, []int64{7, 7, 8}, 1),
		{},
	}}
	resp, err := r.stub.BatchApplyGradients(ctx, breq)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus := []int32{0, 1, 1, 1, 1, 0, 1}
	if len(resp.Responses) != len(wantStatus) {
		t.Fatalf("%d responses for %d requests", len(resp.Responses), len(wantStatus))
	}
	for i, sub := range resp.Responses {
		if sub.StatusCode != wantStatus[i] || (sub.StatusCode != 0) != (sub.ErrorMessage != "") {
			t.Errorf("slot %d: %v, want status %d", i, sub, wantStatus[i])
		}
	}
	if resp.Responses[0].NumUpdated != 2 || resp.Responses[5].NumUpdated != 2 {
		t.Fatalf("updated counts %d, %d; want 2, 2", resp.Responses[0].NumUpdated, resp.Responses[5].NumUpdated)
	}

	lresp, err := r.stub.BatchLookup(ctx, &pspb.BatchLookupRequest{Requests: []*pspb.LookupRequest{
		{Table: "two", DimSize: 3, Fids: []int64{8, 7}},
		{Table: "emb", DimSize: 3, Fids: []int64{1}},
		{Table: "emb", DimSize: 4, Fids: []int64{2, 9}, WantFound: true},
		{Table: "x", DimSize: 1},
		{Table: "emb", DimSize: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus = []int32{0, 1, 0, 1, 0}
	for i, sub := range lresp.Responses {
		if sub.StatusCode != wantStatus[i] {
			t.Errorf("lookup slot %d: %v, want status %d", i, sub, wantStatus[i])
		}
	}
	// "two": SGD lr 1 on the bias (fid 7 summed: 2 → -2; fid 8: -1).
	if got := lresp.Responses[0].Embeddings; len(got) != 6 || got[0] != -1 || got[3] != -2 {
		t.Fatalf("two rows %v, want biases -1 (fid 8) and -2 (fid 7)", got)
	}
	if got := lresp.Responses[2]; !approx(got.Embeddings, []float32{-0.1, -0.1, -0.1, -0.1, 0, 0, 0, 0}) || !slices.Equal(got.Found, []bool{true, false}) {
		t.Fatalf("emb rows %v found %v", got.Embeddings, got.Found)
	}
	if n := len(lresp.Responses[4].Embeddings); n != 0 {
		t.Fatalf("empty lookup returned %d floats", n)
	}

	// A nil sub-request (possible in direct calls only) fails in its own slot.
	nl, err := r.srv.BatchLookup(ctx, &pspb.BatchLookupRequest{Requests: []*pspb.LookupRequest{nil, {Table: "emb", DimSize: 4, Fids: []int64{1}}}})
	if err != nil || len(nl.Responses) != 2 || nl.Responses[0].StatusCode != 1 || !strings.Contains(nl.Responses[0].ErrorMessage, "batch lookup: sub-request 0 is nil") ||
		nl.Responses[1].StatusCode != 0 || len(nl.Responses[1].Embeddings) != 4 {
		t.Fatalf("batch lookup with a nil sub-request: %v %v", nl, err)
	}
	na, err := r.srv.BatchApplyGradients(ctx, &pspb.BatchApplyGradientsRequest{Requests: []*pspb.ApplyGradientsRequest{ok("emb", 4, []int64{9}, 1), nil}})
	if err != nil || len(na.Responses) != 2 || na.Responses[0].StatusCode != 0 || na.Responses[0].NumUpdated != 1 ||
		na.Responses[1].StatusCode != 1 || !strings.Contains(na.Responses[1].ErrorMessage, "batch apply: sub-request 1 is nil") {
		t.Fatalf("batch apply with a nil sub-request: %v %v", na, err)
	}
}

func TestRequestLimits(t *testing.T) {
	o := testOptions(t)
	o.MaxFidsPerRequest = 8
	r := start(t, o)
	ctx := testCtx(t)
	fids := func(n int) []int64 { return make([]int64, n) }
	check := func(name string, err error, want string) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "limit of 8") {
			t.Errorf("%s: %v, want ResourceExhausted naming %q and the limit", name, err, want)
		}
	}
	_, err := r.stub.Lookup(ctx, &pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: fids(9)})
	check("lookup", err, "9 fids")
	_, err = r.stub.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: fids(9), Gradients: make([]float32, 36)})
	check("apply", err, "9 fids")
	_, err = r.stub.BatchLookup(ctx, &pspb.BatchLookupRequest{Requests: []*pspb.LookupRequest{{Fids: fids(5)}, {Fids: fids(5)}}})
	check("batch lookup", err, "10 fids")
	_, err = r.stub.BatchApplyGradients(ctx, &pspb.BatchApplyGradientsRequest{Requests: []*pspb.ApplyGradientsRequest{{Fids: fids(4)}, {Fids: fids(5)}}})
	check("batch apply", err, "9 fids")
	// At the limit is fine.
	if resp, err := r.stub.Lookup(ctx, &pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: fids(8)}); err != nil || resp.StatusCode != 0 {
		t.Fatal(resp, err)
	}
	if n := count(r.srv.metrics.rejected.WithLabelValues(limitFidsPerRequest)); n != 4 {
		t.Fatalf("rejected %d, want 4", n)
	}
	// Messages over MaxMessageBytes are refused by gRPC.
	o = testOptions(t)
	o.MaxMessageBytes = 1 << 10
	small := start(t, o)
	_, err = small.stub.Lookup(ctx, &pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: fids(2000)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized message: %v", err)
	}
	// A reply over MaxMessageBytes is refused before its embeddings are allocated: 100 fids
	// of dim 4 fit the 1 KiB request but not the 1.6 kB reply.
	resp, err := small.stub.Lookup(ctx, &pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: fids(100)})
	if err != nil || resp.StatusCode != 1 || !strings.Contains(resp.ErrorMessage, "(1600 bytes) exceeds the limit of 1024 message bytes") {
		t.Fatalf("oversized reply: %v %v", resp, err)
	}
	if n := count(small.srv.metrics.rejected.WithLabelValues(limitReplyBytes)); n != 1 {
		t.Errorf("reply rejections %d, want 1", n)
	}
}

// TestSubRequestAndIDLimits: a batch of many (empty) sub-requests and an overlong request
// id are refused with a status naming the limit; the server keeps serving.
func TestSubRequestAndIDLimits(t *testing.T) {
	o := testOptions(t)
	o.MaxSubRequests, o.MaxRequestIDBytes = 4, 16
	r := start(t, o)
	ctx := testCtx(t)
	many := make([]*pspb.ApplyGradientsRequest, 5)
	for i := range many {
		many[i] = &pspb.ApplyGradientsRequest{}
	}
	_, err := r.stub.BatchApplyGradients(ctx, &pspb.BatchApplyGradientsRequest{Requests: many})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "5 sub-requests exceeds the limit of 4 sub-requests per batch") {
		t.Errorf("5 sub-requests: %v", err)
	}
	_, err = r.stub.BatchLookup(ctx, &pspb.BatchLookupRequest{Requests: make([]*pspb.LookupRequest, 5)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("5 lookup sub-requests: %v", err)
	}
	long := strings.Repeat("x", 17)
	ar, err := r.stub.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1}, Gradients: make([]float32, 4), RequestId: long})
	if err != nil || ar.StatusCode != 1 || !strings.Contains(ar.ErrorMessage, "request id of 17 bytes exceeds the limit of 16 request id bytes") {
		t.Errorf("long request id: %v %v", ar, err)
	}
	_, err = r.stub.GlobalStep(ctx, &pspb.GlobalStepRequest{Increment: 1, RequestId: long})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "request id bytes") {
		t.Errorf("global step with a long request id: %v", err)
	}
	if n := count(r.srv.metrics.rejected.WithLabelValues(limitSubRequests)); n != 2 {
		t.Errorf("sub-request rejections %d, want 2", n)
	}
	// Within the limits, requests go through.
	ar, err = r.stub.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1}, Gradients: make([]float32, 4), RequestId: long[:16]})
	if err != nil || ar.StatusCode != 0 {
		t.Errorf("apply within the limits: %v %v", ar, err)
	}
}

func TestStatsAndHealth(t *testing.T) {
	o := testOptions(t)
	o.Shard, o.NumShards = 1, 3
	o.MetricsListen = "127.0.0.1:0"
	r := start(t, o)
	ctx := testCtx(t)
	st, err := r.stub.GetStats(ctx, &pspb.GetStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.LookupCount != 0 || st.AvgLookupLatencyUs != 0 || st.AvgApplyLatencyUs != 0 || st.Shard != 1 || st.NumShards != 3 || len(st.Tables) != 0 {
		t.Fatalf("fresh stats: %v", st)
	}
	for range 3 {
		r.stub.Lookup(ctx, &pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 2}})
	}
	r.stub.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 2, 3}, Gradients: make([]float32, 12)})
	r.stub.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 2})
	st, err = r.stub.GetStats(ctx, &pspb.GetStatsRequest{IncludeTableStats: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.LookupCount != 3 || st.ApplyGradientsCount != 2 || st.AvgLookupLatencyUs <= 0 || st.AvgApplyLatencyUs <= 0 {
		t.Fatalf("stats: %v", st)
	}
	if len(st.Tables) != 2 || st.Tables[0].Name != "emb" || st.Tables[0].Size != 3 || st.Tables[0].Dim != 4 || st.Tables[0].MemoryBytes <= 0 || st.Tables[1].Size != 0 {
		t.Fatalf("table stats: %v", st.Tables)
	}

	// Monolith's memory check.
	h, err := r.stub.HealthCheck(ctx, &pspb.HealthCheckRequest{})
	if err != nil || !h.Healthy || h.Status != 0 || h.Message != "" || h.RssBytes <= 0 || h.MemLimitBytes != DefaultMemLimitBytes ||
		len(h.MachineHealthResult) != 0 {
		t.Fatalf("health: %v %v", h, err)
	}
	r.srv.readRSS = func() (int64, error) { return 2000, nil }
	r.srv.opts.MemLimitBytes = 1000
	// (Called directly: the handler reads the fields just changed.)
	h, err = r.srv.HealthCheck(ctx, &pspb.HealthCheckRequest{Component: "ps"})
	if err != nil || h.Healthy || h.Status != 1 || h.Message != "Memory limit exceeded. Current: 2000, Limit: 1000" {
		t.Fatalf("over the limit: %v %v", h, err)
	}
	// MachineHealthResult{status: OUT_OF_MEMORY, message: …} on the wire: field 1 varint 1,
	// field 2 the message.
	want := append([]byte{0x08, 0x01, 0x12, byte(len(h.Message))}, h.Message...)
	if !bytes.Equal(h.MachineHealthResult, want) {
		t.Fatalf("machine_health_result = %x, want %x", h.MachineHealthResult, want)
	}
	r.srv.readRSS = func() (int64, error) { return 0, errors.New("no /proc") }
	if _, err := r.srv.HealthCheck(ctx, &pspb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
		t.Fatalf("unreadable RSS: %v", err)
	}
	if _, err := r.stub.HealthCheck(ctx, &pspb.HealthCheckRequest{Component: "gpu"}); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `"gpu"`) {
		t.Fatalf("unknown component: %v", err)
	}

	// The standard gRPC health service.
	hc := healthpb.NewHealthClient(r.cc)
	for _, svc := range []string{"", pspb.ParameterServer_ServiceDesc.ServiceName} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("grpc health %q: %v %v", svc, resp, err)
		}
	}

	// /metrics, parsed by the Prometheus text parser.
	fams := scrape(t, r)
	shard := []string{"shard", "1", "num_shards", "3"}
	with := func(kv ...string) []string { return append(slices.Clone(shard), kv...) }
	wantSamples(t, fams, []sample{
		{"monolith_ps_lookup_requests_total", shard, 3},
		{"monolith_ps_apply_requests_total", shard, 2},
		{"monolith_ps_apply_errors_total", shard, 1},
		{"monolith_ps_lookup_fids_total", shard, 6},
		{"monolith_ps_lookup_latency_seconds", shard, 3}, // histogram: its sample count
		{"monolith_ps_apply_latency_seconds", shard, 2},
		{"monolith_ps_table_entries", with("table", "emb"), 3},
		{"monolith_ps_table_dim", with("table", "two"), 3},
		{"monolith_ps_request_limit", with("limit", "fids_per_request"), DefaultMaxFidsPerRequest},
		{"monolith_ps_request_limit", with("limit", "message_bytes"), DefaultMaxMessageBytes},
		{"monolith_ps_rejected_requests_total", with("limit", "fids_per_request"), 0},
		{"monolith_ps_training_barrier_placed", with("action", ""), 0},
	})
	for name, typ := range map[string]dto.MetricType{
		"monolith_ps_lookup_latency_seconds":  dto.MetricType_HISTOGRAM,
		"monolith_ps_apply_latency_seconds":   dto.MetricType_HISTOGRAM,
		"monolith_ps_barrier_latency_seconds": dto.MetricType_HISTOGRAM,
		"monolith_ps_checkpoint_save_seconds": dto.MetricType_HISTOGRAM,
		"monolith_ps_lookup_requests_total":   dto.MetricType_COUNTER,
		"monolith_ps_table_entries":           dto.MetricType_GAUGE,
		"go_goroutines":                       dto.MetricType_GAUGE,
		"process_resident_memory_bytes":       dto.MetricType_GAUGE,
	} {
		if got := fams[name].GetType(); fams[name] == nil || got != typ {
			t.Errorf("/metrics %s: type %v (present %v), want %v", name, got, fams[name] != nil, typ)
		}
	}
	h0 := fams["monolith_ps_lookup_latency_seconds"].GetMetric()[0].GetHistogram()
	if n := len(h0.GetBucket()); n != len(requestBuckets)+1 || h0.GetSampleSum() <= 0 { // the parser adds +Inf
		t.Errorf("lookup latency histogram: %d buckets (want %d), sum %v", n, len(requestBuckets), h0.GetSampleSum())
	}

	// Shutdown turns the gRPC health service NOT_SERVING.
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	resp, err := r.srv.health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health after stop: %v %v", resp, err)
	}
}

func TestParseVmRSS(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"Name:\tx\nVmRSS:\t  1234 kB\nVmData: 1 kB\n", 1234 * 1024, true},
		{"VmRSS: 0 kB", 0, true},
		{"Name: x\n", 0, false},
		{"VmRSS: 12 MB\n", 0, false},
		{"VmRSS: x kB\n", 0, false},
		{"VmRSS: 99999999999999999999 kB\n", 0, false},
	} {
		got, err := parseVmRSS([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseVmRSS(%q) = %d, %v", tc.in, got, err)
		}
	}
}

// lookupAll returns the rows of fids in every table.
func lookupAll(t *testing.T, stub pspb.ParameterServerClient, fids []int64) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for table, dim := range map[string]int32{"emb": 4, "two": 3} {
		resp, err := stub.Lookup(testCtx(t), &pspb.LookupRequest{Table: table, DimSize: dim, Fids: fids})
		if err != nil || resp.StatusCode != 0 {
			t.Fatal(resp, err)
		}
		out[table] = resp.Embeddings
	}
	return out
}

func applyBoth(t *testing.T, stub pspb.ParameterServerClient, fids []int64, g float32, step int64) {
	t.Helper()
	for table, dim := range map[string]int{"emb": 4, "two": 3} {
		grads := make([]float32, len(fids)*dim)
		for i := range grads {
			grads[i] = g * float32(i%5+1)
		}
		resp, err := stub.ApplyGradients(testCtx(t), &pspb.ApplyGradientsRequest{Table: table, DimSize: int32(dim), Fids: fids, Gradients: grads, GlobalStep: step})
		if err != nil || resp.StatusCode != 0 {
			t.Fatal(resp, err)
		}
	}
}

func equalRows(a, b map[string][]float32) bool {
	for k := range a {
		if !slices.Equal(a[k], b[k]) {
			return false
		}
	}
	return len(a) == len(b)
}

// TestKillAndRestartFromCheckpoint: Save, more applies, a kill without a final save, a
// restart: the state is the saved one. Then a graceful stop saves and the next restart
// has everything.
func TestKillAndRestartFromCheckpoint(t *testing.T) {
	o := testOptions(t)
	o.Shard, o.NumShards = 0, 2
	o.CheckpointDir = t.TempDir()
	fids := []int64{2, 4, -6, 1 << 40, 8}

	r := start(t, o)
	applyBoth(t, r.stub, fids, 1, 10)
	if _, err := r.stub.Save(testCtx(t), &pspb.SaveRequest{}); err != nil {
		t.Fatal(err)
	}
	saved := lookupAll(t, r.stub, fids)
	applyBoth(t, r.stub, fids[:3], 5, 11)
	if after := lookupAll(t, r.stub, fids); equalRows(after, saved) {
		t.Fatal("applies after the save changed nothing")
	}
	r.srv.Close() // a kill: no final save

	r2 := start(t, o)
	if got := lookupAll(t, r2.stub, fids); !equalRows(got, saved) {
		t.Fatalf("after restart:\n got %v\nwant %v (the saved state)", got, saved)
	}
	if s := r2.srv.step.Load(); s != 10 {
		t.Errorf("restored step %d, want 10", s)
	}
	applyBoth(t, r2.stub, fids[1:], 3, 12)
	last := lookupAll(t, r2.stub, fids)
	if err := r2.stop(t); err != nil { // graceful: final save
		t.Fatal(err)
	}
	r3 := start(t, o)
	if got := lookupAll(t, r3.stub, fids); !equalRows(got, last) {
		t.Fatalf("after graceful restart:\n got %v\nwant %v", got, last)
	}
	r3.srv.Close()

	// The checkpoints live under the shard's folder.
	if _, err := os.Stat(ShardDir(o.CheckpointDir, 0, 2)); err != nil {
		t.Fatal(err)
	}
	// A server with a different shard count does not start empty over them: it refuses,
	// naming the count the directory holds.
	o2 := o
	o2.NumShards = 3
	if _, err := New(o2); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "checkpoints of 2 PS shards (shard-0-of-2), but this job has 3") {
		t.Fatalf("shard 0 of 3 over the checkpoints of 2 shards: %v", err)
	}
}

// TestRestoreFrom: a fresh checkpoint folder starts from Options.RestoreFrom (another
// job's checkpoint, found by its step with checkpoint.AtStep); without it the job restores
// its own newest checkpoint.
func TestRestoreFrom(t *testing.T) {
	o := testOptions(t)
	o.Shard, o.NumShards = 0, 1
	o.CheckpointDir = t.TempDir()
	fids := []int64{2, 4, 8}
	r := start(t, o)
	applyBoth(t, r.stub, fids, 1, 10)
	if _, err := r.stub.Save(testCtx(t), &pspb.SaveRequest{}); err != nil {
		t.Fatal(err)
	}
	at10 := lookupAll(t, r.stub, fids)
	applyBoth(t, r.stub, fids, 2, 20)
	if err := r.stop(t); err != nil { // final save at step 20
		t.Fatal(err)
	}
	from, err := checkpoint.AtStep(ShardDir(o.CheckpointDir, 0, 1), 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.AtStep(ShardDir(o.CheckpointDir, 0, 1), 11); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Fatalf("AtStep(11) = %v, want ErrNoCheckpoint", err)
	}
	o2 := o
	o2.CheckpointDir, o2.RestoreFrom = t.TempDir(), from
	r2 := start(t, o2)
	if got := lookupAll(t, r2.stub, fids); !equalRows(got, at10) || r2.srv.step.Load() != 10 {
		t.Fatalf("restored from step 10: step %d, rows %v, want %v", r2.srv.step.Load(), got, at10)
	}
	applyBoth(t, r2.stub, fids, 3, 30)
	mine := lookupAll(t, r2.stub, fids)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	o2.RestoreFrom = ""
	r3 := start(t, o2)
	if got := lookupAll(t, r3.stub, fids); !equalRows(got, mine) {
		t.Fatal("the job did not restore its own newest checkpoint")
	}
	r3.srv.Close()
}

func TestCorruptCheckpointIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, dir, ckpt string)
	}{
		{"truncated files", func(t *testing.T, _, ckpt string) {
			ents, err := os.ReadDir(ckpt)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), ".entries") {
					info, _ := e.Info()
					if err := os.Truncate(filepath.Join(ckpt, e.Name()), info.Size()/2); err != nil {
						t.Fatal(err)
					}
				}
			}
		}},
		{"flipped byte", func(t *testing.T, _, ckpt string) {
			err := filepath.WalkDir(ckpt, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !strings.HasSuffix(p, ".entries") {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				b[len(b)/2] ^= 0x40
				return os.WriteFile(p, b, 0o644)
			})
			if err != nil {
				t.Fatal(err)
			}
		}},
		{"missing manifest", func(t *testing.T, _, ckpt string) {
			if err := os.Remove(filepath.Join(ckpt, "MANIFEST.json")); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing folder", func(t *testing.T, _, ckpt string) {
			if err := os.RemoveAll(ckpt); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			o.CheckpointDir = t.TempDir()
			r := start(t, o)
			applyBoth(t, r.stub, []int64{1, 2, 3}, 1, 1)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			dir := ShardDir(o.CheckpointDir, 0, 1)
			ckpt, err := checkpoint.Latest(dir)
			if err != nil {
				t.Fatal(err)
			}
			tc.corrupt(t, dir, ckpt)
			s, err := New(o)
			if err == nil {
				s.Close()
				t.Fatal("New over a corrupt checkpoint succeeded")
			}
			if !strings.Contains(err.Error(), ckpt) {
				t.Fatalf("error %q does not name the checkpoint %s", err, ckpt)
			}
		})
	}
}

func TestSaveWithoutDirectory(t *testing.T) {
	r := start(t, testOptions(t))
	if _, err := r.stub.Save(testCtx(t), &pspb.SaveRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Save without a directory: %v", err)
	}
}

func TestPeriodicSave(t *testing.T) {
	o := testOptions(t)
	o.CheckpointDir = t.TempDir()
	o.SaveEvery = 20 * time.Millisecond
	o.KeepCheckpoints = 2
	r := start(t, o)
	applyBoth(t, r.stub, []int64{1}, 1, 1)
	deadline := time.Now().Add(10 * time.Second)
	for count(r.srv.metrics.saves) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no periodic saves")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestLifecycle(t *testing.T) {
	// Close before Serve, Close twice, Serve after Close.
	s, err := New(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
	// Serve twice; Close stops a running Serve.
	s, err = New(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background()) }()
	for !s.serving.Load() {
		time.Sleep(time.Millisecond)
	}
	if err := s.Serve(context.Background()); err == nil {
		t.Fatal("second Serve succeeded")
	}
	s.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
}

func TestPeriodicEviction(t *testing.T) {
	o := testOptions(t)
	o.Tables = tablesConfig(t, `
tables {
  name: "exp"
  config {
    entry_config { segments { dim_size: 2 init_config { zeros {} } opt_config { sgd {} } } }
    cuckoo {}
    enable_feature_eviction: true
    feature_evict_every_n_hours: 1
    slot_expire_time_config { default_expire_time: 1 }
  }
  filter { type: NONE }
}`)
	r := startWith(t, o, func(s *Server) {
		if s.evict[0] != time.Hour {
			t.Errorf("eviction period %v, want 1h", s.evict[0])
		}
		s.evict[0] = 10 * time.Millisecond
	})
	const day = 86400
	for i, ts := range []int64{1700000000, 1700000000 + 3*day} {
		resp, err := r.stub.ApplyGradients(testCtx(t), &pspb.ApplyGradientsRequest{Table: "exp", DimSize: 2, Fids: []int64{int64(i + 1)}, Gradients: []float32{1, 1}, UpdateTime: ts})
		if err != nil || resp.StatusCode != 0 {
			t.Fatal(resp, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for count(r.srv.metrics.evicted) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the expired entry was never evicted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := r.srv.Tables()[0].Stats().Size; n != 1 || count(r.srv.metrics.evicted) != 1 {
		t.Fatalf("%d entries left, %d evicted; want 1 and 1", n, count(r.srv.metrics.evicted))
	}
}

func TestRecoverInterceptor(t *testing.T) {
	s, err := New(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.recoverInterceptor(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(context.Context, any) (any, error) { panic("boom") })
	if status.Code(err) != codes.Internal {
		t.Fatalf("panic became %v, want Internal", err)
	}
}

// TestBatchSubRequestPanic: a panic inside one sub-request of a batch RPC (which runs on
// a goroutine of its own, out of the interceptor's reach) fails that sub-request's slot;
// the others answer and the server keeps serving.
func TestBatchSubRequestPanic(t *testing.T) {
	o := testOptions(t)
	r := startWith(t, o, func(s *Server) {
		s.beforeSub = func(op string, i int) {
			if i == 1 {
				panic("boom in " + op)
			}
		}
	})
	sub := func() *pspb.LookupRequest { return &pspb.LookupRequest{Table: "emb", DimSize: 4, Fids: []int64{1, 2}} }
	for range 2 { // the second call shows the server still serves
		resp, err := r.stub.BatchLookup(testCtx(t), &pspb.BatchLookupRequest{Requests: []*pspb.LookupRequest{sub(), sub(), sub()}})
		if err != nil {
			t.Fatalf("batch lookup with a panicking sub-request: %v", err)
		}
		for i, sr := range resp.GetResponses() {
			failed := sr.GetStatusCode() != 0
			if failed != (i == 1) {
				t.Errorf("sub-request %d: status %d %q", i, sr.GetStatusCode(), sr.GetErrorMessage())
			}
		}
		if msg := resp.GetResponses()[1].GetErrorMessage(); !strings.Contains(msg, "sub-request 1: internal error") {
			t.Errorf("the failed slot says %q", msg)
		}
	}
	g := make([]float32, 8)
	resp, err := r.stub.BatchApplyGradients(testCtx(t), &pspb.BatchApplyGradientsRequest{Requests: []*pspb.ApplyGradientsRequest{
		{Table: "emb", DimSize: 4, Fids: []int64{1, 2}, Gradients: g}, {Table: "emb", DimSize: 4, Fids: []int64{1, 2}, Gradients: g}}})
	if err != nil || resp.GetResponses()[0].GetStatusCode() != 0 || resp.GetResponses()[1].GetStatusCode() == 0 {
		t.Fatalf("batch apply with a panicking sub-request: %v, %v", resp, err)
	}
}

// TestTableSeedFrozen pins the initializer seeds of the tables: a restarted shard must
// initialize new fids as before.
func TestTableSeedFrozen(t *testing.T) {
	for _, tc := range []struct {
		seed     uint64
		shard, i int
		want     uint64
	}{{0, 0, 0, 0xf2fea5823ed3a667}, {42, 1, 2, 0xd40a04d1e1d5d884}, {math.MaxUint64, 3, 0, 0x31bd384c1b6978b0}} {
		if got := tableSeed(tc.seed, tc.shard, tc.i); got != tc.want {
			t.Errorf("tableSeed(%d, %d, %d) = %#x, want %#x", tc.seed, tc.shard, tc.i, got, tc.want)
		}
	}
}

// TestTrainingBarrier drives the TrainingBarrier RPC: join, place (twice: ALREADY_EXISTS),
// the barrier in GlobalStep responses, a WAIT held until REMOVE, a WAIT timing out with the
// worker still blocked, LEAVE, and the invalid requests.
func TestTrainingBarrier(t *testing.T) {
	r := start(t, testOptions(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := func(req *pspb.TrainingBarrierRequest) *pspb.TrainingBarrierResponse {
		t.Helper()
		resp, err := r.stub.TrainingBarrier(ctx, req)
		if err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		return resp
	}
	for want := range int32(3) {
		if got := op(&pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_JOIN}).GetIndex(); got != want {
			t.Fatalf("JOIN = %d, want %d", got, want)
		}
	}
	if st := op(&pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_PLACE, Action: "Save"}); !st.Placed || st.Action != "Save" {
		t.Fatalf("PLACE: %v", st)
	}
	if _, err := r.stub.TrainingBarrier(ctx, &pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_PLACE}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second PLACE: %v", err)
	}
	gs, err := r.stub.GlobalStep(ctx, &pspb.GlobalStepRequest{Increment: 1})
	if err != nil || !gs.BarrierPlaced || gs.BarrierAction != "Save" {
		t.Fatalf("GlobalStep under the barrier: %v %v", gs, err)
	}
	// Worker 2 times out still blocked; worker 1 is released by REMOVE.
	if st := op(&pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_WAIT, Index: 2, TimeoutMs: 1}); !st.Placed ||
		!slices.Equal(st.BlockedIndices, []int32{2}) || !slices.Equal(st.UnblockedIndices, []int32{0, 1}) {
		t.Fatalf("WAIT timing out: %v", st)
	}
	released := make(chan *pspb.TrainingBarrierResponse, 1)
	go func() {
		resp, _ := r.stub.TrainingBarrier(ctx, &pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_WAIT, Index: 1, TimeoutMs: 20000})
		released <- resp
	}()
	for st := op(&pspb.TrainingBarrierRequest{}); !slices.Equal(st.BlockedIndices, []int32{1, 2}); st = op(&pspb.TrainingBarrierRequest{}) {
		time.Sleep(5 * time.Millisecond)
	}
	op(&pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_REMOVE})
	if st := <-released; st == nil || st.Placed || !slices.Equal(st.BlockedIndices, []int32{2}) {
		t.Fatalf("WAIT released by REMOVE: %v", st)
	}
	if gs, _ := r.stub.GlobalStep(ctx, &pspb.GlobalStepRequest{}); gs.BarrierPlaced || gs.BarrierAction != "" {
		t.Fatalf("GlobalStep after REMOVE: %v", gs)
	}
	op(&pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_LEAVE, Index: 2})
	if st := op(&pspb.TrainingBarrierRequest{}); len(st.BlockedIndices) != 0 || !slices.Equal(st.UnblockedIndices, []int32{0, 1}) {
		t.Fatalf("after LEAVE: %v", st)
	}
	for _, bad := range []struct {
		req  *pspb.TrainingBarrierRequest
		code codes.Code
	}{
		{&pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_LEAVE, Index: 2}, codes.FailedPrecondition},
		{&pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_WAIT, Index: -1}, codes.FailedPrecondition},
		{&pspb.TrainingBarrierRequest{Op: pspb.TrainingBarrierRequest_WAIT, Index: 7}, codes.FailedPrecondition},
		{&pspb.TrainingBarrierRequest{Op: 99}, codes.InvalidArgument},
	} {
		if _, err := r.stub.TrainingBarrier(ctx, bad.req); status.Code(err) != bad.code {
			t.Errorf("%v: %v, want %v", bad.req, err, bad.code)
		}
	}
}

// TestSlotCounts: GetStats counts the named tables' entries per slot_id_v2 of their fids;
// an unknown table is NOT_FOUND.
func TestSlotCounts(t *testing.T) {
	r := start(t, testOptions(t))
	slot := func(s, sig int64) int64 { return s<<48 | sig }
	applyBoth(t, r.stub, []int64{slot(1, 1), slot(1, 2), slot(7, 1), slot(32767, 5)}, 1, 1)
	resp, err := r.stub.GetStats(testCtx(t), &pspb.GetStatsRequest{SlotCountTables: []string{"emb", "two"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{1: 4, 7: 2, 32767: 2}
	if !maps.Equal(resp.SlotCounts, want) {
		t.Errorf("slot counts %v, want %v", resp.SlotCounts, want)
	}
	if resp, _ := r.stub.GetStats(testCtx(t), &pspb.GetStatsRequest{}); len(resp.SlotCounts) != 0 {
		t.Errorf("slot counts without tables: %v", resp.SlotCounts)
	}
	if _, err := r.stub.GetStats(testCtx(t), &pspb.GetStatsRequest{SlotCountTables: []string{"nope"}}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown table: %v", err)
	}
}

// TestFailedRunsKeepTheRestoredCheckpoint: a job whose state names step 10 restarts from
// it after failed runs whose shutdown saves (steps 11, 12) would have pruned it with
// keep 1: the checkpoint a shard started from is kept while it runs.
func TestFailedRunsKeepTheRestoredCheckpoint(t *testing.T) {
	o := testOptions(t)
	o.CheckpointDir, o.KeepCheckpoints = t.TempDir(), 1
	fids := []int64{1, 2, 3}
	r := start(t, o)
	applyBoth(t, r.stub, fids, 1, 10)
	if err := r.stop(t); err != nil { // the save the job's state records: step 10
		t.Fatal(err)
	}
	at10, err := checkpoint.AtStep(ShardDir(o.CheckpointDir, 0, 1), 10)
	if err != nil {
		t.Fatal(err)
	}
	for step := int64(11); step <= 12; step++ { // failed runs: restored from step 10, saved at shutdown
		o2 := o
		o2.RestoreFrom = at10
		r := start(t, o2)
		applyBoth(t, r.stub, fids, 1, step)
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.AtStep(ShardDir(o.CheckpointDir, 0, 1), 10); err != nil {
			t.Fatalf("after the failed run at step %d the checkpoint of step 10 is gone: %v", step, err)
		}
	}
}

// TestNewFailsClean: a New that fails after its checks (the port taken, the metrics port
// taken) returns nothing that runs; the gRPC server and its stream workers come last.
func TestNewFailsClean(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"listen port taken", func(o *Options) { o.Listen = taken.Addr().String() }, "listen"},
		{"metrics port taken", func(o *Options) { o.MetricsListen = taken.Addr().String() }, "metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			tc.mod(&o)
			before := goleak.IgnoreCurrent()
			s, err := New(o)
			if err == nil {
				s.Close()
				t.Fatalf("New = nil error, want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
			goleak.VerifyNone(t, before)
		})
	}
}
