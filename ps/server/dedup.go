package server

import (
	"context"
	"math"
	"strings"
	"sync"

	"github.com/monolith-go/monolith/schemas/pspb"
)

// dedupWindow remembers the request ids of the most recent reservations, so that a retried
// ApplyGradients or GlobalStep whose first attempt was applied is not applied again. It is
// a map from id to entry plus a FIFO ring of the reservations in the order they were made;
// when the ring is full the oldest reservation is forgotten (its id may then be applied
// again). A released reservation forgets its id at once but keeps its ring slot until it
// ages out, so the window holds at most capacity ids and capacity slots.
//
// Each id carries an int64 that a duplicate gets back: the step a GlobalStep returned, 0
// for ApplyGradients.
//
// A nil *dedupWindow is a disabled window: begin reserves nothing and never reports a
// duplicate. Methods are safe for concurrent use.
type dedupWindow struct {
	mu       sync.Mutex
	ids      map[string]*dedupEntry
	ring     []*dedupEntry // reservations, oldest at head once full; grows up to capacity
	head     int           // index of the oldest slot once len(ring) == capacity
	capacity int
}

// dedupState is where a reservation is in its life.
type dedupState uint8

const (
	inFlight dedupState = iota
	committed
	released
)

// dedupEntry is one reservation. Its fields are guarded by the window's mu.
type dedupEntry struct {
	id    string
	value int64
	state dedupState
	// wait is made by the first request waiting on an in-flight entry and closed when the
	// entry is committed or released; nil while nobody waits.
	wait chan struct{}
}

// newDedupWindow returns a window of capacity ids; capacity < 1 returns nil (disabled).
func newDedupWindow(capacity int) *dedupWindow {
	if capacity < 1 {
		return nil
	}
	return &dedupWindow{ids: make(map[string]*dedupEntry), capacity: capacity}
}

// reservation is an id reserved by begin; the request ends it with commit (applied: later
// requests with the id are duplicates) or release (failed: a retry may apply). Only the
// first of the two counts, so a deferred release also covers a panic. The zero
// reservation (no id, or a disabled window) makes both no-ops.
type reservation struct {
	w *dedupWindow
	e *dedupEntry
}

// begin checks id and reserves it atomically. When id is in the window and committed,
// begin reports dup with the value the original request stored. When it is in flight
// (another request holds the reservation), begin waits for that request: its commit makes
// this one a duplicate, its release lets this one reserve the id. An empty id or a disabled
// window reserves nothing. err is ctx's error when ctx ends while waiting.
//
// A request holding a reservation must never wait in begin, so waits cannot form a cycle.
func (w *dedupWindow) begin(ctx context.Context, id string) (r reservation, value int64, dup bool, err error) {
	if w == nil || id == "" {
		return reservation{}, 0, false, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		e := w.ids[id]
		if e == nil {
			e = &dedupEntry{id: id}
			w.insertLocked(e)
			return reservation{w: w, e: e}, 0, false, nil
		}
		if e.state == inFlight {
			if e.wait == nil {
				e.wait = make(chan struct{})
			}
			wait := e.wait
			w.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				w.mu.Lock()
				return reservation{}, 0, false, ctx.Err()
			}
			w.mu.Lock()
		}
		// The entry waited on counts even if it left the window meanwhile (evicted while in
		// flight): its commit makes this request a duplicate.
		if e.state == committed {
			return reservation{}, e.value, true, nil
		}
	}
}

// insertLocked adds e as the newest reservation, evicting the oldest when full.
func (w *dedupWindow) insertLocked(e *dedupEntry) {
	w.ids[e.id] = e
	if len(w.ring) < w.capacity {
		w.ring = append(w.ring, e)
		return
	}
	old := w.ring[w.head]
	if w.ids[old.id] == old { // not released, and not reserved again since
		delete(w.ids, old.id)
	}
	w.ring[w.head] = e
	w.head = (w.head + 1) % w.capacity
}

