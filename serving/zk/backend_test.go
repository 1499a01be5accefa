package zk

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	izk "github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/serving/datadef"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait on ZooKeeper (the machine is shared and slow).
const wait = 30 * time.Second

// testCtx bounds a test's ZooKeeper calls.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*wait)
	t.Cleanup(cancel)
	return ctx
}

func eventually(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	zktest.Eventually(t, wait, cond, msg)
}

// The reference test's fixtures (backends_test.py).
const (
	bzid       = "gip"
	model      = "test_ffm_model"
	layoutPath = "/gip/layouts/test_layout/mixed"
)

var container = datadef.Container{Cluster: "default", ID: "asdf"}

func serviceInfo() datadef.ContainerServiceInfo {
	return datadef.ContainerServiceInfo{
		GRPC: datadef.Some("localhost:8888"), HTTP: datadef.Some("localhost:8889"),
		Archon: datadef.Some("localhost:8890"), Agent: datadef.Some("localhost:8891"), IDC: datadef.Some("IDC"),
	}
}

func sm(sub string) datadef.SavedModel { return datadef.SavedModel{ModelName: model, SubGraph: sub} }

func deployConfig(sub string) datadef.SavedModelDeployConfig {
	return datadef.SavedModelDeployConfig{
		ModelBasePath: datadef.Some("/tmp/test_ffm_model/exported_models/" + sub),
		VersionPolicy: datadef.Some("latest"),
	}
}

