package datadef

import (
	"errors"
	"testing"
)

func TestTypePaths(t *testing.T) {
	mm := withModelMeta(func(m *ModelMeta) { m.ModelName = Some("monolith") })
	rs := withResourceSpec(func(s *ResourceSpec) { s.ShardID, s.ReplicaID = Some[int64](10), Some[int64](2) })
	pm := withPublishMeta(func(m *PublishMeta) { m.ShardID, m.ModelName = Some[int64](2), Some("m") })
	rm := withReplicaMeta(func(m *ReplicaMeta) {
		m.ModelName, m.ServerType, m.Task, m.Replica = Some("monolith"), Some("ps"), 3, 1
	})
	for _, tc := range []struct {
		name string
		f    func() (string, error)
		want string
	}{
		{"ModelMeta", func() (string, error) { return mm.Path(PortalBasePath("bz")) }, "/bz/portal/monolith"},
		{"ModelMeta trailing slash", func() (string, error) { return mm.Path("/bz/portal/") }, "/bz/portal/monolith"},
		{"ModelMeta empty base", func() (string, error) { return mm.Path("") }, "monolith"},
		{"ModelMeta absolute name", func() (string, error) {
			return withModelMeta(func(m *ModelMeta) { m.ModelName = Some("/abs") }).Path("/bz/portal")
		}, "/abs"}, // os.path.join drops base
		{"ResourceSpec", func() (string, error) { return rs.Path(ResourceBasePath("bz")) }, "/bz/resource/10:2"},
		{"PublishMeta", func() (string, error) { return pm.Path(PublishBasePath("bz")) }, "/bz/publish/2:-1:m"},
		{"ReplicaMeta", func() (string, error) { return rm.Path("bz") }, "/bz/service/monolith/ps:3/1"},
	} {
		got, err := tc.f()
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestNodePaths(t *testing.T) {
	sm := SavedModel{ModelName: "m", SubGraph: "ps_0"}
	c := Container{Cluster: "psm;lf;default", ID: "pod-1"}
	for _, tc := range []struct{ got, want string }{
		{ServiceBasePath("bz"), "/bz/service"},
		{SavedModelsPath("bz", "m"), "/bz/saved_models/m"},
		{sm.Path("bz"), "/bz/saved_models/m/ps_0"},
		{sm.String(), "m:ps_0"},
		{LayoutPath("bz", "default"), "/bz/layouts/default"},
		{LayoutPath("bz", "/custom/layout"), "/custom/layout"},
		{sm.LayoutNodePath(LayoutPath("bz", "default")), "/bz/layouts/default/m:ps_0"},
		{BindingsPath("bz", "m"), "/bz/binding/m"},
		{sm.BindingPath("bz", c), "/bz/binding/m/ps_0:psm;lf;default:pod-1"},
		{c.String(), "psm;lf;default:pod-1"},
		{c.ServicePath("bz"), "/bz/container_service/psm;lf;default:pod-1"},
		{EntryReplicaNode(5), "00000000005"},
		{EntryReplicaNode(12345678901), "12345678901"},
		{EntryReplicaNode(-1), "0"},
		{EntryReplicaNode(-2), "-0000000002"}, // Python's f"{-2:011d}"
		{ReplicaPath("bz", "base", "", "entry", 0, 7), "/bz/service/base/entry:0/00000000007"},
		{ReplicaPath("bz", "base", "", "entry", 0, -1), "/bz/service/base/entry:0/0"},
		{ReplicaPath("bz", "base", "lf:default", "ps", 3, 7), "/bz/service/base/lf:default/ps:3/7"},
		{ReplicaPath("bz", "base", "", "dense", 0, 12), "/bz/service/base/dense:0/12"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParseNames(t *testing.T) {
	sm, err := ParseSavedModel("m:ps_0")
	if err != nil || sm != (SavedModel{"m", "ps_0"}) {
		t.Errorf("ParseSavedModel = %#v, %v", sm, err)
	}
	sm, err = ParseSavedModel("m:")
	if err != nil || sm != (SavedModel{"m", ""}) {
		t.Errorf("ParseSavedModel(m:) = %#v, %v", sm, err)
	}
	if _, err := ParseSavedModel("nocolon"); !errors.Is(err, ErrName) {
		t.Errorf("ParseSavedModel(nocolon): %v", err)
	}
	sub, c, err := ParseBinding("entry:psm;lf;default:10.0.0.1")
	if err != nil || sub != "entry" || c != (Container{"psm;lf;default", "10.0.0.1"}) {
		t.Errorf("ParseBinding = %q %#v %v", sub, c, err)
	}
	for _, bad := range []string{"", "entry", "entry:cluster"} {
		if _, _, err := ParseBinding(bad); !errors.Is(err, ErrName) {
			t.Errorf("ParseBinding(%q): %v", bad, err)
		}
	}
	if _, err := ParseContainer("nocolon"); !errors.Is(err, ErrName) {
		t.Errorf("ParseContainer(nocolon): %v", err)
	}
}

func TestZKPath(t *testing.T) {
	for _, tc := range []struct {
		path           string
		want           ZKPath
		task, location string
		str            string // String(); "" means the input path
	}{
		// The reference's utils_test vectors.
		{"/bzid/service/base_name/idc:cluster/server_type:0/1",
			ZKPath{"bzid", "base_name", "idc", "cluster", "server_type", "0", "1"}, "server_type:0", "idc:cluster", ""},
		{"/bzid/service/base_name/idc:cluster/server_type:0",
			ZKPath{"bzid", "base_name", "idc", "cluster", "server_type", "0", ""}, "server_type:0", "idc:cluster", ""},
		{"/bzid/service/base_name/server_type:0/1",
			ZKPath{"bzid", "base_name", "", "", "server_type", "0", "1"}, "server_type:0", "", ""},
		{"/bzid/service/base_name/server_type:0",
			ZKPath{"bzid", "base_name", "", "", "server_type", "0", ""}, "server_type:0", "", ""},
		{"/1_20001223_44ce735e-d05c-11ec-ba29-00163e356637/service/20001223_zm_test_realtime_training_1328_v4_r982567_0/ps:1",
			ZKPath{"1_20001223_44ce735e-d05c-11ec-ba29-00163e356637", "20001223_zm_test_realtime_training_1328_v4_r982567_0", "", "", "ps", "1", ""}, "ps:1", "", ""},
		// Our own: an 11-digit entry replica, and a location-like segment followed by a
		// bare number, which is task + replica (the optional level backtracks).
		{"/b/service/m/lf:default/entry:0/00000000005",
			ZKPath{"b", "m", "lf", "default", "entry", "0", "00000000005"}, "entry:0", "lf:default", ""},
		{"/b/service/m/x:1/2", ZKPath{"b", "m", "", "", "x", "1", "2"}, "x:1", "", ""},
		{"/b-1/service/m-2/i-d:c_l/ps_x:007/0", ZKPath{"b-1", "m-2", "i-d", "c_l", "ps_x", "007", "0"}, "ps_x:007", "i-d:c_l", ""},
		// Python's \w and \d are Unicode-aware; its '$' matches before a final newline.
		{"/b/service/m/модель:٣/१", ZKPath{"b", "m", "", "", "модель", "٣", "१"}, "модель:٣", "", ""},
		{"/b/service/m/ps:0/1\n", ZKPath{"b", "m", "", "", "ps", "0", "1"}, "ps:0", "", "/b/service/m/ps:0/1"},
	} {
		got, err := ParseZKPath(tc.path)
		if err != nil || got != tc.want {
			t.Errorf("ParseZKPath(%q) = %#v, %v; want %#v", tc.path, got, err, tc.want)
			continue
		}
		if got.Task() != tc.task || got.Location() != tc.location {
			t.Errorf("%q: task %q location %q; want %q %q", tc.path, got.Task(), got.Location(), tc.task, tc.location)
		}
		want := tc.str
		if want == "" {
			want = tc.path
		}
		if got.String() != want {
			t.Errorf("%q: String() = %q, want %q", tc.path, got.String(), want)
		}
		if !got.ShipIn("", "") || !got.ShipIn("idc", "") || got.ShipIn(got.IDC+"x", got.Cluster+"x") {
			t.Errorf("%q: ShipIn", tc.path)
		}
		if got.IDC != "" && !got.ShipIn(got.IDC, got.Cluster) {
			t.Errorf("%q: ShipIn own location", tc.path)
		}
	}
}

func TestZKPathMalformed(t *testing.T) {
	for _, path := range []string{
		"", "/", "/b/service/m", "/b/service/m/ps", "/b/service/m/ps:", "/b/service/m/:0",
		"/b/service/m/ps:0/", "/b/service/m/ps:0/x", "/b/service/m/ps:0/1/2", "b/service/m/ps:0",
		"/b/portal/m/ps:0", "/b/service/m/ps-x:0", "/b/service/m/ps:0x", "/b.c/service/m/ps:0",
		"/b/service/m/i:c:d/ps:0", "/b/service/m/i:/ps:0", "/b/service/m/ps:0\n\n", "/b/service/m/ps:0 ",
		"\n/b/service/m/ps:0", "/b/service/m/ps:0/1\r", "/b/service/é/ps:0", "/b/service/m/lf:default/x:1/2/3",
	} {
		got, err := ParseZKPath(path)
		if !errors.Is(err, ErrZKPath) || got != (ZKPath{}) {
			t.Errorf("ParseZKPath(%q) = %#v, %v; want zero and ErrZKPath", path, got, err)
		}
		// Python: every attribute None, so task and location are None and ship_in
		// compares with None.
		if got.Task() != "" || got.Location() != "" || !got.ShipIn("", "c") || got.ShipIn("i", "c") {
			t.Errorf("%q: derived parts of an unmatched path", path)
		}
	}
}

func TestZKPathBuildRoundTrip(t *testing.T) {
	for _, p := range []ZKPath{
		{Bzid: "b", BaseName: "m", ServerType: "ps", Index: "0"},
		{Bzid: "b", BaseName: "m", ServerType: "ps", Index: "0", ReplicaID: "3"},
		{Bzid: "b", BaseName: "m", IDC: "lf", Cluster: "default", ServerType: "entry", Index: "0", ReplicaID: EntryReplicaNode(4)},
	} {
		got, err := ParseZKPath(p.String())
		if err != nil || got != p {
			t.Errorf("ParseZKPath(%q) = %#v, %v; want %#v", p.String(), got, err, p)
		}
	}
	if got, want := (ZKPath{Bzid: "b", BaseName: "m", IDC: "lf", Cluster: "c", ServerType: "ps", Index: "2", ReplicaID: "9"}).TaskPath(), "/b/service/m/lf:c/ps:2"; got != want {
		t.Errorf("TaskPath = %q, want %q", got, want)
	}
	if got, want := ReplicaPath("b", "m", "lf:c", "ps", 2, 9), "/b/service/m/lf:c/ps:2/9"; got != want {
		t.Errorf("ReplicaPath = %q, want %q", got, want)
	}
}
