// Package filter is the Beam transform of Monolith's sample filters (kernels/filter):
// filter_by_label, filter_by_fids, filter_by_value, filter_by_feature_value,
// negative_sample and special_strategy, over PCollections of arrow.RecordBatch.
//
// # Behavior
//
// A Config names exactly one op with the kernel's options struct; Filter applies it, and
// ByLabel, ByFids, ByValue, ByFeatureValue, NegativeSample and SpecialStrategy are
// shorthands. Each batch is filtered on its own: its kept rows, in input order, form the
// output batch (kfilter.Apply: the input batch itself when every row is kept), and a
// batch left with no rows is not emitted. Nothing is shuffled and rows of different
// batches are never mixed. The kernel's behaviour is kept as is, departures included
// (I4: set semantics for any / all / diff on repeated fields; I5: a feature missing
// from the batch or the row is empty, so the row is kept iff KeepEmpty).
//
// special_strategy lives here, not in transforms/label: it is a filter that also writes
// its rules' labels into label[0] of the rows it keeps, and it runs as one step (the
// kernel's Apply), as the reference op does.
//
// Operand files (ValueOptions.OperandFile, FeatureValueOptions.OperandFile) are read
// once, at pipeline construction, and their values are shipped inline with the DoFn, so
// workers need not see the file.
//
// # Determinism
//
// filter_by_label, filter_by_fids, filter_by_value and filter_by_feature_value are pure
// functions of the batch. negative_sample and special_strategy are random (decision
// I7). A kernel op keeps one generator that advances from call to call, so reusing one op
// for a stream of batches would make the result depend on batch order and bundle
// boundaries, which differ between runners and runs. Instead, this package builds the
// kernel op anew for every batch with the seed
//
//	BatchSeed(Seed, op, batch)
//
// a hash, seeded with the user's Seed (0 means kfilter.DefaultSeed), of the op name, the
// row count and each row's serialized LineId and labels (see BatchSeed). So:
//
//   - the rows kept from a batch depend only on the Config and the batch's content:
//     not on the order of batches, their grouping into bundles, parallelism, retries
//     or the runner;
//   - batches with equal row counts, LineIds and labels get equal draws (a duplicated
//     batch is sampled identically; so are batches that carry neither LineIds nor
//     distinct labels);
//   - re-batching the rows (other batch boundaries) gives other draws, with the same
//     probabilities;
//   - the draws differ from a kernel op run sequentially over the same batches.
//
// When Seed is 0 the default seed is used and logged (log/slog, once per DoFn Setup or
// Runner.Init).
//
// # Configuration
//
// Beam serializes a DoFn's exported fields as JSON, so a Config must survive a JSON round
// trip: numbers finite, strings (such as bytes operands) valid UTF-8. Resolve checks it,
// with the kernel's validation; Filter and the shorthands panic at pipeline construction
// when it fails, naming the op and the bad value.
package filter

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	kfilter "github.com/monolith-go/monolith/kernels/filter"
	_ "github.com/monolith-go/monolith/transforms/element" // arrow.RecordBatch coder
	"github.com/monolith-go/monolith/transforms/internal/batchop"
)

func init() {
	register.DoFn3x1[context.Context, arrow.RecordBatch, func(arrow.RecordBatch), error](&filterFn{})
	register.Emitter1[arrow.RecordBatch]()
}

// Monolith's op names, as Config.Op returns them.
const (
	OpFilterByLabel        = "filter_by_label"
	OpFilterByFids         = "filter_by_fids"
	OpFilterByValue        = "filter_by_value"
	OpFilterByFeatureValue = "filter_by_feature_value"
	OpNegativeSample       = "negative_sample"
	OpSpecialStrategy      = "special_strategy"
)

// Config selects one sample filter: exactly one field is set, holding the kernel's
// options. It holds plain values only, so Beam can serialize it (as JSON) with a DoFn.
type Config struct {
	ByLabel         *kfilter.LabelFilterOptions    `json:",omitempty"` // filter_by_label
	ByFids          *kfilter.FidsOptions           `json:",omitempty"` // filter_by_fids
	ByValue         *kfilter.ValueOptions          `json:",omitempty"` // filter_by_value
	ByFeatureValue  *kfilter.FeatureValueOptions   `json:",omitempty"` // filter_by_feature_value
	NegativeSample  *kfilter.NegativeSampleOptions `json:",omitempty"` // negative_sample
	SpecialStrategy *kfilter.StrategyOptions       `json:",omitempty"` // special_strategy
}

// Op returns the Monolith name of the op c selects, or an error unless exactly one op is
// set.
func (c Config) Op() (string, error) {
	var ops batchop.Ops
	ops.Add(c.ByLabel != nil, OpFilterByLabel)
	ops.Add(c.ByFids != nil, OpFilterByFids)
	ops.Add(c.ByValue != nil, OpFilterByValue)
	ops.Add(c.ByFeatureValue != nil, OpFilterByFeatureValue)
	ops.Add(c.NegativeSample != nil, OpNegativeSample)
	ops.Add(c.SpecialStrategy != nil, OpSpecialStrategy)
	return ops.One()
}

// random reports whether the op draws random numbers, and its user seed.
func (c Config) random() (bool, uint64) {
	switch {
	case c.NegativeSample != nil:
		return true, c.NegativeSample.Seed
	case c.SpecialStrategy != nil:
		return true, c.SpecialStrategy.Seed
	}
	return false, 0
}

// spec tells the shared code (transforms/internal/batchop) about Config.
var spec = batchop.Spec[Config]{
	Pkg:    "filter",
	Func:   "Filter",
	Op:     Config.Op,
	Random: Config.random,
	Build:  Config.build,
	Ship:   Config.ship,
}