func openTestBackend(t *testing.T, servers []string) *Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	b, err := OpenBackend(ctx, bzid, izk.Options{Servers: servers, SessionTimeout: zktest.SessionTimeout, Logger: zktest.NewLogger(t).Slog()})
	if err != nil {
		t.Fatalf("OpenBackend: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// layoutRecorder records layout callbacks as "model:sub=base|policy" strings.
type layoutRecorder struct {
	mu  sync.Mutex
	all [][]string
}

func (r *layoutRecorder) cb(entries []LayoutEntry) bool {
	var s []string
	for _, e := range entries {
		base, _ := e.Config.ModelBasePath.Get()
		pol, _ := e.Config.VersionPolicy.Get()
		s = append(s, e.SavedModel.String()+"="+base+"|"+pol)
	}
	r.mu.Lock()
	r.all = append(r.all, s)
	r.mu.Unlock()
	return true
}

// get returns the calls so far.
func (r *layoutRecorder) get() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// last returns the latest call's entries.
func (r *layoutRecorder) last() ([]string, bool) {
	all := r.get()
	if len(all) == 0 {
		return nil, false
	}
	return all[len(all)-1], true
}

func (r *layoutRecorder) waitFor(t *testing.T, subs ...string) {
	t.Helper()
	var want []string
	for _, s := range subs {
		c := deployConfig(s)
		base, _ := c.ModelBasePath.Get()
		want = append(want, model+":"+s+"="+base+"|latest")
	}
	eventually(t, func() bool { l, ok := r.last(); return ok && slices.Equal(l, want) },
		func() string { l, _ := r.last(); return fmt.Sprintf("layout callback got %q, want %q", l, want) })
}

func declare(t *testing.T, ctx context.Context, b *Backend, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if err := b.DeclSavedModel(ctx, sm(s), deployConfig(s)); err != nil {
			t.Fatal(err)
		}
	}
}

func waitServiceMap(t *testing.T, b *Backend, want ServiceMap) {
	t.Helper()
	eventually(t, func() bool { return reflect.DeepEqual(b.ServiceMap(), want) },
		func() string { return fmt.Sprintf("service map %v, want %v", b.ServiceMap(), want) })
}

// backends_test: test_register_service, plus the node's bytes and ephemerality.
func TestServiceInfo(t *testing.T) {
	srv := zktest.Start(t)
	b := openTestBackend(t, srv.Servers())
	ctx := testCtx(t)
	if _, ok, err := b.GetServiceInfo(ctx, container); ok || err != nil {
		t.Fatalf("GetServiceInfo before any report = %v, %v", ok, err)
	}
	if err := b.ReportServiceInfo(ctx, container, serviceInfo()); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.GetServiceInfo(ctx, container)
	if err != nil || !ok || got != serviceInfo() {
		t.Fatalf("GetServiceInfo = %+v, %v, %v", got, ok, err)
	}
	want := `{"grpc": "localhost:8888", "http": "localhost:8889", "archon": "localhost:8890", "agent": "localhost:8891", "idc": "IDC", "debug_info": null}`
	eventually(t, func() bool {
		data, stat, err := b.Client().Get(ctx, "/gip/container_service/default:asdf")
		return err == nil && string(data) == want && stat.EphemeralOwner == b.Client().SessionID()
	}, func() string { return "the service info node is not " + want + " owned by the session" })
	// Malformed data is an error naming the node.
	other := datadef.Container{Cluster: "c", ID: "bad"}
	if err := b.Client().CreateOrSet(ctx, other.ServicePath(bzid), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	_, _, err = b.GetServiceInfo(ctx, other)
	if !errors.Is(err, ErrBadData) || !strings.Contains(err.Error(), "/gip/container_service/c:bad") {
		t.Errorf("GetServiceInfo of malformed data = %v", err)
	}
	if err := b.ReportServiceInfo(ctx, datadef.Container{Cluster: "a/b", ID: "x"}, serviceInfo()); !errors.Is(err, izk.ErrInvalidArgument) {
		t.Errorf("ReportServiceInfo with a '/' in the cluster = %v", err)
	}
}

// backends_test: test_layout_callback (entry, ps_0, ps_1, ps_2 in order, then without
// entry), plus the declared nodes' bytes.
func TestLayoutCallback(t *testing.T) {
	srv := zktest.Start(t)
	b := openTestBackend(t, srv.Servers())
	ctx := testCtx(t)
	var rec layoutRecorder
	if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.cb); err != nil {
		t.Fatal(err)
	}
	if got := rec.get(); len(got) != 1 || len(got[0]) != 0 {
		t.Fatalf("first layout call %q, want one empty call", got)
	}
	if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.cb); !errors.Is(err, izk.ErrInvalidArgument) {
		t.Errorf("a second callback on the same layout = %v", err)
	}
	subs := []string{"entry", "ps_0", "ps_1", "ps_2"}
	for _, s := range subs {
		declare(t, ctx, b, s)
		if err := b.AddToLayout(ctx, layoutPath, sm(s)); err != nil {
			t.Fatal(err)
		}
	}
	rec.waitFor(t, subs...)
	data, stat, err := b.Client().Get(ctx, "/gip/saved_models/test_ffm_model/ps_1")
	if want := `{"model_base_path": "/tmp/test_ffm_model/exported_models/ps_1", "version_policy": "latest"}`; err != nil || string(data) != want || stat.EphemeralOwner != 0 {
		t.Errorf("saved model node %s (%v), want persistent %s", data, err, want)
	}
	if err := b.RemoveFromLayout(ctx, layoutPath, sm("entry")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "ps_0", "ps_1", "ps_2")
	if err := b.RemoveFromLayout(ctx, layoutPath, sm("entry")); err != nil {
		t.Errorf("removing a saved model that is not in the layout: %v", err)
	}
	waitServiceMap(t, b, ServiceMap{model: {}})
	if ok, _ := b.Client().Exists(ctx, "/gip/binding/test_ffm_model"); !ok {
		t.Error("the layout's model has no binding node to watch")
	}
}

