package pause

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestBarrier walks the barrier through a table of operations and checks the state after
// each.
func TestBarrier(t *testing.T) {
	b := New()
	ctx := context.Background()
	type step struct {
		name          string
		do            func() error
		placed        bool
		blocked, free []int32 // free: the unblocked (running) workers
	}
	steps := []step{
		{"join 0", func() error { b.Join(); return nil }, false, nil, []int32{0}},
		{"join 1", func() error { b.Join(); return nil }, false, nil, []int32{0, 1}},
		{"join 2", func() error { b.Join(); return nil }, false, nil, []int32{0, 1, 2}},
		{"wait while removed returns at once", func() error {
			p, _, err := b.Wait(ctx, 1, time.Hour)
			if p {
				return errors.New("placed")
			}
			return err
		}, false, nil, []int32{0, 1, 2}},
		{"place", func() error { return b.Place("a") }, true, nil, []int32{0, 1, 2}},
		{"place twice", func() error {
			if err := b.Place("b"); !errors.Is(err, ErrAlreadyPlaced) {
				return errors.New("second place did not fail")
			}
			if _, a := b.Placed(); a != "a" {
				return errors.New("second place changed the action to " + a)
			}
			return nil
		}, true, nil, []int32{0, 1, 2}},
		{"worker 0 blocks (hold 0)", func() error {
			p, a, err := b.Wait(ctx, 0, 0)
			if !p || a != "a" {
				return errors.New("wait did not report the placed barrier")
			}
			return err
		}, true, []int32{0}, []int32{1, 2}},
		{"worker 2 blocks until its context ends", func() error {
			c, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			defer cancel()
			_, _, err := b.Wait(c, 2, time.Hour)
			return err
		}, true, []int32{0, 2}, []int32{1}},
		{"leave 1 (middle)", func() error { return b.Leave(1) }, true, []int32{0, 2}, nil},
		{"rejoin takes index 1", func() error {
			if i := b.Join(); i != 1 {
				return errors.New("rejoined at another index")
			}
			return nil
		}, true, []int32{0, 2}, []int32{1}},
		{"remove", func() error { b.Remove(); return nil }, false, []int32{0, 2}, []int32{1}},
		{"blocked workers run again at their next wait", func() error {
			_, _, e1 := b.Wait(ctx, 0, 0)
			_, _, e2 := b.Wait(ctx, 2, 0)
			return errors.Join(e1, e2)
		}, false, nil, []int32{0, 1, 2}},
		{"leave 2 then 1 trims", func() error { return errors.Join(b.Leave(2), b.Leave(1)) }, false, nil, []int32{0}},
		{"remove twice is harmless", func() error { b.Remove(); return nil }, false, nil, []int32{0}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		st := b.Status()
		if st.Placed != s.placed || !slices.Equal(st.Blocked, s.blocked) || !slices.Equal(st.Unblocked, s.free) {
			t.Fatalf("%s: status %+v, want placed %v blocked %v unblocked %v", s.name, st, s.placed, s.blocked, s.free)
		}
	}
	for _, i := range []int{-1, 1, 5} {
		if err := b.Leave(i); err == nil {
			t.Errorf("Leave(%d) of a worker that has not joined succeeded", i)
		}
		if _, _, err := b.Wait(ctx, i, 0); err == nil {
			t.Errorf("Wait(%d) of a worker that has not joined succeeded", i)
		}
	}
}

// TestWaitReleased: a held Wait returns placed false when the barrier is removed.
func TestWaitReleased(t *testing.T) {
	b := New()
	i := b.Join()
	if err := b.Place(""); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() {
		p, _, _ := b.Wait(context.Background(), i, time.Minute)
		done <- p
	}()
	for !slices.Equal(b.Status().Blocked, []int32{0}) {
		time.Sleep(time.Millisecond)
	}
	b.Remove()
	if p := <-done; p {
		t.Fatal("Wait returned placed after Remove")
	}
	if st := b.Status(); len(st.Blocked) != 0 {
		t.Fatalf("still blocked after release: %+v", st)
	}
}
