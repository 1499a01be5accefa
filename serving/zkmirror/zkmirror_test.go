package zkmirror

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/zk"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	waitFor  = 20 * time.Second
	bzid     = "bzid"
	model    = "model"
	shardID  = 2
	replicaN = 2
	localIP  = "10.0.0.7"
)

// eventually waits (bounded) until cond holds.
func eventually(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	zktest.Eventually(t, waitFor, cond, msg)
}

func connect(t *testing.T, servers []string) *zk.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := zk.Connect(ctx, zk.Options{Servers: servers, SessionTimeout: zktest.SessionTimeout, Logger: zktest.NewLogger(t).Slog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newMirror(t *testing.T, c *zk.Client) *Mirror {
	t.Helper()
	m := New(c, bzid, Options{TCEShardID: shardID, NumTCEShard: 10, ReplicaID: replicaN, LocalHost: localIP,
		DeployType: config.DeployPS, Logger: zktest.NewLogger(t).Slog()})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := m.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

func rm(st string, task int64) datadef.ReplicaMeta {
	r := datadef.NewReplicaMeta()
	r.Address, r.ModelName, r.ServerType = datadef.Some(localIP+":8080"), datadef.Some(model), datadef.Some(st)
	r.Task, r.Replica, r.Stat = task, replicaN, datadef.ModelStateAvailable
	return r
}

// TestMirror ports zk_mirror_test.py's scenario on a real ZooKeeper: a portal event, a
// scheduler publishing 5 shards × 3 replicas, expected_loading for this shard keeping
// entry, update_service, the replica queries, local_replica_paths and the resource round
// trip.
func TestMirror(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv.Servers())
	m := newMirror(t, c)
	ctx := context.Background()
	if err := m.WatchPortal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchResource(ctx); err != nil {
		t.Fatal(err)
	}

	// 0–1) A portal node queues a PORTAL event. Its data watch starts after the node exists
	// (the children watch finds it), so the first call is kazoo's event None: action NONE.
	mm := datadef.NewModelMeta()
	mm.ModelName, mm.ModelDir, mm.NumShard = datadef.Some(model), datadef.Some("/base"), 5
	if err := m.Create(ctx, "/bzid/portal/model", mm.Serialize(), false); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	ev, err := m.Next(wctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := datadef.DeserializeModelMeta(ev.Data)
	if ev.Type != EventPortal || ev.Path != "/bzid/portal/model" || err != nil || got.Action != "NONE" || got.NumShard != 5 {
		t.Fatalf("portal event %+v (%s), %v", ev, ev.Data, err)
	}

	// The scheduler: shard i of 5 holds ps_k for k % 5 == i plus entry; our shard gets i=0.
	var pms []datadef.PublishMeta
	shards := []int64{shardID, 7, 8, 9, 1}
	for i := range 5 {
		subs := []datadef.SubModel{}
		for k := range 10 {
			if k%5 == i {
				subs = append(subs, datadef.SubModel{Name: fmt.Sprintf("ps_%d", k), VersionPath: fmt.Sprintf("/base/ps_%d/123456", k)})
			}
		}
		subs = append(subs, datadef.SubModel{Name: "entry", VersionPath: "/base/entry/123456"})
		for r := range int64(3) {
			pm := datadef.NewPublishMeta()
			pm.ShardID, pm.ReplicaID, pm.ModelName, pm.NumPS = datadef.Some(shards[i]), r, datadef.Some(model), datadef.Some(int64(10))
			pm.SubModels, pm.TotalPublishNum = datadef.Some(subs), 15
			pms = append(pms, pm)
		}
	}
	if err := m.PublishLoading(ctx, pms...); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return len(m.ExpectedLoading()) == 1 }, func() string { return "no expected loading" })
	pm := m.ExpectedLoading()[model]
	var names []string
	for _, s := range pm.SubModels.V {
		names = append(names, s.Name)
	}
	if pm.ShardID.V != shardID || pm.ReplicaID != replicaN || !slices.Equal(names, []string{"ps_0", "ps_5", "entry"}) {
		t.Fatalf("expected loading: shard %v replica %d sub-models %q", pm.ShardID, pm.ReplicaID, names)
	}
	// The scheduler publishes again unchanged: nothing is written (same bytes).
	_, before, err := c.Get(ctx, "/bzid/publish/2:0:model")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.PublishLoading(ctx, pms...); err != nil {
		t.Fatal(err)
	}
	if _, after, _ := c.Get(ctx, "/bzid/publish/2:0:model"); after.Version != before.Version {
		t.Errorf("unchanged publish rewritten: version %d → %d", before.Version, after.Version)
	}

	// 3–4) update_service and the replica queries.
	want := []datadef.ReplicaMeta{rm("ps", 0), rm("ps", 5), rm("entry", 0)}
	if err := m.UpdateService(ctx, want); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return len(m.GetAllReplicas("ps")) == 2 }, func() string { return fmt.Sprintf("ps replicas %v", m.GetAllReplicas("ps")) })
	all := m.GetAllReplicas("ps")
	if !slices.Equal(slices.Sorted(maps.Keys(all)), []string{"model:ps:0", "model:ps:5"}) || all["model:ps:5"][0] != want[1] {
		t.Errorf("GetAllReplicas(ps) = %v", all)
	}
	if got := m.GetModelReplicas(model, "entry"); len(got["model:entry:0"]) != 1 || got["model:entry:0"][0] != want[2] {
		t.Errorf("GetModelReplicas(entry) = %v", got)
	}
	if got := m.GetTaskReplicas(model, "ps", 0); len(got) != 1 || got[0] != want[0] {
		t.Errorf("GetTaskReplicas(ps, 0) = %v", got)
	}
	if got, ok := m.GetReplica(model, "ps", 5, replicaN); !ok || got != want[1] {
		t.Errorf("GetReplica(ps, 5, 2) = %v, %v", got, ok)
	}
	wantLocal := map[string]bool{"/bzid/service/model/ps:0/2": true, "/bzid/service/model/entry:0/2": true, "/bzid/service/model/ps:5/2": true}
	if got := m.LocalReplicaPaths(); !maps.Equal(got, wantLocal) {
		t.Errorf("LocalReplicaPaths = %v", got)
	}
	// Dropping ps:5 from the wanted set deletes its node.
	if err := m.UpdateService(ctx, want[:1]); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { _, ok := m.Get("/bzid/service/model/ps:5/2"); return !ok }, func() string { return "ps:5 not removed" })

	// 5–6) resources.
	rs := datadef.NewResourceSpec()
	rs.Address, rs.ShardID, rs.ReplicaID, rs.Memory = datadef.Some(localIP+":1234"), datadef.Some(int64(shardID)), datadef.Some(int64(replicaN)), datadef.Some(int64(12345))
	rs.CPU, rs.Network, rs.WorkLoad = 5.6, 3.2, 0.7
	if err := m.ReportResource(ctx, rs); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { r := m.Resources(); return len(r) == 1 && r[0] == rs }, func() string { return fmt.Sprintf("resources %v", m.Resources()) })

	// Deleting the portal node queues DELETED.
	if err := m.Delete(ctx, "/bzid/portal/model", true); err != nil {
		t.Fatal(err)
	}
	publishEvents := 0
	for ev, err = m.Next(wctx); err == nil && ev.Type == EventPublish; ev, err = m.Next(wctx) {
		publishEvents++ // the publish watch's: every node arrived
	}
	if publishEvents == 0 {
		t.Error("no PUBLISH event once all 15 publish nodes arrived")
	}
	if got, err := datadef.DeserializeModelMeta(ev.Data); err != nil || ev.Type != EventPortal || got.Action != "DELETED" || got.ModelName.V != model {
		t.Errorf("portal deletion event %+v (%s), %v", ev, ev.Data, err)
	}
}

