package compress

// go test -run '^$' -bench . -count 6 ./ps/compress | tee new.txt   (compare with benchstat)

import (
	"math/rand/v2"
	"testing"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

const benchDim = 32

func benchValues() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	v := make([]float32, benchDim)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}

func BenchmarkConversions(b *testing.B) {
	src := benchValues()
	h := make([]uint16, benchDim)
	q := make([]int8, benchDim)
	dst := make([]float32, benchDim)
	for i, x := range src {
		h[i] = Float32ToFp16(x)
	}
	step := FixedR8Step(1)
	for _, bc := range []struct {
		name string
		fn   func()
	}{
		{"Float32ToFp16", func() {
			for i, x := range src {
				h[i] = Float32ToFp16(x)
			}
		}},
		{"Fp16ToFloat32", func() {
			for i, x := range h {
				dst[i] = Fp16ToFloat32(x)
			}
		}},
		{"quantizeR8", func() {
			for i, x := range src {
				q[i] = quantizeR8(x, step, step/2)
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(4 * benchDim)
			b.ReportAllocs()
			for b.Loop() {
				bc.fn()
			}
			b.ReportMetric(float64(benchDim*b.N)/b.Elapsed().Seconds(), "values/s")
		})
	}
}

func BenchmarkRetriever(b *testing.B) {
	w := benchValues()
	dst := make([]float32, benchDim)
	g := make([]float32, benchDim)
	for _, bc := range []struct {
		name string
		cfg  *hashtablepb.FloatCompressorConfig
	}{
		{"fixed_r8", fixedR8Config(1)},
		{"one_bit", oneBitConfig(&hashtablepb.FloatCompressorConfig_OneBit{})},
	} {
		r, err := NewRetriever(bc.cfg, benchDim)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name+"/Fill", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Fill(dst, w)
			}
		})
		b.Run(bc.name+"/Backward", func(b *testing.B) {
			b.ReportAllocs()
			step := int64(0)
			for b.Loop() {
				r.Backward(g, w, step)
				step++
			}
		})
	}
}
