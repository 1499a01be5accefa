package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/internal/pytext"
)

// Version policies of a model config (case-insensitive in input).
const (
	PolicyLatest     = "latest"
	PolicyLatestOnce = "latest_once" // ByteDance extension; rendered as latest (S4)
	PolicyAll        = "all"
	PolicySpecific   = "specific"
)

// ModelConfig is one entry of TF Serving's model_config_list (reference gen_model_config).
type ModelConfig struct {
	Name          string
	BasePath      string
	ModelPlatform string
	// Policy is one of the Policy* constants, lower case.
	Policy string
	// Versions is num_versions (one value) for latest and latest_once, the version list for
	// specific, and unused for all.
	Versions      []int64
	VersionLabels map[string]int64
}

// GenModelConfig builds a model config on the "tensorflow" platform. versions defaults to
// [1]; latest and latest_once take exactly one value. An unknown policy is an error.
func GenModelConfig(name, basePath, policy string, versions ...int64) (ModelConfig, error) {
	if len(versions) == 0 {
		versions = []int64{1}
	}
	p := strings.ToLower(policy)
	switch p {
	case PolicyLatest, PolicyLatestOnce:
		if len(versions) != 1 {
			return ModelConfig{}, fmt.Errorf("serving/config: model %s: policy %s takes one version count, got %d", name, p, len(versions))
		}
	case PolicyAll:
		versions = nil
	case PolicySpecific:
	default:
		return ModelConfig{}, fmt.Errorf("serving/config: model %s: version policy %q is not allowed", name, policy)
	}
	return ModelConfig{
		Name: name, BasePath: basePath, ModelPlatform: "tensorflow",
		Policy: p, Versions: append([]int64(nil), versions...),
	}, nil
}

// DefaultModelConfig is the reference's DEFAULT_MODEL_CONFIG.
func DefaultModelConfig() ModelConfig {
	return ModelConfig{
		Name: "default", BasePath: TFSHome + "/dat/saved_models/entry", ModelPlatform: "tensorflow",
		Policy: PolicyLatest, Versions: []int64{1},
	}
}

// EmptyModelServerConfigText is what AgentV3 writes to a fresh model config file.
const EmptyModelServerConfigText = "model_config_list {}"

// ModelServerConfigText renders a ModelServerConfig with the given model_config_list in
// protobuf text format, byte for byte as Python's text_format.MessageToString does. A
// latest_once policy is written as latest { num_versions: 1 } whatever its version count
// (S4; see UsesLatestOnce to log it).
func ModelServerConfigText(models []ModelConfig) string {
	w := &textWriter{}
	w.open("model_config_list")
	for _, m := range models {
		w.open("config")
		w.str("name", m.Name)
		w.str("base_path", m.BasePath)
		w.str("model_platform", m.ModelPlatform)
		w.open("model_version_policy")
		switch m.Policy {
		case PolicyLatestOnce:
			w.open("latest")
			w.scalar("num_versions", "1", true)
			w.close()
		case PolicyLatest:
			w.open("latest")
			if len(m.Versions) > 0 {
				w.scalar("num_versions", strconv.FormatInt(m.Versions[0], 10), m.Versions[0] != 0)
			}
			w.close()
		case PolicyAll:
			w.open("all")
			w.close()
		case PolicySpecific:
			w.open("specific")
			for _, v := range m.Versions {
				w.line("versions: " + strconv.FormatInt(v, 10))
			}
			w.close()
		}
		w.close()
		keys := make([]string, 0, len(m.VersionLabels))
		for k := range m.VersionLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys) // Python prints map entries in key order
		for _, k := range keys {
			w.open("version_labels")
			w.str("key", k)
			v := m.VersionLabels[k]
			w.scalar("value", strconv.FormatInt(v, 10), v != 0)
			w.close()
		}
		w.close()
	}
	w.close()
	return w.String()
}

