package train

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/kernels/featcfg"
	klayout "github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/kernels/model"
	kshard "github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/schemas/batch"
	tshard "github.com/monolith-go/monolith/transforms/shard"
)

// errStop reports that the global step passed MaxSteps: the batch was not applied.
var errStop = errors.New("pipelines/train: max_steps reached")

// errStopped reports a worker stopped by the barrier's controller.ActionStop.
var errStopped = errors.New("pipelines/train: stopped by the training barrier")

// sparseTable is one embedding table of the FeatureConfigs as the PS serves it.
type sparseTable struct {
	name string
	dim  int
}

// slot holds the buffers of one batch in flight. A trainer alternates two slots, so the
// asynchronous apply of batch i reads its slot while batch i+1 fills the other.
type slot struct {
	fids  [][]int64   // by sparse table: the fids of its (table, shard) lists, in list order
	emb   [][]float32 // by sparse table: the looked-up rows
	grad  [][]float32 // by sparse table: the embedding gradients, rows like emb
	dense [][]float32 // by dense parameter: its values
	dgrad [][]float32 // by dense parameter: its gradient
	rows  int
	loss  float64
	id    string
}

// Trainer runs training and evaluation steps on batches, one at a time: shard → PS
// lookup → layout → model forward/backward → layout gradient → ApplyGradients. The apply
// of a step runs asynchronously, overlapping the next step's lookup and compute (at most
// one apply in flight). Not safe for concurrent use; a Worker runs several.
type Trainer struct {
	job       *Job
	cfg       *featcfg.Config
	ps        *client.Client
	batcher   tshard.Batcher
	lay       *klayout.Layouter
	model     *model.Model
	tables    []sparseTable
	params    []model.Param
	denseID   [][]int64 // by dense parameter: the fids 0..Rows-1
	denseName []string  // by dense parameter: its PS table

	slots [2]slot
	cur   int
	outs  [][]float32       // layout outputs
	douts [][]float32       // their gradients
	sizes []int             // floats of each layout output for the current batch
	req   []klayout.Sharded // the current batch, as the layout kernel takes it
	emb   klayout.Embedding
	eg    klayout.Embedding
	logit []float32
	dlog  []float32
	label []float32

	pending chan applyDone   // the apply in flight, if any
	gate    *controller.Gate // the worker's training barrier (nil: none)
	stats   Stats
	onStep  func(rows int, loss float64) // called for every applied step (may be nil)
}

type applyDone struct {
	rows int
	loss float64
	err  error
}

// newTrainer builds a trainer of j on the client ps.
func newTrainer(j *Job, ps *client.Client) (*Trainer, error) {
	t := &Trainer{job: j, ps: ps}
	k := j.Kernels
	if err := t.batcher.Init(k); err != nil {
		return nil, err
	}
	t.cfg = t.batcher.Config
	lay, err := klayout.New(t.cfg, klayout.Options{Version: k.Version, PS: k.PS})
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	t.lay = lay
	if t.model, err = j.newModel(t.cfg); err != nil {
		return nil, err
	}
	if t.tables, err = sparseTables(t.cfg); err != nil {
		return nil, err
	}
	t.params = t.model.Params()
	for _, p := range t.params {
		ids := make([]int64, p.Rows)
		for i := range ids {
			ids[i] = int64(i)
		}
		t.denseID = append(t.denseID, ids)
		t.denseName = append(t.denseName, denseTable(p))
	}
	for i := range t.slots {
		s := &t.slots[i]
		s.fids = make([][]int64, len(t.tables))
		s.emb = make([][]float32, len(t.tables))
		s.grad = make([][]float32, len(t.tables))
		for _, p := range t.params {
			s.dense = append(s.dense, make([]float32, p.Size()))
			s.dgrad = append(s.dgrad, make([]float32, p.Size()))
		}
	}
	t.outs = make([][]float32, t.cfg.NumOutputs())
	t.douts = make([][]float32, t.cfg.NumOutputs())
	return t, nil
}

// sparseTables lists the FeatureConfigs' tables with their PS width: every feature of a
// table must have the same slice dims (the table's segments).
func sparseTables(cfg *featcfg.Config) ([]sparseTable, error) {
	out := make([]sparseTable, len(cfg.Tables))
	for i, tb := range cfg.Tables {
		if len(tb.Features) == 0 {
			return nil, fmt.Errorf("%w: table %q has no features", ErrConfig, tb.Name)
		}
		first := cfg.Features[tb.Features[0]]
		for _, f := range tb.Features[1:] {
			if !slices.Equal(cfg.Features[f].SliceDims, first.SliceDims) {
				return nil, fmt.Errorf("%w: table %q: features %q and %q have slice dims %v and %v; a PS table has one segment layout",
					ErrConfig, tb.Name, first.Name, cfg.Features[f].Name, first.SliceDims, cfg.Features[f].SliceDims)
			}
		}
		out[i] = sparseTable{name: tb.Name, dim: first.Dim}
	}
	return out, nil
}

