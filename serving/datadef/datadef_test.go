package datadef

import (
	"bufio"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

type serializer interface{ Serialize() []byte }

func dec[T serializer](f func([]byte) (T, error)) func([]byte) (serializer, error) {
	return func(b []byte) (serializer, error) {
		v, err := f(b)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
}

var (
	decModelMeta    = dec(DeserializeModelMeta)
	decResourceSpec = dec(DeserializeResourceSpec)
	decPublishMeta  = dec(DeserializePublishMeta)
	decReplicaMeta  = dec(DeserializeReplicaMeta)
	decDeployConfig = dec(DeserializeSavedModelDeployConfig)
	decServiceInfo  = dec(DeserializeContainerServiceInfo)
)

func withModelMeta(f func(*ModelMeta)) ModelMeta {
	m := NewModelMeta()
	f(&m)
	return m
}

func withResourceSpec(f func(*ResourceSpec)) ResourceSpec {
	s := NewResourceSpec()
	f(&s)
	return s
}

func withPublishMeta(f func(*PublishMeta)) PublishMeta {
	m := NewPublishMeta()
	f(&m)
	return m
}

func withReplicaMeta(f func(*ReplicaMeta)) ReplicaMeta {
	m := NewReplicaMeta()
	f(&m)
	return m
}

// goldenCases pairs each testdata file with the Go value that must serialize to it.
// *.spec.golden are the example serializations of the spec (§1.3) verbatim;
// *.py.golden were written by testdata/gen_golden.py with Python's json module.
func goldenCases() []struct {
	file   string
	value  serializer
	decode func([]byte) (serializer, error)
	hasNaN bool
} {
	return []struct {
		file   string
		value  serializer
		decode func([]byte) (serializer, error)
		hasNaN bool
	}{
		{file: "model_meta.spec.golden", decode: decModelMeta, value: withModelMeta(func(m *ModelMeta) {
			m.ModelName, m.ModelDir, m.Ckpt, m.NumShard = Some("monolith"), Some("/tmp/opt"), Some("model.ckpt-1234"), 3
		})},
		{file: "resource_spec.spec.golden", decode: decResourceSpec, value: withResourceSpec(func(s *ResourceSpec) {
			s.Address, s.ShardID, s.ReplicaID, s.Memory, s.CPU = Some("localhost:123"), Some[int64](10), Some[int64](2), Some[int64](12345), 3.5
		})},
		{file: "publish_meta.spec.golden", decode: decPublishMeta, value: withPublishMeta(func(m *PublishMeta) {
			m.ShardID, m.ReplicaID, m.ModelName, m.NumPS, m.TotalPublishNum = Some[int64](2), 0, Some("m"), Some[int64](10), 15
			m.SubModels = Some([]SubModel{{"ps_0", "/d/ps_0/123456"}, {"entry", "/d/entry/123456"}})
		})},
		{file: "replica_meta.spec.golden", decode: decReplicaMeta, value: withReplicaMeta(func(m *ReplicaMeta) {
			m.Address, m.AddressIPv6, m.Stat = Some("10.0.0.1:8500"), Some("[fdbd::1]:8500"), ModelStateAvailable
			m.ArchonAddress, m.ArchonAddressIPv6 = Some("10.0.0.1:8600"), Some("[fdbd::1]:8600")
		})},
		{file: "saved_model_deploy_config.spec.golden", decode: decDeployConfig, value: SavedModelDeployConfig{
			ModelBasePath: Some("hdfs:///x/exported_models/ps_0"), VersionPolicy: Some("latest_once"),
		}},

		{file: "model_meta_default.py.golden", decode: decModelMeta, value: NewModelMeta()},
		{file: "model_meta_unicode.py.golden", decode: decModelMeta, value: withModelMeta(func(m *ModelMeta) {
			m.ModelName, m.ModelDir, m.Ckpt = Some("模型😀é"), Some("/tmp/<a&b>/\"q\"\\\t\n\x7f\x01"), Some("")
			m.NumShard, m.Action, m.SpecReplicas = 0, "LOAD", []int64{1, 2, 3}
		})},
		{file: "resource_spec_default.py.golden", decode: decResourceSpec, value: NewResourceSpec()},
		{file: "resource_spec_floats.py.golden", decode: decResourceSpec, value: withResourceSpec(func(s *ResourceSpec) {
			s.Address, s.ShardID, s.ReplicaID, s.Memory = Some("[::1]:80"), Some[int64](0), Some[int64](-1), Some[int64](math.MaxInt64)
			s.CPU, s.Network, s.WorkLoad = 1e-07, 1e16, 0.1
		})},
		{file: "resource_spec_floats2.py.golden", decode: decResourceSpec, value: withResourceSpec(func(s *ResourceSpec) {
			s.Memory, s.CPU, s.Network, s.WorkLoad = Some[int64](math.MinInt64), 1.0, 123456789.125, math.Copysign(0, -1)
		})},
		{file: "resource_spec_floats3.py.golden", decode: decResourceSpec, value: withResourceSpec(func(s *ResourceSpec) {
			s.CPU, s.Network, s.WorkLoad = 1e22, 5e-324, math.MaxFloat64
		})},
		{file: "resource_spec_floats4.py.golden", decode: decResourceSpec, value: withResourceSpec(func(s *ResourceSpec) {
			s.CPU, s.Network, s.WorkLoad = 0.0001, 1e-05, 9999999999999998.0
		})},
		{file: "resource_spec_nonfinite.py.golden", decode: decResourceSpec, hasNaN: true, value: withResourceSpec(func(s *ResourceSpec) {
			s.CPU, s.Network, s.WorkLoad = math.NaN(), math.Inf(1), math.Inf(-1)
		})},
		{file: "publish_meta_default.py.golden", decode: decPublishMeta, value: NewPublishMeta()},
		{file: "publish_meta_unload.py.golden", decode: decPublishMeta, value: PublishMeta{
			ShardID: Some[int64](0), ReplicaID: 3, ModelName: Some("m"), NumPS: Some[int64](0), TotalPublishNum: 0,
			SubModels: Some([]SubModel{}), PType: PublishUnload, IsSpec: true,
		}},
		{file: "replica_meta_default.py.golden", decode: decReplicaMeta, value: NewReplicaMeta()},
		{file: "replica_meta_registered.py.golden", decode: decReplicaMeta, value: withReplicaMeta(func(m *ReplicaMeta) {
			m.Address, m.AddressIPv6 = Some("10.0.0.1:8500"), Some("[fdbd::1]:8500")
			m.ArchonAddress, m.ArchonAddressIPv6 = Some("10.0.0.1:8600"), Some("[fdbd::1]:8600")
		})},
		{file: "replica_meta_v2.py.golden", decode: decReplicaMeta, value: withReplicaMeta(func(m *ReplicaMeta) {
			m.Address, m.Stat, m.ModelName, m.ServerType, m.Task, m.Replica = Some("localhost:123"), ModelStateAvailable, Some("monolith"), Some("ps"), 0, 0
		})},
		{file: "deploy_config_default.py.golden", decode: decDeployConfig, value: SavedModelDeployConfig{}},
		{file: "deploy_config_latest.py.golden", decode: decDeployConfig, value: SavedModelDeployConfig{
			ModelBasePath: Some("hdfs:///x/exported_models/entry"), VersionPolicy: Some("latest"),
		}},
		{file: "service_info_default.py.golden", decode: decServiceInfo, value: ContainerServiceInfo{}},
		{file: "service_info_v3.py.golden", decode: decServiceInfo, value: ContainerServiceInfo{
			GRPC: Some("10.0.0.1:8500"), HTTP: Some("10.0.0.1:8501"), Archon: Some("10.0.0.1:8502"), Agent: Some("10.0.0.1:8503"), IDC: Some("lf"),
			DebugInfo: Some(ContainerDebugInfo{
				LayoutPath:    "/test/layouts/default",
				LayoutFilters: []string{"entry;None", `ps_(?P<i>\d+);i % 2 == 0`},
			}.Serialize()),
		}},
	}
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.file, func(t *testing.T) {
			want := readGolden(t, tc.file)
			if got := tc.value.Serialize(); string(got) != string(want) {
				t.Errorf("Serialize:\n got %s\nwant %s", got, want)
			}
			back, err := tc.decode(want)
			if err != nil {
				t.Fatalf("Deserialize: %v", err)
			}
			if !tc.hasNaN && !reflect.DeepEqual(back, tc.value) {
				t.Errorf("Deserialize:\n got %#v\nwant %#v", back, tc.value)
			}
			if got := back.Serialize(); string(got) != string(want) {
				t.Errorf("re-Serialize:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestGoldenFilesCovered fails when a golden file has no case.
func TestGoldenFilesCovered(t *testing.T) {
	files, err := filepath.Glob("testdata/*.golden")
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{"floats.py.golden": true}
	for _, tc := range goldenCases() {
		covered[tc.file] = true
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no golden case", f)
		}
	}
}

func TestFloatRepr(t *testing.T) {
	f, err := os.Open("testdata/floats.py.golden")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		bitsText, want, _ := strings.Cut(sc.Text(), " ")
		bits, err := strconv.ParseUint(bitsText, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		v := math.Float64frombits(bits)
		if got := string(appendPyFloat(nil, v)); got != want {
			t.Errorf("float %x (%g): got %s, want %s", bits, v, got, want)
		}
		// The text reads back to the same bits through a float field.
		s, err := DeserializeResourceSpec([]byte(`{"cpu": ` + want + `}`))
		if err != nil {
			t.Fatalf("decode %s: %v", want, err)
		}
		if !math.IsNaN(v) && math.Float64bits(s.CPU) != bits {
			t.Errorf("decode %s: got %x, want %x", want, math.Float64bits(s.CPU), bits)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 600 {
		t.Fatalf("only %d float vectors", n)
	}
}

func TestPyString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"plain /path:1", `"plain /path:1"`},
		{"<>&'", `"<>&'"`},
		{"\"\\\b\f\n\r\t", `"\"\\\b\f\n\r\t"`},
		{"\x00\x1f\x7f\u0080", `"\u0000\u001f\u007f\u0080"`},
		{"é中😀", `"\u00e9\u4e2d\ud83d\ude00"`},
		{"\u2028\ufeff\uffff", `"\u2028\ufeff\uffff"`},
		{"\xff", `"\ufffd"`}, // invalid UTF-8: Python strings cannot hold it
	} {
		if got := string(appendPyString(nil, tc.in)); got != tc.want {
			t.Errorf("appendPyString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestDeserializeDefaultsUnknownAndDuplicateKeys(t *testing.T) {
	m, err := DeserializeModelMeta([]byte(`{}`))
	if err != nil || !reflect.DeepEqual(m, NewModelMeta()) {
		t.Errorf("{} = %#v, %v; want the defaults", m, err)
	}
	// Unknown keys of any shape are ignored; the last duplicate wins even after a bad one;
	// Python's json.loads accepts compact and multi-line whitespace.
	in := "\r\n\t{\"extra\":[1,{\"a\":null,\"b\":[true,false,1.5e3,NaN,-Infinity]}],\n\"num_shard\":\"x\",\"num_shard\" : 5 ,\"spec_replicas\":[ ]} \n"
	m, err = DeserializeModelMeta([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := withModelMeta(func(m *ModelMeta) { m.NumShard = 5 }); !reflect.DeepEqual(m, want) {
		t.Errorf("got %#v, want %#v", m, want)
	}
	// A sub-model named twice keeps its first position and its last value.
	p, err := DeserializePublishMeta([]byte(`{"sub_models": {"a": "1", "b": "2", "a": "3"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(p.Serialize()), `{"shard_id": null, "replica_id": -1, "model_name": null, "num_ps": null, "total_publish_num": 1, "sub_models": {"a": "3", "b": "2"}, "ptype": 1, "is_spec": false}`; got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	// Escapes of every kind decode; \u escapes are case-insensitive and pairs combine.
	c, err := DeserializeSavedModelDeployConfig([]byte(`{"model_base_path": "\/a\"\\\b\f\n\r\t\u00E9\uD83D\uDE00", "version_policy": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (SavedModelDeployConfig{ModelBasePath: Some("/a\"\\\b\f\n\r\té😀")}); c != want {
		t.Errorf("got %#v, want %#v", c, want)
	}
	// Integers in float fields become floats (Python's float(int)); a float literal
	// beyond the range is ±Infinity as in json.loads.
	s, err := DeserializeResourceSpec([]byte(`{"cpu": 3, "network": 1e400, "work_load": -1E+400}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU != 3 || !math.IsInf(s.Network, 1) || !math.IsInf(s.WorkLoad, -1) {
		t.Errorf("got %#v", s)
	}
	if got := string(s.Serialize()); !strings.Contains(got, `"cpu": 3.0, "network": Infinity, "work_load": -Infinity`) {
		t.Errorf("re-serialized %s", got)
	}
	// The integer -0 is Python's int 0, so float(-0) is 0.0; the float -0.0 stays.
	s, err = DeserializeResourceSpec([]byte(`{"cpu": -0, "network": -0.0}`))
	if err != nil || math.Signbit(s.CPU) || !math.Signbit(s.Network) {
		t.Errorf("-0: got %#v, %v", s, err)
	}
	// The v3 debug_info text round-trips.
	d, err := DeserializeContainerDebugInfo(`{"layout_path": "/x", "layout_filters": ["a;b"], "more": 1}`)
	if err != nil || !reflect.DeepEqual(d, ContainerDebugInfo{LayoutPath: "/x", LayoutFilters: []string{"a;b"}}) {
		t.Errorf("got %#v, %v", d, err)
	}
	if got := (ContainerDebugInfo{LayoutPath: "/x"}).Serialize(); got != `{"layout_path": "/x", "layout_filters": []}` {
		t.Errorf("got %s", got)
	}
}

func TestDeserializeErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decode func([]byte) (serializer, error)
		in     string
		is     error
		field  string // must appear in the message
	}{
		{"empty", decModelMeta, ``, ErrSyntax, ""},
		{"not utf8", decModelMeta, "{\"model_name\": \"\xff\"}", ErrSyntax, ""},
		{"bom", decModelMeta, "\ufeff{}", ErrSyntax, ""},
		{"trailing data", decModelMeta, `{} {}`, ErrSyntax, ""},
		{"trailing comma", decModelMeta, `{"num_shard": 1,}`, ErrSyntax, ""},
		{"single quotes", decModelMeta, `{'num_shard': 1}`, ErrSyntax, ""},
		{"leading zero", decModelMeta, `{"num_shard": 01}`, ErrSyntax, ""},
		{"bare fraction", decModelMeta, `{"num_shard": 1.}`, ErrSyntax, ""},
		{"plus sign", decModelMeta, `{"num_shard": +1}`, ErrSyntax, ""},
		{"control char", decModelMeta, "{\"model_name\": \"a\tb\"}", ErrSyntax, ""},
		{"bad escape", decModelMeta, `{"model_name": "\x41"}`, ErrSyntax, ""},
		{"short u escape", decModelMeta, `{"model_name": "\u12"}`, ErrSyntax, ""},
		{"unterminated", decModelMeta, `{"model_name": "abc`, ErrSyntax, ""},
		{"deep", decModelMeta, `{"x": ` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`, ErrSyntax, ""},
		{"top-level list", decModelMeta, `[]`, ErrFieldType, ""},
		{"top-level null", decReplicaMeta, `null`, ErrFieldType, ""},
		{"int overflow", decResourceSpec, `{"memory": 9223372036854775808}`, ErrFieldType, "memory"},
		{"float int overflow", decResourceSpec, `{"cpu": 1` + strings.Repeat("0", 400) + `}`, ErrFieldType, "cpu"},
		{"list item", decModelMeta, `{"spec_replicas": [1, "2"]}`, ErrFieldType, "spec_replicas[1]"},
		{"list item null", decModelMeta, `{"spec_replicas": [null]}`, ErrFieldType, "spec_replicas[0]"},
		{"ptype 3", decPublishMeta, `{"ptype": 3}`, ErrFieldType, "ptype"},
		{"sub_models list", decPublishMeta, `{"sub_models": []}`, ErrFieldType, "sub_models"},
		{"sub_models value", decPublishMeta, `{"sub_models": {"ps_0": 1}}`, ErrFieldType, "sub_models.ps_0"},
		{"stat string", decReplicaMeta, `{"stat": "30"}`, ErrFieldType, "stat"},
		{"idc number", decServiceInfo, `{"idc": 1}`, ErrFieldType, "idc"},
		{"policy bool", decDeployConfig, `{"version_policy": true}`, ErrFieldType, "version_policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.decode([]byte(tc.in))
			if !errors.Is(err, tc.is) {
				t.Fatalf("got %v, %v; want %v", v, err, tc.is)
			}
			if tc.field != "" && !strings.Contains(err.Error(), `"`+tc.field+`"`) {
				t.Errorf("error %q does not name field %q", err, tc.field)
			}
		})
	}
}

// TestDepartures pins every departure from the reference listed in the package doc.
func TestDepartures(t *testing.T) {
	// Typed decoding: Python would coerce each of these (str(5), int(3.7), bool(1),
	// float("1"), PublishType(1.0)) or keep None; we fail naming the field.
	for _, tc := range []struct {
		decode func([]byte) (serializer, error)
		in     string
		field  string
	}{
		{decModelMeta, `{"model_name": 5}`, "model_name"},
		{decModelMeta, `{"num_shard": 3.7}`, "num_shard"},
		{decModelMeta, `{"num_shard": 3.0}`, "num_shard"},
		{decModelMeta, `{"num_shard": null}`, "num_shard"},
		{decModelMeta, `{"action": null}`, "action"},
		{decModelMeta, `{"spec_replicas": null}`, "spec_replicas"},
		{decPublishMeta, `{"is_spec": 1}`, "is_spec"},
		{decPublishMeta, `{"ptype": 1.0}`, "ptype"},
		{decResourceSpec, `{"cpu": "1"}`, "cpu"},
		{decResourceSpec, `{"cpu": null}`, "cpu"},
		{decReplicaMeta, `{"task": true}`, "task"},
	} {
		_, err := tc.decode([]byte(tc.in))
		if !errors.Is(err, ErrFieldType) || !strings.Contains(err.Error(), `"`+tc.field+`"`) {
			t.Errorf("%s: got %v, want ErrFieldType naming %q", tc.in, err, tc.field)
		}
	}
	// Path helpers fail on a null part where Python would write "None" or raise.
	for name, f := range map[string]func() (string, error){
		"ResourceSpec": func() (string, error) { return NewResourceSpec().Path("/b/resource") },
		"PublishMeta":  func() (string, error) { return NewPublishMeta().Path("/b/publish") },
		"ReplicaMeta": func() (string, error) {
			return withReplicaMeta(func(m *ReplicaMeta) { m.ModelName = Some("m") }).Path("b")
		},
		"ModelMeta": func() (string, error) { return NewModelMeta().Path("/b/portal") },
	} {
		if p, err := f(); !errors.Is(err, ErrNullPathPart) {
			t.Errorf("%s.Path = %q, %v; want ErrNullPathPart", name, p, err)
		}
	}
	// A lone surrogate escape (Python keeps it in a str) is rejected.
	for _, in := range []string{`{"model_name": "\ud800"}`, `{"model_name": "\udc00x"}`, `{"model_name": "\ud800\u0041"}`} {
		if _, err := DeserializeModelMeta([]byte(in)); !errors.Is(err, ErrSyntax) {
			t.Errorf("%s: got %v, want ErrSyntax", in, err)
		}
	}
	// Container ids keep their ':' (Python's split(":")[:2] / [:3] would cut them).
	c, err := ParseContainer("psm;lf;default:fdbd::1")
	if err != nil || c != (Container{Cluster: "psm;lf;default", ID: "fdbd::1"}) {
		t.Errorf("ParseContainer = %#v, %v", c, err)
	}
	sub, c, err := ParseBinding("ps_0:psm;lf;default:fdbd::1")
	if err != nil || sub != "ps_0" || c != (Container{Cluster: "psm;lf;default", ID: "fdbd::1"}) {
		t.Errorf("ParseBinding = %q, %#v, %v", sub, c, err)
	}
}

func TestGetAddress(t *testing.T) {
	m := withReplicaMeta(func(m *ReplicaMeta) {
		m.Address, m.AddressIPv6 = Some("10.0.0.1:1"), Some("[fdbd::1]:1")
		m.ArchonAddress, m.ArchonAddressIPv6 = Some("0.0.0.0:2"), Some("[fdbd::1]:2")
	})
	for _, tc := range []struct {
		m      ReplicaMeta
		archon bool
		fam    AddressFamily
		want   Null[string]
	}{
		{m, false, IPv4, Some("10.0.0.1:1")},
		{m, false, IPv6, Some("[fdbd::1]:1")},
		{m, true, IPv4, Some("[fdbd::1]:2")}, // 0.0.0.0 counts as absent
		{m, true, IPv6, Some("[fdbd::1]:2")},
		{withReplicaMeta(func(m *ReplicaMeta) { m.Address, m.AddressIPv6 = Some("1.2.3.4:5"), Some("[::]:5") }), false, IPv6, Some("1.2.3.4:5")},
		{withReplicaMeta(func(m *ReplicaMeta) { m.Address = Some("") }), false, IPv4, Null[string]{}}, // "" or None -> None
		{withReplicaMeta(func(m *ReplicaMeta) { m.AddressIPv6 = Some("") }), false, IPv4, Some("")},   // None or "" -> ""
		{NewReplicaMeta(), false, IPv6, Null[string]{}},
	} {
		got, err := tc.m.GetAddress(tc.archon, tc.fam)
		if err != nil || got != tc.want {
			t.Errorf("GetAddress(%v, %s) on %#v = %#v, %v; want %#v", tc.archon, tc.fam, tc.m, got, err, tc.want)
		}
	}
	if _, err := m.GetAddress(false, "ipv5"); err == nil {
		t.Error("unknown family: no error")
	}
}

func TestPublishTypeString(t *testing.T) {
	if PublishLoad.String() != "LOAD" || PublishUnload.String() != "UNLOAD" || PublishType(7).String() != "PublishType(7)" {
		t.Error("PublishType.String")
	}
}
