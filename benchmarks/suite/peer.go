package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/monolith-go/monolith/benchmarks/peers"
	"github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/kernels/shard"
)

// peer runs the NumPy peer of the layout forward and gradient on the suite's peer cases
// (inputs exported by the suite, outputs checked against ours within 1e-5), then times our
// kernels (v5, 1 goroutine) on the same inputs, and reports NumPy's time ÷ ours.
func (r *run) peer(ctx context.Context) error {
	for _, name := range r.sz.peerCases {
		c, err := kernelCase(name)
		if err != nil {
			return err
		}
		dir := filepath.Join(r.tmp, "peer-"+name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		pr, err := peers.Layout(ctx, dir, c, r.sz.reps)
		if err != nil {
			return fmt.Errorf("NumPy peer, %s: %w", name, err)
		}
		s, err := shard.New(c.Cfg, shard.Options{PS: c.PS, Version: 5, Unique: true})
		if err != nil {
			return err
		}
		res, err := s.Shard(c.In)
		if err != nil {
			return err
		}
		emb, err := layout.Arrange(5, c.Cfg, res, layout.ListBuffers(c.Cfg, res, layout.SyntheticValue))
		if err != nil {
			return err
		}
		l, err := layout.New(c.Cfg, layout.Options{Version: 5, PS: c.PS})
		if err != nil {
			return err
		}
		req := []layout.Sharded{layout.FromShard(res)}
		out := l.Outputs(c.In.Rows)
		eg := layout.Zeros(emb)
		var fwd, bwd []float64
		for range r.sz.reps {
			t, err := timeLoop(r.sz.budget, func() error { return l.Forward(req, emb, out) })
			if err != nil {
				return err
			}
			fwd = append(fwd, t*1e3)
			if t, err = timeLoop(r.sz.budget, func() error { return l.Backward(req, out, eg) }); err != nil {
				return err
			}
			bwd = append(bwd, t*1e3)
		}
		ms := func(v []float64) []float64 {
			out := make([]float64, len(v))
			for i := range v {
				out[i] = v[i] * 1e3
			}
			return out
		}
		note := fmt.Sprintf("outputs agree: %d floats compared, largest difference %.2g (tolerance 1e-5 × max(1, |ours|)); %s, NumPy %s",
			pr.Compared, pr.MaxDiff, pr.Python, pr.NumPyVersion)
		for _, k := range []struct {
			what   string
			ours   []float64
			theirs []float64
		}{{"forward", fwd, ms(pr.ForwardSec)}, {"gradient", bwd, ms(pr.BackwardSec)}} {
			r.add(Figure{Issue: 7, Section: SectionPeer, Name: fmt.Sprintf("layout v5 %s, %s: Go (1 goroutine) vs the NumPy peer", k.what, name),
				Unit: "ms per batch", Values: k.ours, Baseline: "NumPy ms per batch", Base: k.theirs, RatioOf: "NumPy time ÷ Go time",
				Ratios: ratios(k.theirs, k.ours), Target: &Target{On: OnRatio, Op: ">=", Bound: 5, Text: "≥ 5× faster than NumPy"}, Note: note})
		}
	}
	return nil
}
