// Package tfbound answers for the parts of Monolith that only run inside TensorFlow: each
// function names one component and returns an error wrapping ErrNeedsTensorFlow that says
// what is missing. Their pure logic lives elsewhere (see each function's doc).
//
// Nothing here pretends to work: a caller that reaches one of these has asked for a
// TensorFlow graph, session, TPU or C++ runtime that a Go process does not have.
package tfbound

import (
	"errors"
	"fmt"
)

// ErrNeedsTensorFlow is wrapped by every error of this package.
var ErrNeedsTensorFlow = errors.New("needs a TensorFlow runtime")

// Error is the error of one component.
type Error struct {
	Component string // the reference's name, e.g. "tpu_runner.TPURunner"
	Missing   string // what it needs that Go does not have
}

func (e *Error) Error() string {
	return fmt.Sprintf("not implemented: %s needs a TensorFlow runtime (%s)", e.Component, e.Missing)
}

// Is makes errors.Is(err, ErrNeedsTensorFlow) true.
func (e *Error) Is(target error) bool { return target == ErrNeedsTensorFlow }

func needs(component, missing string) error { return &Error{Component: component, Missing: missing} }

// TPURunner is monolith/tpu_runner.py (TPURunner, its flags and main): TPUEstimator
// training and checkpoint-by-checkpoint evaluation on Cloud TPU. The task registry it reads
// is hyperparams.Registry.
func TPURunner() error {
	return needs("tpu_runner.TPURunner", "tf.compat.v1.estimator.tpu.TPUEstimator, the Cloud TPU client and TPU embedding")
}

// TPUInfeedOutfeedHook is monolith/core/auto_checkpoint_feed_hook.py: the infeed/outfeed
// session hook with end-of-stream stopping signals.
func TPUInfeedOutfeedHook() error {
	return needs("auto_checkpoint_feed_hook.TPUInfeedOutfeedSessionWithEndOfStreamHandlingHook",
		"a TF session, TPU initialization and the infeed/outfeed enqueue and dequeue ops")
}

// EmbeddingTask is monolith/core/base_embedding_task.py: the tf.data input pipeline and
// the TPU embedding feature and table configs of an embedding task.
func EmbeddingTask() error {
	return needs("base_embedding_task.BaseEmbeddingTask", "tf.data, tf.io.parse_example and tf.tpu.experimental embedding configs")
}

// LayerFProp is BaseLayer.fprop and __call__ (monolith/core/base_layer.py): a layer's
// forward pass builds TF graph ops. Children and params are hyperparams.Layer.
func LayerFProp() error {
	return needs("base_layer.BaseLayer.fprop", "TF graph ops for the forward pass")
}

// LayerLoss is add_layer_loss / get_layer_loss (monolith/core/base_layer.py): losses kept
// per TensorFlow default graph.
func LayerLoss() error {
	return needs("base_layer.add_layer_loss", "tf.compat.v1.get_default_graph, the graph the losses are keyed by")
}

// HostCallHook is BaseEmbeddingHostCall.generate_host_call_hook and its TPU variables
// (monolith/core/base_embedding_host_call.py): summary writers, serialized tensors and
// replicated TPU variables. Compression, the caching variables, the AUC and the summary
// values are kernels/hostcall.
func HostCallHook() error {
	return needs("base_embedding_host_call.generate_host_call_hook",
		"tf2.summary file writers, tf.io.serialize_tensor and replicated TPU variables")
}

// MonkeyPatch is enable_monkey_patch (monolith/utils.py, called on import by
// monolith/__init__.py): it narrows TensorFlow's MonitoredSession preemption errors to
// AbortedError.
func MonkeyPatch() error {
	return needs("utils.enable_monkey_patch", "tensorflow.python.training.monitored_session to patch")
}

// HeapProfile is enable_tcmalloc / setup_heap_profile (monolith/common/python/mem_profiling.py):
// gperftools heap profiling of the TensorFlow C++ runtime through LD_PRELOAD and HEAPPROFILE
// variables. Go heaps are profiled with runtime/pprof; the library path would come from
// pathutil.Locator.LibopsPath.
func HeapProfile() error {
	return needs("mem_profiling.setup_heap_profile",
		"tcmalloc preloaded into the TensorFlow C++ process; Go processes use runtime/pprof")
}

// All returns every component's error, in the order of this file.
func All() []error {
	return []error{TPURunner(), TPUInfeedOutfeedHook(), EmbeddingTask(), LayerFProp(), LayerLoss(),
		HostCallHook(), MonkeyPatch(), HeapProfile()}
}