// commit records that the request was applied and stores value for its duplicates.
func (r reservation) commit(value int64) {
	if r.e == nil {
		return
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if r.e.state != inFlight {
		return
	}
	r.e.value, r.e.state = value, committed
	r.wakeLocked()
}

// release forgets the id (the request failed), so that a retry can apply it.
func (r reservation) release() {
	if r.e == nil {
		return
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if r.e.state != inFlight {
		return
	}
	r.e.state = released
	if r.w.ids[r.e.id] == r.e {
		delete(r.w.ids, r.e.id)
	}
	r.wakeLocked()
}

func (r reservation) wakeLocked() {
	if r.e.wait != nil {
		close(r.e.wait)
		r.e.wait = nil
	}
}

// dedupSet is a shard's duplicate window: one dedupWindow of capacity ids per requester,
// the part of a request id before its first ':' or '/' (training's run id, one per worker
// process), so that one worker's ids never push another's out of the window. It holds at
// most maxParts windows; a requester beyond that evicts the one used least recently. A nil
// *dedupSet is disabled. Methods are safe for concurrent use.
type dedupSet struct {
	mu       sync.Mutex
	parts    map[string]*dedupPart
	capacity int
	maxParts int
	clock    uint64
}

type dedupPart struct {
	w    *dedupWindow
	used uint64
}

// newDedupSet returns a set of windows of capacity ids for up to maxParts requesters;
// capacity < 1 returns nil (disabled).
func newDedupSet(capacity, maxParts int) *dedupSet {
	if capacity < 1 {
		return nil
	}
	return &dedupSet{parts: map[string]*dedupPart{}, capacity: capacity, maxParts: max(1, maxParts)}
}

// requester is the part of id before its first ':' or '/' ("" when it has neither).
func requester(id string) string {
	if i := strings.IndexAny(id, ":/"); i >= 0 {
		return id[:i]
	}
	return ""
}

// window returns the requester's window of id, creating it (and evicting the least
// recently used one when full).
func (d *dedupSet) window(id string) *dedupWindow {
	key := requester(id)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clock++
	p := d.parts[key]
	if p == nil {
		if len(d.parts) >= d.maxParts {
			var oldest string
			var at uint64 = math.MaxUint64
			for k, q := range d.parts {
				if q.used < at {
					oldest, at = k, q.used
				}
			}
			delete(d.parts, oldest)
		}
		p = &dedupPart{w: newDedupWindow(d.capacity)}
		d.parts[key] = p
	}
	p.used = d.clock
	return p.w
}

// begin is dedupWindow.begin in the window of id's requester.
func (d *dedupSet) begin(ctx context.Context, id string) (reservation, int64, bool, error) {
	if d == nil || id == "" {
		return reservation{}, 0, false, nil
	}
	return d.window(id).begin(ctx, id)
}

// snapshot lists the committed ids of every window, oldest first within each, with their
// values: what a checkpoint saves.
func (d *dedupSet) snapshot() []*pspb.AppliedRequest {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	windows := make([]*dedupWindow, 0, len(d.parts))
	for _, p := range d.parts {
		windows = append(windows, p.w)
	}
	d.mu.Unlock()
	var out []*pspb.AppliedRequest
	for _, w := range windows {
		w.mu.Lock()
		n := len(w.ring)
		for i := range n {
			e := w.ring[(w.head+i)%n]
			if e.state == committed && w.ids[e.id] == e {
				out = append(out, &pspb.AppliedRequest{Id: e.id, Value: e.value})
			}
		}
		w.mu.Unlock()
	}
	return out
}

// load records id as applied with value (a restored checkpoint's).
func (d *dedupSet) load(id string, value int64) {
	if d == nil || id == "" {
		return
	}
	w := d.window(id)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ids[id] == nil {
		w.insertLocked(&dedupEntry{id: id, value: value, state: committed})
	}
}
