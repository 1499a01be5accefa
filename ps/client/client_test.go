package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/server"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/pspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTables: "ada" (dim 4, constant init 0.5, Adagrad), "bias" (dim 1 FTRL + dim 2 SGD,
// zeros) and "sgd" (dim 2, zeros, SGD 0.1), all admitting every fid.
const testTables = `
tables {
  name: "ada"
  config {
    entry_config { segments { dim_size: 4 init_config { constants { constant: 0.5 } } opt_config { adagrad { learning_rate: 0.05 } } } }
    cuckoo {}
  }
  filter { type: NONE }
}
tables {
  name: "bias"
  config {
    entry_config {
      segments { dim_size: 1 init_config { zeros {} } opt_config { ftrl { learning_rate: 0.05 l1_regularization_strength: 0.001 } } }
      segments { dim_size: 2 init_config { zeros {} } opt_config { sgd { learning_rate: 0.1 } } }
    }
    cuckoo {}
  }
  filter { type: NONE }
}
tables {
  name: "sgd"
  config {
    entry_config { segments { dim_size: 2 init_config { zeros {} } opt_config { sgd { learning_rate: 0.1 } } } }
    cuckoo {}
  }
  filter { type: NONE }
}
`

var dims = map[string]int{"ada": 4, "bias": 3, "sgd": 2}

func tablesConfig(t testing.TB) *pspb.TablesConfig {
	t.Helper()
	var c pspb.TablesConfig
	if err := prototext.Unmarshal([]byte(testTables), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// shard is one running server.
type shard struct {
	srv    *server.Server
	cancel context.CancelFunc
	done   chan error
}

// startShard serves shard k of n; ckptDir may be "".
func startShard(t testing.TB, k, n int, ckptDir string, mod ...func(*server.Options)) *shard {
	t.Helper()
	o := server.DefaultOptions()
	o.Shard, o.NumShards, o.Tables, o.CheckpointDir, o.Logger = k, n, tablesConfig(t), ckptDir, quiet
	for _, m := range mod {
		m(&o)
	}
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sh := &shard{srv: s, cancel: cancel, done: make(chan error, 1)}
	go func() { sh.done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); s.Close() })
	return sh
}

// cluster starts n shards and returns them with their addresses.
func cluster(t testing.TB, n int) ([]*shard, []string) {
	t.Helper()
	var shards []*shard
	var addrs []string
	for k := range n {
		sh := startShard(t, k, n, "")
		shards = append(shards, sh)
		addrs = append(addrs, sh.srv.Addr())
	}
	return shards, addrs
}

func newClient(t testing.TB, addrs []string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// reference builds the tables of testTables in process.
func reference(t testing.TB) map[string]*table.Table {
	t.Helper()
	out := map[string]*table.Table{}
	for i, spec := range tablesConfig(t).GetTables() {
		tb, err := table.FromSpec(spec, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		out[spec.GetName()] = tb
	}
	return out
}

func randomFids(r *rand.Rand, n int) []int64 {
	fids := make([]int64, n)
	for i := range fids {
		switch r.IntN(4) {
		case 0:
			fids[i] = -int64(r.IntN(50)) - 1 // negative: routed as uint64 (P10)
		case 1:
			fids[i] = int64(r.Uint64() >> 1)
		default:
			fids[i] = int64(r.IntN(60)) // many duplicates, across shards
		}
	}
	return fids
}

// TestShardedEqualsSingleTable: three shards behind the client behave exactly like one
// in-process table fed the same requests.
func TestShardedEqualsSingleTable(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(n, " shards"), func(t *testing.T) {
			_, addrs := cluster(t, n)
			c := newClient(t, addrs)
			ref := reference(t)
			var pool []int64
			for step := range int64(30) {
				name := []string{"ada", "bias", "sgd"}[r.IntN(3)]
				dim, tb := dims[name], ref[name]
				fids := randomFids(r, 1+r.IntN(40))
				pool = append(pool, fids...)
				if r.IntN(3) == 0 {
					// create_if_missing lookups count per position, like the table.
					res, err := c.Lookup(ctx(t), name, dim, fids, client.LookupOptions{CreateIfMissing: true, WantFound: true})
					if err != nil {
						t.Fatal(err)
					}
					want := make([]float32, len(fids)*dim)
					found := make([]bool, len(fids))
					nf, ni, err := tb.LookupOrCreate(fids, want, found)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(res.Embeddings, want) || !slices.Equal(res.Found, found) || res.NumFound != int64(nf) || res.NumInitialized != int64(ni) {
						t.Fatalf("step %d create lookup: got %d/%d found/init, want %d/%d", step, res.NumFound, res.NumInitialized, nf, ni)
					}
					continue
				}
				grads := make([]float32, len(fids)*dim)
				for i := range grads {
					grads[i] = float32(r.NormFloat64())
				}
				var lrs []float32
				if name == "bias" && r.IntN(2) == 0 {
					lrs = []float32{0.02, 0.3}
				}
				got, err := c.ApplyGradients(ctx(t), name, dim, fids, grads, lrs, step, 1700000000+step)
				if err != nil {
					t.Fatal(err)
				}
				want, err := tb.Apply(fids, grads, lrs, step, 1700000000+step)
				if err != nil {
					t.Fatal(err)
				}
				if got.NumUpdated != int64(want.Updated) || got.NumCreated != int64(want.Created) || got.NumNotFound != int64(want.NotFound) {
					t.Fatalf("step %d apply counts %+v, want %+v", step, got, want)
				}
			}
			// Every fid ever used, plus unknown ones, reads the same through the client.
			pool = append(pool, 1<<50, -1<<50, 123456789)
			for name, dim := range dims {
				res, err := c.Lookup(ctx(t), name, dim, pool, client.LookupOptions{WantFound: true})
				if err != nil {
					t.Fatal(err)
				}
				want := make([]float32, len(pool)*dim)
				found := make([]bool, len(pool))
				nf, err := ref[name].Lookup(pool, want, found)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(res.Embeddings, want) || !slices.Equal(res.Found, found) || res.NumFound != int64(nf) || res.NumInitialized != 0 {
					t.Fatalf("table %s differs from the single table", name)
				}
			}
		})
	}
}

