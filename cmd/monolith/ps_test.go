package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/pspb"
)

var psTables = filepath.Join("..", "..", "testdata", "ps_tables.pbtxt")

// psProc is a `monolith ps` running in process.
type psProc struct {
	addr   string
	stderr *syncbuf.Buffer
	cancel context.CancelFunc
	done   chan error
}

var listeningRE = regexp.MustCompile(`ps shard (\d+)/(\d+) listening on ([0-9.:]+)`)

// startPS runs `monolith ps args...` until stopped and waits for its "listening on" line.
func startPS(t *testing.T, args ...string) *psProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &psProc{stderr: &syncbuf.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- run(ctx, append([]string{"ps"}, args...), &bytes.Buffer{}, p.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Error("ps did not stop")
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(p.stderr.String()); m != nil {
			p.addr = m[3]
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("ps exited: %v\n%s", err, p.stderr)
		case <-deadline:
			t.Fatalf("ps never listened:\n%s", p.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// stop cancels the shard (graceful: final checkpoint) and returns run's error.
func (p *psProc) stop(t *testing.T) error {
	t.Helper()
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err // for Cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("ps did not stop")
		return nil
	}
}

// psClient runs `monolith ps-client args...` and decodes its JSON output.
func psClient(t *testing.T, out any, args ...string) {
	t.Helper()
	stdout, stderr, err := runCLI(t, append([]string{"ps-client"}, args...)...)
	if err != nil {
		t.Fatalf("ps-client %v: %v\n%s%s", args, err, stdout, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("ps-client %v output: %v\n%s", args, err, stdout)
	}
}

type lookupOut struct {
	Table string `json:"table"`
	Dim   int    `json:"dim"`
	Rows  []struct {
		Fid       int64     `json:"fid"`
		Shard     int       `json:"shard"`
		Found     bool      `json:"found"`
		Embedding []float32 `json:"embedding"`
	} `json:"rows"`
	NumFound       int64 `json:"num_found"`
	NumInitialized int64 `json:"num_initialized"`
}

type applyOut struct {
	NumUpdated  int64 `json:"num_updated"`
	NumNotFound int64 `json:"num_not_found"`
	NumCreated  int64 `json:"num_created"`
}

func TestPSCommands(t *testing.T) {
	dir := t.TempDir()
	shardArgs := func(k string) []string {
		return []string{"--shard", k, "--num-shards", "2", "--listen", "127.0.0.1:0", "--tables", psTables, "--checkpoint-dir", dir, "--dedup-window", "1024"}
	}
	s0, s1 := startPS(t, shardArgs("0")...), startPS(t, shardArgs("1")...)
	if !strings.Contains(s1.stderr.String(), "ps shard 1/2 listening on "+s1.addr) {
		t.Fatalf("stderr: %s", s1.stderr)
	}
	ps := s0.addr + "," + s1.addr

	// "item": a bias segment (FTRL) and a dim-3 SGD segment (lr 0.1), zeros, no filter.
	var ap applyOut
	psClient(t, &ap, "apply", "--ps", ps, "--table", "item", "--dim", "4", "--fids", "1,2,3,2",
		"--grads", "1,1,1,1, 2,2,2,2, 3,3,3,3, 4,4,4,4", "--step", "5")
	if ap != (applyOut{NumUpdated: 3, NumCreated: 3}) {
		t.Fatalf("apply: %+v", ap)
	}
	var lk lookupOut
	psClient(t, &lk, "lookup", "--ps", ps, "--table", "item", "--fids", "2,4,1") // dim asked from shard 0
	if lk.Dim != 4 || len(lk.Rows) != 3 || lk.NumFound != 2 || lk.Rows[1].Found || !lk.Rows[0].Found || lk.Rows[0].Shard != 0 || lk.Rows[2].Shard != 1 {
		t.Fatalf("lookup: %+v", lk)
	}
	// fid 2 got 2+4 = 6 on each SGD weight: 0 - 0.1×6.
	if got := lk.Rows[0].Embedding[1:]; !slices.Equal(got, []float32{-0.6, -0.6, -0.6}) {
		t.Fatalf("fid 2 vector segment %v, want -0.6s", got)
	}
	// Explicit learning rates: one per segment.
	psClient(t, &ap, "apply", "--ps", ps, "--table", "item", "--fids", "3", "--grads", "0,1,1,1", "--lr", "0.05,1")
	if ap.NumUpdated != 1 {
		t.Fatalf("apply with rates: %+v", ap)
	}
	// fid 3 now holds what an in-process table gives for the same two applies: the SGD
	// segment 0 − 0.1×3 − 1×1 = −1.3, the FTRL bias its closed form at rate 0.05.
	var three lookupOut
	psClient(t, &three, "lookup", "--ps", ps, "--table", "item", "--dim", "4", "--fids", "3")
	if want := refItem3(t); len(three.Rows) != 1 || !slices.Equal(three.Rows[0].Embedding, want) {
		t.Fatalf("fid 3 after the applies with rates: %+v, want %v", three.Rows, want)
	}
	if got := three.Rows[0].Embedding[1:]; !slices.Equal(got, []float32{-1.3, -1.3, -1.3}) {
		t.Fatalf("fid 3 vector segment %v, want -1.3s", got)
	}
	// "user": occurrence threshold 2, so a fid seen once is not created.
	psClient(t, &ap, "apply", "--ps", ps, "--table", "user", "--fids", "77", "--grads", "1,1,1,1,1,1,1,1")
	if ap != (applyOut{NumNotFound: 1}) {
		t.Fatalf("apply below the threshold: %+v", ap)
	}
	// Creating lookups count per position: occurrences 1 and 2 of fid 5 stay below the
	// threshold (absent, zeros), the third is admitted and creates it.
	var created lookupOut
	psClient(t, &created, "lookup", "--ps", ps, "--table", "user", "--dim", "8", "--fids", "5,5,5", "--create")
	if created.NumFound != 0 || created.NumInitialized != 1 || len(created.Rows) != 3 ||
		created.Rows[0].Found || created.Rows[1].Found || !created.Rows[2].Found {
		t.Fatalf("create lookup: %+v, want 0 found, 1 initialized, only the third present", created)
	}
	zeros := make([]float32, 8)
	if !slices.Equal(created.Rows[0].Embedding, zeros) || !slices.Equal(created.Rows[1].Embedding, zeros) {
		t.Fatalf("create lookup: absent positions %v %v, want zeros", created.Rows[0].Embedding, created.Rows[1].Embedding)
	}
	init5 := created.Rows[2].Embedding
	if len(init5) != 8 || slices.Equal(init5, zeros) || slices.ContainsFunc(init5, func(v float32) bool { return v < -0.01 || v > 0.01 }) {
		t.Fatalf("create lookup: fid 5 initialized to %v, want random_uniform values in [-0.01, 0.01]", init5)
	}
	var again lookupOut
	psClient(t, &again, "lookup", "--ps", ps, "--table", "user", "--dim", "8", "--fids", "5", "--create")
	if again.NumFound != 1 || again.NumInitialized != 0 || !slices.Equal(again.Rows[0].Embedding, init5) {
		t.Fatalf("lookup after the creation: %+v, want fid 5 found with %v", again, init5)
	}

	var stats struct {
		Shards []struct {
			Shard       int   `json:"shard"`
			NumShards   int   `json:"num_shards"`
			ApplyCount  int64 `json:"apply_gradients_count"`
			LookupCount int64 `json:"lookup_count"`
			Tables      []struct {
				Name string `json:"name"`
				Size int64  `json:"size"`
				Dim  int    `json:"dim"`
			} `json:"tables"`
		} `json:"shards"`
	}
	psClient(t, &stats, "stats", "--ps", ps, "--tables")
	if len(stats.Shards) != 2 || stats.Shards[1].Shard != 1 || stats.Shards[1].NumShards != 2 || len(stats.Shards[0].Tables) != 2 {
		t.Fatalf("stats: %+v", stats)
	}
	if items := stats.Shards[0].Tables[1].Size + stats.Shards[1].Tables[1].Size; items != 3 || stats.Shards[0].Tables[1].Name != "item" {
		t.Fatalf("item entries %d, want 3: %+v", items, stats)
	}

	// A request id: the repeat is a duplicate on both shards (fid 6 on 0, fid 5 on 1).
	for i, want := range []struct{ updated, duplicates int64 }{{2, 0}, {0, 2}} {
		var dap struct {
			NumUpdated int64 `json:"num_updated"`
			Duplicates int64 `json:"duplicates"`
		}
		psClient(t, &dap, "apply", "--ps", ps, "--table", "item", "--dim", "4", "--fids", "5,6", "--grads", "1,1,1,1,1,1,1,1", "--request-id", "cli-1")
		if dap.NumUpdated != want.updated || dap.Duplicates != want.duplicates {
			t.Fatalf("apply %d with a request id: %+v, want %+v", i, dap, want)
		}
	}
	// The global step of shard 0: raised to 5 by the first apply's --step, then incremented.
	for i, c := range []struct {
		args []string
		want int64
	}{
		{nil, 5},
		{[]string{"--increment", "3", "--request-id", "s1"}, 8},
		{[]string{"--increment", "3", "--request-id", "s1"}, 8},
		{[]string{"--increment", "1"}, 9},
	} {
		var st struct {
			Step int64 `json:"step"`
		}
		psClient(t, &st, append([]string{"step", "--ps", ps}, c.args...)...)
		if st.Step != c.want {
			t.Fatalf("step %d %v: %d, want %d", i, c.args, st.Step, c.want)
		}
	}
	var dups struct {
		Shards []struct {
			DuplicateRequests int64 `json:"duplicate_requests"`
		} `json:"shards"`
	}
	psClient(t, &dups, "stats", "--ps", ps)
	if len(dups.Shards) != 2 || dups.Shards[0].DuplicateRequests != 2 || dups.Shards[1].DuplicateRequests != 1 {
		t.Fatalf("duplicate requests per shard: %+v, want 2 and 1", dups)
	}

	var health struct {
		Shards []struct {
			Healthy bool `json:"healthy"`
		} `json:"shards"`
	}
	psClient(t, &health, "health", "--ps", ps)
	if len(health.Shards) != 2 || !health.Shards[0].Healthy || !health.Shards[1].Healthy {
		t.Fatalf("health: %+v", health)
	}
	var bar struct {
		Released bool `json:"released"`
	}
	psClient(t, &bar, "barrier", "--ps", ps, "--id", "x", "--worker", "0", "--workers", "1", "--timeout", "5s", "--shard", "1")
	if !bar.Released {
		t.Fatal("barrier not released")
	}
	var save struct {
		Shards []struct {
			Path    string `json:"path"`
			Entries int64  `json:"entries"`
		} `json:"shards"`
	}
	psClient(t, &save, "save", "--ps", ps)
	if len(save.Shards) != 2 || !strings.Contains(save.Shards[0].Path, "shard-0-of-2") {
		t.Fatalf("save: %+v", save)
	}

	// Values survive a restart of shard 1 (graceful stop: final checkpoint).
	var before lookupOut
	psClient(t, &before, "lookup", "--ps", ps, "--table", "item", "--dim", "4", "--fids", "1,2,3")
	if err := s1.stop(t); err != nil {
		t.Fatalf("stopping shard 1: %v\n%s", err, s1.stderr)
	}
	if !strings.Contains(s1.stderr.String(), "saved checkpoint") {
		t.Fatalf("no final save:\n%s", s1.stderr)
	}
	s1 = startPS(t, shardArgs("1")...)
	if !strings.Contains(s1.stderr.String(), "restored checkpoint") {
		t.Fatalf("no restore:\n%s", s1.stderr)
	}
	var after lookupOut
	psClient(t, &after, "lookup", "--ps", s0.addr+","+s1.addr, "--table", "item", "--dim", "4", "--fids", "1,2,3")
	for i := range before.Rows {
		if !slices.Equal(before.Rows[i].Embedding, after.Rows[i].Embedding) || !after.Rows[i].Found {
			t.Fatalf("fid %d: %v before the restart, %v after", before.Rows[i].Fid, before.Rows[i].Embedding, after.Rows[i].Embedding)
		}
	}
}

// refItem3 is fid 3 of the "item" table after TestPSCommands' two applies to it, computed
// in process.
func refItem3(t *testing.T) []float32 {
	t.Helper()
	cfg, err := table.LoadTablesConfig(psTables)
	if err != nil {
		t.Fatal(err)
	}
	var spec *pspb.TableSpec
	for _, s := range cfg.GetTables() {
		if s.GetName() == "item" {
			spec = s
		}
	}
	tb, err := table.FromSpec(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Apply([]int64{3}, []float32{3, 3, 3, 3}, nil, 5, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Apply([]int64{3}, []float32{0, 1, 1, 1}, []float32{0.05, 1}, 0, 0); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 4)
	if n, err := tb.Lookup([]int64{3}, out, nil); err != nil || n != 1 {
		t.Fatalf("reference lookup: %d, %v", n, err)
	}
	return out
}

func TestPSUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"ps"},
		{"ps", "--tables", psTables, "--shard", "2", "--num-shards", "2"},
		{"ps", "--tables", psTables, "extra"},
		{"ps-client"},
		{"ps-client", "frobnicate"},
		{"ps-client", "stats"},
		{"ps-client", "stats", "--ps", "127.0.0.1:1", "--discovery", "zk", "--zk", "127.0.0.1:2", "--num-shards", "1"},
		{"ps-client", "stats", "--discovery", "zk", "--num-shards", "1"}, // no --zk
		{"ps", "--tables", psTables, "--discovery", "zk"},                // no --zk
		{"ps-client", "lookup", "--ps", "127.0.0.1:1", "--table", "t", "--dim", "2"},
		{"ps-client", "lookup", "--ps", "127.0.0.1:1", "--table", "t", "--dim", "2", "--fids", "1,x"},
		{"ps-client", "apply", "--ps", "127.0.0.1:1", "--table", "t", "--dim", "2", "--fids", "1", "--grads", "1"},
		{"ps-client", "barrier", "--ps", "127.0.0.1:1"},
		{"ps-client", "step", "--ps", "127.0.0.1:1", "--increment", "-1"},
		{"ps-client", "step", "--ps", "127.0.0.1:1", "--table", "t"}, // apply's flags only
		{"ps", "--tables", psTables, "--dedup-window", "many"},
		{"ps-client", "stats", "--zk", "127.0.0.1:2"},
		{"ps-client", "stats", "--ps", "127.0.0.1"},                // no port (gRPC would dial :443)
		{"ps-client", "stats", "--ps", "127.0.0.1:1,,127.0.0.1:2"}, // empty shard address
	} {
		_, _, err := runCLI(t, args...)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	if _, _, err := runCLI(t, "ps", "--tables", filepath.Join(t.TempDir(), "missing.pbtxt")); err == nil || !strings.Contains(err.Error(), "missing.pbtxt") {
		t.Errorf("missing tables file: %v", err)
	}
}

// TestPSZooKeeper: shards register in a real ZooKeeper (S15) under Monolith's layout
// (/monolith/{job}/ps.{i}) and ps-client finds them.
func TestPSZooKeeper(t *testing.T) {
	zk := zktest.Start(t)
	zkArgs := []string{"--discovery", "zk", "--zk", zk.Addr(), "--job", "test"}
	var shards []*psProc
	for _, k := range []string{"0", "1"} {
		shards = append(shards, startPS(t, append([]string{"--shard", k, "--num-shards", "2", "--tables", psTables}, zkArgs...)...))
	}
	found := append([]string{"--num-shards", "2", "--discovery-wait", "20s"}, zkArgs...)
	var ap applyOut
	psClient(t, &ap, append([]string{"apply", "--table", "item", "--dim", "4", "--fids", "10,11", "--grads", "1,1,1,1,1,1,1,1"}, found...)...)
	if ap.NumUpdated != 2 {
		t.Fatalf("apply through ZooKeeper: %+v", ap)
	}
	conn := zk.Connect(t)
	for i, p := range shards {
		if data, st, err := conn.Get(fmt.Sprintf("/monolith/test/ps.%d", i)); err != nil || string(data) != p.addr || st.EphemeralOwner == 0 {
			t.Errorf("node ps.%d: %q, %v; want %q in an ephemeral node", i, data, err, p.addr)
		}
	}
	var lk lookupOut
	psClient(t, &lk, append([]string{"lookup", "--table", "item", "--dim", "4", "--fids", "10,11,12"}, found...)...)
	if lk.NumFound != 2 {
		t.Fatalf("lookup through ZooKeeper: %+v", lk)
	}
	// A shard count nobody registered times out with a clear error.
	_, _, err := runCLI(t, append([]string{"ps-client", "stats", "--num-shards", "3", "--discovery-wait", "1s"}, zkArgs...)...)
	if err == nil || !strings.Contains(err.Error(), "ps [2] of 3 not registered") {
		t.Fatalf("missing shard: %v", err)
	}
	// A second PS for the live shard 0 refuses to start; the first one keeps its node.
	_, _, err = runCLI(t, append([]string{"ps", "--shard", "0", "--num-shards", "2", "--tables", psTables}, zkArgs...)...)
	if err == nil || !strings.Contains(err.Error(), "already served by "+shards[0].addr) {
		t.Errorf("a second shard 0: %v", err)
	}
	if data, _, err := conn.Get("/monolith/test/ps.0"); err != nil || string(data) != shards[0].addr {
		t.Errorf("ps.0 after the refused second shard: %q, %v", data, err)
	}
	// An unreachable ZooKeeper fails the shard's start within --discovery-wait, naming it.
	start := time.Now()
	_, _, err = runCLI(t, "ps", "--tables", psTables, "--discovery", "zk", "--zk", "127.0.0.1:1", "--discovery-wait", "1s")
	if err == nil || !strings.Contains(err.Error(), "discovery zk") || time.Since(start) > 10*time.Second {
		t.Errorf("ps with an unreachable ZooKeeper: %v after %v", err, time.Since(start))
	}
	// A stopped shard leaves the membership.
	if err := shards[1].stop(t); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := conn.Exists("/monolith/test/ps.1"); ok || err != nil {
		t.Errorf("ps.1 still registered after its shard stopped (%v)", err)
	}
}
