package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dedupOp is one step of a window scenario: begin an id (expecting dup and value), or
// commit or release the reservation an earlier begin of the id holds.
type dedupOp struct {
	op    string // "begin", "commit", "release"
	id    string
	value int64 // commit: stored; begin: wanted when dup
	dup   bool  // begin: wanted
}

func opBegin(id string) dedupOp { return dedupOp{op: "begin", id: id} }

func opDup(id string, value int64) dedupOp {
	return dedupOp{op: "begin", id: id, value: value, dup: true}
}

func opCommit(id string, value int64) dedupOp { return dedupOp{op: "commit", id: id, value: value} }

func opRelease(id string) dedupOp { return dedupOp{op: "release", id: id} }

// opApplied is a begin and commit of a new id.
func opApplied(id string, value int64) []dedupOp {
	return []dedupOp{opBegin(id), opCommit(id, value)}
}

func seq(parts ...any) []dedupOp {
	var out []dedupOp
	for _, p := range parts {
		switch p := p.(type) {
		case dedupOp:
			out = append(out, p)
		case []dedupOp:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("seq: %T", p))
		}
	}
	return out
}

func TestDedupWindow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
		ops      []dedupOp
		wantLen  int
	}{
		{"duplicate gets the stored value", 4, seq(opApplied("a", 7), opDup("a", 7), opDup("a", 7)), 1},
		{"ids are independent", 4, seq(opApplied("a", 1), opApplied("b", 2), opDup("b", 2), opDup("a", 1)), 2},
		{"empty id is never deduplicated", 4, seq(opApplied("", 1), opBegin(""), opCommit("", 2), opBegin("")), 0},
		{"disabled window", -1, seq(opApplied("a", 1), opBegin("a"), opCommit("a", 1), opBegin("a")), 0},
		{"zero capacity is disabled", 0, seq(opApplied("a", 1), opBegin("a")), 0},
		// a, b, c with room for 2: c evicts a (the oldest); a again evicts b; b again evicts c.
		{"eviction is first in, first out", 2, seq(opApplied("a", 1), opApplied("b", 2), opApplied("c", 3),
			opDup("b", 2), opDup("c", 3), opApplied("a", 4), opDup("c", 3), opApplied("b", 5), opDup("a", 4), opApplied("c", 6)), 2},
		{"a duplicate does not refresh its id", 2, seq(opApplied("a", 1), opApplied("b", 2), opDup("a", 1), opApplied("c", 3), opBegin("a")), 2},
		{"release forgets the id", 4, seq(opBegin("a"), opRelease("a"), opApplied("a", 9), opDup("a", 9)), 1},
		{"release after commit is a no-op", 4, seq(opBegin("a"), opCommit("a", 3), opRelease("a"), opDup("a", 3)), 1},
		{"commit after release is a no-op", 4, seq(opBegin("a"), opRelease("a"), opCommit("a", 3), opBegin("a")), 1},
		// The released a keeps its slot until c pushes it out; b stays.
		{"a released slot ages out", 2, seq(opBegin("a"), opRelease("a"), opApplied("b", 2), opApplied("c", 3), opDup("b", 2), opDup("c", 3)), 2},
		// Bounded: an id pushed out while in flight is forgotten (its commit still counts
		// for requests that waited on it, see TestDedupWaitersOfEvictedEntry).
		{"in-flight id evicted", 1, seq(opBegin("a"), opApplied("b", 2), opCommit("a", 1), opBegin("a")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newDedupWindow(tc.capacity)
			held := map[string]reservation{}
			for i, op := range tc.ops {
				switch op.op {
				case "begin":
					r, v, dup, err := w.begin(context.Background(), op.id)
					if err != nil || dup != op.dup || v != op.value {
						t.Fatalf("op %d begin(%q) = %d, dup %v, %v; want %d, dup %v", i, op.id, v, dup, err, op.value, op.dup)
					}
					if !dup {
						held[op.id] = r
					}
				case "commit":
					held[op.id].commit(op.value)
				case "release":
					held[op.id].release()
				}
			}
			if n := w.len(); n != tc.wantLen {
				t.Errorf("%d ids in the window, want %d", n, tc.wantLen)
			}
			if w != nil && len(w.ring) > tc.capacity {
				t.Errorf("ring of %d slots over capacity %d", len(w.ring), tc.capacity)
			}
		})
	}
}