func TestRoutingAndOrder(t *testing.T) {
	shards, addrs := cluster(t, 3)
	c := newClient(t, addrs)
	fids := []int64{5, -1, 3, 5, 0, 7, -1}
	grads := make([]float32, len(fids)*2)
	for i := range fids {
		grads[2*i], grads[2*i+1] = float32(i+1), 10*float32(i+1)
	}
	res, err := c.ApplyGradients(ctx(t), "sgd", 2, fids, grads, nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.NumUpdated != 5 || res.NumCreated != 5 {
		t.Fatalf("apply: %+v, want 5 unique fids updated and created", res)
	}
	// Each fid lives on shard uint64(f) % 3 only.
	for k, sh := range shards {
		var mine []int64
		for _, f := range []int64{5, -1, 3, 0, 7} {
			if int(uint64(f)%3) == k {
				mine = append(mine, f)
			}
		}
		if n := sh.srv.Tables()[2].Stats().Size; n != int64(len(mine)) {
			t.Errorf("shard %d holds %d entries, want %d (%v)", k, n, len(mine), mine)
		}
	}
	look, err := c.Lookup(ctx(t), "sgd", 2, []int64{-1, 9, 5, 3, 5}, client.LookupOptions{WantFound: true})
	if err != nil {
		t.Fatal(err)
	}
	// SGD 0.1 on zeros: -0.1 × summed gradient. fid -1 at positions 1 and 6 (2+7), fid 5 at 0 and 3 (1+4).
	want := []float32{-0.9, -9, 0, 0, -0.5, -5, -0.3, -3, -0.5, -5}
	for i := range want {
		if math.Abs(float64(look.Embeddings[i]-want[i])) > 1e-5 {
			t.Fatalf("rows %v, want %v", look.Embeddings, want)
		}
	}
	if !slices.Equal(look.Found, []bool{true, false, true, true, true}) || look.NumFound != 4 {
		t.Fatalf("found %v (%d)", look.Found, look.NumFound)
	}
	// All fids on one shard (0 of 3): the shard's answer is used as it is, in request order.
	one, err := c.Lookup(ctx(t), "sgd", 2, []int64{3, 0, 9, 3}, client.LookupOptions{WantFound: true})
	if err != nil {
		t.Fatal(err)
	}
	want = []float32{-0.3, -3, -0.5, -5, 0, 0, -0.3, -3}
	for i := range want {
		if math.Abs(float64(one.Embeddings[i]-want[i])) > 1e-5 {
			t.Fatalf("one-shard rows %v, want %v", one.Embeddings, want)
		}
	}
	if !slices.Equal(one.Found, []bool{true, true, false, true}) || one.NumFound != 3 || len(one.Embeddings) != len(want) {
		t.Fatalf("one-shard found %v (%d)", one.Found, one.NumFound)
	}
	if one, err := c.Lookup(ctx(t), "sgd", 2, []int64{3, 0}, client.LookupOptions{}); err != nil || one.Found != nil || one.NumFound != 2 {
		t.Fatalf("one-shard lookup without WantFound: %v %v", one, err)
	}
	// Empty requests never reach a server.
	if r, err := c.Lookup(ctx(t), "sgd", 2, nil, client.LookupOptions{}); err != nil || len(r.Embeddings) != 0 {
		t.Fatal(r, err)
	}
}

func TestErrors(t *testing.T) {
	_, addrs := cluster(t, 2)
	c := newClient(t, addrs)
	var ic *client.InvalidConfigError
	if _, err := client.New(nil); !errors.As(err, &ic) {
		t.Fatalf("New(nil): %v", err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"lookup dim 0", func() error { _, err := c.Lookup(ctx(t), "sgd", 0, []int64{1}, client.LookupOptions{}); return err }()},
		{"apply gradient count", func() error {
			_, err := c.ApplyGradients(ctx(t), "sgd", 2, []int64{1}, []float32{1}, nil, 0, 0)
			return err
		}()},
		{"barrier timeout 0", c.Barrier(ctx(t), "b", 0, 2, 0)},
		{"barrier workers 0", c.Barrier(ctx(t), "b", 0, 0, time.Second)},
		{"barrier worker range", c.Barrier(ctx(t), "b", 2, 2, time.Second)},
		{"barrier negative worker", c.Barrier(ctx(t), "b", -1, 2, time.Second)},
		{"barrier shard range", c.BarrierOnShard(ctx(t), 2, "b", 0, 2, time.Second)},
		{"health shard range", func() error { _, err := c.HealthCheckShard(ctx(t), -1, ""); return err }()},
		{"stats shard range", func() error { _, err := c.GetStatsShard(ctx(t), 5, false); return err }()},
		{"empty SetShards", c.SetShards(nil)},
	} {
		if !errors.As(tc.err, &ic) {
			t.Errorf("%s: %v, want *InvalidConfigError", tc.name, tc.err)
		}
	}
	// A server-side status 1 names the shard.
	_, err := c.Lookup(ctx(t), "nope", 2, []int64{1, 2}, client.LookupOptions{})
	var se *client.StatusError
	if !errors.As(err, &se) || se.Code != 1 || !strings.Contains(se.Msg, `unknown table "nope"`) {
		t.Fatalf("unknown table: %v", err)
	}
	_, err = c.ApplyGradients(ctx(t), "sgd", 3, []int64{4}, make([]float32, 3), nil, 0, 0)
	if !errors.As(err, &se) || se.Shard != 0 || !strings.Contains(se.Msg, "dim_size 3") {
		t.Fatalf("dim mismatch: %v", err)
	}
	// A per-call timeout is a *TimeoutError inside an *RPCError.
	slow := newClient(t, addrs, client.WithCallTimeout(time.Nanosecond), client.WithRetries(0))
	_, err = slow.GetStats(ctx(t), false)
	var te *client.TimeoutError
	var re *client.RPCError
	if !errors.As(err, &te) || !errors.As(err, &re) || re.Shard != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call timeout: %v", err)
	}
	// Calls on a closed client fail fast.
	closed := newClient(t, addrs)
	closed.Close()
	closed.Close()
	if _, err := closed.GetStats(ctx(t), false); !errors.As(err, &ic) || !strings.Contains(err.Error(), "no PS clients configured") {
		t.Fatalf("closed client: %v", err)
	}
	if err := closed.SetShards(addrs); !errors.As(err, &ic) {
		t.Fatalf("SetShards on a closed client: %v", err)
	}
}

