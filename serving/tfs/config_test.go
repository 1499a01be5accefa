package tfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
)

func TestTFSSelectVersions(t *testing.T) {
	found := []int64{1, 3, 10, 20}
	for _, tt := range []struct {
		policy string
		want   []int64
	}{
		{``, []int64{20}},
		{`latest {}`, []int64{20}},
		{`latest { num_versions: 2 }`, []int64{10, 20}},
		{`latest { num_versions: 9 }`, found},
		{`all {}`, found},
		{`specific { versions: 3 versions: 4 versions: 20 }`, []int64{3, 20}},
		{`specific {}`, nil},
	} {
		c, err := ParseModelServerConfig(fmt.Appendf(nil, `model_config_list { config { name: "a" base_path: "/a" model_version_policy { %s } } }`, tt.policy))
		if err != nil {
			t.Fatal(err)
		}
		got := SelectVersions(c.GetModelConfigList().GetConfig()[0].GetModelVersionPolicy(), found)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: %v, want %v", tt.policy, got, tt.want)
		}
		if got := SelectVersions(c.GetModelConfigList().GetConfig()[0].GetModelVersionPolicy(), nil); len(got) != 0 {
			t.Errorf("%q over no versions: %v", tt.policy, got)
		}
	}
}

func TestTFSScanVersions(t *testing.T) {
	base := versionDirs(t, filepath.Join(t.TempDir(), "m"), 10, 2, 0)
	got, err := ScanVersions(base)
	if err != nil || !slices.Equal(got, []int64{0, 2, 10}) {
		t.Fatalf("scan %v %v", got, err)
	}
	if got, err := ScanVersions(filepath.Join(base, "missing")); err != nil || got != nil {
		t.Fatalf("missing base path: %v %v", got, err)
	}
	// Review fix: a link to a version directory is a version (TF Serving follows it), a
	// link to a file or a dangling link is not, and "010" repeats version 10.
	other := versionDirs(t, filepath.Join(t.TempDir(), "other"), 5)
	for name, target := range map[string]string{
		"5":   filepath.Join(other, "5"),
		"8":   filepath.Join(other, "7"), // a file
		"9":   filepath.Join(other, "gone"),
		"010": filepath.Join(base, "10"),
	} {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := ScanVersions(base); err != nil || !slices.Equal(got, []int64{0, 2, 5, 10}) {
		t.Fatalf("scan with links %v %v, want [0 2 5 10]", got, err)
	}
}

func TestTFSParseAndValidate(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		names      []string
		parseErr   bool
		invalid    bool
	}{
		{name: "empty file", text: ""},
		{name: "empty list", text: "model_config_list {}"},
		{name: "empty list written by SetInParent", text: "model_config_list {\n}\n"},
		{name: "spec example", text: `model_config_list {
  config {
    name: "test_ffm_model:entry"
    base_path: "/x/exported_models/entry"
    model_platform: "tensorflow"
    model_version_policy {
      latest {
        num_versions: 1
      }
    }
  }
}
`, names: []string{"test_ffm_model:entry"}},
		{name: "syntax", text: "model_config_list {", parseErr: true},
		{name: "unknown field", text: "model_config_list { config { nme: \"a\" } }", parseErr: true},
		{name: "no name", text: `model_config_list { config { base_path: "/a" } }`, names: []string{""}, invalid: true},
		{name: "no base path", text: `model_config_list { config { name: "a" } }`, names: []string{"a"}, invalid: true},
		{name: "platform", text: `model_config_list { config { name: "a" base_path: "/a" model_platform: "onnx" } }`, names: []string{"a"}, invalid: true},
		{name: "duplicate", text: `model_config_list { config { name: "a" base_path: "/a" } config { name: "a" base_path: "/b" } }`, names: []string{"a", "a"}, invalid: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseModelServerConfig([]byte(tt.text))
			if tt.parseErr {
				if err == nil {
					t.Fatal("parsed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ModelNames(c); !slices.Equal(got, tt.names) {
				t.Fatalf("names %q, want %q", got, tt.names)
			}
			if err := ValidateModelServerConfig(c); errors.Is(err, ErrInvalidConfig) != tt.invalid {
				t.Fatalf("validate: %v, want invalid=%v", err, tt.invalid)
			}
		})
	}
}

func TestTFSPickStatus(t *testing.T) {
	st := func(v int64, s pb.ModelVersionStatus_State) *pb.ModelVersionStatus {
		return &pb.ModelVersionStatus{Version: v, State: s}
	}
	for _, tt := range []struct {
		name  string
		list  []*pb.ModelVersionStatus
		wantV int64
		wantS pb.ModelVersionStatus_State
	}{
		{"empty", nil, NoVersion, unknown},
		{"newest available", []*pb.ModelVersionStatus{st(3, available), st(5, loading), st(1, available)}, 3, available},
		{"none available", []*pb.ModelVersionStatus{st(4, end), st(2, unloading)}, 4, end},
	} {
		got := PickStatus("m", tt.list)
		if got.GetVersion() != tt.wantV || got.GetState() != tt.wantS {
			t.Errorf("%s: %v", tt.name, got)
		}
	}
}
