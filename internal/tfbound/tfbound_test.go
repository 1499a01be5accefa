package tfbound

import (
	"errors"
	"strings"
	"testing"
)

func TestEveryComponentNeedsTensorFlow(t *testing.T) {
	for _, tc := range []struct {
		fn        func() error
		component string
		missing   string
	}{
		{TPURunner, "tpu_runner.TPURunner", "TPUEstimator"},
		{TPUInfeedOutfeedHook, "auto_checkpoint_feed_hook.TPUInfeedOutfeedSessionWithEndOfStreamHandlingHook", "infeed/outfeed"},
		{EmbeddingTask, "base_embedding_task.BaseEmbeddingTask", "tf.data"},
		{LayerFProp, "base_layer.BaseLayer.fprop", "graph ops"},
		{LayerLoss, "base_layer.add_layer_loss", "get_default_graph"},
		{HostCallHook, "base_embedding_host_call.generate_host_call_hook", "tf2.summary"},
		{MonkeyPatch, "utils.enable_monkey_patch", "monitored_session"},
		{HeapProfile, "mem_profiling.setup_heap_profile", "tcmalloc"},
	} {
		err := tc.fn()
		if !errors.Is(err, ErrNeedsTensorFlow) {
			t.Errorf("%s: %v does not wrap ErrNeedsTensorFlow", tc.component, err)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "not implemented: "+tc.component+" needs a TensorFlow runtime (") || !strings.Contains(msg, tc.missing) {
			t.Errorf("%s: message %q", tc.component, msg)
		}
		var e *Error
		if !errors.As(err, &e) || e.Component != tc.component {
			t.Errorf("%s: errors.As gives %+v", tc.component, e)
		}
	}
	if n := len(All()); n != 8 {
		t.Errorf("All has %d components", n)
	}
	for _, err := range All() {
		if !errors.Is(err, ErrNeedsTensorFlow) {
			t.Errorf("All: %v", err)
		}
	}
	if errors.Is(errors.New("other"), ErrNeedsTensorFlow) {
		t.Error("an unrelated error matches")
	}
}
