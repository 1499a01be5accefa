package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/internal/mix"
	"github.com/monolith-go/monolith/internal/ordered"
	kmodel "github.com/monolith-go/monolith/kernels/model"
	kshard "github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/transforms/element"
	tmodel "github.com/monolith-go/monolith/transforms/model"
)

func init() {
	register.DoFn3x1[context.Context, *element.Sharded, func(*element.Sharded), error](&lookupFn{})
	register.DoFn3x1[context.Context, *element.Sharded, func(Stats), error](&applyFn{})
	register.Emitter1[*element.Sharded]()
	register.Emitter1[Stats]()
	register.Function1x0(discardStats)
}

// Beam counters of the Apply step (namespace CounterNS): the driver reads a training
// epoch's Stats from the pipeline's metrics.
const (
	CounterNS       = "monolith.train"
	CounterSteps    = "steps"
	CounterExamples = "examples"
	CounterSkipped  = "skipped"
	// CounterLossNanos is the summed log loss of the applied steps in units of 1e-9.
	CounterLossNanos = "loss_nanos"
)

// runHandle is what Run hands the workers of its own process through the context: the
// run's PS client (shared; safe for concurrent use) and its Metrics. Workers in other
// processes find none and connect themselves.
type runHandle struct {
	ps      *client.Client
	metrics *Metrics
}

type runKey struct{}

func withRun(ctx context.Context, h *runHandle) context.Context {
	return context.WithValue(ctx, runKey{}, h)
}

func runFrom(ctx context.Context) *runHandle {
	h, _ := ctx.Value(runKey{}).(*runHandle)
	return h
}

// psConn is a worker's PS client: the run's when the worker runs in the driver's process,
// else its own (owned: closed by the worker).
type psConn struct {
	c       *client.Client
	metrics *Metrics
	owned   bool
}

func (j *Job) connect(ctx context.Context) (psConn, error) {
	if h := runFrom(ctx); h != nil {
		return psConn{c: h.ps, metrics: h.metrics}, nil
	}
	if len(j.PS) == 0 {
		return psConn{}, fmt.Errorf("%w: no PS addresses", ErrConfig)
	}
	c, err := client.New(j.PS, j.clientOptions()...)
	if err != nil {
		return psConn{}, fmt.Errorf("pipelines/train: %w", err)
	}
	return psConn{c: c, owned: true}, nil
}

func (p *psConn) close() error {
	if p.owned && p.c != nil {
		err := p.c.Close()
		p.c = nil
		return err
	}
	return nil
}

// parallelism is the pool size of a step.
func (j *Job) parallelism() int {
	if j.Parallelism > 0 {
		return j.Parallelism
	}
	return runtime.GOMAXPROCS(0)
}

// denseParam is one dense model parameter as a PS table.
type denseParam struct {
	table string
	cols  int
	ids   []int64 // 0..Rows-1
}

// Lookup is the training pipeline's PS lookup: for every *element.Sharded of col it looks
// up the embedding rows of every (table, PS shard) fid list of its sharding result and
// every dense parameter of the model, and emits the element with a training state holding
// them (element.TrainState.Emb and Params) and the batch's id: run id, epoch, a hash of
// the batch's fids and rows, and its occurrence in the bundle, so that a retried bundle
// presents the same ids. With create, absent fids are created (training); without, they
// read as zeros and nothing is created (evaluation). Runs on j.Parallelism goroutines per
// bundle, emitting in input order.
func Lookup(s beam.Scope, col beam.PCollection, j Job, epoch int, create bool) beam.PCollection {
	s = s.Scope("train.Lookup")
	if _, err := j.lookupTables(); err != nil {
		panic(fmt.Errorf("train.Lookup: %w", err))
	}
	return beam.ParDo(s, &lookupFn{Job: j, Epoch: epoch, Create: create}, col)
}

// lookupTables returns the sparse tables and the dense parameters of the job.
func (j *Job) lookupTables() ([]sparseTable, error) {
	cfg, err := j.Kernels.Build()
	if err != nil {
		return nil, err
	}
	return sparseTables(cfg)
}

