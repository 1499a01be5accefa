package train

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/io/beamio"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/model"
	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/transforms/config"
	tlayout "github.com/monolith-go/monolith/transforms/layout"
)

// Job is what every worker needs to train: plain values only, so that Beam serializes it
// with the DoFns.
type Job struct {
	Kernels  config.Kernels    // FeatureConfigs, PS shard count, version 5, unique
	Model    string            // lr, fm or deepfm
	Bias     string            // bias layout
	Vec      string            // field-vector layout
	Hidden   []int             // DeepFM hidden widths
	MaxSteps int64             // 0: no limit
	Threads  int               // trainers per worker
	PS       []string          // PS shard addresses, shard order
	RunID    string            // prefix of every request id
	Read     beamio.ReadConfig // how files are read (RowsPerBatch = batch size)
	// ConnectRetries and RetryBackoff are the PS clients' retry policy (connect_retries,
	// retry_backoff_ms; zero: the client's defaults).
	ConnectRetries int
	RetryBackoff   time.Duration
	// ProgressEvery is the period of the workers' progress lines on stderr (0: none).
	ProgressEvery time.Duration
}

// clientOptions are the job's PS client options.
func (j *Job) clientOptions() []client.Option {
	var o []client.Option
	if j.ConnectRetries > 0 {
		o = append(o, client.WithRetries(j.ConnectRetries))
	}
	if j.RetryBackoff > 0 {
		o = append(o, client.WithBackoff(j.RetryBackoff, max(j.RetryBackoff, client.DefaultMaxBackoff)))
	}
	return o
}

// newModel binds the job's model to the layout outputs of cfg.
func (j *Job) newModel(cfg *featcfg.Config) (*model.Model, error) {
	kind, err := model.ParseKind(j.Model)
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	m, err := model.New(model.Spec{Kind: kind, Bias: j.Bias, Vec: j.Vec, Hidden: j.Hidden}, ModelInputs(cfg))
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	return m, nil
}