// TestDedupConcurrent: many goroutines begin the same ids at once; exactly one applies
// each id (after the first holder's failure, when failFirst), the others are duplicates.
func TestDedupConcurrent(t *testing.T) {
	const ids, goroutines = 64, 16
	for _, tc := range []struct {
		name      string
		capacity  int
		failFirst bool
	}{
		{"commit", 1024, false},
		{"first attempt fails", 1024, true},
		{"window smaller than the ids in flight", 8, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newDedupWindow(tc.capacity)
			var appliedN, failed [ids]atomic.Int64
			var dups atomic.Int64
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for k := range ids {
						id := fmt.Sprintf("req-%d", (k+g)%ids)
						r, v, dup, err := w.begin(context.Background(), id)
						if err != nil {
							t.Error(err)
							return
						}
						n := (k + g) % ids
						if dup {
							if v != int64(n) {
								t.Errorf("%s: duplicate got %d", id, v)
							}
							dups.Add(1)
							continue
						}
						if tc.failFirst && failed[n].CompareAndSwap(0, 1) {
							r.release()
							continue
						}
						appliedN[n].Add(1)
						r.commit(int64(n))
					}
				})
			}
			wg.Wait()
			if tc.capacity < ids {
				// Ids may leave the window between attempts; only "never twice at once" and
				// the bound hold.
				if w.len() > tc.capacity {
					t.Fatalf("%d ids in a window of %d", w.len(), tc.capacity)
				}
				return
			}
			wantDups := int64(ids * (goroutines - 1))
			if tc.failFirst {
				wantDups -= ids
			}
			for n := range ids {
				if a := appliedN[n].Load(); a != 1 {
					t.Errorf("req-%d applied %d times", n, a)
				}
			}
			if d := dups.Load(); d != wantDups {
				t.Errorf("%d duplicates, want %d", d, wantDups)
			}
		})
	}
}

// waitForWaiter returns once a request waits on the in-flight id.
func waitForWaiter(t *testing.T, w *dedupWindow, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		w.mu.Lock()
		e := w.ids[id]
		waiting := e != nil && e.wait != nil
		w.mu.Unlock()
		if waiting {
			return
		}
	}
	t.Fatalf("nobody waits on %q", id)
}

// TestDedupWaits: a request whose id is in flight waits for the first attempt; the
// attempt's commit makes it a duplicate, its release lets it apply, and its context ends
// the wait.
func TestDedupWaits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		end     func(r reservation, cancel context.CancelFunc)
		wantDup bool
		wantErr error
	}{
		{"first commits", func(r reservation, _ context.CancelFunc) { r.commit(42) }, true, nil},
		{"first fails", func(r reservation, _ context.CancelFunc) { r.release() }, false, nil},
		{"waiter gives up", func(_ reservation, cancel context.CancelFunc) { cancel() }, false, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newDedupWindow(8)
			first, _, _, _ := w.begin(context.Background(), "a")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				r   reservation
				v   int64
				dup bool
				err error
			}
			got := make(chan result, 1)
			go func() {
				r, v, dup, err := w.begin(ctx, "a")
				got <- result{r, v, dup, err}
			}()
			waitForWaiter(t, w, "a")
			select {
			case res := <-got:
				t.Fatalf("begin did not wait for the attempt in flight: %+v", res)
			default:
			}
			tc.end(first, cancel)
			res := <-got
			if res.dup != tc.wantDup || !errors.Is(res.err, tc.wantErr) || (res.dup && res.v != 42) {
				t.Fatalf("waiter: value %d, dup %v, err %v", res.v, res.dup, res.err)
			}
			if !tc.wantDup && tc.wantErr == nil && res.r.e == nil {
				t.Fatal("waiter did not reserve the released id")
			}
			first.release()
			res.r.release()
		})
	}
}

// TestDedupWaitersOfEvictedEntry: an entry pushed out of the window while in flight still
// answers the requests that waited on it.
func TestDedupWaitersOfEvictedEntry(t *testing.T) {
	w := newDedupWindow(1)
	first, _, _, _ := w.begin(context.Background(), "a")
	got := make(chan bool, 1)
	go func() {
		_, _, dup, _ := w.begin(context.Background(), "a")
		got <- dup
	}()
	waitForWaiter(t, w, "a")
	b, _, _, _ := w.begin(context.Background(), "b")
	b.commit(0)
	first.commit(1)
	if !<-got {
		t.Fatal("the waiter applied an id whose first attempt was committed")
	}
}

// len is the number of ids in the window.
func (w *dedupWindow) len() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}