func (j *Job) denseParams() ([]denseParam, error) {
	st, err := tmodel.NewStep(j.ModelSpec(), j.Kernels)
	if err != nil {
		return nil, err
	}
	var out []denseParam
	for _, p := range st.Params() {
		ids := make([]int64, p.Rows)
		for i := range ids {
			ids[i] = int64(i)
		}
		out = append(out, denseParam{table: tmodel.ParamTable(p), cols: p.Cols, ids: ids})
	}
	return out, nil
}

type lookupFn struct {
	Job    Job
	Epoch  int
	Create bool

	ps   psConn
	step *LookupStep
	seen map[uint64]int
	pool *ordered.Pool[*LookupStep, *element.Sharded, *element.Sharded]
}

func (f *lookupFn) Setup(ctx context.Context) error {
	var err error
	if f.ps, err = f.Job.connect(ctx); err != nil {
		return err
	}
	f.step, err = NewLookupStep(&f.Job, f.ps.c, f.Create)
	return err
}

func (f *lookupFn) StartBundle(ctx context.Context, _ func(*element.Sharded)) error {
	f.seen = map[uint64]int{}
	var err error
	// One LookupStep serves every worker: it only reads its configuration.
	f.pool, err = ordered.New(ctx, f.Job.parallelism(), 0, func() (*LookupStep, error) { return f.step, nil },
		func(ctx context.Context, st *LookupStep, in *element.Sharded) (*element.Sharded, error) {
			return st.Run(ctx, in)
		})
	return err
}

func (f *lookupFn) ProcessElement(_ context.Context, in *element.Sharded, emit func(*element.Sharded)) error {
	if in.Shard == nil {
		return fmt.Errorf("train.Lookup: element of %d rows has no sharding result", in.Rows())
	}
	h := batchHash(in.Shard)
	n := f.seen[h]
	f.seen[h] = n + 1
	id := batchID(f.Job.RunID, f.Epoch, h, n)
	return f.pool.Submit(&element.Sharded{Batch: in.Batch, Shard: in.Shard, Tensors: in.Tensors, Train: &element.TrainState{ID: id}}, emit)
}

func (f *lookupFn) FinishBundle(emit func(*element.Sharded)) error { return f.pool.Flush(emit) }

func (f *lookupFn) Teardown() error { return f.ps.close() }

// batchHash identifies a batch by its sparse content: the rows, every fid list and every
// occurrence's position (kernels/shard.Result), hashed with splitmix64 steps.
func batchHash(r *kshard.Result) uint64 {
	h := mix.Mix64(uint64(r.BatchSize) ^ uint64(r.PS)<<32)
	for _, f := range r.Fids {
		h = mix.Mix64(h ^ f)
	}
	for _, o := range r.FidOffset {
		h = mix.Mix64(h ^ o)
	}
	return h
}

// batchID is the id of the n-th batch of hash h in a bundle of an epoch of a run.
func batchID(run string, epoch int, h uint64, n int) string {
	b := make([]byte, 0, len(run)+48)
	b = append(b, run...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(epoch), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, h, 16)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(n), 10)
	return string(b)
}

// LookupStep looks up one batch's embeddings and dense parameters: the body of the Lookup
// DoFn, exported for plain-Go callers (the plain-loop baseline). Safe for concurrent use.
type LookupStep struct {
	ps     *client.Client
	tables []sparseTable
	dense  []denseParam
	create bool
}

// NewLookupStep builds the lookup of j's tables on ps.
func NewLookupStep(j *Job, ps *client.Client, create bool) (*LookupStep, error) {
	tables, err := j.lookupTables()
	if err != nil {
		return nil, err
	}
	dense, err := j.denseParams()
	if err != nil {
		return nil, err
	}
	return &LookupStep{ps: ps, tables: tables, dense: dense, create: create}, nil
}

