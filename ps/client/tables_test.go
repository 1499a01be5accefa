package client_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/server"
)

// calls counts the client's successful RPCs of the round methods, from its metrics.
func calls(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	gathered, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, f := range gathered {
		fams[f.GetName()] = f
	}
	out := map[string]uint64{}
	for _, m := range []string{"Lookup", "BatchLookup", "ApplyGradients", "BatchApplyGradients"} {
		v, _ := metricsrv.Value(fams, "monolith_ps_client_call_seconds", "method", m, "code", "OK")
		out[m] = uint64(v)
	}
	return out
}

// rpcsFor is what one LookupTables or ApplyTables call over fids must cost on n shards:
// per shard one batch RPC when it holds fids of several requests, one plain RPC when of
// one, none otherwise.
func rpcsFor(fids [][]int64, n int) (batch, plain uint64) {
	for k := range n {
		m := 0
		for _, f := range fids {
			if slices.ContainsFunc(f, func(v int64) bool { return int(uint64(v)%uint64(n)) == k }) {
				m++
			}
		}
		switch {
		case m > 1:
			batch++
		case m == 1:
			plain++
		}
	}
	return batch, plain
}

// TestTablesEqualSeparateCalls: LookupTables and ApplyTables over three shards answer what
// the in-process tables answer to one call per table, with one RPC per involved shard,
// and a retried ApplyTables (same request ids) applies nothing again.
func TestTablesEqualSeparateCalls(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	const n = 3
	_, addrs := cluster(t, n)
	reg := prometheus.NewRegistry()
	m, err := client.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, addrs, client.WithMetrics(m))
	ref := reference(t)
	names := []string{"ada", "bias", "sgd"}
	var pool []int64
	for step := range int64(20) {
		// Some requests are empty, and sometimes one table comes twice.
		var fids [][]int64
		var reqs []client.ApplyRequest
		used := map[string]map[int64]bool{} // a table's fids in this round
		for range 1 + r.IntN(4) {
			name := names[r.IntN(len(names))]
			f := randomFids(r, r.IntN(30))
			if r.IntN(5) == 0 {
				f = nil
			}
			// A table's parts in one round hold disjoint fids: a shard applies the parts of
			// a batch concurrently, and two updates of one fid in either order would differ
			// from the reference's in the last bits.
			if used[name] == nil {
				used[name] = map[int64]bool{}
			}
			f = slices.DeleteFunc(f, func(v int64) bool { return used[name][v] })
			for _, v := range f {
				used[name][v] = true
			}
			if len(f) == 0 {
				f = nil
			}
			grads := make([]float32, len(f)*dims[name])
			for i := range grads {
				grads[i] = float32(r.NormFloat64())
			}
			fids = append(fids, f)
			pool = append(pool, f...)
			reqs = append(reqs, client.ApplyRequest{Table: name, Dim: dims[name], Fids: f, Grads: grads, Step: step, UpdateTime: 1700000000 + step,
				RequestID: fmt.Sprintf("step %d part %d", step, len(reqs))})
		}
		before := calls(t, reg)
		got, err := c.ApplyTables(ctx(t), reqs)
		if err != nil {
			t.Fatal(err)
		}
		after := calls(t, reg)
		wb, wp := rpcsFor(fids, n)
		if b, p := after["BatchApplyGradients"]-before["BatchApplyGradients"], after["ApplyGradients"]-before["ApplyGradients"]; b != wb || p != wp {
			t.Fatalf("step %d: %d batch and %d plain apply RPCs, want %d and %d", step, b, p, wb, wp)
		}
		for i, q := range reqs {
			want, err := ref[q.Table].Apply(q.Fids, q.Grads, nil, q.Step, q.UpdateTime)
			if err != nil {
				t.Fatal(err)
			}
			if g := got[i]; g.NumUpdated != int64(want.Updated) || g.NumCreated != int64(want.Created) || g.NumNotFound != int64(want.NotFound) || g.Duplicates != 0 {
				t.Fatalf("step %d part %d (%s): counts %+v, want %+v", step, i, q.Table, g, want)
			}
		}
		// The same call again: every shard part is a duplicate, nothing is applied.
		again, err := c.ApplyTables(ctx(t), reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range reqs {
			shards := countShards(q.Fids, n)
			if g := again[i]; g.Duplicates != shards || g.NumUpdated != 0 {
				t.Fatalf("step %d part %d retried: %+v, want %d duplicates and nothing updated", step, i, g, shards)
			}
		}
	}
	pool = append(pool, 1<<50, -1<<50, 123456789)
	var look []client.TableLookup
	var fids [][]int64
	for _, name := range []string{"ada", "sgd", "bias", "sgd"} {
		f := slices.Clone(pool)
		r.Shuffle(len(f), func(i, j int) { f[i], f[j] = f[j], f[i] })
		f = f[:r.IntN(len(f))]
		look = append(look, client.TableLookup{Table: name, Dim: dims[name], Fids: f})
		fids = append(fids, f)
	}
	look = append(look, client.TableLookup{Table: "ada", Dim: 4}) // empty
	fids = append(fids, nil)
	before := calls(t, reg)
	res, err := c.LookupTables(ctx(t), look, client.LookupOptions{WantFound: true})
	if err != nil {
		t.Fatal(err)
	}
	after := calls(t, reg)
	wb, wp := rpcsFor(fids, n)
	if b, p := after["BatchLookup"]-before["BatchLookup"], after["Lookup"]-before["Lookup"]; b != wb || p != wp {
		t.Fatalf("%d batch and %d plain lookup RPCs, want %d and %d", b, p, wb, wp)
	}
	for i, q := range look {
		want := make([]float32, len(q.Fids)*q.Dim)
		found := make([]bool, len(q.Fids))
		nf, err := ref[q.Table].Lookup(q.Fids, want, found)
		if err != nil {
			t.Fatal(err)
		}
		if g := res[i]; !slices.Equal(g.Embeddings, want) || !slices.Equal(g.Found, found) || g.NumFound != int64(nf) {
			t.Fatalf("lookup part %d (%s, %d fids) differs from the table", i, q.Table, len(q.Fids))
		}
	}
}