// TestCacheSegmentsS9: children and queries match whole path segments, and each child
// comes once.
func TestCacheSegmentsS9(t *testing.T) {
	m := New(nil, bzid, Options{})
	for _, p := range []string{"/bzid/service/m1/ps:0/1", "/bzid/service/m1/ps:0/2", "/bzid/service/m10/ps:0/1", "/bzid/service/m1/entry:0/1"} {
		r := datadef.NewReplicaMeta()
		r.Address, r.Stat = datadef.Some("h:1"), datadef.ModelStateAvailable
		m.data[p] = r.Serialize()
	}
	if got := m.GetChildren("/bzid/service/m1"); !slices.Equal(got, []string{"entry:0", "ps:0"}) {
		t.Errorf("children of m1 = %q", got)
	}
	if got := m.GetChildren("/bzid/service"); !slices.Equal(got, []string{"m1", "m10"}) {
		t.Errorf("children of service = %q", got)
	}
	if got := m.GetTaskReplicas("m1", "ps", 0); len(got) != 2 {
		t.Errorf("m1 ps:0 replicas = %d, want 2 (m10's excluded)", len(got))
	}
	if !under("/a/b", "/a/b/") || under("/a/bc", "/a/b") {
		t.Error("under() does not match on segments")
	}
}

// TestServingClient: load, double load, status, unload.
func TestServingClient(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv.Servers())
	m := newMirror(t, c)
	sc := NewServingClient(m)
	ctx := context.Background()
	mm := datadef.NewModelMeta()
	mm.ModelName = datadef.Some(model)
	if err := sc.Load(ctx, mm); err != nil {
		t.Fatal(err)
	}
	if err := sc.Load(ctx, mm); err == nil || err.Error() != "model has exists" {
		t.Errorf("second load: %v", err)
	}
	r := rm("ps", 0)
	if err := c.CreateOrSet(ctx, "/bzid/service/model/ps:0/2", r.Serialize()); err != nil {
		t.Fatal(err)
	}
	st, err := sc.Status(ctx, model)
	if err != nil || !st.Portal || st.Publish || st.Service["ps:0:2"] != datadef.ModelStateAvailable {
		t.Errorf("status %+v, %v", st, err)
	}
	if err := sc.Unload(ctx, model); err != nil {
		t.Fatal(err)
	}
	if st, _ := sc.Status(ctx, model); st.Portal {
		t.Error("portal after unload")
	}
	if err := m.Election(); err == nil {
		t.Error("Election on a ps deployment did not answer not implemented")
	}
}

// TestSessionExpiry: the resource node (ephemeral) comes back after the session expires.
func TestSessionExpiry(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.NewProxy(t)
	c := connect(t, proxy.Servers())
	m := newMirror(t, c)
	direct := connect(t, srv.Servers())
	ctx := context.Background()
	rs := datadef.NewResourceSpec()
	rs.ShardID, rs.ReplicaID = datadef.Some(int64(shardID)), datadef.Some(int64(replicaN))
	if err := m.ReportResource(ctx, rs); err != nil {
		t.Fatal(err)
	}
	proxy.ExpireSessions(t, c.SessionID())
	eventually(t, func() bool { ok, err := direct.Exists(ctx, "/bzid/resource/2:2"); return err == nil && ok && !c.Lost() },
		func() string { return "resource node not re-created after expiry" })
}
