package optimizer

import (
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// TestAdagradVectorBitIdentical: Adagrad's vector loop (AVX2 where the CPU has it) gives
// the scalar loop's bits for every dim from 1 to 40, including zeros, negatives, huge and
// tiny values, and weight decay.
func TestAdagradVectorBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	special := []float32{0, -0, 1e-38, -1e-38, 3e38, -3e38, 1e-45, 0.5, -2}
	for _, wd := range []float32{0, 0.01} {
		for dim := 1; dim <= 40; dim++ {
			cfg := &hashtablepb.OptimizerConfig{Type: &hashtablepb.OptimizerConfig_Adagrad{Adagrad: &hashtablepb.AdagradOptimizerConfig{
				LearningRate: proto.Float32(0.05), InitialAccumulatorValue: proto.Float32(0.1), WeightDecayFactor: proto.Float32(wd)}}}
			o, err := New(cfg, dim)
			if err != nil {
				t.Fatal(err)
			}
			w, g, st := make([]float32, dim), make([]float32, dim), make([]float32, o.StateLen())
			for i := range w {
				w[i], g[i], st[i] = rng.Float32()*4-2, rng.Float32()*2-1, rng.Float32()
				if rng.IntN(4) == 0 {
					g[i] = special[rng.IntN(len(special))]
				}
			}
			ww, wn := append([]float32(nil), w...), append([]float32(nil), st...)
			for i := range ww { // the scalar loop
				gi := g[i] + wd*ww[i]
				n := wn[i] + gi*gi
				wn[i] = n
				ww[i] -= 0.05 / float32(math.Sqrt(float64(n))) * gi
			}
			o.Step(w, g, st, 0.05, 1)
			for i := range w {
				if math.Float32bits(w[i]) != math.Float32bits(ww[i]) || math.Float32bits(st[i]) != math.Float32bits(wn[i]) {
					t.Fatalf("wd %v dim %d element %d: w %v norm %v, the scalar loop %v %v (vector path: %v)", wd, dim, i, w[i], st[i], ww[i], wn[i], useAVX2)
				}
			}
		}
	}
}
