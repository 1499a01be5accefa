// Package readlayout is the data path without training as one Beam job: files are read,
// parsed, sharded and laid out (synthetic embeddings), and every bundle reports its rows,
// batches and a checksum of the layout outputs. monolith bench runs it against a plain loop.
package readlayout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/internal/ordered"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/layout"
	"github.com/monolith-go/monolith/transforms/parse"
	"github.com/monolith-go/monolith/transforms/shard"
)

func init() {
	register.DoFn2x1[*element.Sharded, func(Totals), error](&countFn{})
	register.Emitter1[Totals]()
	register.Function2x0(addCounters)
}

// CounterNS is the namespace of the job's Beam counters: rows, batches, checksum, bundles.
const CounterNS = "monolith.readlayout"

// Config is what the job reads and how it lays it out.
type Config struct {
	Files   []string       // ExampleBatch / Example / Instance files (no commas in names)
	Kernels config.Kernels // sharding and layout configuration
	Parse   parse.Config   // the parse request
}

// Totals are the rows, batches and checksum of some batches, and the bundles that
// reported them.
type Totals struct {
	Rows, Batches, Checksum, Bundles int64
}

// TensorHash is the checksum of one batch's layout outputs: FNV-1a over the bits of every
// float of every tensor, in column order, folded to 32 bits so that a sum over up to 2^31
// batches cannot overflow an int64 counter (the sum does not depend on batch order).
func TensorHash(rec arrow.RecordBatch) (int64, error) {
	ts, err := element.Tensors(rec)
	if err != nil {
		return 0, fmt.Errorf("readlayout: layout output: %w", err)
	}
	h := uint64(14695981039346656037)
	for _, t := range ts {
		for _, v := range t.Data {
			h ^= uint64(math.Float32bits(v))
			h *= 1099511628211
		}
	}
	return int64(uint32(h ^ h>>32)), nil
}

// Build adds read → parse → shard → layout → count over c.Files to s. Each bundle of the
// fused stage emits its Totals when it finishes (a stage without an output is busy-waited
// on by prism), and they reach the counters through a reshuffle: only those small
// records are shuffled, never batches.
func Build(s beam.Scope, c Config) {
	recs := beamio.Read(s, strings.Join(c.Files, ","))
	parsed := parse.Parse(s, recs, c.Parse)
	sharded := shard.Shard(s, parsed, c.Kernels)
	out := layout.Layout(s, sharded, c.Kernels, layout.Synthetic{})
	cs := s.Scope("count")
	totals := beam.ParDo(cs, &countFn{}, out)
	beam.ParDo0(cs, addCounters, beam.Reshuffle(cs, totals))
}

// Run builds the job and runs it with o, and returns its Totals from the runner's metrics.
func Run(ctx context.Context, c Config, o runners.Options) (Totals, error) {
	if len(c.Files) == 0 {
		return Totals{}, errors.New("readlayout: no input files")
	}
	for _, f := range c.Files {
		if strings.Contains(f, ",") {
			return Totals{}, fmt.Errorf("readlayout: file name %q contains a comma", f)
		}
	}
	if !beam.Initialized() {
		runners.Init(false)
	}
	p, s := beam.NewPipelineWithRoot()
	Build(s, c)
	if o.JobName == "" {
		o.JobName = "readlayout"
	}
	res, err := runners.Run(ctx, p, o)
	if err != nil {
		return Totals{}, fmt.Errorf("readlayout: %w", err)
	}
	var t Totals
	got := false
	for _, m := range res.Metrics().AllMetrics().Counters() {
		if m.Namespace() != CounterNS {
			continue
		}
		switch m.Name() {
		case "rows":
			t.Rows += m.Result()
			got = true
		case "batches":
			t.Batches += m.Result()
		case "checksum":
			t.Checksum += m.Result()
		case "bundles":
			t.Bundles += m.Result()
		}
	}
	if !got {
		return Totals{}, errors.New("readlayout: the runner reported no row counter")
	}
	return t, nil
}

// addCounters adds the Totals of one bundle to the job's counters.
func addCounters(ctx context.Context, t Totals) {
	beam.NewCounter(CounterNS, "rows").Inc(ctx, t.Rows)
	beam.NewCounter(CounterNS, "batches").Inc(ctx, t.Batches)
	beam.NewCounter(CounterNS, "checksum").Inc(ctx, t.Checksum)
	beam.NewCounter(CounterNS, "bundles").Inc(ctx, t.Bundles)
}

// countFn ends the chain: it adds up the rows, batches and checksums of a bundle's
// elements and emits them when the bundle finishes. The checksums are computed on an
// ordered pool, as every step with real work is, so that the bundle's goroutine, which
// emits for every step of the fused stage, only adds them up.
type countFn struct {
	t    Totals
	pool *ordered.Pool[struct{}, *element.Sharded, Totals]
}

func (f *countFn) StartBundle(ctx context.Context, _ func(Totals)) error {
	f.t = Totals{Bundles: 1}
	var err error
	f.pool, err = ordered.New(ctx, runtime.GOMAXPROCS(0), 0, func() (struct{}, error) { return struct{}{}, nil }, countOne)
	return err
}

// countOne is the Totals of one element.
func countOne(_ context.Context, _ struct{}, in *element.Sharded) (Totals, error) {
	if in.Tensors == nil {
		return Totals{}, fmt.Errorf("readlayout: element of %d rows has no layout tensors", in.Rows())
	}
	h, err := TensorHash(in.Tensors)
	if err != nil {
		return Totals{}, err
	}
	return Totals{Rows: int64(in.Rows()), Batches: 1, Checksum: h}, nil
}

// add adds the Totals of one element to the bundle's.
func (f *countFn) add(t Totals) {
	f.t.Rows += t.Rows
	f.t.Batches += t.Batches
	f.t.Checksum += t.Checksum
}

func (f *countFn) ProcessElement(in *element.Sharded, _ func(Totals)) error {
	return f.pool.Submit(in, f.add)
}

func (f *countFn) FinishBundle(emit func(Totals)) error {
	if err := f.pool.Flush(f.add); err != nil {
		return err
	}
	if f.t.Batches > 0 {
		emit(f.t)
	}
	return nil
}

// Chain is the job's per-batch work in plain Go: the kernel wrappers its DoFns run, for a
// loop that measures the same code without Beam. The zero value is not usable: call Init.
// A Chain is not safe for concurrent use: give every goroutine its own.
type Chain struct {
	parser parse.Parser
	shard  shard.Batcher
	layout layout.Forward
}

// Init prepares the chain for c's kernels and parse request.
func (ch *Chain) Init(c Config) error {
	if err := ch.parser.Init(c.Parse); err != nil {
		return fmt.Errorf("readlayout: %w", err)
	}
	if err := ch.shard.Init(c.Kernels); err != nil {
		return fmt.Errorf("readlayout: %w", err)
	}
	if err := ch.layout.Init(c.Kernels, layout.Synthetic{}); err != nil {
		return fmt.Errorf("readlayout: %w", err)
	}
	return nil
}

// Batch runs parse → shard → layout on one batch and returns its TensorHash.
func (ch *Chain) Batch(ctx context.Context, rec arrow.RecordBatch) (int64, error) {
	parsed, err := ch.parser.Parse(rec)
	if err != nil {
		return 0, err
	}
	r, err := ch.shard.Shard(parsed)
	if err != nil {
		return 0, err
	}
	t, err := ch.layout.Run(ctx, &element.Sharded{Shard: r})
	if err != nil {
		return 0, err
	}
	return TensorHash(t)
}