// UsesLatestOnce reports whether any model asks for the latest_once policy, which
// ModelServerConfigText rewrites to latest (S4).
func UsesLatestOnce(models []ModelConfig) bool {
	for _, m := range models {
		if m.Policy == PolicyLatestOnce {
			return true
		}
	}
	return false
}

// SavedModelBundleSourceAdapterConfigURL is the Any type URL of the platform config.
const SavedModelBundleSourceAdapterConfigURL = "type.googleapis.com/tensorflow.serving.SavedModelBundleSourceAdapterConfig"

// PlatformConfigText renders the PlatformConfigMap the reference writes to
// platform_config_file at start-up, in Python's text format: session threads from
// tensorflow_{intra,inter}_op_parallelism, else MY_CPU_LIMIT (Host.CPULimit), else 16;
// soft placement; allow_growth; model warm-up; and, when dense_alone and enable_batching,
// Monolith's batching parameters. It fails only when a thread count falls back to a
// MY_CPU_LIMIT that is not an integer (the reference then removes the file and goes on).
func (c AgentConfig) PlatformConfigText() (string, error) {
	usesCPULimit := c.TensorflowIntraOpParallelism == 0 || c.TensorflowInterOpParallelism == 0
	if usesCPULimit && c.Host.CPULimitErr != nil {
		return "", fmt.Errorf("serving/config: platform config: %w", c.Host.CPULimitErr)
	}
	threads := func(v int) int {
		if v != 0 {
			return v
		}
		if c.Host.CPULimit != 0 {
			return c.Host.CPULimit
		}
		return 16
	}
	intra, inter := threads(c.TensorflowIntraOpParallelism), threads(c.TensorflowInterOpParallelism)
	w := &textWriter{}
	w.open("platform_configs")
	w.str("key", "tensorflow")
	w.open("value")
	w.open("source_adapter_config")
	w.open("[" + SavedModelBundleSourceAdapterConfigURL + "]")
	w.open("legacy_config")
	w.open("session_config")
	w.scalar("intra_op_parallelism_threads", strconv.Itoa(intra), intra != 0)
	w.scalar("inter_op_parallelism_threads", strconv.Itoa(inter), inter != 0)
	w.open("gpu_options") // present even when allow_growth is false (Python sets it)
	w.scalar("allow_growth", "true", c.AllowGrowth)
	w.close()
	w.line("allow_soft_placement: true")
	w.close()
	if c.DenseAlone && c.EnableBatching {
		w.open("batching_parameters")
		for _, kv := range []struct {
			k string
			v int
		}{{"max_batch_size", 1024}, {"batch_timeout_micros", 800}, {"max_enqueued_batches", 100000}, {"num_batch_threads", 8}} {
			w.open(kv.k)
			w.line("value: " + strconv.Itoa(kv.v))
			w.close()
		}
		w.line("support_diff_dim_size_inputs: true")
		w.close()
	}
	w.scalar("enable_model_warmup", "true", c.EnableModelWarmup)
	w.close()
	w.close()
	w.close()
	w.close()
	w.close()
	return w.String(), nil
}

// textWriter writes protobuf text format with Python's layout: two-space indent, "name {"
// blocks, one field per line.
type textWriter struct {
	sb     strings.Builder
	indent int
}

func (w *textWriter) line(s string) {
	w.sb.WriteString(strings.Repeat(" ", w.indent))
	w.sb.WriteString(s)
	w.sb.WriteByte('\n')
}

func (w *textWriter) open(name string) { w.line(name + " {"); w.indent += 2 }
func (w *textWriter) close()           { w.indent -= 2; w.line("}") }

// scalar writes a proto3 scalar, which text format omits at its default value.
func (w *textWriter) scalar(name, v string, present bool) {
	if present {
		w.line(name + ": " + v)
	}
}

// str writes a proto3 string field (omitted when empty) with C-style escapes.
func (w *textWriter) str(name, v string) {
	if v != "" {
		w.line(name + ": \"" + pytext.CEscape(v) + "\"")
	}
}

func (w *textWriter) String() string { return w.sb.String() }
