package suite

import (
	"context"
	"fmt"
	"testing"

	"github.com/monolith-go/monolith/kernels/kernelbench"
	"github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/kernels/shard"
)

// kernelCase builds the kernelbench case of a name.
func kernelCase(name string) (kernelbench.Case, error) {
	switch name {
	case "s61":
		return kernelbench.Scenario61(1), nil
	case "large":
		return kernelbench.Large(1), nil
	}
	return kernelbench.Case{}, fmt.Errorf("unknown kernel case %q", name)
}

// kernelRunner is one kernel bound to its inputs at 1 and 2 goroutines.
type kernelRunner struct {
	name  string // "sharding, unique", …
	bytes int64  // bytes it must touch (kernelbench.ShardBytes / LayoutBytes)
	run   [3]func() error
	// target of the 1-goroutine ratio to memcpy, and of the 2 ÷ 1 goroutine speedup
	memTarget, parTarget *Target
}

// kernelRunners binds sharding (unique and plain) and the layout forward and gradient (v5)
// to case c, with their issue 3 targets.
func kernelRunners(c kernelbench.Case) ([]kernelRunner, error) {
	var out []kernelRunner
	for _, unique := range []bool{true, false} {
		kr := kernelRunner{name: "sharding v5, plain"}
		if unique {
			kr.name = "sharding v5, unique"
			kr.memTarget = &Target{On: OnRatio, Op: ">=", Bound: 0.25, Text: "≥ 0.25× memcpy"}
		}
		for g := 1; g <= 2; g++ {
			s, err := shard.New(c.Cfg, shard.Options{PS: c.PS, Version: 5, Unique: unique, Parallel: g})
			if err != nil {
				return nil, err
			}
			r, err := s.Shard(c.In)
			if err != nil {
				return nil, err
			}
			kr.bytes = kernelbench.ShardBytes(c, r)
			kr.run[g] = func() error { _, err := s.Shard(c.In); return err }
		}
		out = append(out, kr)
	}
	s, err := shard.New(c.Cfg, shard.Options{PS: c.PS, Version: 5, Unique: true})
	if err != nil {
		return nil, err
	}
	r, err := s.Shard(c.In)
	if err != nil {
		return nil, err
	}
	r = r.Clone()
	emb, err := layout.Arrange(5, c.Cfg, r, layout.ListBuffers(c.Cfg, r, layout.SyntheticValue))
	if err != nil {
		return nil, err
	}
	req := []layout.Sharded{layout.FromShard(r)}
	for _, grad := range []bool{false, true} {
		kr := kernelRunner{name: "layout v5 forward",
			memTarget: &Target{On: OnRatio, Op: ">=", Bound: 0.5, Text: "≥ 0.5× memcpy"},
			parTarget: &Target{On: OnRatio, Op: ">=", Bound: 1.7, Text: "≥ 1.7× on 2 goroutines"}}
		if grad {
			kr.name = "layout v5 gradient"
		}
		for g := 1; g <= 2; g++ {
			l, err := layout.New(c.Cfg, layout.Options{Version: 5, PS: c.PS, Parallel: g})
			if err != nil {
				return nil, err
			}
			out := l.Outputs(c.In.Rows)
			eg := layout.Zeros(emb)
			kr.bytes = kernelbench.LayoutBytes(c, r, l, grad)
			if grad {
				kr.run[g] = func() error { return l.Backward(req, out, eg) }
			} else {
				kr.run[g] = func() error { return l.Forward(req, emb, out) }
			}
		}
		out = append(out, kr)
		if !grad {
			// The forward's embedding reads alone, against the same bytes: the part of the
			// forward's time that is its gathers (NOTES.md, issue 22).
			reads := kernelRunner{name: "layout v5 forward, embedding reads alone", bytes: kr.bytes}
			for g := 1; g <= 2; g++ {
				l, err := layout.New(c.Cfg, layout.Options{Version: 5, PS: c.PS, Parallel: g})
				if err != nil {
					return nil, err
				}
				reads.run[g] = func() error { _, err := l.ForwardReads(req, emb); return err }
			}
			out = append(out, reads)
		}
	}
	return out, nil
}

