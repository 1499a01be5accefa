package parse

import (
	"encoding/binary"
	"math"
)

// qtzFlag prefixes an Instance bytes_value that holds a compressed float vector (io.md §4.2).
var qtzFlag = []byte("UE_QTZ")

// halfBits converts an IEEE 754 half-precision value to float32 exactly.
func halfBits(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		v := float32(mant) * (1.0 / (1 << 24)) // subnormal (or zero): mant · 2^-24, exact
		return math.Float32frombits(math.Float32bits(v) | sign)
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// halfGet is Monolith's Float16::get: the value, with infinities clamped to ±65504.
func halfGet(h uint16) float32 {
	v := halfBits(h)
	if math.IsInf(float64(v), 0) {
		if v < 0 {
			return -65504
		}
		return 65504
	}
	return v
}

// halfGetM is Monolith's Float16::get_m: zero for ±0, else the value plus half of its unit
// in the last place (the "median rounding value" indexed by sign and exponent).
func halfGetM(h uint16) float32 {
	if h&0x7fff == 0 {
		return 0
	}
	i := int(h >> 10) // sign and exponent
	var r float32
	if i < 32 {
		r = float32(math.Ldexp(1, i-26))
	} else {
		r = -float32(math.Ldexp(1, i-32-26))
	}
	return halfGet(h) + r
}

// qtzLen returns the number of floats a payload decodes to, and false when the reference's
// decompression fails (an odd-sized f16 payload), in which case the feature falls back to
// its float values.
func qtzLen(p []byte) (int, bool) {
	if len(p) <= 8 {
		if len(p)%2 != 0 {
			return 0, false
		}
		return len(p) / 2, true
	}
	return len(p) - 4, true
}

// qtzDecode writes the floats of a payload (qtzLen(p) of them) to dst. Payloads of at most
// 8 bytes are plain f16 arrays; longer ones are f16 min, f16 max and one byte per value,
// value = min + (max-min)/255·byte.
func qtzDecode(p []byte, dst []float32) {
	if len(p) <= 8 {
		for i := range len(p) / 2 {
			dst[i] = halfGetM(binary.LittleEndian.Uint16(p[2*i:]))
		}
		return
	}
	lo := halfGet(binary.LittleEndian.Uint16(p))
	hi := halfGet(binary.LittleEndian.Uint16(p[2:]))
	step := float32(hi-lo) / 255
	for i, b := range p[4:] {
		dst[i] = lo + float32(step*float32(b)) // the conversion keeps the product unfused
	}
}
