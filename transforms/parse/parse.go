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
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/internal/ordered"
	kparse "github.com/monolith-go/monolith/kernels/parse"
	_ "github.com/monolith-go/monolith/transforms/element" // the arrow.RecordBatch coder
)

func init() {
	register.DoFn2x1[arrow.RecordBatch, func(arrow.RecordBatch), error](&parseFn{})
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

// Parse parses every batch of col (arrow.RecordBatch) and returns the parsed batches, in
// input order; a bundle parses on Parallelism goroutines (default GOMAXPROCS). Panics at
// pipeline construction if cfg is invalid.
func Parse(s beam.Scope, col beam.PCollection, cfg Config, opts ...Option) beam.PCollection {
	s = s.Scope("parse.Parse")
	if _, err := cfg.Spec(); err != nil {
		panic(err)
	}
	fn := &parseFn{Config: cfg}
	for _, o := range opts {
		o(fn)
	}
	return beam.ParDo(s, fn, col)
}

// Option configures Parse.
type Option func(*parseFn)

// Parallelism sets the goroutines a bundle parses on (≤ 0: GOMAXPROCS); results keep the
// input order.
func Parallelism(n int) Option { return func(f *parseFn) { f.Parallelism = n } }

type parseFn struct {
	Config      Config
	Parallelism int

	p    Parser
	pool *ordered.Pool[*Parser, arrow.RecordBatch, arrow.RecordBatch]
}

func (f *parseFn) Setup() error { return f.p.Init(f.Config) }

func (f *parseFn) StartBundle(ctx context.Context, _ func(arrow.RecordBatch)) error {
	n := f.Parallelism
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	var err error
	// The Parser is safe for concurrent use: every worker shares it.
	f.pool, err = ordered.New(ctx, n, 0, func() (*Parser, error) { return &f.p, nil },
		func(_ context.Context, p *Parser, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
			return p.Parse(rec)
		})
	return err
}

func (f *parseFn) ProcessElement(rec arrow.RecordBatch, emit func(arrow.RecordBatch)) error {
	return f.pool.Submit(rec, emit)
}

func (f *parseFn) FinishBundle(emit func(arrow.RecordBatch)) error { return f.pool.Flush(emit) }

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
