package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/schemas/pspb"
)

// fakePS records the barrier state at each call.
type fakePS struct {
	b     Local
	step  int64
	calls []string
	fail  error
}

func (f *fakePS) GlobalStep(context.Context, int64, string) (int64, error) {
	return f.step, nil
}

func (f *fakePS) SaveAt(_ context.Context, step int64) ([]*pspb.SaveResponse, error) {
	st := f.b.B.Status()
	f.calls = append(f.calls, fmt.Sprintf("save@%d placed=%v action=%q blocked=%v unblocked=%v", step, st.Placed, st.Action, st.Blocked, st.Unblocked))
	return nil, f.fail
}

// recorder is a SaveListener logging its calls.
type recorder struct {
	name string
	log  *[]string
}

func (r recorder) BeforeSave(_ context.Context, step int64) error {
	*r.log = append(*r.log, fmt.Sprintf("%s.before@%d", r.name, step))
	return nil
}

func (r recorder) AfterSave(_ context.Context, step int64) error {
	*r.log = append(*r.log, fmt.Sprintf("%s.after@%d", r.name, step))
	return nil
}

func (r recorder) String() string { return r.name }

// TestSaver: a save places the Save barrier, waits for the joined worker to pause, saves
// every shard at the global step between the listeners, and removes the barrier; under an
// operator's pause it saves without waiting and leaves the pause in place; listener
// wrappers forward one phase each (hook_utils_test.py); a failing save still removes the
// barrier.
// consistencyProbe records SaveConsistent in both phases.
type consistencyProbe struct{ seen *[]bool }

func (p consistencyProbe) BeforeSave(ctx context.Context, _ int64) error {
	*p.seen = append(*p.seen, SaveConsistent(ctx))
	return nil
}

func (p consistencyProbe) AfterSave(ctx context.Context, _ int64) error {
	*p.seen = append(*p.seen, SaveConsistent(ctx))
	return nil
}

func TestSaver(t *testing.T) {
	ctx := context.Background()
	b := NewLocal()
	ps := &fakePS{b: b, step: 42}
	var log []string
	s := &Saver{PS: ps, Barrier: b, Poll: time.Millisecond, MaxPending: 10 * time.Second,
		Listeners: []SaveListener{recorder{"a", &log}, BeforeSaveOnly{recorder{"b", &log}}, AfterSaveOnly{recorder{"c", &log}}}}

	g, err := JoinGate(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	// The worker: it learns of the barrier with its next step and pauses at the boundary.
	worker := make(chan error, 1)
	go func() {
		for !b.B.Status().Placed {
			time.Sleep(time.Millisecond)
		}
		g.Observe(b.B.Placed())
		_, err := g.Boundary(ctx)
		worker <- err
	}()
	res, err := s.Save(ctx)
	if err != nil || res.Step != 42 || !res.Consistent {
		t.Fatalf("Save = %+v, %v; want a consistent save at 42", res, err)
	}
	if err := <-worker; err != nil {
		t.Fatal(err)
	}
	want := []string{`save@42 placed=true action="Save" blocked=[0] unblocked=[]`}
	if !slices.Equal(ps.calls, want) {
		t.Errorf("saves %q, want %q", ps.calls, want)
	}
	if wantLog := []string{"a.before@42", "b.before@42", "a.after@42", "c.after@42"}; !slices.Equal(log, wantLog) {
		t.Errorf("listeners %q, want %q", log, wantLog)
	}
	if st := b.B.Status(); st.Placed {
		t.Errorf("barrier still placed after the save: %+v", st)
	}
	if got := fmt.Sprint(BeforeSaveOnly{recorder{"x", &log}}, " ", AfterSaveOnly{recorder{"y", &log}}); got != "BeforeSaveListener(x) AfterSaveListener(y)" {
		t.Errorf("wrapper names %q", got)
	}

	// Under an operator's pause: the save waits for the worker at most MaxPending (it is not
	// at a boundary here: dead or stuck), frees its slot, says the save is not consistent
	// (to the listeners too), and the pause stays.
	ps.calls, log = nil, nil
	s.MaxPending = 20 * time.Millisecond
	var seen []bool
	s.Listeners = append(s.Listeners, consistencyProbe{&seen})
	if err := b.Place(ctx, ""); err != nil {
		t.Fatal(err)
	}
	res, err = s.Save(ctx)
	if err != nil || res.Consistent || !slices.Equal(res.Running, []int32{0}) {
		t.Fatalf("save with a worker that never pauses: %+v, %v; want inconsistent, running [0]", res, err)
	}
	if !slices.Equal(seen, []bool{false, false}) {
		t.Errorf("listeners saw consistent %v, want false before and after", seen)
	}
	st := b.B.Status()
	if !st.Placed || st.Action != "" || len(ps.calls) != 1 || !strings.Contains(ps.calls[0], `action=""`) {
		t.Errorf("save under a pause: %+v, calls %q", st, ps.calls)
	}
	if len(st.Blocked)+len(st.Unblocked) != 0 {
		t.Errorf("the slot of the worker that did not pause is still held: %+v", st)
	}
	// The next save does not wait for it; the worker, alive after all, joins again at its
	// next boundary and pauses there.
	start := time.Now()
	if res, err := s.Save(ctx); err != nil || !res.Consistent || time.Since(start) > time.Second {
		t.Errorf("save after freeing: %+v, %v in %v", res, err, time.Since(start))
	}
	g.Observe(b.B.Placed())
	resumed := make(chan error, 1)
	go func() { _, err := g.Boundary(ctx); resumed <- err }()
	for st := b.B.Status(); !slices.Equal(st.Blocked, []int32{0}); st = b.B.Status() {
		time.Sleep(time.Millisecond)
	}
	b.B.Remove()
	if err := <-resumed; err != nil {
		t.Fatalf("the freed worker at its boundary: %v", err)
	}
	s.Listeners = s.Listeners[:len(s.Listeners)-1]

	// A failing save is reported and removes its barrier; MaxPending bounds the wait for a
	// worker that never pauses.
	ps.fail = errors.New("disk full")
	if _, err := s.Save(ctx); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("failing save: %v", err)
	}
	if st := b.B.Status(); st.Placed {
		t.Errorf("barrier left placed by a failing save: %+v", st)
	}
}
