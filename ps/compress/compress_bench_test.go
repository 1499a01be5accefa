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

func BenchmarkCodecs(b *testing.B) {
	src := benchValues()
	h := make([]uint16, benchDim)
	q := make([]int8, benchDim)
	dst := make([]float32, benchDim)
	EncodeFp16(h, src)
	for _, bc := range []struct {
		name string
		fn   func()
	}{
		{"EncodeFp16", func() { EncodeFp16(h, src) }},
		{"DecodeFp16", func() { DecodeFp16(dst, h) }},
		{"EncodeFixedR8", func() { EncodeFixedR8(q, src, 1) }},
		{"DecodeFixedR8", func() { DecodeFixedR8(dst, q, 1) }},
		{"EncodeOneBit", func() { EncodeOneBit(q, src, 0.1, 1) }},
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
