package train

import (
	"errors"
	"testing"
)

// FuzzParseConfig: any YAML or JSON either parses and normalizes or fails with ErrConfig;
// it never panics.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("model: fm\ntrain_input: x\nfeature_configs: y\n"), true)
	f.Add([]byte(`{"model": "lr", "train_input": "x", "feature_configs": "y", "tables": [{"name": "t"}]}`), false)
	f.Add([]byte("sparse: {segments: [{init: {zeros: {}}, optimizer: {adagrad: {learning_rate: 0.1}}}]}\n"), true)
	f.Add([]byte("ps: {shards: -1, addrs: [a]}\n"), true)
	f.Fuzz(func(t *testing.T, b []byte, yaml bool) {
		c, err := ParseConfig(b, yaml)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		if err := c.Normalize(); err != nil && !errors.Is(err, ErrConfig) {
			t.Fatalf("Normalize error %v does not wrap ErrConfig", err)
		}
	})
}

// FuzzParseOps: any filters or labels section either gives validated ops or fails with
// ErrConfig naming the section; it never panics.
func FuzzParseOps(f *testing.F) {
	f.Add([]byte(`[{"negative_sample": {"drop_rate": 0.5, "threshold": 0.5}}]`), false)
	f.Add([]byte(`[{"filter_by_label": {"thresholds": [0.5]}}]`), false)
	f.Add([]byte(`[{"add_label": {"tasks": [], "negative_value": 0}}]`), true)
	f.Add([]byte(`[{"label_upper_bound": {"bounds": [1]}}]`), true)
	f.Fuzz(func(t *testing.T, b []byte, labels bool) {
		section := "filters"
		if labels {
			section = "labels"
		}
		if _, err := parseOps(section, b); err != nil && !errors.Is(err, ErrConfig) {
			t.Fatalf("error %v does not wrap ErrConfig", err)
		}
	})
}
