package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/monolith-go/monolith/ps/pause"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// ActionSave is the barrier action of a consistent checkpoint (BarrierSaverListener).
const ActionSave = "Save"

// SaveListener is called around every checkpoint (Monolith's CheckpointSaverListener),
// with the global step the checkpoint records.
type SaveListener interface {
	BeforeSave(ctx context.Context, step int64) error
	AfterSave(ctx context.Context, step int64) error
}

// BeforeSaveOnly forwards only BeforeSave to L (hook_utils.BeforeSaveListener), so that
// one listener's phases can sit in different lists.
type BeforeSaveOnly struct{ L SaveListener }

// BeforeSave calls L.BeforeSave.
func (b BeforeSaveOnly) BeforeSave(ctx context.Context, step int64) error {
	return b.L.BeforeSave(ctx, step)
}

// AfterSave does nothing.
func (BeforeSaveOnly) AfterSave(context.Context, int64) error { return nil }

func (b BeforeSaveOnly) String() string { return fmt.Sprintf("BeforeSaveListener(%v)", b.L) }

// AfterSaveOnly forwards only AfterSave to L (hook_utils.AfterSaveListener).
type AfterSaveOnly struct{ L SaveListener }

// BeforeSave does nothing.
func (AfterSaveOnly) BeforeSave(context.Context, int64) error { return nil }

// AfterSave calls L.AfterSave.
func (a AfterSaveOnly) AfterSave(ctx context.Context, step int64) error {
	return a.L.AfterSave(ctx, step)
}

func (a AfterSaveOnly) String() string { return fmt.Sprintf("AfterSaveListener(%v)", a.L) }

// SavePS is the part of ps/client.Client a Saver uses.
type SavePS interface {
	GlobalStep(ctx context.Context, increment int64, requestID string) (int64, error)
	SaveAt(ctx context.Context, step int64) ([]*pspb.SaveResponse, error)
}

// Saver writes consistent checkpoints of a PS job (BarrierSaverListener): it places the
// barrier with ActionSave, waits up to MaxPending for every joined worker to pause, reads
// the global step, runs the listeners' BeforeSave, has every shard save recording that
// step, runs AfterSave, and removes the barrier. A barrier already placed (an operator's
// pause) is used as it is and left placed. Saves are serialized. Saver is also the
// controller's Trainer.
//
// Workers that have not paused after MaxPending are dead or stuck: the saver frees their
// slots, so that later saves do not wait for them (a live one joins again at its next step
// boundary, see Gate), and saves anyway. Monolith went ahead silently; here the save says
// so: SaveResult.Consistent is false, the listeners see it (SaveConsistent) and the state
// recorder lists the checkpoint as inconsistent.
type Saver struct {
	PS      SavePS
	Barrier Barrier // nil: no barrier, the workers go on during the save
	// MaxPending bounds the wait for the workers (default 30 s, Monolith's
	// max_pending_seconds_for_barrier); Poll is its period (default 50 ms).
	MaxPending, Poll time.Duration
	Listeners        []SaveListener
	Log              *slog.Logger
	Metrics          *Metrics // counts the saves (nil: not counted)

	mu sync.Mutex
}

// GlobalStep reads the PS global step.
func (s *Saver) GlobalStep(ctx context.Context) (int64, error) { return s.PS.GlobalStep(ctx, 0, "") }

// SaveCheckpoint is Save for the controller.
func (s *Saver) SaveCheckpoint(ctx context.Context) error {
	_, err := s.Save(ctx)
	return err
}

// free leaves the slots of workers that never paused.
func (s *Saver) free(ctx context.Context, running []int32, log *slog.Logger) {
	for _, i := range running {
		if err := s.Barrier.Leave(ctx, int(i)); err != nil && !errors.Is(err, pause.ErrNotJoined) {
			log.Warn("checkpoint: free the slot of a worker that did not pause", "index", i, "err", err)
		}
	}
}

// SaveResult is what a save wrote.
type SaveResult struct {
	Step int64
	// Consistent is false when workers still ran after MaxPending; Running are their
	// barrier indexes, whose slots were freed.
	Consistent bool
	Running    []int32
}

type consistencyKey struct{}

// SaveConsistent reports, inside a SaveListener's call, whether the save is consistent
// (every worker paused); outside a save it is true.
func SaveConsistent(ctx context.Context) bool {
	v, ok := ctx.Value(consistencyKey{}).(bool)
	return !ok || v
}

// Save writes a checkpoint and returns its step.
func (s *Saver) Save(ctx context.Context) (res SaveResult, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	defer func() { s.Metrics.observeSave(start, err) }()
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res.Consistent = true
	if s.Barrier != nil {
		owned, running, herr := s.hold(ctx, log)
		if owned {
			defer func() {
				if rerr := s.Barrier.Remove(context.WithoutCancel(ctx)); rerr != nil {
					err = errors.Join(err, fmt.Errorf("controller: remove the save barrier: %w", rerr))
				}
			}()
		}
		if herr != nil {
			return res, herr
		}
		if len(running) > 0 {
			s.free(ctx, running, log)
			res.Consistent, res.Running = false, running
		}
	}
	step, err := s.PS.GlobalStep(ctx, 0, "")
	if err != nil {
		return res, fmt.Errorf("controller: checkpoint: global step: %w", err)
	}
	res.Step = step
	if !res.Consistent {
		log.Warn("checkpoint: not consistent: workers still ran after the wait limit; their slots are freed",
			"step", step, "running", res.Running, "limit", s.maxPending())
	}
	lctx := context.WithValue(ctx, consistencyKey{}, res.Consistent)
	for _, l := range s.Listeners {
		if err := l.BeforeSave(lctx, step); err != nil {
			return res, fmt.Errorf("controller: before the checkpoint at step %d: %w", step, err)
		}
	}
	if _, err := s.PS.SaveAt(ctx, step); err != nil {
		return res, fmt.Errorf("controller: checkpoint at step %d: %w", step, err)
	}
	for _, l := range s.Listeners {
		if err := l.AfterSave(lctx, step); err != nil {
			return res, fmt.Errorf("controller: after the checkpoint at step %d: %w", step, err)
		}
	}
	return res, nil
}

// maxPending is MaxPending or its default.
func (s *Saver) maxPending() time.Duration {
	if s.MaxPending <= 0 {
		return 30 * time.Second
	}
	return s.MaxPending
}

// hold places the save barrier and waits for the workers; owned reports whether this save
// placed it, running the workers that had not paused by the wait limit.
func (s *Saver) hold(ctx context.Context, log *slog.Logger) (owned bool, running []int32, err error) {
	switch err := s.Barrier.Place(ctx, ActionSave); {
	case errors.Is(err, pause.ErrAlreadyPlaced):
		log.Info("checkpoint: the barrier is placed already; saving under it")
	case err != nil:
		return false, nil, fmt.Errorf("controller: place the save barrier: %w", err)
	default:
		owned = true
	}
	pending, poll := s.maxPending(), s.Poll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	deadline := time.Now().Add(pending)
	for {
		st, err := s.Barrier.Status(ctx)
		if err != nil {
			return owned, nil, fmt.Errorf("controller: save barrier status: %w", err)
		}
		if len(st.Unblocked) == 0 {
			return owned, nil, nil
		}
		if time.Now().After(deadline) {
			return owned, st.Unblocked, nil
		}
		select {
		case <-ctx.Done():
			return owned, nil, context.Cause(ctx)
		case <-time.After(poll):
		}
	}
}