// agent_controller_test: decl then pub/unpub sequences, with list_saved_models.
func TestControllerOperations(t *testing.T) {
	srv := zktest.Start(t)
	b := openTestBackend(t, srv.Servers())
	ctx := testCtx(t)
	if got, err := b.ListSavedModels(ctx, model); err != nil || len(got) != 0 {
		t.Fatalf("ListSavedModels of an undeclared model = %v, %v", got, err)
	}
	all := []string{"entry", "ps_0", "ps_1", "ps_2", "ps_3", "ps_4"}
	declare(t, ctx, b, all...)
	got, err := b.ListSavedModels(ctx, model)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.SubGraph)
	}
	if !slices.Equal(names, all) {
		t.Fatalf("ListSavedModels = %q", names)
	}
	lp := "/gip/layouts/ctl"
	layout := func() []string {
		ch, err := b.Client().Children(ctx, lp)
		if err != nil && !errors.Is(err, izk.ErrNoNode) {
			t.Fatal(err)
		}
		return ch
	}
	steps := []struct {
		pub  bool
		subs []string
		want []string
	}{
		{true, []string{"entry"}, []string{"test_ffm_model:entry"}},
		{true, all[1:], []string{"test_ffm_model:entry", "test_ffm_model:ps_0", "test_ffm_model:ps_1", "test_ffm_model:ps_2", "test_ffm_model:ps_3", "test_ffm_model:ps_4"}},
		{false, all[1:], []string{"test_ffm_model:entry"}},
		{false, []string{"entry"}, nil},
	}
	for i, s := range steps {
		for _, sub := range s.subs {
			op := b.AddToLayout
			if !s.pub {
				op = b.RemoveFromLayout
			}
			if err := op(ctx, lp, sm(sub)); err != nil {
				t.Fatal(err)
			}
		}
		if got := layout(); !slices.Equal(got, s.want) {
			t.Errorf("step %d: layout %q, want %q", i, got, s.want)
		}
	}
	if err := b.DeclSavedModel(ctx, datadef.SavedModel{ModelName: "m", SubGraph: "a:b"}, deployConfig("x")); !errors.Is(err, izk.ErrInvalidArgument) {
		t.Errorf("DeclSavedModel with ':' in the sub-graph = %v", err)
	}
}

// backends_test: test_sync_available_models and test_service_map (whose assertion is
// vacuous in the reference; here the map is checked).
func TestSyncAndServiceMap(t *testing.T) {
	srv := zktest.Start(t)
	b := openTestBackend(t, srv.Servers())
	ctx := testCtx(t)
	if err := b.ReportServiceInfo(ctx, container, serviceInfo()); err != nil {
		t.Fatal(err)
	}
	declare(t, ctx, b, "entry", "ps_0", "ps_1")
	for _, s := range []string{"entry", "ps_0"} {
		if err := b.AddToLayout(ctx, layoutPath, sm(s)); err != nil {
			t.Fatal(err)
		}
	}
	var rec layoutRecorder
	if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.cb); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "entry", "ps_0")

	if err := b.SyncAvailableSavedModels(ctx, container, []datadef.SavedModel{sm("entry"), sm("ps_0"), sm("ps_1")}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"entry", "ps_0", "ps_1"} {
		p := "/gip/binding/test_ffm_model/" + s + ":default:asdf"
		eventually(t, func() bool {
			_, stat, err := b.Client().Get(ctx, p)
			return err == nil && stat.EphemeralOwner == b.Client().SessionID()
		}, func() string { return "binding " + p + " missing or not owned by the session" })
	}
	info := serviceInfo()
	waitServiceMap(t, b, ServiceMap{model: {"entry": {info}, "ps_0": {info}, "ps_1": {info}}})

	if err := b.SyncAvailableSavedModels(ctx, container, []datadef.SavedModel{sm("entry"), sm("ps_0")}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Client().Exists(ctx, "/gip/binding/test_ffm_model/ps_1:default:asdf"); ok {
		t.Error("the ps_1 binding survives its removal")
	}
	waitServiceMap(t, b, ServiceMap{model: {"entry": {info}, "ps_0": {info}}})

	// A second container bound to ps_0, and one without service info (left out).
	c2 := datadef.Container{Cluster: "psm;idc;cl", ID: "pod-2"}
	info2 := info
	info2.GRPC = datadef.Some("10.0.0.2:8888")
	if err := b.ReportServiceInfo(ctx, c2, info2); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, c2, []datadef.SavedModel{sm("ps_0")}); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, datadef.Container{Cluster: "x", ID: "noinfo"}, []datadef.SavedModel{sm("ps_0")}); err != nil {
		t.Fatal(err)
	}
	waitServiceMap(t, b, ServiceMap{model: {"entry": {info}, "ps_0": {info, info2}}})

	// A model leaving the layout leaves the map.
	for _, s := range []string{"entry", "ps_0"} {
		if err := b.RemoveFromLayout(ctx, layoutPath, sm(s)); err != nil {
			t.Fatal(err)
		}
	}
	waitServiceMap(t, b, ServiceMap{})
}

