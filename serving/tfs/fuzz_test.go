package tfs

import (
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// FuzzParseModelServerConfig feeds arbitrary text to the model config reader and what
// follows it (validation, names, version selection): none may panic, and an accepted
// config survives a text round trip.
func FuzzParseModelServerConfig(f *testing.F) {
	for _, s := range []string{
		"", "model_config_list {}", "model_config_list {\n}\n",
		`model_config_list { config { name: "a:entry" base_path: "/m/entry" model_platform: "tensorflow" model_version_policy { latest { num_versions: 2 } } } }`,
		`model_config_list { config { name: "b" base_path: "/b" model_version_policy { specific { versions: 1 versions: -3 } } version_labels { key: "x" value: 1 } } }`,
		`model_config_list { config { name: "c" base_path: "/c" model_version_policy { all {} } } }`,
		`custom_model_config { [type.googleapis.com/google.protobuf.Empty] {} }`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		c, err := ParseModelServerConfig(text)
		if err != nil {
			return
		}
		_ = ValidateModelServerConfig(c)
		_ = ModelNames(c)
		for _, m := range c.GetModelConfigList().GetConfig() {
			_ = SelectVersions(m.GetModelVersionPolicy(), []int64{0, 1, 2, 5})
			_ = SelectVersions(m.GetModelVersionPolicy(), nil)
		}
		out, err := prototext.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := ParseModelServerConfig(out)
		if err != nil {
			t.Fatalf("re-parse %q: %v", out, err)
		}
		if !proto.Equal(c, back) {
			t.Fatalf("round trip differs:\n%v\n%v", c, back)
		}
	})
}
