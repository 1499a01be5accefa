package server

import (
	"errors"
	"math"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// applyReq is an apply of gradient g to fid 1 of "two"'s dim-1 SGD segment (lr 1): each
// application moves weight 0 of fid 1 by -g.
func applyReq(id string, g float32) *pspb.ApplyGradientsRequest {
	return &pspb.ApplyGradientsRequest{Table: "two", DimSize: 3, Fids: []int64{1}, Gradients: []float32{g, 0, 0}, RequestId: id}
}

// weight0 is weight 0 of fid 1 in "two".
func weight0(t *testing.T, r *running) float32 {
	t.Helper()
	resp, err := r.stub.Lookup(testCtx(t), &pspb.LookupRequest{Table: "two", DimSize: 3, Fids: []int64{1}})
	if err != nil || resp.StatusCode != 0 {
		t.Fatal(resp, err)
	}
	return resp.Embeddings[0]
}

func TestApplyRequestIDs(t *testing.T) {
	type call struct {
		batch   []*pspb.ApplyGradientsRequest // nil: a unary ApplyGradients of single
		single  *pspb.ApplyGradientsRequest
		wantDup []bool // per (sub-)request
		wantErr []bool
	}
	unary := func(req *pspb.ApplyGradientsRequest, dup bool) call {
		return call{single: req, wantDup: []bool{dup}, wantErr: []bool{false}}
	}
	for _, tc := range []struct {
		name       string
		window     int
		calls      []call
		wantWeight float32
		wantDups   int64
	}{
		{"retry with the same id is a duplicate", 0, []call{unary(applyReq("a", 1), false), unary(applyReq("a", 1), true), unary(applyReq("a", 1), true)}, -1, 2},
		{"distinct ids all apply", 0, []call{unary(applyReq("a", 1), false), unary(applyReq("b", 2), false)}, -3, 0},
		{"no id: no deduplication", 0, []call{unary(applyReq("", 1), false), unary(applyReq("", 1), false)}, -2, 0},
		{"disabled window", -1, []call{unary(applyReq("a", 1), false), unary(applyReq("a", 1), false)}, -2, 0},
		// Rejected before the table is touched: the id stays free.
		{"a failed request does not use its id", 0, []call{
			{single: &pspb.ApplyGradientsRequest{Table: "two", DimSize: 3, Fids: []int64{1}, RequestId: "a"}, wantDup: []bool{false}, wantErr: []bool{true}},
			unary(applyReq("a", 1), false), unary(applyReq("a", 1), true),
		}, -1, 1},
		{"batch sub-requests share the window", 0, []call{
			unary(applyReq("a", 1), false),
			{batch: []*pspb.ApplyGradientsRequest{applyReq("a", 1), applyReq("b", 2), applyReq("", 4)}, wantDup: []bool{true, false, false}, wantErr: []bool{false, false, false}},
			unary(applyReq("b", 2), true),
		}, -7, 2},
		// Concurrent sub-requests with one id: exactly one applies.
		{"same id twice in one batch", 0, []call{
			{batch: []*pspb.ApplyGradientsRequest{applyReq("c", 1), applyReq("c", 1)}, wantErr: []bool{false, false}},
		}, -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			o.DedupWindow = tc.window
			o.MetricsListen = "127.0.0.1:0"
			r := start(t, o)
			ctx := testCtx(t)
			for i, c := range tc.calls {
				var resps []*pspb.ApplyGradientsResponse
				if c.batch == nil {
					resp, err := r.stub.ApplyGradients(ctx, c.single)
					if err != nil {
						t.Fatal(err)
					}
					resps = []*pspb.ApplyGradientsResponse{resp}
				} else {
					resp, err := r.stub.BatchApplyGradients(ctx, &pspb.BatchApplyGradientsRequest{Requests: c.batch})
					if err != nil {
						t.Fatal(err)
					}
					resps = resp.Responses
				}
				for j, resp := range resps {
					if (resp.StatusCode != 0) != c.wantErr[j] {
						t.Fatalf("call %d.%d: %v, want failure %v", i, j, resp, c.wantErr[j])
					}
					if c.wantDup != nil && resp.Duplicate != c.wantDup[j] {
						t.Fatalf("call %d.%d: %v, want duplicate %v", i, j, resp, c.wantDup[j])
					}
					if resp.Duplicate && (resp.NumUpdated != 0 || resp.NumCreated != 0) {
						t.Fatalf("call %d.%d: a duplicate reports work: %v", i, j, resp)
					}
				}
			}
			if w := weight0(t, r); w != tc.wantWeight {
				t.Errorf("weight %v, want %v", w, tc.wantWeight)
			}
			st, err := r.stub.GetStats(ctx, &pspb.GetStatsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if st.DuplicateRequests != tc.wantDups {
				t.Errorf("GetStats: %d duplicates, want %d", st.DuplicateRequests, tc.wantDups)
			}
			wantSamples(t, scrape(t, r), []sample{{"monolith_ps_duplicate_requests_total", []string{"shard", "0", "num_shards", "1"}, float64(tc.wantDups)}})
		})
	}
}

// scrape reads /metrics with the Prometheus text parser (metricsrv.Scrape).
func scrape(t *testing.T, r *running) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := metricsrv.Scrape(testCtx(t), r.srv.MetricsAddr())
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// wantSamples checks samples of a scrape: name with label pairs → value.
func wantSamples(t *testing.T, fams map[string]*dto.MetricFamily, want []sample) {
	t.Helper()
	for _, w := range want {
		got, ok := metricsrv.Value(fams, w.name, w.labels...)
		if !ok || got != w.value {
			t.Errorf("/metrics %s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
}

type sample struct {
	name   string
	labels []string
	value  float64
}

func globalStep(t *testing.T, r *running, inc int64, id string) *pspb.GlobalStepResponse {
	t.Helper()
	resp, err := r.stub.GlobalStep(testCtx(t), &pspb.GlobalStepRequest{Increment: inc, RequestId: id})
	if err != nil {
		t.Fatalf("GlobalStep(%d, %q): %v", inc, id, err)
	}
	return resp
}

func TestGlobalStep(t *testing.T) {
	o := testOptions(t)
	o.MetricsListen = "127.0.0.1:0"
	r := start(t, o)
	ctx := testCtx(t)
	for i, c := range []struct {
		inc       int64
		id        string
		apply     int64 // > 0: an ApplyGradients with this global_step first
		want      int64
		duplicate bool
	}{
		{inc: 0, want: 0},
		{inc: 1, want: 1},
		{inc: 5, id: "a", want: 6},
		{inc: 5, id: "a", want: 6, duplicate: true},
		{inc: 100, id: "a", want: 6, duplicate: true}, // the id decides, not the increment
		{inc: 0, want: 6},
		{inc: 2, id: "b", want: 8},
		// ApplyGradients raises the counter to the largest global_step seen...
		{apply: 50, inc: 0, want: 50},
		{inc: 1, want: 51},
		// ...but never lowers it.
		{apply: 10, inc: 0, want: 51},
		{inc: 0, id: "b", want: 8, duplicate: true},
	} {
		if c.apply > 0 {
			req := applyReq("", 0)
			req.GlobalStep = c.apply
			if resp, err := r.stub.ApplyGradients(ctx, req); err != nil || resp.StatusCode != 0 {
				t.Fatal(resp, err)
			}
		}
		got := globalStep(t, r, c.inc, c.id)
		if got.Step != c.want || got.Duplicate != c.duplicate {
			t.Fatalf("step %d: GlobalStep(%d, %q) = %v, want step %d duplicate %v", i, c.inc, c.id, got, c.want, c.duplicate)
		}
	}
	// Invalid increments change nothing and use no id.
	for _, tc := range []struct {
		name string
		inc  int64
		code codes.Code
	}{
		{"negative", -1, codes.InvalidArgument},
		{"overflow", math.MaxInt64, codes.OutOfRange},
	} {
		if _, err := r.stub.GlobalStep(ctx, &pspb.GlobalStepRequest{Increment: tc.inc, RequestId: "bad"}); status.Code(err) != tc.code {
			t.Errorf("%s increment: %v, want %v", tc.name, err, tc.code)
		}
	}
	if got := globalStep(t, r, 1, "bad"); got.Step != 52 || got.Duplicate {
		t.Fatalf("after the rejected increments: %v, want 52", got)
	}
	st, err := r.stub.GetStats(ctx, &pspb.GetStatsRequest{})
	if err != nil || st.DuplicateRequests != 3 {
		t.Fatalf("stats %v, %v: want 3 duplicates", st, err)
	}
	shard := []string{"shard", "0", "num_shards", "1"}
	wantSamples(t, scrape(t, r), []sample{
		{"monolith_ps_global_step", shard, 52},
		{"monolith_ps_global_step_requests_total", shard, 14},
		{"monolith_ps_duplicate_requests_total", shard, 3},
	})
}

// TestGlobalStepConcurrent: concurrent increments are atomic, and concurrent requests with
// one id apply once and all answer the same step.
func TestGlobalStepConcurrent(t *testing.T) {
	r := start(t, testOptions(t))
	const n = 32
	steps := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx := testCtx(t)
			_, err1 := r.stub.GlobalStep(ctx, &pspb.GlobalStepRequest{Increment: 1})
			resp, err2 := r.stub.GlobalStep(ctx, &pspb.GlobalStepRequest{Increment: 10, RequestId: "same"})
			if err := errors.Join(err1, err2); err != nil {
				t.Error(err)
				return
			}
			steps[i] = resp.Step
		})
	}
	wg.Wait()
	for _, s := range steps {
		if s != steps[0] {
			t.Fatalf("one request id answered different steps: %v", steps)
		}
	}
	if got := globalStep(t, r, 0, "").Step; got != n+10 {
		t.Fatalf("step %d after %d increments of 1 and one of 10, want %d", got, n, n+10)
	}
}

// TestGlobalStepSurvivesRestart: the counter and the applied request ids are saved with a
// checkpoint and restored by New over the same CheckpointDir; increments after the save
// die with a kill, and so do their ids, so their retries apply again.
func TestGlobalStepSurvivesRestart(t *testing.T) {
	o := testOptions(t)
	o.CheckpointDir = t.TempDir()
	r := start(t, o)
	globalStep(t, r, 5, "a")
	globalStep(t, r, 3, "")
	if _, err := r.stub.Save(testCtx(t), &pspb.SaveRequest{}); err != nil {
		t.Fatal(err)
	}
	globalStep(t, r, 100, "b") // lost: no save before the kill
	r.srv.Close()

	r2 := start(t, o)
	if got := globalStep(t, r2, 0, ""); got.Step != 8 {
		t.Fatalf("restored step %d, want 8", got.Step)
	}
	// "a" is in the checkpoint: its retry is a duplicate answering its first step.
	if got := globalStep(t, r2, 1, "a"); got.Step != 5 || !got.Duplicate {
		t.Fatalf("retry of a saved id after restart: %v, want step 5, duplicate", got)
	}
	// "b" died with the kill: its retry applies (here with increment 1).
	if got := globalStep(t, r2, 1, "b"); got.Step != 9 || got.Duplicate {
		t.Fatalf("retry of a lost id after restart: %v, want step 9, applied", got)
	}
	if err := r2.stop(t); err != nil { // graceful: final save
		t.Fatal(err)
	}
	r3 := start(t, o)
	if got := globalStep(t, r3, 0, ""); got.Step != 9 {
		t.Fatalf("step %d after a graceful restart, want 9", got.Step)
	}
}

// TestDedupPerRequester: each requester (the id's part before ':' or '/') has a window of
// its own: a worker sending more ids than the window holds pushes out only its own, and
// the requester used least recently goes when there are too many.
func TestDedupPerRequester(t *testing.T) {
	o := testOptions(t)
	o.DedupWindow, o.DedupRequesters = 4, 2
	r := start(t, o)
	apply := func(id string) bool {
		t.Helper()
		resp, err := r.stub.ApplyGradients(testCtx(t), applyReq(id, 1))
		if err != nil || resp.StatusCode != 0 {
			t.Fatal(resp, err)
		}
		return resp.Duplicate
	}
	apply("w1:0/emb")
	for i := range 10 { // worker 2 floods: 10 ids through a window of 4
		apply("w2:" + string(rune('a'+i)) + "/emb")
	}
	if !apply("w1:0/emb") {
		t.Errorf("worker 1's id was pushed out by worker 2's")
	}
	if apply("w2:a/emb") {
		t.Errorf("worker 2's oldest id is still in its window of 4")
	}
	apply("w3:0/emb") // a third requester: worker 1 (used before worker 2's last id) goes
	if !apply("w2:j/emb") {
		t.Errorf("worker 2, used most recently, lost its window to a third requester")
	}
	if apply("w1:0/emb") {
		t.Errorf("worker 1, used least recently, kept its window beside 2 others (limit 2)")
	}
}

// TestApplyIDsSurviveRestart: the applied ids are saved with the checkpoint: after a kill
// and a restart from it, a retry of an update the checkpoint holds is a duplicate, and one
// made after the save (lost with the kill) applies again, so the weight ends as if each
// update was applied once.
func TestApplyIDsSurviveRestart(t *testing.T) {
	o := testOptions(t)
	o.CheckpointDir = t.TempDir()
	r := start(t, o)
	for _, id := range []string{"w:1/two", "w:2/two"} {
		if _, err := r.stub.ApplyGradients(testCtx(t), applyReq(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.stub.Save(testCtx(t), &pspb.SaveRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.stub.ApplyGradients(testCtx(t), applyReq("w:3/two", 1)); err != nil { // lost
		t.Fatal(err)
	}
	r.srv.Close()
	r2 := start(t, o)
	for i, id := range []string{"w:1/two", "w:2/two", "w:3/two"} { // the bundle, retried whole
		resp, err := r2.stub.ApplyGradients(testCtx(t), applyReq(id, 1))
		if err != nil || resp.Duplicate != (i < 2) {
			t.Errorf("retry of %s after the restart: duplicate %v, %v; want %v", id, resp.GetDuplicate(), err, i < 2)
		}
	}
	if w := weight0(t, r2); w != -3 {
		t.Errorf("weight %v after the retried bundle, want -3 (three updates, each once)", w)
	}
}
