// Package label is the Beam transform of Monolith's label and line_id ops
// (kernels/filter): add_action, add_label, scatter_label, label_upper_bound,
// label_normalization, use_field_as_label, multi_label_gen and instance_reweight.
//
// # Behavior
//
// A Config names exactly one op with the kernel's options struct; Apply applies it, and
// AddAction, AddLabel, ScatterLabel, UpperBound, Normalize, UseFieldAsLabel,
// MultiLabelGen and InstanceReweight are shorthands. Each batch is transformed on its
// own by the kernel op's Apply (the input batch itself when the op changes nothing);
// a result without rows (an empty input, or instance_reweight dropping every row) is
// not emitted. Nothing is shuffled and rows of different batches are never mixed. The
// kernel's behaviour is kept as is, departures included (I6: multi_label_gen renders
// another head field as decimal or string text).
//
// special_strategy, which both filters and relabels, is in transforms/filter.
//
// # Determinism
//
// add_label is random (decision I7); every other op is a pure function of the batch.
// As in transforms/filter, the kernel op is built anew for every batch with the seed
// filter.BatchSeed(Seed, "add_label", batch): a hash, seeded with the user's Seed (0
// means kfilter.DefaultSeed), of the row count and each row's serialized LineId and
// labels. The labels of a batch therefore depend only on the Config and the batch's
// content, not on batch order, bundles, parallelism or the runner; see the
// transforms/filter package doc for the consequences. When Seed is 0 the default seed
// is used and logged (log/slog, once per DoFn Setup or Runner.Init).
//
// # Configuration
//
// Beam serializes a DoFn's exported fields as JSON, so a Config must survive a JSON round
// trip (numbers finite, strings valid UTF-8). Resolve checks it, with the kernel's
// validation; Apply and the shorthands panic at pipeline construction when it fails,
// naming the op and the bad value.
package label

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	kfilter "github.com/monolith-go/monolith/kernels/filter"
	_ "github.com/monolith-go/monolith/transforms/element" // arrow.RecordBatch coder
	"github.com/monolith-go/monolith/transforms/internal/batchop"
)

func init() {
	register.DoFn3x1[context.Context, arrow.RecordBatch, func(arrow.RecordBatch), error](&labelFn{})
	register.Emitter1[arrow.RecordBatch]()
}

// Monolith's op names, as Config.Op returns them.
const (
	OpAddAction          = "add_action"
	OpAddLabel           = "add_label"
	OpScatterLabel       = "scatter_label"
	OpLabelUpperBound    = "label_upper_bound"
	OpLabelNormalization = "label_normalization"
	OpUseFieldAsLabel    = "use_field_as_label"
	OpMultiLabelGen      = "multi_label_gen"
	OpInstanceReweight   = "instance_reweight"
)

// Config selects one label op: exactly one field is set, holding the kernel's options.
// It holds plain values only, so Beam can serialize it (as JSON) with a DoFn.
type Config struct {
	AddAction        *kfilter.AddActionOptions     `json:",omitempty"` // add_action
	AddLabel         *kfilter.AddLabelOptions      `json:",omitempty"` // add_label
	ScatterLabel     *kfilter.ScatterLabelOptions  `json:",omitempty"` // scatter_label
	UpperBound       *kfilter.UpperBoundOptions    `json:",omitempty"` // label_upper_bound
	Normalization    *kfilter.NormOptions          `json:",omitempty"` // label_normalization
	FieldAsLabel     *kfilter.FieldAsLabelOptions  `json:",omitempty"` // use_field_as_label
	MultiLabelGen    *kfilter.MultiLabelGenOptions `json:",omitempty"` // multi_label_gen
	InstanceReweight *kfilter.ReweightOptions      `json:",omitempty"` // instance_reweight
}

// Op returns the Monolith name of the op c selects, or an error unless exactly one op is
// set.
func (c Config) Op() (string, error) {
	var ops batchop.Ops
	ops.Add(c.AddAction != nil, OpAddAction)
	ops.Add(c.AddLabel != nil, OpAddLabel)
	ops.Add(c.ScatterLabel != nil, OpScatterLabel)
	ops.Add(c.UpperBound != nil, OpLabelUpperBound)
	ops.Add(c.Normalization != nil, OpLabelNormalization)
	ops.Add(c.FieldAsLabel != nil, OpUseFieldAsLabel)
	ops.Add(c.MultiLabelGen != nil, OpMultiLabelGen)
	ops.Add(c.InstanceReweight != nil, OpInstanceReweight)
	return ops.One()
}

// random reports whether the op draws random numbers (add_label), and its user seed.
func (c Config) random() (bool, uint64) {
	if c.AddLabel != nil {
		return true, c.AddLabel.Seed
	}
	return false, 0
}

// spec tells the shared code (transforms/internal/batchop) about Config.
var spec = batchop.Spec[Config]{
	Pkg:    "label",
	Func:   "Apply",
	Op:     Config.Op,
	Random: Config.random,
	Build:  Config.build,
}