// backends_test: test_sync_backend.
func TestSyncTargets(t *testing.T) {
	srv := zktest.Start(t)
	b := openTestBackend(t, srv.Servers())
	ctx := testCtx(t)
	if _, _, err := b.SyncTargets("ps_1"); !errors.Is(err, izk.ErrInvalidArgument) {
		t.Errorf("SyncTargets without a subscription = %v", err)
	}
	if err := b.ReportServiceInfo(ctx, container, serviceInfo()); err != nil {
		t.Fatal(err)
	}
	if err := b.SubscribeModel(ctx, model); err != nil {
		t.Fatal(err)
	}
	if err := b.SubscribeModel(ctx, model); err != nil {
		t.Errorf("subscribing to the same model again: %v", err)
	}
	if err := b.SubscribeModel(ctx, "other"); !errors.Is(err, izk.ErrInvalidArgument) {
		t.Errorf("subscribing to a second model = %v", err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, []datadef.SavedModel{sm("ps_0"), sm("ps_1"), sm("ps_2")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		name, targets, err := b.SyncTargets("ps_1")
		return err == nil && name == "test_ffm_model:ps_1" && slices.Equal(targets, []string{"localhost:8888"})
	}, func() string {
		name, targets, err := b.SyncTargets("ps_1")
		return fmt.Sprintf("SyncTargets = %q, %q, %v", name, targets, err)
	})
}

// TestRebindingS13: a model that leaves the layout and comes back before its bindings
// change gets a fresh binding watch, so its service map entry is filled at once (the
// reference keeps the stale watch and an empty entry until the bindings change).
func TestRebindingS13(t *testing.T) {
	srv := zktest.Start(t)
	b := openTestBackend(t, srv.Servers())
	ctx := testCtx(t)
	if err := b.ReportServiceInfo(ctx, container, serviceInfo()); err != nil {
		t.Fatal(err)
	}
	declare(t, ctx, b, "entry")
	if err := b.SyncAvailableSavedModels(ctx, container, []datadef.SavedModel{sm("entry")}); err != nil {
		t.Fatal(err)
	}
	var rec layoutRecorder
	if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.cb); err != nil {
		t.Fatal(err)
	}
	if err := b.AddToLayout(ctx, layoutPath, sm("entry")); err != nil {
		t.Fatal(err)
	}
	full := ServiceMap{model: {"entry": {serviceInfo()}}}
	waitServiceMap(t, b, full)
	b.mu.Lock()
	first := b.bindings[model]
	b.mu.Unlock()

	if err := b.RemoveFromLayout(ctx, layoutPath, sm("entry")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t)
	if m := b.ServiceMap(); len(m) != 0 {
		t.Errorf("service map %v after the model left the layout", m)
	}
	select {
	case <-first.w.Done():
	case <-time.After(wait):
		t.Fatal("the binding watch of a model that left the layout still runs")
	}
	if err := b.AddToLayout(ctx, layoutPath, sm("entry")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "entry")
	// No binding changed: only a fresh watch can fill the entry.
	waitServiceMap(t, b, full)
	b.mu.Lock()
	second := b.bindings[model]
	b.mu.Unlock()
	if second == first {
		t.Error("the binding watch was reused")
	}
}

