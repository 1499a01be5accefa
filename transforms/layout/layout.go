// Package layout holds the Beam transforms of fused_embedding_to_layout and its gradient:
// Layout turns sharded batches and embeddings into the layout tensors, LayoutGrad turns
// gradients of those tensors into per-(table, PS shard) embedding gradients.
//
// # Behavior
//
// Layout reads the embeddings of each sharded batch from a pluggable Source (Synthetic
// gives the kernels' synthetic formula; FromTrain the rows a training pipeline's Lookup
// put in the element), runs the layout kernel and stores the outputs as a tensor record
// (element.NewTensors) in the element's Tensors: one column per output tensor in output
// order, named after its layout ("name/i" for the i-th tensor of a NONE layout), shaped
// [B, ...] as the FeatureConfigs declare. The batch, the sharding result and the training
// state stay in the element.
//
// LayoutGrad reads gradients of those tensors (the same columns) from each element's
// Tensors and emits one element.TableGrads per (table, PS shard) list with one gradient
// row per fid of the list, in list order, each row as wide as its feature's embedding;
// with Attach it instead stores them in the element's training state and emits the
// element, so that a training step keeps its batch together.
//
// # Parallelism
//
// Both run their kernel on Options.Parallelism goroutines per bundle (default
// GOMAXPROCS), each with its own layouter, and emit in input order (internal/ordered): a
// runner that gives a fused stage one bundle, as prism does, still uses every core.
//
// # Sources
//
// A Source is carried inside the pipeline: its concrete type must be registered with
// beam.RegisterType (in an init function) and must survive encoding/json, which rebuilds
// it on every worker.
//
// # Determinism
//
// The kernels are deterministic (bitwise, whatever the parallelism); so is Synthetic.
package layout

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamruntime "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/internal/ordered"
	"github.com/monolith-go/monolith/kernels/featcfg"
	klayout "github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/element"
)

func init() {
	register.DoFn2x1[*element.Sharded, func(*element.Sharded), error](&layoutFn{})
	register.DoFn2x1[*element.Sharded, func(element.TableGrads), error](&gradFn{})
	register.DoFn2x1[*element.Sharded, func(*element.Sharded), error](&gradAttachFn{})
	register.Emitter1[*element.Sharded]()
	register.Emitter1[element.TableGrads]()
	beam.RegisterType(reflect.TypeOf((*Synthetic)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Zeros)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*FromTrain)(nil)).Elem())
}

// Source supplies the embeddings of the fids of one sharded batch (in.Shard), in the
// storage of the configured version (see kernels/layout.Embedding). Implementations must
// be safe for concurrent use: the Layout DoFn calls one Source from several goroutines.
type Source interface {
	Embeddings(ctx context.Context, cfg *featcfg.Config, version int, in *element.Sharded) (klayout.Embedding, error)
}

// Synthetic is the kernels' synthetic embedding: element k of fid f is
// kernels/layout.SyntheticValue(f, k).
type Synthetic struct{}

// Embeddings implements Source.
func (Synthetic) Embeddings(_ context.Context, cfg *featcfg.Config, version int, in *element.Sharded) (klayout.Embedding, error) {
	return klayout.Arrange(version, cfg, in.Shard, klayout.ListBuffers(cfg, in.Shard, klayout.SyntheticValue))
}

// Zeros gives all-zero embeddings (a table that was never trained).
type Zeros struct{}

// Embeddings implements Source.
func (Zeros) Embeddings(_ context.Context, cfg *featcfg.Config, version int, in *element.Sharded) (klayout.Embedding, error) {
	return klayout.Arrange(version, cfg, in.Shard, klayout.ListBuffers(cfg, in.Shard, func(uint64, int) float32 { return 0 }))
}

// FromTrain takes the embeddings a training pipeline's lookup stored in the element
// (element.TrainState.Emb: the rows of every (table, PS shard) list, list k =
// table×P + shard).
type FromTrain struct{}

// Embeddings implements Source.
func (FromTrain) Embeddings(_ context.Context, cfg *featcfg.Config, version int, in *element.Sharded) (klayout.Embedding, error) {
	r := in.Shard
	if in.Train == nil || len(in.Train.Emb) != len(cfg.Tables)*r.PS {
		n := 0
		if in.Train != nil {
			n = len(in.Train.Emb)
		}
		return klayout.Embedding{}, fmt.Errorf("the element holds %d looked-up lists, want %d (tables × PS shards): run a lookup before the layout", n, len(cfg.Tables)*r.PS)
	}
	return klayout.Arrange(version, cfg, r, in.Train.Emb)
}