// Run returns in with its training state's Emb and Params filled (a new element and
// state; in.Train supplies the id).
func (l *LookupStep) Run(ctx context.Context, in *element.Sharded) (*element.Sharded, error) {
	r := in.Shard
	P := r.PS
	t := element.TrainState{}
	if in.Train != nil {
		t = *in.Train
	}
	t.Emb = make([][]float32, len(l.tables)*P)
	t.Params = make([][]float32, len(l.dense))
	// One round of RPCs for every table and dense parameter: each shard gets one call.
	reqs := make([]client.TableLookup, 0, len(l.tables)+len(l.dense))
	for ti, tb := range l.tables {
		total := 0
		for p := range P {
			total += len(r.List(ti, p))
		}
		fids := make([]int64, 0, total)
		for p := range P {
			for _, v := range r.List(ti, p) {
				fids = append(fids, int64(v))
			}
		}
		reqs = append(reqs, client.TableLookup{Table: tb.name, Dim: tb.dim, Fids: fids})
	}
	for _, d := range l.dense {
		reqs = append(reqs, client.TableLookup{Table: d.table, Dim: d.cols, Fids: d.ids})
	}
	res, err := l.ps.LookupTables(ctx, reqs, client.LookupOptions{CreateIfMissing: l.create})
	if err != nil {
		return nil, fmt.Errorf("train.Lookup: %w", err)
	}
	for ti, tb := range l.tables {
		off, emb := 0, res[ti].Embeddings
		for p := range P {
			m := len(r.List(ti, p)) * tb.dim
			t.Emb[ti*P+p] = emb[off : off+m : off+m]
			off += m
		}
	}
	for j := range l.dense {
		t.Params[j] = res[len(l.tables)+j].Embeddings
	}
	for k, e := range t.Emb {
		if e == nil {
			t.Emb[k] = []float32{}
		}
	}
	return &element.Sharded{Batch: in.Batch, Shard: in.Shard, Tensors: in.Tensors, Train: &t}, nil
}

// Apply is the training pipeline's last step: for every *element.Sharded it takes a
// global step on PS shard 0 and applies the batch's aggregated embedding gradients and
// dense-parameter gradients (element.TrainState.Grads and ParamGrads) with request ids
// derived from the batch id, so that a retried bundle applies each batch once. A bundle is
// a worker of the training barrier from its start to its end: at a step boundary it pauses
// while the controller holds the barrier. Once the global step passes j.MaxSteps, or the
// barrier says stop, the rest of the bundle is skipped. The applied steps, examples and
// loss are Beam counters (CounterNS), read by the driver; each bundle also emits its
// Stats, the step's output. Runs on 2×j.Parallelism goroutines per bundle.
func Apply(s beam.Scope, col beam.PCollection, j Job) beam.PCollection {
	s = s.Scope("train.Apply")
	if _, err := j.lookupTables(); err != nil {
		panic(fmt.Errorf("train.Apply: %w", err))
	}
	return beam.ParDo(s, &applyFn{Job: j}, col)
}

// discardStats consumes Apply's output. A fused stage needs an output that a later stage
// reads: prism (v2.77.0) busy-waits on a bundle whose stage has none (its progress loop
// selects on the already-closed data channel), which cost the training pipeline a core.
func discardStats(Stats) {}

// Discard consumes the bundles' Stats of Apply (reshuffled, so that Apply's stage has an
// output another stage reads).
func Discard(s beam.Scope, stats beam.PCollection) {
	s = s.Scope("train.Discard")
	beam.ParDo0(s, discardStats, beam.Reshuffle(s, stats))
}

type applyFn struct {
	Job Job

	ps      psConn
	dense   []denseParam
	tables  []sparseTable
	gate    *controller.Gate
	stopped atomic.Bool
	pool    *ordered.Pool[*ApplyStep, *element.Sharded, Stats]
	bundle  Stats // the bundle's counts so far
}

func (f *applyFn) Setup(ctx context.Context) error {
	var err error
	if f.ps, err = f.Job.connect(ctx); err != nil {
		return err
	}
	if f.tables, err = f.Job.lookupTables(); err != nil {
		return err
	}
	f.dense, err = f.Job.denseParams()
	return err
}

