// Package batchop is the code transforms/filter and transforms/label share: checking a
// Config (one op, kernel validation, Beam's JSON round trip) and running its kernel op
// batch by batch, random ops seeded per batch with BatchSeed.
package batchop

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	kfilter "github.com/monolith-go/monolith/kernels/filter"
)

// ErrNoOp is the error of a Config that sets no op; it wraps kfilter.ErrConfig.
var ErrNoOp = fmt.Errorf("%w: no op set", kfilter.ErrConfig)

// Ops collects the ops a Config sets, for its Op method.
type Ops []string

// Add adds name when set.
func (o *Ops) Add(set bool, name string) {
	if set {
		*o = append(*o, name)
	}
}

// One returns the single op added, or an error wrapping kfilter.ErrConfig unless exactly
// one was.
func (o Ops) One() (string, error) {
	switch len(o) {
	case 0:
		return "", ErrNoOp
	case 1:
		return o[0], nil
	}
	return "", fmt.Errorf("%w: %d ops set (%v); a Config holds exactly one", kfilter.ErrConfig, len(o), []string(o))
}

// Spec describes a package's Config type C to the shared code.
type Spec[C any] struct {
	Pkg  string // the package: scopes are Pkg+"."+op, logs start "transforms/"+Pkg
	Func string // its transform: errors start Pkg+"."+Func

	Op     func(C) (string, error)            // the name of the one op set (Config.Op)
	Random func(C) (random bool, seed uint64) // whether the op is random, and its user seed
	// Build returns the kernel op c selects, with its seed replaced by seed when it is
	// random: a kfilter.Op, whose Apply gives the result, or else a kfilter.Filter,
	// whose kept rows do.
	Build func(c C, seed uint64) (any, error)
	// Ship, when set, returns c (validated) ready to ship to workers, such as with
	// operand files read in; op is c's op.
	Ship func(c C, op string) (C, error)
}

func (sp *Spec[C]) name() string { return sp.Pkg + "." + sp.Func }

// validate builds c's kernel op with its user seed.
func (sp *Spec[C]) validate(c C) error {
	_, seed := sp.Random(c)
	_, err := sp.Build(c, seed)
	return err
}

// Resolve validates c and returns it ready to ship to workers (Config.Resolve).
func (sp *Spec[C]) Resolve(c C) (C, error) {
	op, err := sp.Op(c)
	if err != nil {
		return c, err
	}
	if err := sp.validate(c); err != nil {
		return c, err
	}
	if sp.Ship != nil {
		if c, err = sp.Ship(c, op); err != nil {
			return c, err
		}
		if err := sp.validate(c); err != nil {
			return c, err
		}
	}
	if err := jsonRoundTrip(c); err != nil {
		return c, fmt.Errorf("%w: %s: %v", kfilter.ErrConfig, op, err)
	}
	return c, nil
}

// jsonRoundTrip checks that v survives the JSON encoding Beam gives DoFn fields.
func jsonRoundTrip[T any](v T) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("the options cannot be encoded as JSON for Beam (non-finite number?): %v", err)
	}
	var back T
	if err := json.Unmarshal(b, &back); err != nil {
		return fmt.Errorf("the options do not decode from their JSON: %v", err)
	}
	if !reflect.DeepEqual(v, back) {
		return fmt.Errorf("the options change in Beam's JSON encoding (a string that is not valid UTF-8?): %s", b)
	}
	return nil
}

// Prepare returns the scope of c's op under s and c resolved, for the DoFn that applies
// it. It panics, naming the transform, when c is invalid.
func (sp *Spec[C]) Prepare(s beam.Scope, c C) (beam.Scope, C) {
	op, err := sp.Op(c)
	if err != nil {
		panic(fmt.Errorf("%s: %w", sp.name(), err))
	}
	s = s.Scope(sp.Pkg + "." + op)
	c, err = sp.Resolve(c)
	if err != nil {
		panic(fmt.Errorf("%s: %w", sp.name(), err))
	}
	return s, c
}

// Runner is the state of a package's Runner (and of its DoFn), which its Spec runs. The
// zero Runner is not initialized. Not safe for concurrent use.
type Runner[C any] struct {
	cfg    C
	op     string
	seed   uint64 // user seed of a random op (0: default)
	random bool   // build the kernel op per batch
	k      any    // the kernel op of a non-random Config
	mem    memory.Allocator
	keep   []int
}

// Op returns the Monolith name of the runner's op.
func (r *Runner[C]) Op() string { return r.op }

// Init validates c (as Resolve does) and prepares r. When a random op has no seed it
// logs the default seed it uses.
func (sp *Spec[C]) Init(r *Runner[C], c C) error {
	c, err := sp.Resolve(c)
	if err != nil {
		return fmt.Errorf("%s: %w", sp.name(), err)
	}
	*r = Runner[C]{cfg: c, mem: memory.NewGoAllocator()}
	r.op, _ = sp.Op(c)
	r.random, r.seed = sp.Random(c)
	if r.random {
		if r.seed == 0 {
			slog.Info("transforms/"+sp.Pkg+": no seed given; using the default seed",
				"op", r.op, "seed", fmt.Sprintf("%#x", kfilter.DefaultSeed))
		}
		return nil
	}
	if r.k, err = sp.Build(c, r.seed); err != nil {
		return fmt.Errorf("%s: %w", sp.name(), err)
	}
	return nil
}

// Apply returns rec transformed by r's op, or nil when the result has no rows; a random
// op is built for rec with the seed BatchSeed(user seed, op, rec). The result is rec
// itself, retained, when the op changes nothing; otherwise a new batch built with
// Go-managed memory. A caller that does not hand the result to Beam releases it. rec is
// neither modified nor released.
func (sp *Spec[C]) Apply(r *Runner[C], rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if r.mem == nil {
		return nil, fmt.Errorf("%s: Runner used before Init", sp.name())
	}
	k := r.k
	if r.random {
		var err error
		if k, err = sp.Build(r.cfg, BatchSeed(r.seed, r.op, rec)); err != nil {
			return nil, sp.wrap(r, rec, err)
		}
	}
	out, err := r.apply(k, rec)
	if err != nil {
		return nil, sp.wrap(r, rec, err)
	}
	if out == nil {
		return nil, nil
	}
	if out.NumRows() == 0 {
		out.Release()
		return nil, nil
	}
	return out, nil
}

// apply runs the kernel op k on rec: Apply for a kfilter.Op, else the rows a
// kfilter.Filter keeps (nil when none).
func (r *Runner[C]) apply(k any, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	switch k := k.(type) {
	case kfilter.Op:
		return k.Apply(r.mem, rec)
	case kfilter.Filter:
		keep, err := k.Keep(rec, r.keep[:0])
		r.keep = keep
		if err != nil {
			return nil, err
		}
		if len(keep) == 0 {
			return nil, nil
		}
		return kfilter.Apply(r.mem, rec, keep)
	}
	return nil, fmt.Errorf("%T is neither a kfilter.Op nor a kfilter.Filter", k)
}

func (sp *Spec[C]) wrap(r *Runner[C], rec arrow.RecordBatch, err error) error {
	return fmt.Errorf("%s: %s: batch of %d rows: %w", sp.name(), r.op, rec.NumRows(), err)
}

// Process is the DoFn's ProcessElement: it applies r's op to rec and emits the result
// unless it is nil.
func (sp *Spec[C]) Process(r *Runner[C], rec arrow.RecordBatch, emit func(arrow.RecordBatch)) error {
	out, err := sp.Apply(r, rec)
	if err != nil {
		return err
	}
	if out != nil {
		emit(out)
	}
	return nil
}
