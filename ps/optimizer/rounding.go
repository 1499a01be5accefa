package optimizer

import (
	"math"

	"github.com/monolith-go/monolith/internal/mix"
	"github.com/monolith-go/monolith/ps/compress"
)

// fp16Rounding is the stochastic_rounding_float16 decorator: after the wrapped rule's
// step it replaces each weight of the segment by one of its two neighbouring binary16
// values, chosen at random so that the rounding is unbiased. State, dumps, kind and
// learning rate are the wrapped rule's.
type fp16Rounding struct {
	Optimizer
}

// Step passes the global step through to the wrapped rule and rounds only the Dim()
// weights of this segment (see the package doc for how Monolith differs).
func (r *fp16Rounding) Step(w, g, state []float32, lr float32, step int64) {
	r.Optimizer.Step(w, g, state, lr, step)
	w = span(w, r.Dim())
	for i, x := range w {
		w[i] = roundFp16(x, roundingDraw(x, step, i))
	}
}

// maxHalf is the largest finite binary16 value.
const maxHalf = 65504

// roundFp16 returns the binary16 neighbour of x above it when p ≤ (x − down)/(up − down)
// and the one below otherwise, so P(up) = (x − down)/(up − down) for p uniform in [0, 1).
// Values exactly representable in binary16, ±Inf and NaN are returned unchanged; finite
// values beyond ±65504 saturate to ±65504.
func roundFp16(x, p float32) float32 {
	a := abs32(x)
	if !(a < maxHalf) { // NaN, ±Inf, |x| ≥ 65504
		if a > maxHalf && a <= math.MaxFloat32 {
			return float32(math.Copysign(maxHalf, float64(x)))
		}
		return x
	}
	h := compress.Float32ToFp16(a) // nearest binary16 of |x|, ≤ 65504
	near := compress.Fp16ToFloat32(h)
	if near == a {
		return x
	}
	// Neighbours of |x| in magnitude: lo < |x| < hi.
	lo, hi := near, near
	if near < a {
		hi = compress.Fp16ToFloat32(h + 1)
	} else {
		lo = compress.Fp16ToFloat32(h - 1)
	}
	down, up := lo, hi
	if x < 0 {
		down, up = -hi, -lo
	}
	if p <= (x-down)/(up-down) {
		return up
	}
	return down
}

// roundingDraw is the rounding's uniform p in [0, 1): a SplitMix64 hash of the weight's
// bits, the global step and the element index. It is a pure function, so the decorator
// needs no generator state, is safe for concurrent use and reproduces bit for bit.
func roundingDraw(x float32, step int64, i int) float32 {
	z := uint64(math.Float32bits(x)) | uint64(uint32(i))<<32
	z ^= uint64(step) * 0x9e3779b97f4a7c15 // splitmix64's increment
	return float32(mix.SplitMix(z, 1)>>40) / (1 << 24)
}
