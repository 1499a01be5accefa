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
	step, err := s.Save(ctx)
	if err != nil || step != 42 {
		t.Fatalf("Save = %d, %v", step, err)
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
	// at a boundary here) and the pause stays.
	ps.calls, log = nil, nil
	s.MaxPending = 20 * time.Millisecond
	if err := b.Place(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.B.Status(); !st.Placed || st.Action != "" || len(ps.calls) != 1 || !strings.Contains(ps.calls[0], `action=""`) {
		t.Errorf("save under a pause: %+v, calls %q", st, ps.calls)
	}
	b.B.Remove()

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