func TestRequestLimit(t *testing.T) {
	sh := startShard(t, 0, 1, "", func(o *server.Options) { o.MaxFidsPerRequest = 10 })
	c := newClient(t, []string{sh.srv.Addr()})
	_, err := c.Lookup(ctx(t), "sgd", 2, make([]int64, 11), client.LookupOptions{})
	var re *client.RPCError
	if !errors.As(err, &re) || status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "11 fids exceeds the limit of 10") {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestRetriesUnavailableOnly(t *testing.T) {
	var calls atomic.Int64
	count := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	// Nothing listens on a closed listener's port: Unavailable, retried.
	sh := startShard(t, 0, 1, "")
	dead := sh.srv.Addr()
	sh.srv.Close()
	c := newClient(t, []string{dead}, client.WithRetries(2), client.WithBackoff(time.Millisecond, 4*time.Millisecond), client.WithDialOptions(count))
	_, err := c.GetStats(ctx(t), false)
	var re *client.RPCError
	if !errors.As(err, &re) || status.Code(err) != codes.Unavailable || calls.Load() != 3 {
		t.Fatalf("dead shard: %v after %d calls, want Unavailable after 3", err, calls.Load())
	}
	// Other codes are not retried.
	live := startShard(t, 0, 1, "")
	calls.Store(0)
	c2 := newClient(t, []string{live.srv.Addr()}, client.WithDialOptions(count))
	if _, err := c2.HealthCheck(ctx(t), "gpu"); status.Code(err) != codes.NotFound || calls.Load() != 1 {
		t.Fatalf("NotFound: %v after %d calls", err, calls.Load())
	}
	// A shard without an address is Unavailable once the retries are spent.
	c3 := newClient(t, []string{live.srv.Addr(), ""})
	if _, err := c3.GetStatsShard(ctx(t), 1, false); status.Code(err) != codes.Unavailable {
		t.Fatalf("missing shard: %v", err)
	}
	if _, err := c3.Lookup(ctx(t), "sgd", 2, []int64{0, 2}, client.LookupOptions{}); err != nil {
		t.Fatalf("lookup avoiding the missing shard: %v", err)
	}
}

func TestBarrier(t *testing.T) {
	_, addrs := cluster(t, 2)
	c := newClient(t, addrs)
	for _, k := range []int{0, 1} {
		for round := range 2 {
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for w := range 3 {
				wg.Go(func() { errs[w] = c.BarrierOnShard(ctx(t), k, "sync", w, 3, 10*time.Second) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("shard %d round %d: %v", k, round, err)
			}
		}
	}
	// Timeout, then everyone retries and is released.
	err := c.Barrier(ctx(t), "t", 0, 2, 30*time.Millisecond)
	var te *client.TimeoutError
	if !errors.As(err, &te) || te.After != 30*time.Millisecond {
		t.Fatalf("timeout: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for w := range 2 {
		wg.Go(func() { errs[w] = c.Barrier(ctx(t), "t", w, 2, 10*time.Second) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// A mismatched num_workers is an *InvalidConfigError naming both values ("t" was fixed
	// at 2 workers by its first request).
	err = c.Barrier(ctx(t), "t", 1, 3, time.Second)
	var ic *client.InvalidConfigError
	if !errors.As(err, &ic) || !strings.Contains(ic.Msg, "num_workers 3 differs from 2") {
		t.Fatalf("mismatched num_workers: %v", err)
	}
}

func TestStatsHealthSave(t *testing.T) {
	dir := t.TempDir()
	var addrs []string
	for k := range 2 {
		addrs = append(addrs, startShard(t, k, 2, dir).srv.Addr())
	}
	c := newClient(t, addrs)
	if _, err := c.ApplyGradients(ctx(t), "sgd", 2, []int64{1, 2, 3}, make([]float32, 6), nil, 1, 0); err != nil {
		t.Fatal(err)
	}
	all, err := c.GetStatsAll(ctx(t), true)
	if err != nil {
		t.Fatal(err)
	}
	var entries int64
	for k, st := range all {
		if st.Shard != int32(k) || st.NumShards != 2 || st.ApplyGradientsCount != 1 || len(st.Tables) != 3 {
			t.Fatalf("shard %d stats: %v", k, st)
		}
		entries += st.Tables[2].Size
	}
	if entries != 3 {
		t.Fatalf("%d sgd entries over the shards, want 3", entries)
	}
	if st, err := c.GetStatsShard(ctx(t), 1, false); err != nil || st.Shard != 1 || len(st.Tables) != 0 {
		t.Fatal(st, err)
	}
	hs, err := c.HealthCheckAll(ctx(t), "ps")
	if err != nil || len(hs) != 2 || !hs[0].Healthy || !hs[1].Healthy {
		t.Fatal(hs, err)
	}
	saves, err := c.Save(ctx(t))
	if err != nil || len(saves) != 2 || saves[0].Entries+saves[1].Entries != 3 || !strings.Contains(saves[1].Path, "shard-1-of-2") {
		t.Fatal(saves, err)
	}
}

// TestShardKilledAndRestarted: shard 1 is killed after a Save and more applies, restarted
// from its checkpoint on a new port and swapped in with SetShards: it lost exactly the
// updates since the save; shard 0 lost nothing.
func TestShardKilledAndRestarted(t *testing.T) {
	dir := t.TempDir()
	s0, s1 := startShard(t, 0, 2, dir), startShard(t, 1, 2, dir)
	c := newClient(t, []string{s0.srv.Addr(), s1.srv.Addr()})
	fids := []int64{0, 1, 2, 3, 4, 5, -1}
	apply := func(g float32, step int64) {
		grads := make([]float32, len(fids)*4)
		for i := range grads {
			grads[i] = g * float32(i%7-3)
		}
		if _, err := c.ApplyGradients(ctx(t), "ada", 4, fids, grads, nil, step, 0); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() []float32 {
		res, err := c.Lookup(ctx(t), "ada", 4, fids, client.LookupOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Embeddings
	}
	apply(1, 1)
	if _, err := c.Save(ctx(t)); err != nil {
		t.Fatal(err)
	}
	saved := rows()
	apply(2, 2)
	latest := rows()
	s1.srv.Close() // killed: no final save
	if _, err := c.Lookup(ctx(t), "ada", 4, fids, client.LookupOptions{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("lookup with a dead shard: %v", err)
	}
	s1b := startShard(t, 1, 2, dir)
	if err := c.SetShards([]string{s0.srv.Addr(), s1b.srv.Addr()}); err != nil {
		t.Fatal(err)
	}
	got := rows()
	for i, f := range fids {
		want := latest // shard 0 kept everything
		if uint64(f)%2 == 1 {
			want = saved // shard 1 is back at its checkpoint
		}
		if !slices.Equal(got[i*4:(i+1)*4], want[i*4:(i+1)*4]) {
			t.Fatalf("fid %d: %v, want %v", f, got[i*4:(i+1)*4], want[i*4:(i+1)*4])
		}
	}
}

// TestCallWaitsForMovedShard: with WithUnavailableWait, a call to a killed shard keeps
// retrying, follows SetShards to the shard's new address and succeeds there, logging what
// it waits for; past the wait it fails naming how long it tried.
func TestCallWaitsForMovedShard(t *testing.T) {
	dir := t.TempDir()
	s0, s1 := startShard(t, 0, 2, dir), startShard(t, 1, 2, dir)
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	c := newClient(t, []string{s0.srv.Addr(), s1.srv.Addr()}, client.WithUnavailableWait(30*time.Second),
		client.WithBackoff(5*time.Millisecond, 50*time.Millisecond), client.WithLogger(log))
	fids := []int64{1, 2, 3}
	grads := []float32{1, 1, 1, 1, 1, 1}
	if _, err := c.ApplyGradients(ctx(t), "sgd", 2, fids, grads, nil, 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Save(ctx(t)); err != nil {
		t.Fatal(err)
	}
	s1.srv.Close()
	done := make(chan error, 1)
	var got *client.LookupResult
	go func() {
		var err error
		got, err = c.Lookup(ctx(t), "sgd", 2, fids, client.LookupOptions{})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "PS shard unavailable") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line saying what the call waits for:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the lookup ended (%v) while its shard was down", err)
	default:
	}
	s1b := startShard(t, 1, 2, dir) // restarted elsewhere: a new port, its checkpoint restored
	if err := c.SetShards([]string{s0.srv.Addr(), s1b.srv.Addr()}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("lookup across the restart: %v\n%s", err, logs.String())
	}
	if want := []float32{-0.1, -0.1, -0.1, -0.1, -0.1, -0.1}; !slices.Equal(got.Embeddings, want) {
		t.Errorf("rows %v, want %v (the saved update on both shards)", got.Embeddings, want)
	}
	for _, w := range []string{"PS shard moved", "to=" + s1b.srv.Addr(), "PS shard answers again"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, logs.String())
		}
	}

	// Past the wait, the call fails and says how long it tried.
	s1b.srv.Close()
	c2 := newClient(t, []string{s0.srv.Addr(), s1b.srv.Addr()}, client.WithUnavailableWait(300*time.Millisecond),
		client.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	start := time.Now()
	_, err := c2.Lookup(ctx(t), "sgd", 2, fids, client.LookupOptions{})
	if took := time.Since(start); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "gave up after") || took < 300*time.Millisecond || took > 5*time.Second {
		t.Fatalf("dead shard with a 300 ms wait: %v after %v", err, took)
	}
}

// TestConcurrentClient: many goroutines share one client (run with -race), while the
// shard list is swapped underneath them. SGD on zeros is linear, so the final rows are
// -lr × the sum of all gradients whatever the interleaving.
func TestConcurrentClient(t *testing.T) {
	_, addrs := cluster(t, 3)
	c := newClient(t, addrs)
	const workers, iters, nfids = 16, 60, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	stop := make(chan struct{})
	wg.Go(func() { // membership "changes" to the same addresses, reusing connections
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.SetShards(slices.Clone(addrs)); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	var workersWG sync.WaitGroup
	for w := range workers {
		workersWG.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range iters {
				fids := make([]int64, 8)
				for i := range fids {
					fids[i] = int64(r.IntN(nfids))
				}
				if r.IntN(2) == 0 {
					if _, err := c.ApplyGradients(ctx(t), "sgd", 2, fids, slices.Repeat([]float32{1}, 16), nil, 0, 0); err != nil {
						errs <- err
						return
					}
				} else if _, err := c.Lookup(ctx(t), "sgd", 2, fids, client.LookupOptions{WantFound: true}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	workersWG.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Replay the same random streams to know each fid's total gradient.
	total := make([]float64, nfids)
	for w := range workers {
		r := rand.New(rand.NewPCG(uint64(w), 1))
		for range iters {
			fids := make([]int64, 8)
			for i := range fids {
				fids[i] = int64(r.IntN(nfids))
			}
			if r.IntN(2) == 0 {
				for _, f := range fids {
					total[f]++
				}
			}
		}
	}
	all := make([]int64, nfids)
	for i := range all {
		all[i] = int64(i)
	}
	res, err := c.Lookup(ctx(t), "sgd", 2, all, client.LookupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for f := range nfids {
		want := -0.1 * total[f]
		for j := range 2 {
			if got := float64(res.Embeddings[2*f+j]); math.Abs(got-want) > 1e-3 {
				t.Fatalf("fid %d: %v, want %v", f, got, want)
			}
		}
	}
	st, err := c.GetStatsAll(ctx(t), false)
	if err != nil {
		t.Fatal(err)
	}
	var calls int64
	for _, s := range st {
		calls += s.LookupCount + s.ApplyGradientsCount
	}
	if calls < workers*iters {
		t.Fatalf("%d calls reached the shards, want at least %d", calls, workers*iters)
	}
}

// TestSetShardsMovesTraffic: after SetShards, calls go to the new address, and calls in
// flight on the old set finish.
func TestSetShardsMovesTraffic(t *testing.T) {
	a, b := startShard(t, 0, 1, ""), startShard(t, 0, 1, "")
	sent := make(chan struct{})
	var once sync.Once
	signal := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/Barrier") {
			once.Do(func() { close(sent) })
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	c := newClient(t, []string{a.srv.Addr()}, client.WithDialOptions(signal))
	// A barrier waiting on the old set survives the swap.
	done := make(chan error, 1)
	go func() { done <- c.Barrier(ctx(t), "x", 0, 2, 20*time.Second) }()
	<-sent
	if err := c.SetShards([]string{b.srv.Addr()}); err != nil {
		t.Fatal(err)
	}
	if got := c.Addrs(); !slices.Equal(got, []string{b.srv.Addr()}) || c.NumShards() != 1 {
		t.Fatalf("addrs %v", got)
	}
	if _, err := c.Lookup(ctx(t), "sgd", 2, []int64{1}, client.LookupOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, _ := a.srv.GetStats(ctx(t), &pspb.GetStatsRequest{})
	sb, _ := b.srv.GetStats(ctx(t), &pspb.GetStatsRequest{})
	if sa.LookupCount != 0 || sb.LookupCount != 1 {
		t.Fatalf("lookups: old %d, new %d", sa.LookupCount, sb.LookupCount)
	}
	// Release the barrier on the old shard directly: the old connection still works.
	resp, err := a.srv.Barrier(ctx(t), &pspb.BarrierRequest{BarrierId: "x", WorkerId: 1, NumWorkers: 2, TimeoutMs: 10000})
	if err != nil || resp.StatusCode != 0 {
		t.Fatal(resp, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("barrier across SetShards: %v", err)
	}
}