// backends bzid_info: the structure and agent_controller's printed text.
func TestBzidInfo(t *testing.T) {
	srv := zktest.Start(t)
	b := openTestBackend(t, srv.Servers())
	ctx := testCtx(t)
	empty, err := b.BzidInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(empty.JSON()); got != "{\n  \"model_info\": {},\n  \"container_info\": {},\n  \"layout_info\": {}\n}" {
		t.Errorf("empty bzid info:\n%s", got)
	}
	if err := b.ReportServiceInfo(ctx, container, datadef.ContainerServiceInfo{GRPC: datadef.Some("h:1"), IDC: datadef.Some("\u00e9")}); err != nil {
		t.Fatal(err)
	}
	declare(t, ctx, b, "entry", "ps_0")
	if err := b.AddToLayout(ctx, "/gip/layouts/l1", sm("ps_0")); err != nil {
		t.Fatal(err)
	}
	if err := b.AddToLayout(ctx, "/gip/layouts/l1", sm("entry")); err != nil {
		t.Fatal(err)
	}
	if err := b.Client().EnsurePath(ctx, "/gip/layouts/empty"); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, []datadef.SavedModel{sm("entry"), {ModelName: "other", SubGraph: "ps_9"}}); err != nil {
		t.Fatal(err)
	}
	want := `{
  "model_info": {
    "other": {
      "ps_9": {
        "bindings": [
          "default:asdf"
        ]
      },
      "sub_graphs_available": 1
    },
    "test_ffm_model": {
      "entry": {
        "deploy_config": "{\"model_base_path\": \"/tmp/test_ffm_model/exported_models/entry\", \"version_policy\": \"latest\"}",
        "bindings": [
          "default:asdf"
        ]
      },
      "ps_0": {
        "deploy_config": "{\"model_base_path\": \"/tmp/test_ffm_model/exported_models/ps_0\", \"version_policy\": \"latest\"}"
      },
      "sub_graphs_available": 1,
      "sub_graphs_total": 2
    }
  },
  "container_info": {
    "default": {
      "asdf": {
        "service_info": "{\"grpc\": \"h:1\", \"http\": null, \"archon\": null, \"agent\": null, \"idc\": \"\\u00e9\", \"debug_info\": null}",
        "saved_models": [
          "other:ps_9",
          "test_ffm_model:entry"
        ]
      }
    }
  },
  "layout_info": {
    "empty": [],
    "l1": [
      "test_ffm_model:entry",
      "test_ffm_model:ps_0"
    ]
  }
}`
	// Ephemeral nodes may be briefly missing if the short test session expires on a
	// loaded machine: read until the expected view appears.
	var info *BzidInfo
	eventually(t, func() bool {
		var err error
		if info, err = b.BzidInfo(ctx); err != nil {
			t.Fatal(err)
		}
		return string(info.JSON()) == want
	}, func() string { return fmt.Sprintf("bzid info JSON:\n%s\nwant:\n%s", info.JSON(), want) })
	m := info.Models[model]
	if n, _ := m.SubGraphsTotal.Get(); n != 2 || m.SubGraphsAvailable != 1 || !slices.Equal(m.SubGraphs["entry"].Bindings, []string{"default:asdf"}) {
		t.Errorf("model info %+v", m)
	}
}

