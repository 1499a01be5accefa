package optimizer

// go test -run '^$' -bench '^BenchmarkStep$' -count 6 ./ps/optimizer | tee new.txt   (compare with benchstat)

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

const benchDim = 32

func benchKinds() []struct {
	name string
	cfg  *hashtablepb.OptimizerConfig
	dim  int
} {
	ks := allKinds()
	for i := range ks {
		if ks[i].name != "batch_softmax" {
			ks[i].dim = benchDim
		}
	}
	return append(ks, struct {
		name string
		cfg  *hashtablepb.OptimizerConfig
		dim  int
	}{"adagrad_nowd", wrap(&hashtablepb.AdagradOptimizerConfig{InitialAccumulatorValue: proto.Float32(1)}), benchDim})
}

// BenchmarkStep measures one Step of a dim-32 segment (dim 1 for batch_softmax) per
// iteration; updates/s counts Step calls (entry updates) per second.
func BenchmarkStep(b *testing.B) {
	for _, k := range benchKinds() {
		o := mustNew(b, k.cfg, k.dim)
		e := newEntry(o)
		g := make([]float32, k.dim)
		for i := range g {
			g[i] = float32(i%7) * 0.01
		}
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(int64(4 * k.dim))
			b.ReportAllocs()
			step := int64(0)
			for b.Loop() {
				step++
				o.Step(e.w, g, e.state, 0.001, step)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
		})
	}
}

// TestStepDoesNotAllocate pins the zero-allocation contract of every rule's Step.
func TestStepDoesNotAllocate(t *testing.T) {
	for _, k := range benchKinds() {
		o := mustNew(t, k.cfg, k.dim)
		e := newEntry(o)
		g := make([]float32, k.dim)
		step := int64(0)
		if n := testing.AllocsPerRun(100, func() {
			step++
			o.Step(e.w, g, e.state, 0.001, step)
		}); n != 0 {
			t.Errorf("%s: Step allocates %v times per call", k.name, n)
		}
	}
}