func (f *applyFn) StartBundle(ctx context.Context, _ func(Stats)) error {
	g, err := controller.JoinGate(ctx, f.ps.c.TrainingBarrier())
	if err != nil {
		return fmt.Errorf("train.Apply: %w", err)
	}
	f.gate = g
	f.stopped.Store(false)
	// Twice the lookup's workers: an apply takes a global step and then its updates, so it
	// is the slower PS call, and batches queued before it would only grow stale.
	f.pool, err = ordered.New(ctx, 2*f.Job.parallelism(), 0, func() (*ApplyStep, error) {
		return &ApplyStep{ps: f.ps.c, job: &f.Job, tables: f.tables, dense: f.dense, gate: g, metrics: f.ps.metrics, stopped: &f.stopped}, nil
	}, func(ctx context.Context, st *ApplyStep, in *element.Sharded) (Stats, error) {
		before := st.stats
		err := st.Run(ctx, in)
		d := st.stats
		d.Steps, d.Examples, d.Skipped, d.LossSum = d.Steps-before.Steps, d.Examples-before.Examples, d.Skipped-before.Skipped, d.LossSum-before.LossSum
		return d, err
	})
	if err != nil {
		return err
	}
	// Every counter is touched at the start, so that the runner knows them from the first
	// progress report on. Prism (v2.77.0) keeps only one of the final reports of several
	// bundles that end together with counters it has not seen yet: the bundles a split
	// leaves (a paused step makes prism split) would lose their counts.
	f.count(ctx, Stats{})
	return nil
}

// count adds one element's Stats to the Beam counters (on the bundle's goroutine).
func (f *applyFn) count(ctx context.Context, st Stats) {
	beam.NewCounter(CounterNS, CounterSteps).Inc(ctx, st.Steps)
	beam.NewCounter(CounterNS, CounterExamples).Inc(ctx, st.Examples)
	beam.NewCounter(CounterNS, CounterSkipped).Inc(ctx, st.Skipped)
	beam.NewCounter(CounterNS, CounterLossNanos).Inc(ctx, int64(math.Round(st.LossSum*1e9)))
}

func (f *applyFn) ProcessElement(ctx context.Context, in *element.Sharded, _ func(Stats)) error {
	return f.pool.Submit(in, func(st Stats) { f.count(ctx, st); f.bundle.Add(st) })
}

func (f *applyFn) FinishBundle(ctx context.Context, emit func(Stats)) error {
	err := f.pool.Flush(func(st Stats) { f.count(ctx, st); f.bundle.Add(st) })
	if err == nil {
		emit(f.bundle)
	}
	f.bundle = Stats{}
	if f.gate != nil {
		if lerr := leaveGate(f.gate); lerr != nil {
			err = errors.Join(err, lerr)
		}
		f.gate = nil
	}
	return err
}

func (f *applyFn) Teardown() error { return f.ps.close() }

// ApplyStep applies batches: the body of the Apply DoFn's workers, exported for plain-Go
// callers. Each worker has its own; they share the gate and the stop flag.
type ApplyStep struct {
	ps      *client.Client
	job     *Job
	tables  []sparseTable
	dense   []denseParam
	gate    *controller.Gate
	metrics *Metrics
	stopped *atomic.Bool
	stats   Stats
}

// NewApplyStep builds an apply worker of j on ps (gate and metrics may be nil).
func NewApplyStep(j *Job, ps *client.Client, gate *controller.Gate, m *Metrics, stopped *atomic.Bool) (*ApplyStep, error) {
	tables, err := j.lookupTables()
	if err != nil {
		return nil, err
	}
	dense, err := j.denseParams()
	if err != nil {
		return nil, err
	}
	if stopped == nil {
		stopped = &atomic.Bool{}
	}
	return &ApplyStep{ps: ps, job: j, tables: tables, dense: dense, gate: gate, metrics: m, stopped: stopped}, nil
}

