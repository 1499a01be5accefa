package model

import (
	"context"
	"fmt"
	"reflect"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/internal/ordered"
	"github.com/monolith-go/monolith/kernels/featcfg"
	kmodel "github.com/monolith-go/monolith/kernels/model"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/element"
	tlayout "github.com/monolith-go/monolith/transforms/layout"
)

func init() {
	register.DoFn2x1[*element.Sharded, func(*element.Sharded), error](&forwardBackwardFn{})
	register.DoFn2x1[*element.Sharded, func(Scores), error](&predictFn{})
	register.Emitter1[*element.Sharded]()
	register.Emitter1[Scores]()
	beam.RegisterType(reflect.TypeOf((*Scores)(nil)).Elem())
}

// Scores are the predicted probabilities and the labels of the rows of one batch, and
// with the LineIDs option the rows' serialized LineIds (nil for a row without one).
type Scores struct {
	Preds   []float32
	Labels  []float32
	LineIDs [][]byte
}

// Inputs describes the layout outputs of cfg as a model reads them, in output order: name,
// floats per row, and the field widths of a CONCAT layout without FIRSTN.
func Inputs(cfg *featcfg.Config) []kmodel.Input {
	names := tlayout.OutputNames(cfg)
	var out []kmodel.Input
	for li := range cfg.Layouts {
		l := &cfg.Layouts[li]
		for i := 0; i < l.Outputs(); i++ {
			in := kmodel.Input{Name: names[len(out)], Width: l.RowSize[i]}
			if l.OutType == featcfg.Concat && l.FirstN == 0 {
				for _, s := range l.Slices {
					in.Fields = append(in.Fields, s.Width())
				}
			}
			out = append(out, in)
		}
	}
	return out
}

// Build builds the model spec over the layout outputs of k (what a worker runs).
func Build(spec Spec, k config.Kernels) (Net, error) {
	cfg, err := k.Build()
	if err != nil {
		return nil, fmt.Errorf("transforms/model: %w", err)
	}
	return New(spec, Inputs(cfg))
}

// Option configures the transforms.
type Option func(*options)

type options struct {
	parallelism int
	lineIDs     bool
}

// Parallelism sets the goroutines a bundle runs the model on (≤ 0: GOMAXPROCS).
func Parallelism(n int) Option { return func(o *options) { o.parallelism = n } }

// LineIDs makes Predict copy every row's serialized LineId into its Scores.
func LineIDs() Option { return func(o *options) { o.lineIDs = true } }

