package suite

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestTimeAlternating: the functions run in turn, one call each per round, until each has
// had the budget; every time is at least what its call sleeps; an error stops the loop and
// is returned.
func TestTimeAlternating(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		budget  time.Duration
		sleeps  []time.Duration
		failAt  int // the call (0-based, all functions counted) that fails; -1: none
		wantErr error
	}{
		{"two", 6 * time.Millisecond, []time.Duration{time.Millisecond, 2 * time.Millisecond}, -1, nil},
		{"one call each at zero budget", 0, []time.Duration{0, 0, 0}, -1, nil},
		{"the fast one sets the rounds", 6 * time.Millisecond, []time.Duration{time.Millisecond, 3 * time.Millisecond}, -1, nil},
		{"error", time.Second, []time.Duration{0, 0}, 3, errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var order []int
			fs := make([]func() error, len(tc.sleeps))
			for i, d := range tc.sleeps {
				fs[i] = func() error {
					order = append(order, i)
					if len(order)-1 == tc.failAt {
						return errBoom
					}
					time.Sleep(d)
					return nil
				}
			}
			got, err := timeAlternating(tc.budget, fs...)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if len(order) != tc.failAt+1 {
					t.Errorf("%d calls before the error returned, want %d", len(order), tc.failAt+1)
				}
				return
			}
			n := len(tc.sleeps)
			if len(order) == 0 || len(order)%n != 0 {
				t.Fatalf("%d calls of %d functions", len(order), n)
			}
			for k, i := range order {
				if i != k%n {
					t.Fatalf("call order %v: not one call each per round", order)
				}
			}
			rounds := len(order) / n
			for i, d := range tc.sleeps {
				if got[i] < d.Seconds() {
					t.Errorf("function %d: %v per call, but it sleeps %v", i, got[i], d)
				}
				// Every function has had the budget, and no round ran past the one that gave
				// the last of them their budget.
				if total := time.Duration(got[i] * float64(rounds) * float64(time.Second)); total < tc.budget {
					t.Errorf("function %d ran %v in total, budget %v", i, total, tc.budget)
				}
			}
			// After one round fewer, some function had less than the budget, so the one
			// whose calls take least could not have had it either.
			if fast := slices.Min(tc.sleeps); fast > 0 && time.Duration(rounds-1)*fast >= tc.budget {
				t.Errorf("%d rounds: more than the fastest function (%v per call) needed for %v", rounds, fast, tc.budget)
			}
		})
	}
}
