package optimizer

import "github.com/monolith-go/monolith/schemas/hashtablepb"

// Optimizer is the update rule of one segment of an embedding entry. An Optimizer holds only
// its hyper-parameters: the per-entry state lives in caller-owned float32 slices, so a table
// keeps every entry's weights and state in contiguous arrays. Implementations are safe for
// concurrent use on distinct state slices.
type Optimizer interface {
	// Dim is the number of weights of the segment.
	Dim() int
	// StateLen is the number of float32 words of per-entry state (0 for stateless rules).
	// Integer state (BatchSoftmax's last step) is stored bit-cast in two words.
	StateLen() int
	// Init writes the initial state of a new entry.
	Init(state []float32)
	// Step applies one update to w with gradient g, learning rate lr and the global step.
	// len(w) == len(g) == Dim(), len(state) == StateLen(). g is not modified.
	Step(w, g, state []float32, lr float32, step int64)
	// LearningRate is the default learning rate at a global step (§3.4): the configured rate,
	// ramped linearly from 0 over warmup_steps when that is set. Callers use it when a request
	// carries no learning rates.
	LearningRate(step int64) float32
	// Dump returns the state as Monolith's SingleOptimizerDump, or nil for rules that dump
	// nothing (MovingAverage).
	Dump(state []float32) *hashtablepb.SingleOptimizerDump
	// DumpTo writes what Dump returns into dst, which must not be nil, and reports whether
	// the rule dumps anything (false for MovingAverage, leaving dst alone). When dst already
	// holds this rule's kind, its oneof wrapper, inner message, optional scalars and slices
	// are reused (the slices overwritten from [:0]), so dumping many entries through one dst
	// allocates only for the first. Otherwise dst's oneof is replaced.
	DumpTo(dst *hashtablepb.SingleOptimizerDump, state []float32) bool
	// Restore overwrites state from a dump produced by Dump (or by Monolith). It checks the
	// dump kind and lengths and names what is wrong.
	Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error
	// Kind is the config oneof name ("adagrad", "sgd", ...).
	Kind() string
}