// labels reads the first label of every row of rec.
func (t *Trainer) labels(rec arrow.RecordBatch) ([]float32, error) {
	d, err := batch.DenseColumn(rec, batch.ColLabel)
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: labels: %w", err)
	}
	n := int(rec.NumRows())
	t.label = grow(t.label, n)
	if len(d.Offsets) != n+1 {
		return nil, fmt.Errorf("pipelines/train: labels: %d offsets for %d rows", len(d.Offsets), n)
	}
	for r := 0; r < n; r++ {
		lo, hi := d.Offsets[r], d.Offsets[r+1]
		if hi <= lo || int(hi) > len(d.Values) {
			return nil, fmt.Errorf("pipelines/train: row %d of the batch has no label", r)
		}
		t.label[r] = d.Values[lo]
	}
	return t.label, nil
}

// forward shards rec, looks its fids up (creating absent ones when training), and runs
// the layout and the model; the logits are in t.logit.
func (t *Trainer) forward(ctx context.Context, rec arrow.RecordBatch, s *slot, create bool) (*kshard.Result, error) {
	r, err := t.batcher.Shard(rec)
	if err != nil {
		return nil, err
	}
	rows := r.BatchSize
	s.rows = rows
	P := r.PS
	for ti := range t.tables {
		f := s.fids[ti][:0]
		for p := 0; p < P; p++ {
			for _, v := range r.List(ti, p) {
				f = append(f, int64(v))
			}
		}
		s.fids[ti] = f
	}
	if err := t.lookup(ctx, s, create); err != nil {
		return nil, err
	}
	t.emb.Tensors = t.views(t.emb.Tensors, s.emb, r)
	t.sizes = t.lay.OutputSizes(rows)
	for i, n := range t.sizes {
		t.outs[i] = grow(t.outs[i], n)
	}
	t.req = append(t.req[:0], klayout.FromShard(r))
	if err := t.lay.Forward(t.req, t.emb, t.outs); err != nil {
		return nil, fmt.Errorf("pipelines/train: layout: %w", err)
	}
	t.logit = grow(t.logit, rows)
	if err := t.model.Forward(model.Batch{Rows: rows, In: t.outs, Params: s.dense}, t.logit); err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	return r, nil
}

// views cuts bufs (by table: the rows of every shard's list, in shard order) into the v5
// tensors k = t*P+p of r, appended to dst[:0].
func (t *Trainer) views(dst, bufs [][]float32, r *kshard.Result) [][]float32 {
	dst = dst[:0]
	for ti := range t.tables {
		off := 0
		for p := 0; p < r.PS; p++ {
			n := int(r.EmbSize[ti*r.PS+p])
			dst = append(dst, bufs[ti][off:off+n])
			off += n
		}
	}
	return dst
}

