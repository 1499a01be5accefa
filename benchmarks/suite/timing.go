package suite

import (
	"context"
	"syscall"
	"time"

	"github.com/monolith-go/monolith/benchmarks/internal/child"
)

// quietCPUs is the load of other processes under which the machine counts as quiet.
const quietCPUs = 0.3

// othersMeter starts measuring the CPUs other processes use (the machine's busy time
// less this process's and its waited-for children's); the returned function reports the
// average since the start (-1 where /proc/stat is missing).
func othersMeter() func() float64 {
	b0, ok0 := child.MachineBusy()
	s0, t0 := selfCPU(), time.Now()
	return func() float64 {
		b1, ok1 := child.MachineBusy()
		wall := time.Since(t0)
		if !ok0 || !ok1 || wall <= 0 {
			return -1
		}
		return max(0, (b1-b0-(selfCPU()-s0)).Seconds()/wall.Seconds())
	}
}

// waitQuiet waits, at most d, until other processes use fewer than quietCPUs.
func (r *run) waitQuiet(ctx context.Context) error {
	if r.sz.quietWait <= 0 {
		return nil
	}
	t0 := time.Now()
	load, err := child.WaitQuiet(ctx, quietCPUs, r.sz.quietWait)
	if err != nil {
		return err
	}
	if load >= quietCPUs {
		r.log.Info("bench: the machine is busy; measuring anyway", "others_cpus", load, "waited", time.Since(t0).Round(time.Second))
	}
	return nil
}

// timeAlternating calls fs in turn, one call each per round, until every one of them has
// run for at least budget in total (each at least once), and returns the time per call of
// each in seconds. Compared with timeLoop windows one after the other, a ratio between two
// of them then pairs calls made moments apart, under the same load and clock, which on a
// shared machine drift over the hundreds of milliseconds of a window.
func timeAlternating(budget time.Duration, fs ...func() error) ([]float64, error) {
	spent := make([]time.Duration, len(fs))
	calls := 0
	for done := false; !done; {
		done = true
		for i, f := range fs {
			t0 := time.Now()
			if err := f(); err != nil {
				return nil, err
			}
			spent[i] += time.Since(t0)
			done = done && spent[i] >= budget
		}
		calls++
	}
	out := make([]float64, len(fs))
	for i, d := range spent {
		out[i] = d.Seconds() / float64(calls)
	}
	return out, nil
}

// timeLoop calls f until at least budget has passed (at least once) and returns the time
// per call in seconds.
func timeLoop(budget time.Duration, f func() error) (float64, error) {
	calls := 0
	start := time.Now()
	for calls == 0 || time.Since(start) < budget {
		if err := f(); err != nil {
			return 0, err
		}
		calls++
	}
	return time.Since(start).Seconds() / float64(calls), nil
}

// selfCPU is the CPU time of this process and of its children that have been waited for.
func selfCPU() time.Duration {
	var d time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			d += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return d
}

// ratios returns a[i]/b[i] for every i.
func ratios(a, b []float64) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] / b[i]
	}
	return out
}
