// Package aggregate is the Beam transform that sums the gradient rows of equal fids within
// each (table, PS shard) list of a batch (kernels/reduce.AggregateGradsRagged): the step
// between the layout gradient and a parameter-server push, as Monolith's
// DistributedHashTable.apply_gradients deduplicates before it applies.
//
// # Behavior
//
// Each element.TableGrads is aggregated on its own: the output holds every distinct fid
// once, in first-occurrence order, with its summed row and its occurrence count. A fid
// whose occurrences have different widths is an error naming the table, shard and fid.
// Nothing is shuffled; gradients of different batches are never mixed. A PCollection of
// *element.Sharded (a training step, after layout.LayoutGrad with Attach) has the lists of
// each element's training state aggregated in place of the originals, in a new element.
//
// # Determinism
//
// Sums start from a fid's first row and add later rows in occurrence order, so the result
// is bitwise reproducible.
package aggregate

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/kernels/reduce"
	"github.com/monolith-go/monolith/transforms/element"
)

func init() {
	register.DoFn3x1[context.Context, element.TableGrads, func(element.TableGrads), error](&aggregateFn{})
	register.DoFn3x1[context.Context, *element.Sharded, func(*element.Sharded), error](&aggregateStepFn{})
	register.Emitter1[element.TableGrads]()
	register.Emitter1[*element.Sharded]()
}

// AggregateGrads aggregates every element.TableGrads of col, or the attached gradient
// lists of every *element.Sharded of col. Panics at pipeline construction for another
// element type.
func AggregateGrads(s beam.Scope, col beam.PCollection) beam.PCollection {
	s = s.Scope("aggregate.AggregateGrads")
	switch t := col.Type().Type(); t {
	case reflect.TypeOf(element.TableGrads{}):
		return beam.ParDo(s, &aggregateFn{}, col)
	case reflect.TypeOf((*element.Sharded)(nil)):
		return beam.ParDo(s, &aggregateStepFn{}, col)
	default:
		panic(fmt.Errorf("aggregate.AggregateGrads: elements of type %v, want element.TableGrads or *element.Sharded", t))
	}
}

// aggregateStepFn aggregates the gradient lists a training step carries.
type aggregateStepFn struct {
	a Aggregator
}

func (f *aggregateStepFn) ProcessElement(_ context.Context, in *element.Sharded, emit func(*element.Sharded)) error {
	out, err := f.a.AggregateStep(in)
	if err != nil {
		return err
	}
	emit(out)
	return nil
}

// AggregateStep returns a copy of in whose training state's gradient lists are aggregated
// (AggregateGrads' body for *element.Sharded).
func (a *Aggregator) AggregateStep(in *element.Sharded) (*element.Sharded, error) {
	if in.Train == nil {
		return nil, fmt.Errorf("aggregate.AggregateGrads: element of %d rows has no training state (run layout.LayoutGrad with Attach first)", in.Rows())
	}
	t := *in.Train
	t.Grads = make([]element.TableGrads, len(in.Train.Grads))
	for i, g := range in.Train.Grads {
		out, err := a.Aggregate(g)
		if err != nil {
			return nil, err
		}
		t.Grads[i] = out
	}
	return &element.Sharded{Batch: in.Batch, Shard: in.Shard, Tensors: in.Tensors, Train: &t}, nil
}

type aggregateFn struct {
	a Aggregator
}

func (f *aggregateFn) ProcessElement(_ context.Context, g element.TableGrads, emit func(element.TableGrads)) error {
	out, err := f.a.Aggregate(g)
	if err != nil {
		return err
	}
	emit(out)
	return nil
}

// Aggregator aggregates TableGrads with reused scratch buffers: the body of the DoFn,
// exported for plain-Go callers. The zero value is ready; not safe for concurrent use.
type Aggregator struct {
	acc  reduce.Aggregated[uint64]
	dims []int
}

// Aggregate returns the aggregated form of g (new slices, owned by the caller).
func (a *Aggregator) Aggregate(g element.TableGrads) (element.TableGrads, error) {
	if err := g.Check(); err != nil {
		return element.TableGrads{}, fmt.Errorf("aggregate.AggregateGrads: %w", err)
	}
	a.dims = a.dims[:0]
	for u := range g.Fids {
		a.dims = append(a.dims, int(g.Offsets[u+1]-g.Offsets[u]))
	}
	if err := reduce.AggregateGradsRagged(&a.acc, g.Fids, g.Grads, a.dims); err != nil {
		return element.TableGrads{}, fmt.Errorf("aggregate.AggregateGrads: table %q shard %d: %w", g.Table, g.Shard, err)
	}
	n := a.acc.Len()
	out := element.TableGrads{Table: g.Table, Shard: g.Shard,
		Fids:   append(make([]uint64, 0, n), a.acc.IDs...),
		Grads:  append(make([]float32, 0, len(a.acc.Grads)), a.acc.Grads...),
		Counts: append(make([]int32, 0, n), a.acc.Counts...),
	}
	out.Offsets = make([]int32, 0, n+1)
	for _, o := range a.acc.Offsets {
		out.Offsets = append(out.Offsets, int32(o))
	}
	if len(out.Offsets) == 0 {
		out.Offsets = append(out.Offsets, 0)
	}
	return out, nil
}
