package train

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/monolith-go/monolith/io/tfevents"
	"github.com/monolith-go/monolith/ps/client"
)

// Summary tags of the event file (TensorBoard's scalar names).
const (
	TagLoss           = "loss"
	TagAUC            = "auc" // streaming, over every applied row (Monolith's host call)
	TagExamplesPerSec = "examples_per_sec"
	TagGlobalStep     = "global_step"
	TagEvalAUC        = "eval/auc"
	TagEvalLogLoss    = "eval/logloss"
	TagBayesAUC       = "eval/bayes_auc"
	TagBayesLogLoss   = "eval/bayes_logloss"
)

// summaries writes the job's scalar summaries (Monolith's save_summary_steps) into the
// model directory's event file and the interval gauges of Metrics: every `every` global
// steps the mean loss and examples/s since the last summary, and the global step. The
// driver polls the global step on PS shard 0; the loss and examples come from the workers
// of this process (Metrics). It is safe for concurrent use.
type summaries struct {
	m        *Metrics
	ps       *client.Client
	every    int64
	w        *tfevents.Writer // nil: gauges only
	log      io.Writer        // progress lines (nil: none)
	logEvery time.Duration    // at most one progress line per period
	logged   time.Time

	mu       sync.Mutex
	last     time.Time
	examples int64   // at the last summary
	loss     float64 // at the last summary
	step     int64   // global step of the last summary (-1: none yet)
	err      error   // the first write error

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newSummaries opens the event file in dir ("" = no file) for summaries every `every`
// global steps (≤ 0: only the final and the eval summaries). An unwritable dir fails here,
// before training starts.
func newSummaries(m *Metrics, dir string, every int64, log io.Writer, logEvery time.Duration) (*summaries, error) {
	s := &summaries{m: m, every: every, log: log, logEvery: logEvery, last: time.Now(), step: -1}
	if dir != "" {
		w, err := tfevents.Create(dir)
		if err != nil {
			return nil, fmt.Errorf("pipelines/train: model directory %s: %w", dir, err)
		}
		s.w = w
	}
	_, s.examples, s.loss = m.totals()
	return s, nil
}

// Path is the event file ("" when there is none).
func (s *summaries) Path() string {
	if s.w == nil {
		return ""
	}
	return s.w.Path()
}

// pollEvery is the period of the driver's global-step reads: a summary is written at most
// this late (tens of steps on a fast job), as the polled step is what it is labelled with.
const pollEvery = 50 * time.Millisecond

// start polls the global step on ps (every pollEvery) while training runs and writes a
// summary each time it passes the next multiple of every.
func (s *summaries) start(ctx context.Context, ps *client.Client) {
	s.ps = ps
	if s.every <= 0 {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Go(func() {
		next := int64(0)
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			step, err := s.ps.GlobalStep(ctx, 0, "")
			if err != nil {
				continue // training fails on the PS itself; the next tick tries again
			}
			if next == 0 {
				next = (step/s.every + 1) * s.every
			}
			if step < next {
				continue
			}
			s.train(step)
			for next <= step {
				next += s.every
			}
		}
	})
}

// stop ends the polling.
func (s *summaries) stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// train writes the training summary at step: the mean loss and examples/s since the last
// one (nothing when no step was applied since, or when step was summarized already).
func (s *summaries) train(step int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	_, examples, loss := s.m.totals()
	dex, dloss, dt := examples-s.examples, loss-s.loss, now.Sub(s.last).Seconds()
	if dex <= 0 || step <= s.step {
		return
	}
	mean, eps := dloss/float64(dex), float64(dex)/max(dt, 1e-9)
	s.m.loss.Set(mean)
	s.m.examplesPerSec.Set(eps)
	s.m.globalStep.Set(float64(step))
	s.examples, s.loss, s.last, s.step = examples, loss, now, step
	s.write(step, now, tfevents.Scalar{Tag: TagLoss, Value: mean}, tfevents.Scalar{Tag: TagAUC, Value: s.m.TrainAUC()},
		tfevents.Scalar{Tag: TagExamplesPerSec, Value: eps},
		tfevents.Scalar{Tag: TagGlobalStep, Value: float64(step)})
	if s.log != nil && now.Sub(s.logged) >= s.logEvery {
		s.logged = now
		fmt.Fprintf(s.log, "train: global step %d: loss %.4f, %.0f examples/s\n", step, mean, eps)
	}
}

// eval writes an evaluation's summary at step, with the Bayes figures of planted data.
func (s *summaries) eval(step int64, sum *Summary) {
	if sum.EvalAUC == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m.evalAUC.Set(*sum.EvalAUC)
	s.m.evalLogLoss.Set(*sum.EvalLogLoss)
	s.m.evalExamples.Set(float64(sum.EvalExamples))
	vals := []tfevents.Scalar{{Tag: TagEvalAUC, Value: *sum.EvalAUC}, {Tag: TagEvalLogLoss, Value: *sum.EvalLogLoss}}
	if sum.BayesAUC != nil {
		vals = append(vals, tfevents.Scalar{Tag: TagBayesAUC, Value: *sum.BayesAUC})
	}
	if sum.BayesLogLoss != nil {
		vals = append(vals, tfevents.Scalar{Tag: TagBayesLogLoss, Value: *sum.BayesLogLoss})
	}
	s.write(step, time.Now(), vals...)
}

// write appends one event and flushes it, so that TensorBoard and monolith inspect see it
// while the job runs; the first error is kept for close.
func (s *summaries) write(step int64, t time.Time, vals ...tfevents.Scalar) {
	if s.w == nil || s.err != nil {
		return
	}
	if err := s.w.WriteScalars(step, t, vals...); err != nil {
		s.err = err
		return
	}
	s.err = s.w.Flush()
}

// close stops polling and closes the event file, returning the first write error.
func (s *summaries) close() error {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return s.err
	}
	cerr := s.w.Close()
	s.w = nil
	if s.err != nil {
		return fmt.Errorf("pipelines/train: summaries: %w", s.err)
	}
	if cerr != nil {
		return fmt.Errorf("pipelines/train: summaries: %w", cerr)
	}
	return nil
}