// kernels times every kernel on every case of the suite against memcpy on a buffer of
// half its byte count (the bytes copied read one half and write the other), then 2
// against 1 goroutine; and counts allocations per call on both shapes.
func (r *run) kernels(ctx context.Context) error {
	allocs := map[string]map[string]float64{} // kernel → case → allocations per call
	fids := map[string]int{}
	for _, name := range r.sz.kernelCases {
		c, err := kernelCase(name)
		if err != nil {
			return err
		}
		krs, err := kernelRunners(c)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fids[name] = 0
		for f := range c.In.Features {
			fids[name] += len(c.In.Features[f].Values)
		}
		r.res.Inputs = append(r.res.Inputs, fmt.Sprintf("kernels, %s: B=%d, P=%d, %d features, %d fids (kernels/kernelbench)", name, c.In.Rows, c.PS, len(c.In.Features), fids[name]))
		for _, kr := range krs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := r.waitQuiet(ctx); err != nil {
				return err
			}
			others := othersMeter()
			var mem, g1, g2 []float64
			for range r.sz.reps {
				base := kernelbench.MemcpyMBpsFor(int(kr.bytes/2), r.sz.budget)
				ts, err := timeAlternating(r.sz.budget, kr.run[1], kr.run[2])
				if err != nil {
					return fmt.Errorf("%s %s: %w", kr.name, name, err)
				}
				t1, t2 := ts[0], ts[1]
				mem = append(mem, base)
				g1 = append(g1, float64(kr.bytes)/t1/1e6)
				g2 = append(g2, float64(kr.bytes)/t2/1e6)
			}
			load := others()
			r.add(Figure{Issue: 3, Section: SectionKernels, Name: fmt.Sprintf("%s, %s, 1 goroutine", kr.name, name), Others: load,
				Unit: "MB/s touched", Values: g1, Baseline: "memcpy MB/s", Base: mem, RatioOf: "÷ memcpy", Ratios: ratios(g1, mem), Target: kr.memTarget,
				Series: kr.name + ", " + name, X: 1})
			r.add(Figure{Issue: 3, Section: SectionKernels, Name: fmt.Sprintf("%s, %s, 2 goroutines", kr.name, name), Others: load,
				Unit: "MB/s touched", Values: g2, Baseline: "1-goroutine MB/s", Base: g1, RatioOf: "2 ÷ 1 goroutine", Ratios: ratios(g2, g1), Target: kr.parTarget,
				Series: kr.name + ", " + name, X: 2})
			if allocs[kr.name] == nil {
				allocs[kr.name] = map[string]float64{}
			}
			var callErr error // the kernel's error inside AllocsPerRun, which takes a func()
			allocs[kr.name][name] = testing.AllocsPerRun(3, func() {
				if callErr == nil {
					callErr = kr.run[1]()
				}
			})
			if err := callErr; err != nil {
				return fmt.Errorf("%s %s: %w", kr.name, name, err)
			}
			r.log.Info("bench: kernel", "kernel", kr.name, "case", name, "x_memcpy", Summarize(ratios(g1, mem)).Med, "speedup_2", Summarize(ratios(g2, g1)).Med)
		}
	}
	if len(r.sz.kernelCases) == 2 {
		a, b := r.sz.kernelCases[0], r.sz.kernelCases[1]
		for _, kr := range []string{"sharding v5, unique", "sharding v5, plain", "layout v5 forward", "layout v5 gradient"} {
			n0, n1 := allocs[kr][a], allocs[kr][b]
			r.add(Figure{Issue: 3, Section: SectionKernels, Name: fmt.Sprintf("%s: allocations per call, %s (%d fids) vs %s (%d fids)", kr, b, fids[b], a, fids[a]),
				Unit: "allocs per call", Values: []float64{n1}, Baseline: "allocs per call, " + a, Base: []float64{n0},
				RatioOf: b + " ÷ " + a, Ratios: []float64{n1 / max(n0, 1)},
				Target: &Target{On: OnRatio, Op: "<=", Bound: 1, Text: "no per-element allocation"}})
		}
	}
	return nil
}