// Stats returns the counters of the batches this worker applied or skipped.
func (a *ApplyStep) Stats() Stats { return a.stats }

// Stopped reports whether max_steps or the barrier stopped the workers sharing its flag.
func (a *ApplyStep) Stopped() bool { return a.stopped.Load() }

// Run applies one batch (or skips it once stopped). Only RPC failures are errors.
func (a *ApplyStep) Run(ctx context.Context, in *element.Sharded) error {
	if a.stopped.Load() {
		a.stats.Skipped++
		return nil
	}
	t := in.Train
	if t == nil || t.ID == "" || len(t.Grads) != len(a.tables)*in.Shard.PS || len(t.ParamGrads) != len(a.dense) {
		return fmt.Errorf("train.Apply: element of %d rows lacks its lookup, gradients or id", in.Rows())
	}
	if a.gate != nil && a.gate.Placed() {
		// The step boundary: pause while the barrier is placed (a checkpoint taken
		// meanwhile holds every applied step).
		stop, err := a.gate.Boundary(ctx)
		if err != nil {
			return fmt.Errorf("train.Apply: %w", err)
		}
		if stop {
			a.stopped.Store(true)
			a.stats.Skipped++
			return nil
		}
	}
	gs, err := a.ps.GlobalStepState(ctx, 1, t.ID+"/step")
	if err != nil {
		return fmt.Errorf("train.Apply: global step: %w", err)
	}
	step := gs.GetStep()
	if a.gate != nil {
		a.gate.Observe(gs.GetBarrierPlaced(), gs.GetBarrierAction())
	}
	if a.job.MaxSteps > 0 && step > a.job.MaxSteps {
		a.stopped.Store(true)
		a.stats.Skipped++
		return nil
	}
	P := in.Shard.PS
	// One round of RPCs for every table and dense parameter: each shard gets one call.
	reqs := make([]client.ApplyRequest, 0, len(a.tables)+len(a.dense))
	for ti, tb := range a.tables {
		n := 0
		for p := range P {
			n += len(t.Grads[ti*P+p].Fids)
		}
		fids := make([]int64, 0, n)
		grads := make([]float32, 0, n*tb.dim)
		for p := range P {
			g := &t.Grads[ti*P+p]
			for _, v := range g.Fids {
				fids = append(fids, int64(v))
			}
			grads = append(grads, g.Grads...)
		}
		if len(grads) != n*tb.dim {
			return fmt.Errorf("train.Apply: table %q: %d gradients for %d fids of dim %d", tb.name, len(grads), n, tb.dim)
		}
		reqs = append(reqs, client.ApplyRequest{Table: tb.name, Dim: tb.dim, Fids: fids, Grads: grads, Step: step, RequestID: t.ID + "/" + tb.name})
	}
	for j, d := range a.dense {
		reqs = append(reqs, client.ApplyRequest{Table: d.table, Dim: d.cols, Fids: d.ids, Grads: t.ParamGrads[j], Step: step, RequestID: t.ID + "/" + d.table})
	}
	if _, err := a.ps.ApplyTables(ctx, reqs); err != nil {
		return fmt.Errorf("train.Apply: %w", err)
	}
	a.stats.Steps++
	a.stats.Examples += int64(t.Rows)
	a.stats.LossSum += t.Loss
	a.metrics.observeStep(t.Rows, t.Loss, t.Labels, t.Preds)
	return nil
}

// leaveTimeout bounds a bundle's goodbye to the barrier.
func leaveGate(g *controller.Gate) error {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	if err := g.Close(ctx); err != nil {
		return fmt.Errorf("pipelines/train: leave the training barrier: %w", err)
	}
	return nil
}

// modelParams are the dense parameters of a model spec (for the PS tables).
func modelParams(spec tmodel.Spec, j *Job) ([]kmodel.Param, error) {
	st, err := tmodel.NewStep(spec, j.Kernels)
	if err != nil {
		return nil, err
	}
	return st.Params(), nil
}
