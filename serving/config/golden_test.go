package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// checkGolden compares got with testdata/name (rewritten with -update).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// The model config text quoted in §1.8.
func TestModelServerConfigTextSpec(t *testing.T) {
	m, err := GenModelConfig("test_ffm_model:entry", "/x/exported_models/entry", "latest")
	if err != nil {
		t.Fatal(err)
	}
	const want = `model_config_list {
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
`
	if got := ModelServerConfigText([]ModelConfig{m}); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// After a layout update with nothing accepted (SetInParent).
	if got := ModelServerConfigText(nil); got != "model_config_list {\n}\n" {
		t.Errorf("empty: %q", got)
	}
}

// S4: latest_once asks for one version whatever count it carries; the text says latest
// { num_versions: 1 }, while latest keeps its count.
func TestLatestOnceNumVersions(t *testing.T) {
	once, err := GenModelConfig("m", "/b", "latest_once", 3)
	if err != nil {
		t.Fatal(err)
	}
	latest, err := GenModelConfig("n", "/c", "latest", 3)
	if err != nil {
		t.Fatal(err)
	}
	got := ModelServerConfigText([]ModelConfig{once, latest})
	want := "model_config_list {\n" +
		"  config {\n    name: \"m\"\n    base_path: \"/b\"\n    model_platform: \"tensorflow\"\n    model_version_policy {\n      latest {\n        num_versions: 1\n      }\n    }\n  }\n" +
		"  config {\n    name: \"n\"\n    base_path: \"/c\"\n    model_platform: \"tensorflow\"\n    model_version_policy {\n      latest {\n        num_versions: 3\n      }\n    }\n  }\n" +
		"}\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestGenModelConfig(t *testing.T) {
	for _, tc := range []struct {
		policy string
		data   []int64
		err    string
	}{
		{"latest", nil, ""}, {"LATEST", []int64{2}, ""}, {"latest_once", []int64{1}, ""},
		{"all", []int64{7}, ""}, {"specific", []int64{3, 5}, ""}, {"Specific", nil, ""},
		{"latest", []int64{1, 2}, "takes one version count"},
		{"newest", nil, `version policy "newest" is not allowed`},
	} {
		_, err := GenModelConfig("m", "/b", tc.policy, tc.data...)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s %v: error %v, want %q", tc.policy, tc.data, err, tc.err)
		}
	}
}

// Every policy form, version labels (Python sorts map keys and omits a zero value) and
// string escaping, against a golden file.
func TestModelServerConfigTextGolden(t *testing.T) {
	var ms []ModelConfig
	add := func(name, base, policy string, data ...int64) *ModelConfig {
		m, err := GenModelConfig(name, base, policy, data...)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		return &ms[len(ms)-1]
	}
	add("test_ffm_model:ps_0", "hdfs:///x/exported_models/ps_0", "latest", 2)
	add("test_ffm_model:ps_1", "hdfs:///x/exported_models/ps_1", "latest_once") // S4: written as latest
	add("all", "/b/all", "all")
	add("specific", "/b/specific", "specific", 3, 1)
	add("latest0", "/b/l0", "latest", 0)
	l := add("labels", "/b/labels", "latest")
	l.VersionLabels = map[string]int64{"stable": 3, "canary": 4, "zero": 0}
	add("quote\"tab\tüñ\\", "/b/'x'", "latest")
	ms = append(ms, DefaultModelConfig())
	if !UsesLatestOnce(ms) || UsesLatestOnce(ms[:1]) {
		t.Error("UsesLatestOnce")
	}
	checkGolden(t, "model_server_config.golden", ModelServerConfigText(ms))
}

func TestPlatformConfigTextGolden(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		cpu        int
	}{
		{"platform_default.golden", "deploy_type ps", 0},
		{"platform_cpu_limit.golden", "deploy_type ps\ntensorflow_inter_op_parallelism 4\nallow_growth false\nenable_model_warmup false", 8},
		{"platform_batching.golden", "deploy_type dense\ndense_alone true\nenable_batching true", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.conf)
			c.Host.CPULimit = tc.cpu
			text, err := c.PlatformConfigText()
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.name, text)
		})
	}
	// Batching parameters need both dense_alone and enable_batching.
	c := mustParse(t, "deploy_type entry\nenable_batching true")
	if text, err := c.PlatformConfigText(); err != nil || strings.Contains(text, "batching_parameters") {
		t.Errorf("batching parameters without dense_alone (%v)", err)
	}
}

// A MY_CPU_LIMIT that is not an integer does not stop Resolve (the agent still starts); the
// platform config fails only when a thread count falls back to it.
func TestPlatformConfigBadCPULimit(t *testing.T) {
	for _, tc := range []struct {
		conf, err string
	}{
		{"deploy_type ps", `MY_CPU_LIMIT="4000m": not an integer`},
		{"deploy_type ps\ntensorflow_intra_op_parallelism 4", `MY_CPU_LIMIT="4000m": not an integer`},
		{"deploy_type ps\ntensorflow_intra_op_parallelism 4\ntensorflow_inter_op_parallelism 2", ""},
	} {
		c, err := mustParse(t, tc.conf).Resolve(MapEnv(map[string]string{"MY_CPU_LIMIT": "4000m"}), seqPorts())
		if err != nil {
			t.Fatalf("%q: Resolve: %v", tc.conf, err)
		}
		text, err := c.PlatformConfigText()
		if tc.err == "" {
			if err != nil || !strings.Contains(text, "intra_op_parallelism_threads: 4") || !strings.Contains(text, "inter_op_parallelism_threads: 2") {
				t.Errorf("%q: %v\n%s", tc.conf, err, text)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.conf, err, tc.err)
		}
	}
}
