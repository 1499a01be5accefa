package train

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/pipelines/train/runconfig"
)

// keysFC has two bias and two vector layouts, so that the layouts keys can move.
const keysFC = `feature_configs { key: "a" value { table: "t" slice_dims: 1 slice_dims: 2 } }
feature_configs { key: "b" value { table: "t" slice_dims: 1 slice_dims: 2 } }
out_configs { key: "bias" value { out_type: ADDN slice_configs { feature_name: "a" start: 0 end: 1 } slice_configs { feature_name: "b" start: 0 end: 1 } shape { dims: -1 dims: 1 } } }
out_configs { key: "bias2" value { out_type: ADDN slice_configs { feature_name: "a" start: 0 end: 1 } shape { dims: -1 dims: 1 } } }
out_configs { key: "vec" value { out_type: CONCAT slice_configs { feature_name: "a" start: 1 end: 3 } slice_configs { feature_name: "b" start: 1 end: 3 } shape { dims: -1 dims: 4 } } }
out_configs { key: "vec2" value { out_type: CONCAT slice_configs { feature_name: "b" start: 1 end: 3 } slice_configs { feature_name: "a" start: 1 end: 3 } shape { dims: -1 dims: 4 } } }
`

// keysBase is the config every key's case adds to.
const keysBase = "model: deepfm\nhidden: [4]\ntrain_input: data/*\nfeature_configs: fc.pbtxt\n"