// ModelInputs describes the layout outputs of cfg for kernels/model, in output order.
func ModelInputs(cfg *featcfg.Config) []model.Input {
	names := tlayout.OutputNames(cfg)
	var out []model.Input
	for li := range cfg.Layouts {
		l := &cfg.Layouts[li]
		for i := 0; i < l.Outputs(); i++ {
			in := model.Input{Name: names[len(out)], Width: l.RowSize[i]}
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

// Stats are a worker's training counters; they merge by addition.
type Stats struct {
	Examples int64   `json:"examples"`
	Steps    int64   `json:"steps"`
	Skipped  int64   `json:"skipped"`  // batches computed after max_steps, not applied
	LossSum  float64 `json:"loss_sum"` // summed log loss of the applied batches, before their update
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Examples += o.Examples
	s.Steps += o.Steps
	s.Skipped += o.Skipped
	s.LossSum += o.LossSum
}

// Worker trains and evaluates whole files with Job.Threads concurrent trainers sharing
// one PS client. It is the body of the pipeline's DoFns and of the plain-loop baseline.
type Worker struct {
	job      *Job
	ps       *client.Client
	trainers []*Trainer
	gate     *controller.Gate // nil until JoinBarrier
	metrics  *Metrics         // nil: not counted

	progress io.Writer
	mu       sync.Mutex
	start    time.Time
	last     time.Time
	seen     Stats // since start, for progress lines
}

// NewWorker connects to the job's PS and builds its trainers. progress receives the
// progress lines (nil: none); m counts the applied steps and the PS calls (nil: none).
func NewWorker(j *Job, progress io.Writer, m *Metrics) (*Worker, error) {
	if len(j.PS) == 0 {
		return nil, fmt.Errorf("%w: no PS addresses", ErrConfig)
	}
	opts := j.clientOptions()
	if m != nil {
		opts = append(opts, client.WithMetrics(m.PS))
	}
	ps, err := client.New(j.PS, opts...)
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	w := &Worker{job: j, ps: ps, metrics: m, progress: progress, start: time.Now(), last: time.Now()}
	for range max(1, j.Threads) {
		t, err := newTrainer(j, ps)
		if err != nil {
			_ = ps.Close()
			return nil, err
		}
		t.onStep = w.note
		w.trainers = append(w.trainers, t)
	}
	return w, nil
}

// JoinBarrier joins the training barrier of PS shard 0: from then on the worker's
// trainers pause at their step boundaries while it is placed, and stop under
// controller.ActionStop. Joining twice changes nothing.
func (w *Worker) JoinBarrier(ctx context.Context) error {
	if w.gate != nil {
		return nil
	}
	g, err := controller.JoinGate(ctx, w.ps.TrainingBarrier())
	if err != nil {
		return fmt.Errorf("pipelines/train: %w", err)
	}
	w.setGate(g)
	return nil
}

func (w *Worker) setGate(g *controller.Gate) {
	w.gate = g
	for _, t := range w.trainers {
		t.gate = g
	}
}

// leaveTimeout bounds the worker's goodbye to the barrier.
const leaveTimeout = 5 * time.Second

// LeaveBarrier leaves the training barrier, if joined: the worker's index is free again
// and GetBlockStatus no longer lists it.
func (w *Worker) LeaveBarrier() error {
	if w.gate == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	err := w.gate.Close(ctx)
	w.setGate(nil)
	if err != nil {
		return fmt.Errorf("pipelines/train: leave the training barrier: %w", err)
	}
	return nil
}

// Close leaves the barrier and closes the PS client.
func (w *Worker) Close() error {
	return errors.Join(w.LeaveBarrier(), w.ps.Close())
}

// note counts one applied step in the metrics and for the progress lines.
func (w *Worker) note(rows int, loss float64) {
	w.metrics.observeStep(rows, loss)
	if w.progress == nil || w.job.ProgressEvery <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen.Steps++
	w.seen.Examples += int64(rows)
	w.seen.LossSum += loss
	if now := time.Now(); now.Sub(w.last) >= w.job.ProgressEvery {
		w.last = now
		el := now.Sub(w.start).Seconds()
		fmt.Fprintf(w.progress, "train: %d steps, %d examples, %.0f examples/s, loss %.4f\n",
			w.seen.Steps, w.seen.Examples, float64(w.seen.Examples)/el, w.seen.LossSum/float64(max(1, w.seen.Examples)))
	}
}

func fileHash(file string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, file)
	return h.Sum64()
}

type item struct {
	rec arrow.RecordBatch
	id  string
}

// TrainFile trains on every batch of file. It returns early, without error, once the
// global step passes MaxSteps; the last applies may still be in flight (see Flush).
func (w *Worker) TrainFile(ctx context.Context, file string, epoch int) (stopped bool, err error) {
	fh := fileHash(file)
	i := 0
	errStopRead := errors.New("stop")
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan item, len(w.trainers))
	var wg sync.WaitGroup
	var stop sync.Once
	var stoppedFlag bool
	for _, t := range w.trainers {
		wg.Go(func() {
			for it := range ch {
				if ctx.Err() != nil { // stopped or failed: drain the queue without training
					it.rec.Release()
					continue
				}
				err := t.Train(ctx, it.rec, it.id)
				it.rec.Release()
				switch {
				case errors.Is(err, errStop), errors.Is(err, errStopped):
					stop.Do(func() { stoppedFlag = true; cancel(errStopRead) })
				case err != nil:
					cancel(err)
				}
			}
		})
	}
	rerr := beamio.ReadFile(ctx, file, w.job.Read, func(rec arrow.RecordBatch) error {
		select {
		case ch <- item{rec: rec, id: batchID(w.job.RunID, epoch, fh, i)}:
			i++
			return nil
		case <-ctx.Done():
			rec.Release()
			return context.Cause(ctx)
		}
	})
	close(ch)
	wg.Wait()
	cause := context.Cause(ctx)
	switch {
	case stoppedFlag:
		return true, nil
	case cause != nil && !errors.Is(cause, context.Canceled):
		return false, fmt.Errorf("pipelines/train: %s: %w", file, cause)
	case rerr != nil:
		return false, fmt.Errorf("pipelines/train: %s: %w", file, rerr)
	}
	return false, nil
}

// Flush waits for every apply in flight and returns the statistics since the last Flush.
func (w *Worker) Flush() (Stats, error) {
	var st Stats
	var errs []error
	for _, t := range w.trainers {
		s, err := t.Flush()
		st.Add(s)
		errs = append(errs, err)
	}
	return st, errors.Join(errs...)
}

// EvalFile appends the predictions and labels of every row of file.
func (w *Worker) EvalFile(ctx context.Context, file string, preds, labels []float32) ([]float32, []float32, error) {
	t := w.trainers[0]
	err := beamio.ReadFile(ctx, file, w.job.Read, func(rec arrow.RecordBatch) error {
		defer rec.Release()
		var err error
		preds, labels, err = t.Eval(ctx, rec, preds, labels)
		return err
	})
	if err != nil {
		return preds, labels, fmt.Errorf("pipelines/train: eval %s: %w", file, err)
	}
	return preds, labels, nil
}