// Resolve validates c and returns it ready to ship to workers. Errors wrap
// kfilter.ErrConfig and name the op and the bad value. c is not modified.
func (c Config) Resolve() (Config, error) { return spec.Resolve(c) }

// build returns the kernel op c selects (a kfilter.Op), add_label seeded with seed.
func (c Config) build(seed uint64) (any, error) {
	switch {
	case c.AddAction != nil:
		return kfilter.NewAddAction(*c.AddAction)
	case c.AddLabel != nil:
		o := *c.AddLabel
		o.Seed = seed
		return kfilter.NewAddLabel(o)
	case c.ScatterLabel != nil:
		return kfilter.NewScatterLabel(*c.ScatterLabel)
	case c.UpperBound != nil:
		return kfilter.NewLabelUpperBound(*c.UpperBound)
	case c.Normalization != nil:
		return kfilter.NewLabelNormalization(*c.Normalization)
	case c.FieldAsLabel != nil:
		return kfilter.NewUseFieldAsLabel(*c.FieldAsLabel)
	case c.MultiLabelGen != nil:
		return kfilter.NewMultiLabelGen(*c.MultiLabelGen)
	case c.InstanceReweight != nil:
		return kfilter.NewInstanceReweight(*c.InstanceReweight)
	}
	return nil, batchop.ErrNoOp
}

// Apply applies the label op cfg selects to every batch of col (arrow.RecordBatch) and
// returns the non-empty results. Panics at pipeline construction if cfg is invalid.
func Apply(s beam.Scope, col beam.PCollection, cfg Config) beam.PCollection {
	s, cfg = spec.Prepare(s, cfg)
	return beam.ParDo(s, &labelFn{Config: cfg}, col)
}

// AddAction applies add_action.
func AddAction(s beam.Scope, col beam.PCollection, o kfilter.AddActionOptions) beam.PCollection {
	return Apply(s, col, Config{AddAction: &o})
}

// AddLabel applies add_label (random: see the package doc).
func AddLabel(s beam.Scope, col beam.PCollection, o kfilter.AddLabelOptions) beam.PCollection {
	return Apply(s, col, Config{AddLabel: &o})
}

// ScatterLabel applies scatter_label.
func ScatterLabel(s beam.Scope, col beam.PCollection, o kfilter.ScatterLabelOptions) beam.PCollection {
	return Apply(s, col, Config{ScatterLabel: &o})
}

// UpperBound applies label_upper_bound.
func UpperBound(s beam.Scope, col beam.PCollection, o kfilter.UpperBoundOptions) beam.PCollection {
	return Apply(s, col, Config{UpperBound: &o})
}

// Normalize applies label_normalization.
func Normalize(s beam.Scope, col beam.PCollection, o kfilter.NormOptions) beam.PCollection {
	return Apply(s, col, Config{Normalization: &o})
}

// UseFieldAsLabel applies use_field_as_label.
func UseFieldAsLabel(s beam.Scope, col beam.PCollection, o kfilter.FieldAsLabelOptions) beam.PCollection {
	return Apply(s, col, Config{FieldAsLabel: &o})
}

// MultiLabelGen applies multi_label_gen.
func MultiLabelGen(s beam.Scope, col beam.PCollection, o kfilter.MultiLabelGenOptions) beam.PCollection {
	return Apply(s, col, Config{MultiLabelGen: &o})
}

// InstanceReweight applies instance_reweight.
func InstanceReweight(s beam.Scope, col beam.PCollection, o kfilter.ReweightOptions) beam.PCollection {
	return Apply(s, col, Config{InstanceReweight: &o})
}

type labelFn struct {
	Config Config

	r Runner
}

func (f *labelFn) Setup() error { return f.r.Init(f.Config) }

func (f *labelFn) ProcessElement(_ context.Context, rec arrow.RecordBatch, emit func(arrow.RecordBatch)) error {
	return spec.Process(&f.r.r, rec, emit)
}

// Runner applies a label op to batches one after another: the body of the Apply DoFn,
// exported so that plain-Go callers run exactly the same code. Not safe for concurrent
// use.
type Runner struct{ r batchop.Runner[Config] }

// Init validates cfg (as Config.Resolve does) and prepares the runner. When add_label
// has no seed it logs the default seed it uses.
func (r *Runner) Init(cfg Config) error { return spec.Init(&r.r, cfg) }

// Op returns the Monolith name of the runner's op.
func (r *Runner) Op() string { return r.r.Op() }

// Apply returns rec transformed by the op, or nil when the result has no rows. The
// result is rec itself, retained, when the op changes nothing; otherwise a new batch
// built with Go-managed memory. A caller that does not hand the result to Beam releases
// it. rec is neither modified nor released.
func (r *Runner) Apply(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	return spec.Apply(&r.r, rec)
}
