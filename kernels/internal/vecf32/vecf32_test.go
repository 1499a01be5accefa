package vecf32

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBitIdentical: the vector loops give exactly the scalar results for every length,
// alignment and value class, and write nothing outside dst.
func TestBitIdentical(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d (AVX2: %v)", seed, useAVX2)
	rng := rand.New(rand.NewPCG(seed, 0))
	val := func() float32 {
		switch rng.IntN(8) {
		case 0:
			return math.Float32frombits(rng.Uint32()) // anything, NaN included
		case 1:
			return float32(math.Copysign(0, -1))
		case 2:
			return math.SmallestNonzeroFloat32 * float32(rng.IntN(100))
		}
		return float32(rng.NormFloat64())
	}
	for n := 0; n <= 70; n++ {
		for off := 0; off < 3; off++ {
			buf := make([]float32, n+off+2)
			src := make([]float32, n+off)
			for i := range buf {
				buf[i] = val()
			}
			for i := range src {
				src[i] = val()
			}
			d := float32(1 + rng.IntN(10))
			for _, div := range []bool{false, true} {
				got := append([]float32(nil), buf...)
				want := append([]float32(nil), buf...)
				if div {
					AddDiv(got[off:off+n], src[off:], d)
				} else {
					Add(got[off:off+n], src[off:])
				}
				for k := 0; k < n; k++ {
					if div {
						want[off+k] += src[off+k] / d
					} else {
						want[off+k] += src[off+k]
					}
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("n=%d off=%d div=%v: element %d = %v, want %v", n, off, div, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func BenchmarkAdd(b *testing.B) {
	dst, src := make([]float32, 17), make([]float32, 17)
	b.SetBytes(17 * 8)
	for b.Loop() {
		Add(dst, src)
	}
}

func BenchmarkAddDiv(b *testing.B) {
	dst, src := make([]float32, 17), make([]float32, 17)
	b.SetBytes(17 * 8)
	for b.Loop() {
		AddDiv(dst, src, 3)
	}
}