// effective is what a run reads from a config: the prepared job and tables, and every
// field Run and its helpers consult. Two configs that behave alike have equal effective
// values; an error is an outcome of its own.
func effective(t *testing.T, dir, text string) string {
	t.Helper()
	p := writeFile(t, dir, "c.yaml", []byte(text))
	c, err := LoadConfig(p)
	if err != nil {
		return "error: " + err.Error()
	}
	pr, err := Prepare(c)
	if err != nil {
		return "error: " + err.Error()
	}
	tables, err := prototext.Marshal(pr.Tables)
	if err != nil {
		t.Fatal(err)
	}
	j := pr.Job
	j.MaxSteps = stepLimit(c.MaxSteps, c.Steps, 100) // as Run does after reading the start step
	r := c.Runner
	retries, backoff := r.Retry()
	v := map[string]any{
		"job": j, "tables": string(tables), "epochs": c.Epochs, "eval_every": c.EvalEveryEpochs,
		"inputs": []string{c.TrainInput, c.EvalInput, c.FeatureConfigs, c.Planted}, "ps": c.PS, "checkpoint": c.Checkpoint,
		"discovery": c.Discovery(), "worker": []int{r.Index, r.NumWorkers}, "summary_steps": r.SaveSummarySteps,
		"chief_timeout": r.ChiefTimeoutSecs, "rpc_deadline": r.MaxRPCDeadlineMillis, "retry": []any{retries, backoff},
		"barrier": r.BarrierTimeout(), "zk": []string{r.ZKServer, r.DeepInsightName}, "tf_config": r.TFConfig, "psm": r.UUID,
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// keyCases set each documented key to something other than its default (with what it
// needs beside it, in both the base and the changed config).
var keyCases = []struct {
	key, base, set string
}{
	{"model", "", "model: fm\n"},
	{"layouts.bias", "", "layouts: {bias: bias2}\n"},
	{"layouts.vec", "", "layouts: {vec: vec2}\n"},
	{"hidden", "", "hidden: [8, 2]\n"},
	{"data", "", "data: planted\n"},
	{"train_input", "", "train_input: other/*\n"},
	{"eval_input", "", "eval_input: eval/*\n"},
	{"feature_configs", "", "feature_configs: fc2.pbtxt\n"},
	{"planted", "", "planted: planted.json\n"},
	{"batch_size", "", "batch_size: 64\n"},
	{"epochs", "", "epochs: 3\n"},
	{"eval_every_epochs", "eval_input: eval/*\n", "eval_every_epochs: 1\n"},
	{"max_steps", "", "max_steps: 50\n"},
	{"steps", "", "steps: 10\n"},
	{"threads", "", "threads: 3\n"},
	{"filters", "", "filters: [{negative_sample: {drop_rate: 0.5, threshold: 0.5}}]\n"},
	{"labels", "", "labels: [{label_upper_bound: {bounds: [1]}}]\n"},
	{"unique", "", "unique: false\n"},
	{"sparse.segments", "", "sparse: {segments: [{init: {zeros: {}}, optimizer: {ftrl: {learning_rate: 0.1}}}]}\n"},
	{"dense.optimizer", "", "dense: {optimizer: {sgd: {learning_rate: 0.3}}}\n"},
	{"tables", "", "tables: [{name: t, filter: {type: PROBABILISTIC}}]\n"},
	{"ps.shards", "", "ps: {shards: 3}\n"},
	{"ps.addrs", "", "ps: {addrs: ['127.0.0.1:1']}\n"},
	{"ps.seed", "", "ps: {seed: 7}\n"},
	{"ps.unavailable_wait_secs", "", "ps: {unavailable_wait_secs: 5}\n"},
	{"checkpoint.dir", "", "checkpoint: {dir: m}\n"},
	{"checkpoint.every_steps", "", "checkpoint: {every_steps: 10}\n"},
	{"checkpoint.keep", "", "checkpoint: {keep: 9}\n"},
	{"checkpoint.restore_dir", "checkpoint: {dir: m}\n", "checkpoint: {dir: m, restore_dir: r}\n"},
	{"checkpoint.restore_ckpt", "checkpoint: {dir: m}\n", "checkpoint: {dir: m, restore_ckpt: model.ckpt-3}\n"},
	{"checkpoint.info", "", "checkpoint: {info: true}\n"},
	{"checkpoint.save_timeout_secs", "", "checkpoint: {save_timeout_secs: 30}\n"},

	{"runner.index", "ps: {addrs: [a:1]}\nrunner: {num_workers: 2}\n", "ps: {addrs: [a:1]}\nrunner: {num_workers: 2, index: 1}\n"},
	{"runner.num_workers", "ps: {addrs: [a:1]}\n", "ps: {addrs: [a:1]}\nrunner: {num_workers: 2}\n"},
	{"runner.num_ps", "", "runner: {num_ps: 2}\n"},
	{"runner.server_type", "", "runner: {server_type: ps}\n"},
	{"runner.mode", "", "runner: {mode: eval}\n"},
	{"runner.model_dir", "", "runner: {model_dir: m}\n"},
	{"runner.restore_dir", "checkpoint: {dir: m}\n", "checkpoint: {dir: m}\nrunner: {restore_dir: r}\n"},
	{"runner.restore_ckpt", "", "runner: {restore_ckpt: model.ckpt-3}\n"},
	{"runner.enable_model_ckpt_info", "", "runner: {enable_model_ckpt_info: true}\n"},
	{"runner.save_checkpoints_steps", "", "runner: {save_checkpoints_steps: 10}\n"},
	{"runner.checkpoints_max_to_keep", "", "runner: {checkpoints_max_to_keep: 10}\n"},
	{"runner.save_summary_steps", "", "runner: {save_summary_steps: 7}\n"},
	{"runner.chief_timeout_secs", "", "runner: {chief_timeout_secs: 60}\n"},
	{"runner.max_rpc_deadline_millis", "", "runner: {max_rpc_deadline_millis: 500}\n"},
	{"runner.is_local", "ps: {addrs: [a:1]}\n", "ps: {addrs: [a:1]}\nrunner: {is_local: true}\n"},
	{"runner.discovery_type", "", "runner: {discovery_type: mlp}\n"},
	{"runner.zk_server", "runner: {discovery_type: zk, zk_server: 'h:1'}\n", "runner: {discovery_type: zk, zk_server: 'h:2'}\n"},
	{"runner.deep_insight_name", "runner: {discovery_type: zk, zk_server: 'h:1'}\n", "runner: {discovery_type: zk, zk_server: 'h:1', deep_insight_name: j}\n"},
	{"runner.tf_config", "runner: {discovery_type: tf_config}\n", "runner: {discovery_type: tf_config, tf_config: '{}'}\n"},
	{"runner.uuid", "runner: {discovery_type: consul, uuid: a}\n", "runner: {discovery_type: consul, uuid: b}\n"},
	{"runner.connect_retries", "", "runner: {connect_retries: 9}\n"},
	{"runner.retry_backoff_ms", "", "runner: {retry_backoff_ms: 9}\n"},
	{"runner.barrier_timeout_ms", "", "runner: {barrier_timeout_ms: 9}\n"},
}

// mergeYAML concatenates YAML snippets, merging the flow maps of a key given twice.
func mergeYAML(t *testing.T, parts ...string) string {
	t.Helper()
	var out map[string]any
	for _, p := range parts {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(p), &m); err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		out = mergeMaps(out, m)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mergeMaps(a, b map[string]any) map[string]any {
	if a == nil {
		a = map[string]any{}
	}
	for k, v := range b {
		am, ok1 := a[k].(map[string]any)
		bm, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			a[k] = mergeMaps(am, bm)
			continue
		}
		a[k] = v
	}
	return a
}

// TestEveryKeyActs sets every documented key, one at a time, and checks that what a run
// reads changes (or that the value is refused, for the keys that must keep one value).
func TestEveryKeyActs(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "fc.pbtxt", []byte(keysFC))
	writeFile(t, dir, "fc2.pbtxt", []byte(strings.ReplaceAll(keysFC, `key: "b" value { table: "t"`, `key: "b" value { table: "u"`)))
	if err := os.MkdirAll(dir+"/planted", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir+"/planted", "feature_configs.pbtxt", []byte(keysFC))
	for _, tc := range keyCases {
		t.Run(tc.key, func(t *testing.T) {
			before := effective(t, dir, mergeYAML(t, keysBase, tc.base))
			after := effective(t, dir, mergeYAML(t, keysBase, tc.base, tc.set))
			if strings.HasPrefix(before, "error") {
				t.Fatalf("the base config fails: %s", before)
			}
			if before == after {
				t.Errorf("setting %s (%q) changes nothing a run reads", tc.key, tc.set)
			}
		})
	}
}

// TestUnknownKeysRejected: a key this config does not have, at any level, and a runner
// field that does not act here set to another value than its default, fail naming it.
func TestUnknownKeysRejected(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "fc.pbtxt", []byte(keysFC))
	cases := map[string]string{
		"top":        "modle: fm\n",
		"layouts":    "layouts: {biass: b}\n",
		"ps":         "ps: {zookeeper: 'h:1'}\n",
		"checkpoint": "checkpoint: {every: 3}\n",
		"sparse":     "sparse: {segment: []}\n",
		"dense":      "dense: {opt: {}}\n",
	}
	want := map[string]string{"top": "modle", "layouts": "biass", "ps": "zookeeper", "checkpoint": "every", "sparse": "segment", "dense": "opt"}
	def := runconfig.Defaults()
	dv := reflect.ValueOf(def)
	for i, name := range runconfig.Names() {
		if _, acts := RunnerKeys[name]; acts {
			continue
		}
		var v any
		switch f := dv.Field(i).Interface().(type) {
		case bool:
			v = !f
		case string:
			v = map[string]string{"zk_watch_address_family": "ipv6"}[name] // a valid value, else any other
			if v == "" {
				v = f + "x"
			}
		case int, int64:
			v = reflect.ValueOf(f).Int() + 1
		case float64:
			v = f + 1
		default:
			t.Fatalf("runner.%s: type %T", name, f)
		}
		b, _ := json.Marshal(map[string]any{"runner": map[string]any{name: v}})
		cases["runner."+name] = string(b)
		want["runner."+name] = "runner." + name
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			got := effective(t, dir, mergeYAML(t, keysBase, text))
			if !strings.HasPrefix(got, "error") || !strings.Contains(got, want[name]) {
				t.Errorf("%q: %s, want an error naming %s", text, got, want[name])
			}
			if !strings.Contains(got, ErrConfig.Error()) {
				t.Errorf("%q: %s does not wrap ErrConfig", text, got)
			}
		})
	}
}

