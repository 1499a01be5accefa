package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"
)

// complete returns the addresses 0..n-1 of got, the indexes missing, and an error when an
// index is outside [0, n).
func complete(got map[int]string, name string, n int) ([]string, []int, error) {
	out := make([]string, n)
	var missing []int
	for i := range got {
		if i < 0 || i >= n {
			return nil, nil, fmt.Errorf("%w: %s.%d is registered but there are %d %s (a count that disagrees)", ErrInvalidArgument, name, i, n, name)
		}
	}
	for i := range n {
		a, ok := got[i]
		if !ok || a == "" {
			missing = append(missing, i)
			continue
		}
		out[i] = a
	}
	return out, missing, nil
}

// WaitFor polls b until name has an address for every index in [0, n) and returns them
// by index. It fails when wait passes first (naming the backend, the missing indexes and
// the last query error), when ctx ends, or at once when an index beyond n is registered.
func WaitFor(ctx context.Context, b Backend, name string, n int, wait time.Duration, log *slog.Logger) ([]string, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: wait for %d %s", ErrInvalidArgument, n, name)
	}
	log = orDiscard(log)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	delay := 50 * time.Millisecond
	var lastErr error
	var missing []int
	lastLog := time.Time{}
	for {
		got, err := b.Query(ctx, name)
		if err == nil {
			var out []string
			out, missing, err = complete(got, name, n)
			if err != nil {
				return nil, fmt.Errorf("ps/discovery: %s: %w", Name(b), err)
			}
			if len(missing) == 0 {
				return out, nil
			}
		} else {
			lastErr = err
		}
		if time.Since(lastLog) > 5*time.Second {
			log.Info("waiting for registrations", "discovery", Name(b), "name", name, "missing", missing, "err", lastErr)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("ps/discovery: %s: waiting for %s %v: %w", Name(b), name, missing, context.Cause(ctx))
		case <-deadline.C:
			if missing == nil && lastErr != nil {
				return nil, fmt.Errorf("ps/discovery: %s: no %s found within %v: %w", Name(b), name, wait, lastErr)
			}
			return nil, fmt.Errorf("ps/discovery: %s: %s %v of %d not registered within %v (last error: %v)", Name(b), name, missing, n, wait, lastErr)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// Follow polls b every period until ctx ends and calls onChange, on Follow's goroutine,
// with a fresh slice whenever a complete set of the n addresses of name differs from the
// last one reported (the first complete set included). Query errors, incomplete sets and
// count mismatches keep the last report and are logged, at most once per distinct problem.
func Follow(ctx context.Context, b Backend, name string, n int, period time.Duration, log *slog.Logger, onChange func(addrs []string)) {
	log = orDiscard(log)
	var last []string
	problem := ""
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		got, err := b.Query(ctx, name)
		var out []string
		var missing []int
		if err == nil {
			out, missing, err = complete(got, name, n)
		}
		p := ""
		switch {
		case err != nil:
			p = err.Error()
		case len(missing) > 0:
			sort.Ints(missing)
			p = fmt.Sprintf("%s %v not registered", name, missing)
		case !slices.Equal(out, last):
			last = out
			onChange(slices.Clone(out))
		}
		if p != "" && p != problem && ctx.Err() == nil {
			log.Warn("discovery: keeping the last addresses", "discovery", Name(b), "name", name, "problem", p, "addrs", last)
		}
		problem = p
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