func TestPyString(t *testing.T) {
	for in, want := range map[string]string{
		"a\"b\\c":            `"a\"b\\c"`,
		"\n\r\t\b\f\x01\x7f": `"\n\r\t\b\f\u0001` + "\x7f" + `"`,
		"é€😀":                `"\u00e9\u20ac\ud83d\ude00"`,
		"<&>":                `"<&>"`,
		"\xff":               `"\ufffd"`,
	} {
		if got := string(appendPyString(nil, in)); got != want {
			t.Errorf("appendPyString(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestSessionExpiryBackend expires the backend's session: its service info and bindings
// come back in the new session without any call (S7), and its layout and binding watches
// keep the service map current.
func TestSessionExpiryBackend(t *testing.T) {
	srv := zktest.Start(t)
	proxy := srv.NewProxy(t)
	b := openTestBackend(t, proxy.Servers())
	peer := openTestBackend(t, srv.Servers()) // another container, connected directly
	ctx := testCtx(t)
	info := serviceInfo()
	if err := b.ReportServiceInfo(ctx, container, info); err != nil {
		t.Fatal(err)
	}
	declare(t, ctx, b, "entry", "ps_0")
	if err := b.AddToLayout(ctx, layoutPath, sm("entry")); err != nil {
		t.Fatal(err)
	}
	var rec layoutRecorder
	if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.cb); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, []datadef.SavedModel{sm("entry")}); err != nil {
		t.Fatal(err)
	}
	waitServiceMap(t, b, ServiceMap{model: {"entry": {info}}})

	old := b.Client().SessionID()
	again := b.Client().Reregistered()
	proxy.Cut()
	// While the backend is cut off, the layout gains ps_0 and a peer binds it.
	if err := peer.AddToLayout(ctx, layoutPath, sm("ps_0")); err != nil {
		t.Fatal(err)
	}
	c2 := datadef.Container{Cluster: "peer", ID: "p1"}
	info2 := info
	info2.GRPC = datadef.Some("10.0.0.9:1")
	if err := peer.ReportServiceInfo(ctx, c2, info2); err != nil {
		t.Fatal(err)
	}
	if err := peer.SyncAvailableSavedModels(ctx, c2, []datadef.SavedModel{sm("ps_0")}); err != nil {
		t.Fatal(err)
	}
	// Cut until the server has expired the backend's session (its service info is gone).
	eventually(t, func() bool {
		ok, err := peer.Client().Exists(ctx, container.ServicePath(bzid))
		return err == nil && !ok
	}, func() string { return "the backend's session did not expire behind the cut" })
	proxy.Heal()
	select {
	case <-again:
	case <-time.After(wait):
		t.Fatal("no re-registration after the session expired")
	}
	if b.Client().Lost() || b.Client().SessionID() == old {
		t.Errorf("Lost = %v, session %#x (old %#x) after the re-registration", b.Client().Lost(), b.Client().SessionID(), old)
	}
	for _, p := range []string{"/gip/container_service/default:asdf", "/gip/binding/test_ffm_model/entry:default:asdf"} {
		eventually(t, func() bool {
			_, stat, err := peer.Client().Get(ctx, p)
			return err == nil && stat.EphemeralOwner == b.Client().SessionID()
		}, func() string { return p + " is not back in the new session" })
	}
	rec.waitFor(t, "entry", "ps_0")
	waitServiceMap(t, b, ServiceMap{model: {"entry": {info}, "ps_0": {info2}}})
	// Syncing after the expiry only applies the difference.
	if err := b.SyncAvailableSavedModels(ctx, container, []datadef.SavedModel{sm("entry"), sm("ps_0")}); err != nil {
		t.Fatal(err)
	}
	waitServiceMap(t, b, ServiceMap{model: {"entry": {info}, "ps_0": {info, info2}}})
}

// TestDepartures pins the departures listed in the package doc that other tests do not.
func TestDepartures(t *testing.T) {
	srv := zktest.Start(t)
	b := openTestBackend(t, srv.Servers())
	ctx := testCtx(t)
	// Layout entries come in name order; nodes with bad names or bad configs are skipped.
	declare(t, ctx, b, "ps_1", "entry")
	bad := sm("bad")
	if err := b.Client().CreateOrSet(ctx, bad.Path(bzid), []byte(`{"model_base_path": 5}`)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"test_ffm_model:ps_1", "nocolon", "test_ffm_model:entry", "test_ffm_model:bad", "test_ffm_model:undeclared"} {
		if err := b.Client().EnsurePath(ctx, layoutPath+"/"+n); err != nil {
			t.Fatal(err)
		}
	}
	var rec layoutRecorder
	if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.cb); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "entry", "ps_1")
	// A stopped layout watch (callback returned false) can be registered again.
	lp2 := "/gip/layouts/once"
	n := 0
	if err := b.RegisterLayoutCallback(ctx, lp2, func([]LayoutEntry) bool { n++; return false }); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.layouts[lp2].w != nil && b.layouts[lp2].w.Stopped()
	}, func() string { return "the layout watch did not stop" })
	if err := b.RegisterLayoutCallback(ctx, lp2, func([]LayoutEntry) bool { return true }); err != nil {
		t.Errorf("re-registering a stopped layout: %v", err)
	}
	// SyncTargets drops null gRPC addresses.
	c := datadef.Container{Cluster: "c", ID: "nogrpc"}
	if err := b.ReportServiceInfo(ctx, c, datadef.ContainerServiceInfo{HTTP: datadef.Some("h:1")}); err != nil {
		t.Fatal(err)
	}
	if err := b.SubscribeModel(ctx, model); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, c, []datadef.SavedModel{sm("ps_1")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return len(b.ServiceMap()[model]["ps_1"]) == 1 }, func() string { return fmt.Sprint(b.ServiceMap()) })
	if name, targets, err := b.SyncTargets("ps_1"); err != nil || name != "test_ffm_model:ps_1" || len(targets) != 0 {
		t.Errorf("SyncTargets = %q, %q, %v", name, targets, err)
	}
	if _, err := OpenBackend(ctx, "a/b", izk.Options{Servers: srv.Servers()}); !errors.Is(err, izk.ErrInvalidArgument) {
		t.Errorf("OpenBackend with a '/' in the bzid = %v", err)
	}
}

