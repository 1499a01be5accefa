// Package shard is the Beam transform of sharding_sparse_fids: every batch becomes an
// element.Sharded holding the batch and its sharding outputs (kernels/shard), ready for
// the layout transforms and the parameter servers.
//
// # Behavior
//
// Each batch is sharded on its own with the configured version, PS count and dedup mode;
// the input may be a schemas/batch batch (Monolith's fused path, SHARED features stay one
// entry) or a kernels/parse output (the non-fused path). Nothing is shuffled.
//
// # Determinism
//
// The kernel is deterministic: the same batch and configuration give the same outputs on
// any runner and with any parallelism.
package shard

import (
	"context"
	"fmt"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/internal/ordered"
	"github.com/monolith-go/monolith/kernels/featcfg"
	kshard "github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/element"
)

func init() {
	register.DoFn2x1[arrow.RecordBatch, func(*element.Sharded), error](&shardFn{})
	register.Emitter1[*element.Sharded]()
}

// Option configures Shard.
type Option func(*shardFn)

// Parallelism sets the goroutines a bundle shards on (≤ 0: GOMAXPROCS).
func Parallelism(n int) Option { return func(f *shardFn) { f.Parallelism = n } }

// Shard shards every batch of col (arrow.RecordBatch) and returns a PCollection of
// *element.Sharded, in input order. A bundle shards on Parallelism goroutines (default
// GOMAXPROCS), each with its own sharder. Panics at pipeline construction if k is invalid.
func Shard(s beam.Scope, col beam.PCollection, k config.Kernels, opts ...Option) beam.PCollection {
	s = s.Scope("shard.Shard")
	if _, err := k.Build(); err != nil {
		panic(fmt.Errorf("shard.Shard: %w", err))
	}
	fn := &shardFn{Kernels: k}
	for _, o := range opts {
		o(fn)
	}
	return beam.ParDo(s, fn, col)
}

type shardFn struct {
	Kernels     config.Kernels
	Parallelism int

	batchers []*Batcher
	pool     *ordered.Pool[*Batcher, arrow.RecordBatch, *element.Sharded]
}

func (f *shardFn) Setup() error {
	n := f.Parallelism
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	f.batchers = make([]*Batcher, n)
	for i := range f.batchers {
		f.batchers[i] = &Batcher{}
		if err := f.batchers[i].Init(f.Kernels); err != nil {
			return err
		}
	}
	return nil
}

func (f *shardFn) StartBundle(ctx context.Context, _ func(*element.Sharded)) error {
	i := 0
	var err error
	f.pool, err = ordered.New(ctx, len(f.batchers), 0, func() (*Batcher, error) { b := f.batchers[i]; i++; return b, nil },
		func(_ context.Context, b *Batcher, rec arrow.RecordBatch) (*element.Sharded, error) {
			r, err := b.Shard(rec)
			if err != nil {
				return nil, err
			}
			return &element.Sharded{Batch: rec, Shard: r.Clone()}, nil
		})
	return err
}

func (f *shardFn) ProcessElement(rec arrow.RecordBatch, emit func(*element.Sharded)) error {
	return f.pool.Submit(rec, emit)
}

func (f *shardFn) FinishBundle(emit func(*element.Sharded)) error { return f.pool.Flush(emit) }

// Batcher shards batches one after another with reused buffers: the body of the Shard
// DoFn, exported so that plain-Go callers (the pipeline benchmark's loop, the validation
// checks) run exactly the same code. Not safe for concurrent use.
type Batcher struct {
	Config  *featcfg.Config
	sharder *kshard.Sharder
	in      kshard.Input
}

// Init builds the configuration and the sharder.
func (b *Batcher) Init(k config.Kernels) error {
	cfg, err := k.Build()
	if err != nil {
		return fmt.Errorf("shard.Shard: %w", err)
	}
	s, err := kshard.New(cfg, kshard.Options{PS: k.PS, Version: k.Version, Unique: k.Unique, Parallel: k.Parallel})
	if err != nil {
		return fmt.Errorf("shard.Shard: %w", err)
	}
	b.Config, b.sharder = cfg, s
	return nil
}

// Shard shards rec. The result is valid until the next call.
func (b *Batcher) Shard(rec arrow.RecordBatch) (*kshard.Result, error) {
	if err := b.in.FromBatch(rec, b.Config); err != nil {
		return nil, fmt.Errorf("shard.Shard: batch of %d rows: %w", rec.NumRows(), err)
	}
	r, err := b.sharder.Shard(&b.in)
	if err != nil {
		return nil, fmt.Errorf("shard.Shard: batch of %d rows: %w", rec.NumRows(), err)
	}
	return r, nil
}
