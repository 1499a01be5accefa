package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/monolith-go/monolith/schemas/pspb"
)

// Barrier status codes (pspb.BarrierResponse.status_code).
const (
	statusOK      = 0
	statusFailure = 1
	statusTimeout = 2
)

// maxIdleBarriers bounds the barrier ids remembered with nobody waiting; beyond it the least
// recently used idle ones are forgotten (their num_workers is fixed again by the next
// request).
const maxIdleBarriers = 4096

// barrierState is one barrier id (spec/ps.md §8.4). Guarded by barriers.mu.
type barrierState struct {
	numWorkers int32
	generation int64
	arrived    map[int32]struct{} // workers arrived in the current generation
	release    chan struct{}      // closed when the current generation is released
	lastUsed   int64              // barriers.clock at the last request
}

// barriers is the generation-numbered barrier table of a server.
type barriers struct {
	mu struct {
		sync.Mutex
		m     map[string]*barrierState
		clock int64
	}
	// stopping is closed when the server shuts down; waiters return Unavailable.
	stopping <-chan struct{}
	// testHookGaveUp, when set (by tests only), is called by a waiter that stopped waiting
	// for its release, before it takes the lock to check its generation.
	testHookGaveUp func()
}

func newBarriers(stopping <-chan struct{}) *barriers {
	b := &barriers{stopping: stopping}
	b.mu.m = make(map[string]*barrierState)
	return b
}

func barrierFail(code int32, format string, args ...any) *pspb.BarrierResponse {
	return &pspb.BarrierResponse{StatusCode: code, ErrorMessage: fmt.Sprintf(format, args...)}
}

// errStopping is returned to barrier waiters when the server shuts down.
var errStopping = errors.New("ps/server: server is shutting down")

// arrive registers req.worker_id and waits for its generation to be released, its timeout,
// the end of ctx or the server's shutdown. A non-nil error means the RPC itself fails
// (ctx ended, shutdown); otherwise the response carries the status.
func (b *barriers) arrive(ctx context.Context, req *pspb.BarrierRequest) (*pspb.BarrierResponse, error) {
	id, w, n := req.GetBarrierId(), req.GetWorkerId(), req.GetNumWorkers()
	// Validation first: nothing below mutates state for an invalid request.
	switch {
	case n <= 0:
		return barrierFail(statusFailure, "barrier %q: num_workers %d, want > 0", id, n), nil
	case w < 0 || w >= n:
		return barrierFail(statusFailure, "barrier %q: worker_id %d out of range [0, %d)", id, w, n), nil
	case req.GetTimeoutMs() <= 0:
		return barrierFail(statusFailure, "barrier %q: timeout_ms %d, want > 0", id, req.GetTimeoutMs()), nil
	}
	timeout := time.Duration(math.MaxInt64)
	if ms := req.GetTimeoutMs(); ms < int64(math.MaxInt64/time.Millisecond) {
		timeout = time.Duration(ms) * time.Millisecond
	}

	b.mu.Lock()
	b.mu.clock++
	st := b.mu.m[id]
	if st == nil {
		b.pruneLocked()
		st = &barrierState{numWorkers: n, arrived: make(map[int32]struct{}), release: make(chan struct{})}
		b.mu.m[id] = st
	}
	st.lastUsed = b.mu.clock
	if st.numWorkers != n {
		b.mu.Unlock()
		return barrierFail(statusFailure, "barrier %q: num_workers %d differs from %d fixed by its first request", id, n, st.numWorkers), nil
	}
	gen := st.generation
	if _, dup := st.arrived[w]; dup {
		b.mu.Unlock()
		return barrierFail(statusFailure, "barrier %q: worker %d already arrived in generation %d", id, w, gen), nil
	}
	st.arrived[w] = struct{}{}
	if int32(len(st.arrived)) == st.numWorkers {
		st.releaseLocked()
		b.mu.Unlock()
		return &pspb.BarrierResponse{Generation: gen}, nil
	}
	released := st.release
	b.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var cause error
	select {
	case <-released:
		return &pspb.BarrierResponse{Generation: gen}, nil
	case <-timer.C:
	case <-ctx.Done():
		cause = ctx.Err()
	case <-b.stopping:
		cause = errStopping
	}
	if b.testHookGaveUp != nil {
		b.testHookGaveUp()
	}
	// Leave the arrived set unless the generation was released meanwhile.
	b.mu.Lock()
	defer b.mu.Unlock()
	if st.generation != gen {
		return &pspb.BarrierResponse{Generation: gen}, nil
	}
	delete(st.arrived, w)
	if cause != nil {
		return nil, cause
	}
	return barrierFail(statusTimeout, "barrier %q: timed out after %v in generation %d with %d of %d workers arrived",
		id, timeout, gen, len(st.arrived)+1, st.numWorkers), nil
}

// releaseLocked releases the current generation and starts the next one.
func (st *barrierState) releaseLocked() {
	close(st.release)
	st.generation++
	st.arrived = make(map[int32]struct{})
	st.release = make(chan struct{})
}

// pruneLocked forgets the least recently used idle barriers once more than maxIdleBarriers
// ids are known. A barrier with a waiter is never forgotten.
func (b *barriers) pruneLocked() {
	if len(b.mu.m) < maxIdleBarriers {
		return
	}
	type idle struct {
		id   string
		used int64
	}
	var ids []idle
	for id, st := range b.mu.m {
		if len(st.arrived) == 0 {
			ids = append(ids, idle{id, st.lastUsed})
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].used < ids[j].used })
	for _, x := range ids[:(len(ids)+1)/2] {
		delete(b.mu.m, x.id)
	}
}
