package ordered

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// worker is a state that counts its own calls, to show each state is used by one worker.
type worker struct {
	id    int
	calls int
	busy  atomic.Bool
}

func TestOrderAndBound(t *testing.T) {
	for _, tc := range []struct{ workers, limit, n int }{
		{1, 0, 50}, {2, 0, 200}, {4, 4, 300}, {3, 17, 300}, {8, 1, 100}, {2, 2, 0},
	} {
		t.Run(fmt.Sprintf("w%d_l%d_n%d", tc.workers, tc.limit, tc.n), func(t *testing.T) {
			seed := uint64(tc.workers*1000 + tc.n)
			t.Logf("seed %d", seed)
			var inflight, peak atomic.Int64
			next := 0
			newState := func() (*worker, error) { next++; return &worker{id: next}, nil }
			work := func(_ context.Context, w *worker, in int) (string, error) {
				if !w.busy.CompareAndSwap(false, true) {
					return "", errors.New("a state used by two goroutines at once")
				}
				defer w.busy.Store(false)
				w.calls++
				n := inflight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Duration(rand.New(rand.NewPCG(seed, uint64(in))).IntN(300)) * time.Microsecond)
				inflight.Add(-1)
				return fmt.Sprint(in), nil
			}
			p, err := New(context.Background(), tc.workers, tc.limit, newState, work)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			emit := func(s string) { got = append(got, s) }
			submitted := 0
			for i := range tc.n {
				if err := p.Submit(i, emit); err != nil {
					t.Fatal(err)
				}
				submitted++
				// Never more in flight than the limit (emitted ones are done).
				limit := max(tc.limit, tc.workers)
				if tc.limit == 0 {
					limit = 2 * tc.workers
				}
				if pending := submitted - len(got); pending > limit {
					t.Fatalf("%d inputs pending after submit %d, limit %d", pending, i, limit)
				}
			}
			if err := p.Flush(emit); err != nil {
				t.Fatal(err)
			}
			want := make([]string, tc.n)
			for i := range want {
				want[i] = fmt.Sprint(i)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("emitted %v, want %v", got, want)
			}
			calls := 0
			for _, s := range p.States() {
				calls += s.calls
			}
			if calls != tc.n || len(p.States()) != tc.workers {
				t.Fatalf("%d calls over %d states, want %d over %d", calls, len(p.States()), tc.n, tc.workers)
			}
			if tc.workers > 1 && tc.n >= 100 && peak.Load() < 2 {
				t.Errorf("never more than one input in work at once with %d workers", tc.workers)
			}
			if err := p.Submit(0, emit); !errors.Is(err, ErrClosed) {
				t.Errorf("Submit after Flush: %v", err)
			}
		})
	}
}

func TestErrorStopsInOrder(t *testing.T) {
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			boom := errors.New("boom")
			p, err := New(context.Background(), workers, 0, func() (int, error) { return 0, nil },
				func(_ context.Context, _ int, in int) (int, error) {
					if in == 7 {
						return 0, fmt.Errorf("input %d: %w", in, boom)
					}
					return in, nil
				})
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			var serr error
			for i := range 20 {
				if serr = p.Submit(i, func(v int) { got = append(got, v) }); serr != nil {
					break
				}
			}
			ferr := p.Flush(func(v int) { got = append(got, v) })
			if !errors.Is(errors.Join(serr, ferr), boom) {
				t.Fatalf("errors %v / %v, want boom", serr, ferr)
			}
			if !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6}) {
				t.Fatalf("emitted %v, want 0..6 (nothing at or after the failure)", got)
			}
		})
	}
}

func TestStateError(t *testing.T) {
	n := 0
	_, err := New(context.Background(), 3, 0, func() (int, error) {
		n++
		if n == 2 {
			return 0, errors.New("no buffers")
		}
		return n, nil
	}, func(context.Context, int, int) (int, error) { return 0, nil })
	if err == nil {
		t.Fatal("a failing state did not fail New")
	}
}

func TestCloseDropsInFlight(t *testing.T) {
	p, err := New(context.Background(), 2, 4, func() (int, error) { return 0, nil },
		func(_ context.Context, _ int, in int) (int, error) { time.Sleep(time.Millisecond); return in, nil })
	if err != nil {
		t.Fatal(err)
	}
	emitted := 0
	for i := range 4 {
		if err := p.Submit(i, func(int) { emitted++ }); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	p.Close()
	before := emitted
	if err := p.Flush(func(int) { emitted++ }); err != nil || emitted != before {
		t.Fatalf("Flush after Close: %v, emitted %d more", err, emitted-before)
	}
}

func TestContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, err := New(ctx, 2, 0, func() (int, error) { return 0, nil },
		func(ctx context.Context, _ int, in int) (int, error) { return in, nil })
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for i := range 10 {
		if err := p.Submit(i, func(int) {}); err != nil {
			break
		}
	}
	if err := p.Flush(func(int) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush after the context ended: %v", err)
	}
}

// BenchmarkSubmit measures the pool's own cost per element (no work).
// go test -run '^$' -bench Submit -benchmem ./internal/ordered
func BenchmarkSubmit(b *testing.B) {
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprint(w), func(b *testing.B) {
			p, err := New(context.Background(), w, 0, func() (int, error) { return 0, nil },
				func(_ context.Context, _ int, in int) (int, error) { return in, nil })
			if err != nil {
				b.Fatal(err)
			}
			sum := 0
			emit := func(v int) { sum += v }
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := p.Submit(i, emit); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.Flush(emit); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestAbandonedPoolLeavesNoGoroutine is the pool of a bundle the runner abandoned after a
// failure elsewhere in the stage: neither Flush nor Close is called, and once the inputs
// in flight are done no worker goroutine is left.
func TestAbandonedPoolLeavesNoGoroutine(t *testing.T) {
	base := goleak.IgnoreCurrent()
	p, err := New(context.Background(), 3, 6, func() (int, error) { return 0, nil },
		func(_ context.Context, _ int, in int) (int, error) { time.Sleep(time.Millisecond); return in, nil })
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := p.Submit(i, func(int) {}); err != nil {
			t.Fatal(err)
		}
	}
	goleak.VerifyNone(t, base)
}
