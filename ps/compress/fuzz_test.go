package compress

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzRoundtrip feeds arbitrary float32 bit patterns through the conversions: fp16 must
// match the reference conversion and be idempotent after one round trip; fixed_r8 must
// give a defined code for any range and land on the grid within half a step of in-range
// inputs.
func FuzzRoundtrip(f *testing.F) {
	for _, seed := range [][]float32{
		{0, 1, -1, 0.5},
		{65504, 65520, 1e-8, 0x1p-25},
		{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -0.0078125},
	} {
		b := make([]byte, 0, 4*len(seed)+4)
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(1)) // r
		for _, x := range seed {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		r := math.Float32frombits(binary.LittleEndian.Uint32(data))
		data = data[4:]
		src := make([]float32, len(data)/4)
		for i := range src {
			src[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}

		for _, x := range src {
			h := Float32ToFp16(x)
			if x == x && h != refFp16(x) {
				t.Fatalf("fp16(%g) = %#04x, want %#04x", x, h, refFp16(x))
			}
			if h2 := Float32ToFp16(Fp16ToFloat32(h)); h2 != h {
				t.Fatalf("fp16 not idempotent for %g: %#04x then %#04x", x, h, h2)
			}
		}

		step := FixedR8Step(r)
		for _, x := range src {
			q := quantizeR8(x, step, step/2) // any r, even NaN or 0, must not panic
			if !(r > 0) || math.IsInf(float64(r), 0) {
				continue
			}
			if x != x {
				if q != 0 {
					t.Fatalf("fixed_r8(NaN) = %d, want 0", q)
				}
				continue
			}
			back := float32(q) * step
			lo, hi := -128*float64(step), 127*float64(step)
			if xf := float64(x); xf > lo && xf < hi {
				// A float32 rounding of x ± step/2 may add one ulp of slack.
				if d := math.Abs(float64(back) - xf); d > float64(step)/2*(1+1e-5)+1e-30 {
					t.Fatalf("fixed_r8(%g, r=%g) = %g, %g away (step %g)", x, r, back, d, step)
				}
			}
		}
	})
}
