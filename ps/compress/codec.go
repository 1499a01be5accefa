package compress

import (
	"fmt"
	"math"
)

// Float32ToFp16 returns the IEEE 754 binary16 encoding of f, rounded to nearest with ties
// to even. Values whose magnitude rounds above 65504 become ±Inf; magnitudes below 2⁻²⁵
// become ±0 (the sign is kept). NaN stays NaN: the result is a quiet NaN carrying the top
// nine payload bits of f, as half.hpp and the F16C instructions produce.
func Float32ToFp16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16(a>>13)&0x3ff
	case a >= 0x47800000: // ≥ 65536 and Inf
		return sign | 0x7c00
	case a >= 0x38800000: // normal binary16 range (≥ 2⁻¹⁴)
		// Rebias the exponent from 127 to 15 and keep the top 10 mantissa bits. A carry
		// out of the mantissa moves into the exponent, up to Inf for [65520, 65536).
		m := a - 112<<23
		return sign | uint16(roundShift(m, 13))
	case a >= 0x33000000: // binary16 subnormals (≥ 2⁻²⁵ rounds to at least 0 or 1 ulp)
		e := a >> 23
		m := a&0x7fffff | 0x800000
		return sign | uint16(roundShift(m, 126-e))
	default:
		return sign
	}
}

// roundShift returns m >> s rounded to nearest, ties to even (1 ≤ s ≤ 31).
func roundShift(m, s uint32) uint32 {
	q := m >> s
	rem := m & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}

// Fp16ToFloat32 widens the binary16 value h to float32. The conversion is exact; NaN
// payloads are kept.
func Fp16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	a := uint32(h & 0x7fff)
	if a-0x400 < 0x7800 { // normal (exponent 1–30): rebias the exponent from 15 to 127
		return math.Float32frombits(sign | (a<<13 + 112<<23))
	}
	return fp16Special(sign, a)
}

// fp16Special widens zeros, subnormals, infinities and NaNs (a = h without its sign).
func fp16Special(sign, a uint32) float32 {
	if a >= 0x7c00 { // Inf and NaN keep their payload
		return math.Float32frombits(sign | 0x7f800000 | (a&0x3ff)<<13)
	}
	if a == 0 {
		return math.Float32frombits(sign)
	}
	// Subnormal a·2⁻²⁴: shift the leading one into the implicit bit.
	e := uint32(113)
	for a&0x400 == 0 {
		a <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (a&0x3ff)<<13)
}

// FixedR8Step is the quantization step of the fixed_r8 codec with range r: r/128.
func FixedR8Step(r float32) float32 { return r / 128 }

// quantizeR8 is the fixed_r8 code of x with step r/128 and half = step/2: NaN becomes 0;
// other values move half a step away from zero, are divided by the step, truncated toward
// zero and clamped to [−128, 127]; the code decodes as code·step. Every input, including
// ±Inf and a zero step, gives a defined code: the clamps run on the float quotient before
// the integer conversion.
func quantizeR8(x, step, half float32) int8 {
	if x != x {
		return 0
	}
	if x >= 0 {
		x += half
	} else {
		x -= half
	}
	q := x / step
	switch {
	case q >= 127:
		return 127
	case q <= -128:
		return -128
	case q != q: // 0/0 with a zero step
		return 0
	}
	return int8(q)
}

func tanh32(x float32) float32 { return float32(math.Tanh(float64(x))) }

// fit returns dst[:n], panicking when dst is shorter than n (not merely when its capacity
// is): a retriever never writes past the length the caller handed it.
func fit[T any](dst []T, n int) []T {
	if len(dst) < n {
		panic(fmt.Sprintf("ps/compress: dst has %d values, need %d", len(dst), n))
	}
	return dst[:n]
}
