// Package parse is the Beam transform of Monolith's parsers: every schemas/batch batch
// becomes the batch of tensors parse_example_batch, parse_examples or parse_instances
// would produce (kernels/parse), ready for Shard's non-fused path or an export sink.
//
// # Behavior
//
// Each batch is parsed on its own with one validated request (Config, a kernels/parse
// Spec in serializable form); the parser is chosen by the batch's source. Rows are never
// dropped or reordered, nothing is shuffled, and a batch the reference parser rejects
// fails the bundle with an error naming the feature and the row.
package parse

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	kparse "github.com/monolith-go/monolith/kernels/parse"
	_ "github.com/monolith-go/monolith/transforms/element" // the arrow.RecordBatch coder
)

func init() {
	register.DoFn3x1[context.Context, arrow.RecordBatch, func(arrow.RecordBatch), error](&parseFn{})
	register.Emitter1[arrow.RecordBatch]()
}

// Config is a parse request: the features to read, as kernels/parse.NewSpec takes them.
// It is plain data, so that it travels with the pipeline to every worker.
type Config struct {
	Sparse []kparse.SparseFeature
	Dense  []kparse.DenseFeature
	Extra  []kparse.ExtraFeature
}

// SparseOnly is the request of sparse features only, one per name.
func SparseOnly(names ...string) Config {
	c := Config{Sparse: make([]kparse.SparseFeature, len(names))}
	for i, n := range names {
		c.Sparse[i] = kparse.SparseFeature{Name: n}
	}
	return c
}

// Spec validates the request.
func (c Config) Spec() (*kparse.Spec, error) {
	s, err := kparse.NewSpec(c.Sparse, c.Dense, c.Extra)
	if err != nil {
		return nil, fmt.Errorf("parse.Parse: %w", err)
	}
	return s, nil
}

// Parse parses every batch of col (arrow.RecordBatch) and returns the parsed batches.
// Panics at pipeline construction if cfg is invalid.
func Parse(s beam.Scope, col beam.PCollection, cfg Config) beam.PCollection {
	s = s.Scope("parse.Parse")
	if _, err := cfg.Spec(); err != nil {
		panic(err)
	}
	return beam.ParDo(s, &parseFn{Config: cfg}, col)
}

type parseFn struct {
	Config Config

	p Parser
}

func (f *parseFn) Setup() error { return f.p.Init(f.Config) }

func (f *parseFn) ProcessElement(_ context.Context, rec arrow.RecordBatch, emit func(arrow.RecordBatch)) error {
	out, err := f.p.Parse(rec)
	if err != nil {
		return err
	}
	emit(out)
	return nil
}

// Parser parses batches one after another: the body of the Parse DoFn, exported so that
// plain-Go callers (the pipeline benchmark's loop) run exactly the same code. It is safe
// for concurrent use once initialised.
type Parser struct {
	spec *kparse.Spec
	mem  memory.Allocator
}

// Init validates the request.
func (p *Parser) Init(c Config) error {
	s, err := c.Spec()
	if err != nil {
		return err
	}
	p.spec, p.mem = s, memory.NewGoAllocator()
	return nil
}

// Parse parses rec; the caller owns the result.
func (p *Parser) Parse(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if p.spec == nil {
		return nil, fmt.Errorf("parse.Parse: parser not initialised")
	}
	out, err := kparse.Parse(p.mem, rec, p.spec)
	if err != nil {
		return nil, fmt.Errorf("parse.Parse: batch of %d rows: %w", rec.NumRows(), err)
	}
	return out, nil
}
