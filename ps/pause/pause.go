// Package pause is the training barrier (Monolith's BarrierOp, spec/serving-and-control.md
// §2.2): the controller places and removes it, and workers pause at a step boundary while
// it is placed. The parameter server hosts one (shard 0); tests and local runs use it directly.
//
// Departures (decision C2 and Beam): workers join and leave, taking the lowest free index,
// instead of a fixed num_workers with index 0 reserved for the "placed" flag — a Beam
// runner decides how many workers there are, and every worker, index 0 included, pauses.
// Placing twice is ErrAlreadyPlaced and changes nothing. Callbacks are the caller's: a
// worker learns the action from Wait and runs its own.
package pause

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrAlreadyPlaced reports a barrier placed twice.
var ErrAlreadyPlaced = errors.New("barrier is placed already")

// ErrNotJoined reports a worker index that has not joined, for example because the
// barrier's PS shard restarted since: the worker joins again.
var ErrNotJoined = errors.New("not joined")

// Status is a snapshot of the barrier.
type Status struct {
	Placed bool
	Action string
	// Blocked are the joined workers paused at the barrier, Unblocked the other joined
	// workers, both ascending.
	Blocked, Unblocked []int32
}

type slot uint8

const (
	free slot = iota
	running
	blocked
)

// Barrier is the barrier. Its methods are safe for concurrent use; the zero value is not
// usable, call New.
type Barrier struct {
	mu      sync.Mutex
	placed  bool
	action  string
	removed chan struct{} // closed when the barrier is removed; replaced at Place
	slots   []slot
}

// New returns a removed barrier with no workers.
func New() *Barrier {
	r := make(chan struct{})
	close(r)
	return &Barrier{removed: r}
}

// Join adds a worker and returns its index: the lowest free one.
func (b *Barrier) Join() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, s := range b.slots {
		if s == free {
			b.slots[i] = running
			return i
		}
	}
	b.slots = append(b.slots, running)
	return len(b.slots) - 1
}

// Leave frees index i.
func (b *Barrier) Leave(i int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(i); err != nil {
		return err
	}
	b.slots[i] = free
	for len(b.slots) > 0 && b.slots[len(b.slots)-1] == free {
		b.slots = b.slots[:len(b.slots)-1]
	}
	return nil
}

// check reports an index that is not a joined worker. b.mu is held.
func (b *Barrier) check(i int) error {
	if i < 0 || i >= len(b.slots) || b.slots[i] == free {
		return fmt.Errorf("pause: worker index %d has %w the barrier (%d slots)", i, ErrNotJoined, len(b.slots))
	}
	return nil
}

// Place places the barrier with action; ErrAlreadyPlaced when it is placed.
func (b *Barrier) Place(action string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.placed {
		return ErrAlreadyPlaced
	}
	b.placed, b.action, b.removed = true, action, make(chan struct{})
	return nil
}

// Remove removes the barrier; nothing happens when it is not placed.
func (b *Barrier) Remove() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.placed {
		b.placed = false
		close(b.removed)
	}
}

// Placed reports whether the barrier is placed, and its action.
func (b *Barrier) Placed() (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.placed {
		return false, ""
	}
	return true, b.action
}

// Wait pauses worker i: while the barrier is placed the worker is blocked. It returns
// placed false once the barrier is removed (or at once when it is not placed), or placed
// true with the action after hold (hold ≤ 0: at once) or when ctx ends; the worker then
// stays blocked until its next Wait or Leave.
func (b *Barrier) Wait(ctx context.Context, i int, hold time.Duration) (placed bool, action string, err error) {
	b.mu.Lock()
	if err := b.check(i); err != nil {
		b.mu.Unlock()
		return false, "", err
	}
	if !b.placed {
		b.slots[i] = running
		b.mu.Unlock()
		return false, "", nil
	}
	b.slots[i] = blocked
	action, removed := b.action, b.removed
	b.mu.Unlock()
	if hold > 0 {
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-removed:
			b.mu.Lock()
			if b.check(i) == nil && b.slots[i] == blocked && !b.placed {
				b.slots[i] = running
			}
			placed, action = b.placed, b.action
			b.mu.Unlock()
			return placed, action, nil
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return true, action, nil
}

// Status returns a snapshot.
func (b *Barrier) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Status{Placed: b.placed, Action: b.action}
	if !b.placed {
		st.Action = ""
	}
	for i, s := range b.slots {
		switch s {
		case blocked:
			st.Blocked = append(st.Blocked, int32(i))
		case running:
			st.Unblocked = append(st.Unblocked, int32(i))
		}
	}
	return st
}