// encodeSource captures src for a DoFn.
func encodeSource(src Source) (string, []byte, error) {
	t := reflect.TypeOf(src)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	key, ok := beamruntime.TypeKey(t)
	if !ok {
		return "", nil, fmt.Errorf("source type %v has no name", t)
	}
	if _, ok := beamruntime.LookupType(key); !ok {
		return "", nil, fmt.Errorf("source type %v is not registered: call beam.RegisterType in an init function", t)
	}
	b, err := json.Marshal(src)
	if err != nil {
		return "", nil, fmt.Errorf("source %v: %w", t, err)
	}
	return key, b, nil
}

// decodeSource rebuilds a captured source.
func decodeSource(key string, b []byte) (Source, error) {
	t, ok := beamruntime.LookupType(key)
	if !ok {
		return nil, fmt.Errorf("source type %q is not registered in this binary", key)
	}
	v := reflect.New(t)
	if err := json.Unmarshal(b, v.Interface()); err != nil {
		return nil, fmt.Errorf("source %q: %w", key, err)
	}
	if s, ok := v.Elem().Interface().(Source); ok {
		return s, nil
	}
	if s, ok := v.Interface().(Source); ok {
		return s, nil
	}
	return nil, fmt.Errorf("type %q does not implement layout.Source", key)
}

// Option configures Layout and LayoutGrad.
type Option func(*Options)

// Options are the settings of Layout and LayoutGrad.
type Options struct {
	// Parallelism is the number of goroutines a bundle runs the kernel on (≤ 0: GOMAXPROCS
	// of the worker).
	Parallelism int
	// Attach makes LayoutGrad store the gradients in the element's training state and
	// emit the element instead of one element.TableGrads per list.
	Attach bool
}

// Parallelism sets Options.Parallelism.
func Parallelism(n int) Option { return func(o *Options) { o.Parallelism = n } }

// Attach sets Options.Attach.
func Attach() Option { return func(o *Options) { o.Attach = true } }