// Resolve validates c and returns it ready to ship to workers: operand files read into
// the operands. Errors wrap kfilter.ErrConfig and name the op and the bad value. c is
// not modified.
func (c Config) Resolve() (Config, error) { return spec.Resolve(c) }

// ship returns c with its operand file, if any, read into its operands.
func (c Config) ship(op string) (Config, error) {
	var err error
	if c.ByValue != nil && c.ByValue.OperandFile != "" {
		o := *c.ByValue
		if o.Operands, err = kfilter.LoadFilterValues(o.OperandFile); err != nil {
			return c, fmt.Errorf("%s: %w", op, err)
		}
		o.OperandFile, c.ByValue = "", &o
	}
	if c.ByFeatureValue != nil && c.ByFeatureValue.OperandFile != "" {
		o := *c.ByFeatureValue
		if o.Operands, err = kfilter.LoadFilterValues(o.OperandFile); err != nil {
			return c, fmt.Errorf("%s: %w", op, err)
		}
		o.OperandFile, c.ByFeatureValue = "", &o
	}
	return c, nil
}

// build returns the kernel filter c selects (a kfilter.Filter), a random one seeded with
// seed.
func (c Config) build(seed uint64) (any, error) {
	switch {
	case c.ByLabel != nil:
		return kfilter.NewFilterByLabel(*c.ByLabel)
	case c.ByFids != nil:
		return kfilter.NewFilterByFids(*c.ByFids)
	case c.ByValue != nil:
		return kfilter.NewFilterByValue(*c.ByValue)
	case c.ByFeatureValue != nil:
		return kfilter.NewFilterByFeatureValue(*c.ByFeatureValue)
	case c.NegativeSample != nil:
		o := *c.NegativeSample
		o.Seed = seed
		return kfilter.NewNegativeSample(o)
	case c.SpecialStrategy != nil:
		o := *c.SpecialStrategy
		o.Seed = seed
		return kfilter.NewSpecialStrategy(o)
	}
	return nil, batchop.ErrNoOp
}

// Filter applies the sample filter cfg selects to every batch of col (arrow.RecordBatch)
// and returns the non-empty results. Panics at pipeline construction if cfg is invalid.
func Filter(s beam.Scope, col beam.PCollection, cfg Config) beam.PCollection {
	s, cfg = spec.Prepare(s, cfg)
	return beam.ParDo(s, &filterFn{Config: cfg}, col)
}

// ByLabel applies filter_by_label.
func ByLabel(s beam.Scope, col beam.PCollection, o kfilter.LabelFilterOptions) beam.PCollection {
	return Filter(s, col, Config{ByLabel: &o})
}

// ByFids applies filter_by_fids.
func ByFids(s beam.Scope, col beam.PCollection, o kfilter.FidsOptions) beam.PCollection {
	return Filter(s, col, Config{ByFids: &o})
}

// ByValue applies filter_by_value.
func ByValue(s beam.Scope, col beam.PCollection, o kfilter.ValueOptions) beam.PCollection {
	return Filter(s, col, Config{ByValue: &o})
}

// ByFeatureValue applies filter_by_feature_value.
func ByFeatureValue(s beam.Scope, col beam.PCollection, o kfilter.FeatureValueOptions) beam.PCollection {
	return Filter(s, col, Config{ByFeatureValue: &o})
}

// NegativeSample applies negative_sample (random: see the package doc).
func NegativeSample(s beam.Scope, col beam.PCollection, o kfilter.NegativeSampleOptions) beam.PCollection {
	return Filter(s, col, Config{NegativeSample: &o})
}

// SpecialStrategy applies special_strategy, labels included (random: see the package
// doc).
func SpecialStrategy(s beam.Scope, col beam.PCollection, o kfilter.StrategyOptions) beam.PCollection {
	return Filter(s, col, Config{SpecialStrategy: &o})
}

type filterFn struct {
	Config Config

	r Runner
}

func (f *filterFn) Setup() error { return f.r.Init(f.Config) }

func (f *filterFn) ProcessElement(_ context.Context, rec arrow.RecordBatch, emit func(arrow.RecordBatch)) error {
	return spec.Process(&f.r.r, rec, emit)
}

// Runner filters batches one after another: the body of the Filter DoFn, exported so
// that plain-Go callers run exactly the same code. Not safe for concurrent use.
type Runner struct{ r batchop.Runner[Config] }

// Init validates cfg (as Config.Resolve does) and prepares the runner. When a random op
// has no seed it logs the default seed it uses.
func (r *Runner) Init(cfg Config) error { return spec.Init(&r.r, cfg) }

// Op returns the Monolith name of the runner's op.
func (r *Runner) Op() string { return r.r.Op() }

// Filter returns the rows of rec the op keeps, or nil when it keeps none. The result is
// rec itself, retained, when every row is kept and special_strategy writes no label;
// otherwise a new batch built with Go-managed memory. A caller that does not hand the
// result to Beam releases it. rec is neither modified nor released.
func (r *Runner) Filter(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	return spec.Apply(&r.r, rec)
}

// BatchSeed returns the seed a random op named op (Monolith's name, such as
// "negative_sample") uses for rec when the user's seed is seed (0 means
// kfilter.DefaultSeed). It is a 64-bit hash, seeded with the user's seed, of the op name,
// the row count and, row by row, the serialized LineId and the labels: the values the
// random ops read. It depends on the content of rec only, never on its buffers' layout,
// so a batch gives the same seed before and after a coder round trip, on any runner.
// It does not allocate.
func BatchSeed(seed uint64, op string, rec arrow.RecordBatch) uint64 {
	return batchop.BatchSeed(seed, op, rec)
}
