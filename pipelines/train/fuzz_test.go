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

// FuzzReadChunks: the eval result decoder rejects malformed input with an error and
// round-trips what appendChunk writes.
func FuzzReadChunks(f *testing.F) {
	f.Add(appendChunk(nil, []float32{0.5, 0.25}, []float32{1, 0}))
	f.Add([]byte{1, 0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		preds, labels, err := readChunks(b)
		if err != nil {
			return
		}
		if len(preds) != len(labels) {
			t.Fatalf("%d predictions, %d labels", len(preds), len(labels))
		}
		again, _, err := readChunks(appendChunk(nil, preds, labels))
		if err != nil || len(again) != len(preds) {
			t.Fatalf("round trip: %d → %d, %v", len(preds), len(again), err)
		}
	})
}