// TestServerRestart: a Backend survives a ZooKeeper restart, short (the session may
// survive) or long (the session expires on the server): its service info and bindings
// exist afterwards, Lost clears, and the layout watch fires on changes made after it.
func TestServerRestart(t *testing.T) {
	for _, down := range []time.Duration{0, 3 * zktest.SessionTimeout} {
		t.Run(fmt.Sprintf("down %v", down), func(t *testing.T) {
			srv := zktest.Start(t)
			b := openTestBackend(t, srv.Servers())
			ctx := testCtx(t)
			declare(t, ctx, b, "entry")
			var rec layoutRecorder
			if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.cb); err != nil {
				t.Fatal(err)
			}
			if err := b.ReportServiceInfo(ctx, container, serviceInfo()); err != nil {
				t.Fatal(err)
			}
			if err := b.SyncAvailableSavedModels(ctx, container, []datadef.SavedModel{sm("entry")}); err != nil {
				t.Fatal(err)
			}

			srv.Restart(t, down)

			peer := openTestBackend(t, srv.Servers())
			owned := []string{container.ServicePath(bzid), sm("entry").BindingPath(bzid, container)}
			eventually(t, func() bool {
				for _, p := range owned {
					if _, stat, err := peer.Client().Get(ctx, p); err != nil || stat.EphemeralOwner != b.Client().SessionID() {
						return false
					}
				}
				return !b.Client().Lost()
			}, func() string {
				return fmt.Sprintf("after the restart %q are not all back (lost %v)", owned, b.Client().Lost())
			})
			if err := peer.AddToLayout(ctx, layoutPath, sm("entry")); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(t, "entry")
			waitServiceMap(t, b, ServiceMap{model: {"entry": {serviceInfo()}}})
		})
	}
}