// lookup fetches every sparse table's rows and every dense parameter, concurrently.
func (t *Trainer) lookup(ctx context.Context, s *slot, create bool) error {
	n := len(t.tables) + len(t.params)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for ti, tb := range t.tables {
		if len(s.fids[ti]) == 0 {
			s.emb[ti] = s.emb[ti][:0]
			continue
		}
		wg.Go(func() {
			res, err := t.ps.Lookup(ctx, tb.name, tb.dim, s.fids[ti], client.LookupOptions{CreateIfMissing: create})
			if err != nil {
				errs[ti] = fmt.Errorf("pipelines/train: lookup %q: %w", tb.name, err)
				return
			}
			s.emb[ti] = res.Embeddings
		})
	}
	for j, p := range t.params {
		wg.Go(func() {
			res, err := t.ps.Lookup(ctx, t.denseName[j], p.Cols, t.denseID[j], client.LookupOptions{CreateIfMissing: create})
			if err != nil {
				errs[len(t.tables)+j] = fmt.Errorf("pipelines/train: lookup dense %q: %w", t.denseName[j], err)
				return
			}
			copy(s.dense[j], res.Embeddings)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Train runs one training step on rec. id names the batch for the PS's duplicate
// detection: a retried bundle presents the same ids, so its gradients are applied once.
// Errors of the previous step's apply are reported here or by Flush.
func (t *Trainer) Train(ctx context.Context, rec arrow.RecordBatch, id string) error {
	if t.gate != nil && t.gate.Placed() {
		// The step boundary: finish the step in flight, then pause while the barrier is
		// placed (a checkpoint taken meanwhile holds every applied step).
		if err := t.wait(); err != nil {
			return err
		}
		stop, err := t.gate.Boundary(ctx)
		if err != nil {
			return fmt.Errorf("pipelines/train: %w", err)
		}
		if stop {
			return errStopped
		}
	}
	labels, err := t.labels(rec)
	if err != nil {
		return err
	}
	// The slot at cur is free: the apply in flight, if any, reads the other one.
	s := &t.slots[t.cur]
	r, err := t.forward(ctx, rec, s, true)
	if err != nil {
		return err
	}
	rows := s.rows
	t.dlog = grow(t.dlog, rows)
	if s.loss, err = model.SigmoidXent(t.logit[:rows], labels, nil, t.dlog); err != nil {
		return fmt.Errorf("pipelines/train: %w", err)
	}
	for i, n := range t.sizes {
		if len(t.douts[i]) != n {
			t.douts[i] = grow(t.douts[i], n)
			if !t.model.Reads(i) {
				clear(t.douts[i]) // outputs the model does not read have a zero gradient
			}
		}
	}
	if err := t.model.Backward(t.dlog, model.Grads{In: t.douts, Params: s.dgrad}); err != nil {
		return fmt.Errorf("pipelines/train: %w", err)
	}
	for ti, tb := range t.tables {
		s.grad[ti] = grow(s.grad[ti], len(s.fids[ti])*tb.dim)
	}
	t.eg.Tensors = t.views(t.eg.Tensors, s.grad, r)
	if err := t.lay.Backward(t.req, t.douts, t.eg); err != nil {
		return fmt.Errorf("pipelines/train: layout gradient: %w", err)
	}
	// At most one apply in flight: collect the previous one before starting this one.
	if err := t.wait(); err != nil {
		return err
	}
	s.id = id
	done := make(chan applyDone, 1)
	t.pending = done
	t.cur ^= 1 // the apply owns s until it is collected
	// The apply outlives this call (and the element's context): it is collected by the next
	// Train or by Flush; the client's call timeouts bound it.
	actx := context.WithoutCancel(ctx)
	go func() { done <- t.apply(actx, s) }()
	return nil
}

// apply takes a global step and sends the gradients of slot s to the PS.
func (t *Trainer) apply(ctx context.Context, s *slot) applyDone {
	d := applyDone{rows: s.rows, loss: s.loss}
	gs, err := t.ps.GlobalStepState(ctx, 1, s.id+"/step")
	if err != nil {
		d.err = fmt.Errorf("pipelines/train: global step: %w", err)
		return d
	}
	step := gs.GetStep()
	if t.gate != nil {
		t.gate.Observe(gs.GetBarrierPlaced(), gs.GetBarrierAction())
	}
	if t.job.MaxSteps > 0 && step > t.job.MaxSteps {
		d.err = errStop
		return d
	}
	n := len(t.tables) + len(t.params)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for ti, tb := range t.tables {
		if len(s.fids[ti]) == 0 {
			continue
		}
		wg.Go(func() {
			_, err := t.ps.Apply(ctx, client.ApplyRequest{Table: tb.name, Dim: tb.dim, Fids: s.fids[ti], Grads: s.grad[ti],
				Step: step, RequestID: s.id + "/" + tb.name})
			if err != nil {
				errs[ti] = fmt.Errorf("pipelines/train: apply %q: %w", tb.name, err)
			}
		})
	}
	for j, p := range t.params {
		wg.Go(func() {
			_, err := t.ps.Apply(ctx, client.ApplyRequest{Table: t.denseName[j], Dim: p.Cols, Fids: t.denseID[j], Grads: s.dgrad[j],
				Step: step, RequestID: s.id + "/" + t.denseName[j]})
			if err != nil {
				errs[len(t.tables)+j] = fmt.Errorf("pipelines/train: apply dense %q: %w", t.denseName[j], err)
			}
		})
	}
	wg.Wait()
	d.err = errors.Join(errs...)
	return d
}

// wait collects the apply in flight, if any, into the statistics.
func (t *Trainer) wait() error {
	if t.pending == nil {
		return nil
	}
	d := <-t.pending
	t.pending = nil
	switch {
	case errors.Is(d.err, errStop):
		t.stats.Skipped++
		return errStop
	case d.err != nil:
		return d.err
	}
	t.stats.Steps++
	t.stats.Examples += int64(d.rows)
	t.stats.LossSum += d.loss
	if t.onStep != nil {
		t.onStep(d.rows, d.loss)
	}
	return nil
}

// Flush waits for the apply in flight and returns the statistics since the last Flush.
func (t *Trainer) Flush() (Stats, error) {
	err := t.wait()
	st := t.stats
	t.stats = Stats{}
	if errors.Is(err, errStop) {
		err = nil
	}
	return st, err
}

// Eval runs the model on rec without creating fids or applying anything, and appends the
// predicted probabilities and the labels to preds and labels.
func (t *Trainer) Eval(ctx context.Context, rec arrow.RecordBatch, preds, labels []float32) ([]float32, []float32, error) {
	lab, err := t.labels(rec)
	if err != nil {
		return preds, labels, err
	}
	s := &t.slots[t.cur]
	if _, err := t.forward(ctx, rec, s, false); err != nil {
		return preds, labels, err
	}
	for r := 0; r < s.rows; r++ {
		preds = append(preds, model.Sigmoid(t.logit[r]))
	}
	return preds, append(labels, lab...), nil
}

// denseTable is the PS table name of a dense parameter.
func denseTable(p model.Param) string { return "dense_" + p.Name }

// batchID is the id of batch i of a file in an epoch of a run.
func batchID(run string, epoch int, fileHash uint64, i int) string {
	b := make([]byte, 0, len(run)+40)
	b = append(b, run...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(epoch), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, fileHash, 16)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(i), 10)
	return string(b)
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
