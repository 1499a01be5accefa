package datadef

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// addGoldenSeeds seeds f with every golden file and a few malformed variants.
func addGoldenSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.py.golden")
	spec, _ := filepath.Glob("testdata/*.spec.golden")
	for _, name := range append(files, spec...) {
		if strings.HasSuffix(name, "floats.py.golden") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	for _, s := range []string{`{}`, `[]`, `null`, `{"a": [1, {"b": NaN}]}`, `{"x": "\ud83d\ude00"}`, `{"x": 1e400}`} {
		f.Add([]byte(s))
	}
}

// fuzzDecode checks that decode never panics and that a decoded value re-encodes to
// bytes that decode to the same encoding (encode ∘ decode is idempotent).
func fuzzDecode(f *testing.F, decode func([]byte) (serializer, error)) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decode(data)
		if err != nil {
			return
		}
		enc := v.Serialize()
		v2, err := decode(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		if enc2 := v2.Serialize(); !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
		for _, c := range enc {
			if c >= 0x80 {
				t.Fatalf("non-ASCII output %s", enc)
			}
		}
	})
}

func FuzzDeserializeModelMeta(f *testing.F)    { fuzzDecode(f, decModelMeta) }
func FuzzDeserializeResourceSpec(f *testing.F) { fuzzDecode(f, decResourceSpec) }
func FuzzDeserializePublishMeta(f *testing.F)  { fuzzDecode(f, decPublishMeta) }
func FuzzDeserializeReplicaMeta(f *testing.F)  { fuzzDecode(f, decReplicaMeta) }
func FuzzDeserializeSavedModelDeployConfig(f *testing.F) {
	fuzzDecode(f, decDeployConfig)
}

func FuzzDeserializeContainerServiceInfo(f *testing.F) {
	fuzzDecode(f, decServiceInfo)
}

func FuzzDeserializeContainerDebugInfo(f *testing.F) {
	f.Add(`{"layout_path": "/x", "layout_filters": ["a;b"]}`)
	f.Add(`{"layout_filters": [1]}`)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := DeserializeContainerDebugInfo(s)
		if err != nil {
			return
		}
		enc := d.Serialize()
		d2, err := DeserializeContainerDebugInfo(enc)
		if err != nil || d2.Serialize() != enc {
			t.Fatalf("round trip of %s: %v", enc, err)
		}
	})
}

// FuzzParseZKPath: never panics; a match rebuilds to the input (less a final newline)
// and the rebuilt path parses to the same parts; a mismatch has every part empty.
func FuzzParseZKPath(f *testing.F) {
	for _, s := range []string{
		"/bzid/service/base_name/idc:cluster/server_type:0/1", "/bzid/service/base_name/server_type:0",
		"/b/service/m/x:1/2", "/b/service/m/ps:0\n", "/b/service/m/модель:٣/१", "", "/b/service/m/ps:0/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		p, err := ParseZKPath(path)
		if err != nil {
			if p != (ZKPath{}) {
				t.Fatalf("%q: error %v with parts %#v", path, err, p)
			}
			return
		}
		if s := p.String(); s != strings.TrimSuffix(path, "\n") {
			t.Fatalf("%q: String() = %q", path, s)
		}
		p2, err := ParseZKPath(p.String())
		if err != nil || p2 != p {
			t.Fatalf("%q: reparse = %#v, %v; want %#v", path, p2, err, p)
		}
	})
}

func FuzzPyFloatRoundTrip(f *testing.F) {
	for _, v := range []float64{0, 1, 1e-7, 1e16, 5e-324, 0.1} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		s := string(appendPyFloat(nil, v))
		rs, err := DeserializeResourceSpec([]byte(`{"cpu": ` + s + `}`))
		if err != nil {
			t.Fatalf("%v -> %s: %v", v, s, err)
		}
		if rs.CPU != v && (v == v || rs.CPU == rs.CPU) {
			t.Fatalf("%v -> %s -> %v", v, s, rs.CPU)
		}
	})
}