func optionsOf(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

func parallelism(opts []Option) int { return optionsOf(opts).parallelism }

// ForwardBackward runs the training pass of spec on every *element.Sharded of col (see the
// package doc). k is the configuration the batches were sharded and laid out with.
// Panics at pipeline construction if the model cannot be built for k.
func ForwardBackward(s beam.Scope, col beam.PCollection, spec Spec, k config.Kernels, opts ...Option) beam.PCollection {
	s = s.Scope("model.ForwardBackward")
	if _, err := Build(spec, k); err != nil {
		panic(fmt.Errorf("model.ForwardBackward: %w", err))
	}
	return beam.ParDo(s, &forwardBackwardFn{base: base{Spec: spec, Kernels: k, Parallelism: parallelism(opts)}}, col)
}

// Predict emits the Scores of every *element.Sharded of col (layout outputs and the
// dense parameters of its training state). Panics at pipeline construction if the model
// cannot be built for k.
func Predict(s beam.Scope, col beam.PCollection, spec Spec, k config.Kernels, opts ...Option) beam.PCollection {
	s = s.Scope("model.Predict")
	if _, err := Build(spec, k); err != nil {
		panic(fmt.Errorf("model.Predict: %w", err))
	}
	o := optionsOf(opts)
	return beam.ParDo(s, &predictFn{base: base{Spec: spec, Kernels: k, Parallelism: o.parallelism}, LineIDs: o.lineIDs}, col)
}

// base is the configuration and the per-worker models of both DoFns.
type base struct {
	Spec        Spec
	Kernels     config.Kernels
	Parallelism int

	workers []*Step
}

func (b *base) Setup() error {
	n := b.Parallelism
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	b.workers = make([]*Step, n)
	for i := range b.workers {
		st, err := NewStep(b.Spec, b.Kernels)
		if err != nil {
			return err
		}
		b.workers[i] = st
	}
	return nil
}

func (b *base) newState() func() (*Step, error) {
	i := 0
	return func() (*Step, error) { s := b.workers[i]; i++; return s, nil }
}

type forwardBackwardFn struct {
	base
	pool *ordered.Pool[*Step, *element.Sharded, *element.Sharded]
}

func (f *forwardBackwardFn) StartBundle(ctx context.Context, _ func(*element.Sharded)) error {
	var err error
	f.pool, err = ordered.New(ctx, len(f.workers), 0, f.newState(),
		func(_ context.Context, st *Step, in *element.Sharded) (*element.Sharded, error) { return st.Train(in) })
	return err
}

func (f *forwardBackwardFn) ProcessElement(in *element.Sharded, emit func(*element.Sharded)) error {
	return f.pool.Submit(in, emit)
}

func (f *forwardBackwardFn) FinishBundle(emit func(*element.Sharded)) error {
	return f.pool.Flush(emit)
}

type predictFn struct {
	base
	LineIDs bool
	pool    *ordered.Pool[*Step, *element.Sharded, Scores]
}

func (f *predictFn) StartBundle(ctx context.Context, _ func(Scores)) error {
	var err error
	f.pool, err = ordered.New(ctx, len(f.workers), 0, f.newState(),
		func(_ context.Context, st *Step, in *element.Sharded) (Scores, error) {
			sc, err := st.Predict(in)
			if err != nil || !f.LineIDs {
				return sc, err
			}
			sc.LineIDs, err = RowLineIDs(in.Batch, len(sc.Preds))
			return sc, err
		})
	return err
}

func (f *predictFn) ProcessElement(in *element.Sharded, emit func(Scores)) error {
	return f.pool.Submit(in, emit)
}

func (f *predictFn) FinishBundle(emit func(Scores)) error { return f.pool.Flush(emit) }

// Step runs a model's passes on elements: the body of the DoFns, exported for plain-Go
// callers (the plain-loop baseline of the training benchmark). Not safe for concurrent
// use.
type Step struct {
	net    Net
	inputs []kmodel.Input
	params []kmodel.Param
	logit  []float32
	dlog   []float32
	label  []float32
}

// NewStep builds spec over the layout outputs of k.
func NewStep(spec Spec, k config.Kernels) (*Step, error) {
	cfg, err := k.Build()
	if err != nil {
		return nil, fmt.Errorf("transforms/model: %w", err)
	}
	inputs := Inputs(cfg)
	n, err := New(spec, inputs)
	if err != nil {
		return nil, err
	}
	return &Step{net: n, inputs: inputs, params: n.Params()}, nil
}

// Params lists the model's dense parameters.
func (st *Step) Params() []kmodel.Param { return st.params }

// forward checks in and runs the forward pass; the logits are in st.logit.
func (st *Step) forward(in *element.Sharded, what string) (rows int, outs []element.Tensor, err error) {
	if in.Tensors == nil || in.Train == nil {
		return 0, nil, fmt.Errorf("model.%s: element of %d rows needs the layout outputs and looked-up dense parameters", what, in.Rows())
	}
	outs, err = element.Tensors(in.Tensors)
	if err != nil {
		return 0, nil, fmt.Errorf("model.%s: %w", what, err)
	}
	if len(outs) != len(st.inputs) {
		return 0, nil, fmt.Errorf("model.%s: %d layout outputs, the model reads %d", what, len(outs), len(st.inputs))
	}
	if len(in.Train.Params) != len(st.params) {
		return 0, nil, fmt.Errorf("model.%s: %d dense parameters looked up, the model has %d", what, len(in.Train.Params), len(st.params))
	}
	rows = int(in.Tensors.NumRows())
	data := make([][]float32, len(outs))
	for i, o := range outs {
		data[i] = o.Data
	}
	st.logit = grow(st.logit, rows)
	if err := st.net.Forward(kmodel.Batch{Rows: rows, In: data, Params: in.Train.Params}, st.logit); err != nil {
		return 0, nil, fmt.Errorf("model.%s: %w", what, err)
	}
	return rows, outs, nil
}

// Train runs the forward and backward pass of one element and returns the element with
// the output gradients as its Tensors and the training state's ParamGrads, Rows, Loss,
// Preds and Labels set (a new element; in is not modified).
func (st *Step) Train(in *element.Sharded) (*element.Sharded, error) {
	rows, outs, err := st.forward(in, "ForwardBackward")
	if err != nil {
		return nil, err
	}
	labels, err := st.labels(in.Batch, rows)
	if err != nil {
		return nil, err
	}
	st.dlog = grow(st.dlog, rows)
	loss, err := kmodel.SigmoidXent(st.logit[:rows], labels, nil, st.dlog)
	if err != nil {
		return nil, fmt.Errorf("model.ForwardBackward: %w", err)
	}
	// The element owns new gradient buffers: downstream steps keep them.
	douts := make([][]float32, len(outs))
	gts := make([]element.Tensor, len(outs))
	for i, o := range outs {
		douts[i] = make([]float32, len(o.Data)) // zero for the outputs the model does not read
		gts[i] = element.Tensor{Name: o.Name, Shape: o.Shape, Data: douts[i]}
	}
	pgrads := make([][]float32, len(st.params))
	for j, p := range st.params {
		pgrads[j] = make([]float32, p.Size())
	}
	if err := st.net.Backward(st.dlog[:rows], kmodel.Grads{In: douts, Params: pgrads}); err != nil {
		return nil, fmt.Errorf("model.ForwardBackward: %w", err)
	}
	grads, err := element.NewTensors(rows, gts)
	if err != nil {
		return nil, fmt.Errorf("model.ForwardBackward: %w", err)
	}
	t := *in.Train
	t.ParamGrads, t.Rows, t.Loss = pgrads, rows, loss
	t.Preds, t.Labels = make([]float32, rows), append([]float32(nil), labels[:rows]...)
	for r := range rows {
		t.Preds[r] = kmodel.Sigmoid(st.logit[r])
	}
	return &element.Sharded{Batch: in.Batch, Shard: in.Shard, Tensors: grads, Train: &t}, nil
}

// Predict returns the probabilities and labels of one element's rows.
func (st *Step) Predict(in *element.Sharded) (Scores, error) {
	preds, err := st.Probabilities(in)
	if err != nil {
		return Scores{}, err
	}
	labels, err := st.labels(in.Batch, len(preds))
	if err != nil {
		return Scores{}, err
	}
	return Scores{Preds: preds, Labels: append([]float32(nil), labels...)}, nil
}

// Probabilities returns the probability of each of one element's rows, reading no label
// (serving's answer).
func (st *Step) Probabilities(in *element.Sharded) ([]float32, error) {
	rows, _, err := st.forward(in, "Predict")
	if err != nil {
		return nil, err
	}
	preds := make([]float32, rows)
	for r := range rows {
		preds[r] = kmodel.Sigmoid(st.logit[r])
	}
	return preds, nil
}

// ParamTable is the PS table holding dense parameter p, one row per parameter row: training
// looks it up and applies its gradients there, and a served model reads it back.
func ParamTable(p kmodel.Param) string { return "dense_" + p.Name }

// RowLineIDs copies the serialized LineId of each of rec's first rows rows (nil for a row
// without one) into one buffer: they alias the batch until copied.
func RowLineIDs(rec arrow.RecordBatch, rows int) ([][]byte, error) {
	ids := make([][]byte, rows)
	size := 0
	for r := range ids {
		b, err := batch.LineIDBytes(rec, r)
		if err != nil {
			return nil, fmt.Errorf("transforms/model: line id of row %d: %w", r, err)
		}
		ids[r], size = b, size+len(b)
	}
	buf := make([]byte, 0, size)
	for r, b := range ids {
		start := len(buf)
		buf = append(buf, b...)
		ids[r] = buf[start:len(buf):len(buf)]
	}
	return ids, nil
}

// RowLabels returns the first label of every row of rec, as Predict reads them.
func RowLabels(rec arrow.RecordBatch) ([]float32, error) {
	var st Step
	l, err := st.labels(rec, int(rec.NumRows()))
	return l, err
}

// labels reads the first label of every row of rec.
func (st *Step) labels(rec arrow.RecordBatch, rows int) ([]float32, error) {
	if rec == nil {
		return nil, fmt.Errorf("transforms/model: element of %d rows has no batch to read labels from", rows)
	}
	d, err := batch.DenseColumn(rec, batch.ColLabel)
	if err != nil {
		return nil, fmt.Errorf("transforms/model: labels: %w", err)
	}
	n := int(rec.NumRows())
	if n != rows || len(d.Offsets) != n+1 {
		return nil, fmt.Errorf("transforms/model: labels: %d label offsets for %d rows (layout outputs of %d)", len(d.Offsets), n, rows)
	}
	st.label = grow(st.label, n)
	for r := range n {
		lo, hi := d.Offsets[r], d.Offsets[r+1]
		if hi <= lo || int(hi) > len(d.Values) {
			return nil, fmt.Errorf("transforms/model: row %d of the batch has no label", r)
		}
		st.label[r] = d.Values[lo]
	}
	return st.label, nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