// countShards is how many of n shards hold fids.
func countShards(fids []int64, n int) (count int) {
	seen := make([]bool, n)
	for _, f := range fids {
		seen[int(uint64(f)%uint64(n))] = true
	}
	for _, s := range seen {
		if s {
			count++
		}
	}
	return count
}

// TestTablesErrors: a bad part fails the whole call with the shard's answer, which names
// the table; a bad dim or gradient count fails before any RPC.
func TestTablesErrors(t *testing.T) {
	_, addrs := cluster(t, 2)
	c := newClient(t, addrs)
	_, err := c.LookupTables(ctx(t), []client.TableLookup{
		{Table: "sgd", Dim: 2, Fids: []int64{1, 2, 3}},
		{Table: "nope", Dim: 2, Fids: []int64{4, 5}},
	}, client.LookupOptions{})
	var se *client.StatusError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown table in a batch: %v", err)
	}
	_, err = c.ApplyTables(ctx(t), []client.ApplyRequest{
		{Table: "sgd", Dim: 2, Fids: []int64{1, 2}, Grads: make([]float32, 4)},
		{Table: "ada", Dim: 3, Fids: []int64{3}, Grads: make([]float32, 3)},
	})
	if !errors.As(err, &se) || !strings.Contains(err.Error(), `"ada"`) {
		t.Fatalf("dim mismatch in a batch: %v", err)
	}
	var ic *client.InvalidConfigError
	if _, err := c.ApplyTables(ctx(t), []client.ApplyRequest{{Table: "sgd", Dim: 2, Fids: []int64{1}, Grads: make([]float32, 3)}}); !errors.As(err, &ic) {
		t.Fatalf("bad gradient count: %v", err)
	}
	if _, err := c.LookupTables(ctx(t), []client.TableLookup{{Table: "sgd", Dim: 0, Fids: []int64{1}}}, client.LookupOptions{}); !errors.As(err, &ic) {
		t.Fatalf("bad dim: %v", err)
	}
	if res, err := c.LookupTables(ctx(t), nil, client.LookupOptions{}); err != nil || len(res) != 0 {
		t.Fatalf("no parts: %v %v", res, err)
	}
}

// TestTablesManyParts: past the server's 1024 sub-requests per batch, a shard's parts go
// out in several calls (a last call of one part as the plain RPC), and every part is
// answered.
func TestTablesManyParts(t *testing.T) {
	if client.MaxSubRequests != server.DefaultMaxSubRequests {
		t.Fatalf("the client splits at %d parts, the server's default limit is %d", client.MaxSubRequests, server.DefaultMaxSubRequests)
	}
	_, addrs := cluster(t, 1)
	reg := prometheus.NewRegistry()
	m, err := client.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, addrs, client.WithMetrics(m))
	apply := make([]client.ApplyRequest, 1025)
	for i := range apply {
		apply[i] = client.ApplyRequest{Table: "sgd", Dim: 2, Fids: []int64{int64(i)}, Grads: []float32{1, float32(i)}}
	}
	if _, err := c.ApplyTables(ctx(t), apply); err != nil {
		t.Fatal(err)
	}
	look := make([]client.TableLookup, 2500)
	for i := range look {
		look[i] = client.TableLookup{Table: "sgd", Dim: 2, Fids: []int64{int64(i)}}
	}
	res, err := c.LookupTables(ctx(t), look, client.LookupOptions{WantFound: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		// SGD 0.1 on zeros: -0.1 × the gradient, for the 1025 fids applied.
		want := []float32{0, 0}
		if i < len(apply) {
			want = []float32{-0.1, -0.1 * float32(i)}
		}
		if len(r.Embeddings) != 2 || math.Abs(float64(r.Embeddings[0]-want[0])) > 1e-6 || math.Abs(float64(r.Embeddings[1]-want[1])) > 1e-3 || r.Found[0] != (i < len(apply)) {
			t.Fatalf("part %d: %v found %v, want %v", i, r.Embeddings, r.Found, want)
		}
	}
	got := calls(t, reg)
	if got["BatchApplyGradients"] != 1 || got["ApplyGradients"] != 1 || got["BatchLookup"] != 3 || got["Lookup"] != 0 {
		t.Fatalf("calls by method %v, want 1 batch and 1 plain apply, 3 batch lookups", got)
	}
}