// configKeys lists the keys of Config's JSON form, nested sections joined by dots
// (runner: the fields RunnerKeys lists).
func configKeys() []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			switch {
			case name == "runner":
				for k := range RunnerKeys {
					out = append(out, "runner."+k)
				}
			case f.Type.Kind() == reflect.Struct:
				walk(prefix+name+".", f.Type)
			default:
				out = append(out, prefix+name)
			}
		}
	}
	walk("", reflect.TypeFor[Config]())
	sort.Strings(out)
	return out
}

// TestKeysDocumentedAndCovered: the README's training config table lists exactly the keys
// of Config (and the runner keys that act), and TestEveryKeyActs has a case for each.
func TestKeysDocumentedAndCovered(t *testing.T) {
	keys := configKeys()
	var cased []string
	for _, tc := range keyCases {
		cased = append(cased, tc.key)
	}
	sort.Strings(cased)
	if !slices.Equal(keys, cased) {
		t.Errorf("keys of Config:\n%v\ncases of TestEveryKeyActs:\n%v", keys, cased)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "### Training config")
	end := strings.Index(string(readme)[start+1:], "\n### ")
	if start < 0 || end < 0 {
		t.Fatal("README has no Training config section")
	}
	section := string(readme)[start : start+1+end]
	var documented []string
	cell := regexp.MustCompile(`^\| ([^|]+) \|`)
	key := regexp.MustCompile("`([a-z_.]+)`")
	for line := range strings.SplitSeq(section, "\n") {
		m := cell.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, k := range key.FindAllStringSubmatch(m[1], -1) {
			documented = append(documented, k[1])
		}
	}
	sort.Strings(documented)
	documented = slices.Compact(documented)
	if !slices.Equal(keys, documented) {
		t.Errorf("keys of Config:\n%v\nkeys in the README's Training config table:\n%v", keys, documented)
	}
}

// TestSegmentCompress: a segment's compress reaches its tables' comp_config, and one that
// does not parse fails naming the key.
func TestSegmentCompress(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "fc.pbtxt", []byte(keysFC))
	for _, tc := range []struct{ compress, want string }{
		{"{fp16: {}}", `comp_config:?\s*\{\s*fp16:?\s*\{`},
		{"{fixed_r8: {r: 2}}", `comp_config:?\s*\{\s*fixed_r8:?\s*\{\s*r:\s*2`},
		{"{fp17: {}}", `^error: .*compress: .*fp17`},
	} {
		set := "sparse: {segments: [{optimizer: {sgd: {learning_rate: 0.1}}, compress: " + tc.compress + "}]}\n"
		got := effective(t, dir, mergeYAML(t, keysBase, set))
		if !regexp.MustCompile(tc.want).MatchString(got) {
			t.Errorf("compress %s: %s\ndoes not match %s", tc.compress, got, tc.want)
		}
	}
}
