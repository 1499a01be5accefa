package layout

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/monolith-go/monolith/internal/ordered"
	"github.com/monolith-go/monolith/kernels/featcfg"
	klayout "github.com/monolith-go/monolith/kernels/layout"
	kshard "github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/element"
)

// LayoutGrad runs the layout gradient on every *element.Sharded of col whose Tensors hold
// the gradients of the layout outputs, and returns a PCollection of element.TableGrads,
// one per (table, PS shard) list of each batch; with Attach, the elements themselves
// with their training state's Grads set. Panics at pipeline construction if k is invalid.
func LayoutGrad(s beam.Scope, col beam.PCollection, k config.Kernels, opts ...Option) beam.PCollection {
	s = s.Scope("layout.LayoutGrad")
	if _, err := k.Build(); err != nil {
		panic(fmt.Errorf("layout.LayoutGrad: %w", err))
	}
	o := options(opts)
	if o.Attach {
		return beam.ParDo(s, &gradAttachFn{gradBase: gradBase{Kernels: k, Parallelism: o.Parallelism}}, col)
	}
	return beam.ParDo(s, &gradFn{gradBase: gradBase{Kernels: k, Parallelism: o.Parallelism}}, col)
}

// gradBase is the state of both gradient DoFns: a pool of Backward kernels.
type gradBase struct {
	Kernels     config.Kernels
	Parallelism int

	states []*Backward
	pool   *ordered.Pool[*Backward, *element.Sharded, *element.Sharded]
}

func (f *gradBase) Setup() error {
	f.states = make([]*Backward, workers(f.Parallelism))
	for i := range f.states {
		f.states[i] = &Backward{}
		if err := f.states[i].Init(f.Kernels); err != nil {
			return err
		}
	}
	return nil
}

func (f *gradBase) start(ctx context.Context) error {
	var err error
	f.pool, err = ordered.New(ctx, len(f.states), 0, states(f.states),
		func(_ context.Context, b *Backward, in *element.Sharded) (*element.Sharded, error) {
			return b.RunElement(in)
		})
	return err
}

// RunElement computes the embedding gradients of one element whose Tensors hold the
// gradients of its layout outputs, and returns a copy of it with the training state's
// Grads set (one TableGrads per (table, PS shard) list): LayoutGrad's body.
func (b *Backward) RunElement(in *element.Sharded) (*element.Sharded, error) {
	if in.Shard == nil || in.Tensors == nil {
		return nil, fmt.Errorf("layout.LayoutGrad: element of %d rows needs a sharding result and output gradients", in.Rows())
	}
	gs, err := element.Tensors(in.Tensors)
	if err != nil {
		return nil, fmt.Errorf("layout.LayoutGrad: %w", err)
	}
	grads := make([][]float32, len(gs))
	for i, g := range gs {
		grads[i] = g.Data
	}
	out, err := b.Run(in.Shard, grads)
	if err != nil {
		return nil, err
	}
	t := element.TrainState{}
	if in.Train != nil {
		t = *in.Train
	}
	t.Grads = out
	return &element.Sharded{Batch: in.Batch, Shard: in.Shard, Tensors: in.Tensors, Train: &t}, nil
}

type gradFn struct{ gradBase }

func (f *gradFn) StartBundle(ctx context.Context, _ func(element.TableGrads)) error {
	return f.start(ctx)
}

func (f *gradFn) ProcessElement(in *element.Sharded, emit func(element.TableGrads)) error {
	return f.pool.Submit(in, func(e *element.Sharded) { emitLists(e, emit) })
}

func (f *gradFn) FinishBundle(emit func(element.TableGrads)) error {
	return f.pool.Flush(func(e *element.Sharded) { emitLists(e, emit) })
}

func emitLists(e *element.Sharded, emit func(element.TableGrads)) {
	for _, g := range e.Train.Grads {
		emit(g)
	}
}

type gradAttachFn struct{ gradBase }

func (f *gradAttachFn) StartBundle(ctx context.Context, _ func(*element.Sharded)) error {
	return f.start(ctx)
}

func (f *gradAttachFn) ProcessElement(in *element.Sharded, emit func(*element.Sharded)) error {
	return f.pool.Submit(in, emit)
}

func (f *gradAttachFn) FinishBundle(emit func(*element.Sharded)) error { return f.pool.Flush(emit) }

// Backward runs the layout gradient of sharded batches: the body of the LayoutGrad DoFn,
// exported for plain-Go callers. Not safe for concurrent use.
type Backward struct {
	Config  *featcfg.Config
	version int
	lay     *klayout.Layouter
}

// Init builds the configuration and the layouter.
func (b *Backward) Init(k config.Kernels) error {
	cfg, err := k.Build()
	if err != nil {
		return fmt.Errorf("layout.LayoutGrad: %w", err)
	}
	lay, err := klayout.New(cfg, klayout.Options{Version: k.Version, PS: k.PS, Parallel: k.Parallel})
	if err != nil {
		return fmt.Errorf("layout.LayoutGrad: %w", err)
	}
	b.Config, b.version, b.lay = cfg, k.Version, lay
	return nil
}

// Run returns the embedding gradients of one batch, one TableGrads per (table, shard)
// list, given the gradients of its layout outputs (in output order).
func (b *Backward) Run(r *kshard.Result, grads [][]float32) ([]element.TableGrads, error) {
	cfg, P := b.Config, r.PS
	rows := r.BatchSize
	if r.Version != b.version {
		return nil, fmt.Errorf("layout.LayoutGrad: batch sharded with version %d, layout configured for %d", r.Version, b.version)
	}
	sizes := b.lay.OutputSizes(rows)
	if len(grads) != len(sizes) {
		return nil, fmt.Errorf("layout.LayoutGrad: %d gradient tensors for %d layout outputs", len(grads), len(sizes))
	}
	for i, n := range sizes {
		if len(grads[i]) != n {
			return nil, fmt.Errorf("layout.LayoutGrad: gradient of output %d has %d floats, want %d", i, len(grads[i]), n)
		}
	}
	bufs := klayout.ListBuffers(cfg, r, func(uint64, int) float32 { return 0 })
	eg, err := klayout.Arrange(b.version, cfg, r, bufs)
	if err != nil {
		return nil, fmt.Errorf("layout.LayoutGrad: %w", err)
	}
	if err := b.lay.Backward([]klayout.Sharded{klayout.FromShard(r)}, grads, eg); err != nil {
		return nil, fmt.Errorf("layout.LayoutGrad: batch of %d rows: %w", rows, err)
	}
	lists := klayout.Lists(b.version, cfg, r, eg)
	out := make([]element.TableGrads, 0, len(lists))
	for t := range cfg.Tables {
		for p := 0; p < P; p++ {
			fids := r.List(t, p)
			off := make([]int32, 0, len(fids)+1)
			off = append(off, 0)
			pos := int32(0)
			for _, f := range cfg.Tables[t].Features {
				d := int32(cfg.Features[f].Dim)
				for range r.Counts[f*P+p] {
					pos += d
					off = append(off, pos)
				}
			}
			g := element.TableGrads{Table: cfg.Tables[t].Name, Shard: p,
				Fids: append([]uint64(nil), fids...), Offsets: off, Grads: lists[t*P+p]}
			if err := g.Check(); err != nil {
				return nil, fmt.Errorf("layout.LayoutGrad: %w", err)
			}
			out = append(out, g)
		}
	}
	return out, nil
}