func options(opts []Option) Options {
	var o Options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// workers is the pool size of a bundle for a Parallelism setting.
func workers(n int) int {
	if n <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return n
}

// Layout runs the layout on every *element.Sharded of col with embeddings from src and
// returns the elements with their Tensors set. k must be the configuration the batches
// were sharded with. Panics at pipeline construction if k or src is invalid.
func Layout(s beam.Scope, col beam.PCollection, k config.Kernels, src Source, opts ...Option) beam.PCollection {
	s = s.Scope("layout.Layout")
	if _, err := k.Build(); err != nil {
		panic(fmt.Errorf("layout.Layout: %w", err))
	}
	key, b, err := encodeSource(src)
	if err != nil {
		panic(fmt.Errorf("layout.Layout: %w", err))
	}
	return beam.ParDo(s, &layoutFn{Kernels: k, SourceType: key, Source: b, Parallelism: options(opts).Parallelism}, col)
}

type layoutFn struct {
	Kernels     config.Kernels
	SourceType  string
	Source      []byte
	Parallelism int

	states []*Forward
	pool   *ordered.Pool[*Forward, *element.Sharded, *element.Sharded]
}

// Setup builds one layouter per worker of a bundle's pool.
func (f *layoutFn) Setup() error {
	src, err := decodeSource(f.SourceType, f.Source)
	if err != nil {
		return fmt.Errorf("layout.Layout: %w", err)
	}
	f.states = make([]*Forward, workers(f.Parallelism))
	for i := range f.states {
		f.states[i] = &Forward{}
		if err := f.states[i].Init(f.Kernels, src); err != nil {
			return err
		}
	}
	return nil
}

func (f *layoutFn) StartBundle(ctx context.Context, _ func(*element.Sharded)) error {
	var err error
	f.pool, err = ordered.New(ctx, len(f.states), 0, states(f.states), layoutOne)
	return err
}

// layoutOne is the work of one element.
func layoutOne(ctx context.Context, fw *Forward, in *element.Sharded) (*element.Sharded, error) {
	if in.Shard == nil {
		return nil, fmt.Errorf("layout.Layout: element of %d rows has no sharding result", in.Rows())
	}
	t, err := fw.Run(ctx, in)
	if err != nil {
		return nil, err
	}
	return &element.Sharded{Batch: in.Batch, Shard: in.Shard, Tensors: t, Train: in.Train}, nil
}

func (f *layoutFn) ProcessElement(in *element.Sharded, emit func(*element.Sharded)) error {
	return f.pool.Submit(in, emit)
}

func (f *layoutFn) FinishBundle(emit func(*element.Sharded)) error { return f.pool.Flush(emit) }

// states hands pre-built worker states to ordered.New.
func states[S any](all []S) func() (S, error) {
	i := 0
	return func() (S, error) {
		s := all[i]
		i++
		return s, nil
	}
}

// Forward runs the layout of sharded batches: the body of the Layout DoFn, exported so
// that plain-Go callers run the same code. Not safe for concurrent use.
type Forward struct {
	Config  *featcfg.Config
	version int
	lay     *klayout.Layouter
	src     Source
	names   []string
}

// Init builds the configuration and the layouter.
func (f *Forward) Init(k config.Kernels, src Source) error {
	cfg, err := k.Build()
	if err != nil {
		return fmt.Errorf("layout.Layout: %w", err)
	}
	lay, err := klayout.New(cfg, klayout.Options{Version: k.Version, PS: k.PS, Parallel: k.Parallel})
	if err != nil {
		return fmt.Errorf("layout.Layout: %w", err)
	}
	f.Config, f.version, f.lay, f.src, f.names = cfg, k.Version, lay, src, OutputNames(cfg)
	return nil
}

// OutputNames returns the tensor names of cfg's layout outputs, in output order.
func OutputNames(cfg *featcfg.Config) []string {
	var names []string
	for _, l := range cfg.Layouts {
		for i := 0; i < l.Outputs(); i++ {
			if l.OutType == featcfg.None {
				names = append(names, l.Name+"/"+strconv.Itoa(i))
			} else {
				names = append(names, l.Name)
			}
		}
	}
	return names
}

// shapes returns the per-row shape of every output tensor.
func shapes(cfg *featcfg.Config, rows int) [][]int {
	var out [][]int
	for li := range cfg.Layouts {
		l := &cfg.Layouts[li]
		for i := 0; i < l.Outputs(); i++ {
			sh := l.OutputShape(i, rows)
			out = append(out, append([]int(nil), sh[1:]...))
		}
	}
	return out
}

// Run computes the layout tensors of one sharded batch (in.Shard, with the embeddings of
// the Source) as a new tensor record.
func (f *Forward) Run(ctx context.Context, in *element.Sharded) (arrow.RecordBatch, error) {
	r := in.Shard
	rows := r.BatchSize
	if r.Version != f.version {
		return nil, fmt.Errorf("layout.Layout: batch sharded with version %d, layout configured for %d", r.Version, f.version)
	}
	if err := f.Config.CheckBatch(rows); err != nil {
		return nil, fmt.Errorf("layout.Layout: batch of %d rows: %w", rows, err)
	}
	emb, err := f.src.Embeddings(ctx, f.Config, f.version, in)
	if err != nil {
		return nil, fmt.Errorf("layout.Layout: embeddings of a batch of %d rows: %w", rows, err)
	}
	outs := f.lay.Outputs(rows)
	if err := f.lay.Forward([]klayout.Sharded{klayout.FromShard(r)}, emb, outs); err != nil {
		return nil, fmt.Errorf("layout.Layout: batch of %d rows: %w", rows, err)
	}
	return f.tensors(rows, outs)
}

// tensors wraps the output buffers in a tensor record (no copy).
func (f *Forward) tensors(rows int, outs [][]float32) (arrow.RecordBatch, error) {
	sh := shapes(f.Config, rows)
	ts := make([]element.Tensor, len(outs))
	for i, o := range outs {
		ts[i] = element.Tensor{Name: f.names[i], Shape: sh[i], Data: o}
	}
	rec, err := element.NewTensors(rows, ts)
	if err != nil {
		return nil, fmt.Errorf("layout.Layout: %w", err)
	}
	return rec, nil
}
