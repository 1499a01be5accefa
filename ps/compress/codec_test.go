package compress

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// halfValues holds the exact value of every finite non-negative binary16 (0x0000–0x7bff),
// computed from the IEEE definition in float64. Every binary16, every midpoint between two
// neighbours and every float32 are exact in float64, so comparisons against this table
// decide round-to-nearest-even exactly.
var halfValues = func() []float64 {
	v := make([]float64, 0x7c00)
	for h := range v {
		e, m := h>>10, h&0x3ff
		if e == 0 {
			v[h] = math.Ldexp(float64(m), -24)
		} else {
			v[h] = math.Ldexp(float64(m|0x400), e-25)
		}
	}
	return v
}()

// refFp16 is the reference float32 → binary16 conversion for non-NaN x.
func refFp16(x float32) uint16 {
	var sign uint16
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	a := math.Abs(float64(x))
	if a >= 65520 { // at or beyond the midpoint between 65504 and 65536: Inf (ties to even)
		return sign | 0x7c00
	}
	// Largest h with halfValues[h] <= a.
	h := sort.Search(len(halfValues), func(i int) bool { return halfValues[i] > a }) - 1
	if halfValues[h] == a || h == 0x7bff {
		return sign | uint16(h)
	}
	mid := (halfValues[h] + halfValues[h+1]) / 2
	switch {
	case a > mid, a == mid && h&1 == 1:
		h++
	}
	return sign | uint16(h)
}

func TestFp16DecodeAllHalfs(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got := Fp16ToFloat32(uint16(h))
		abs := h & 0x7fff
		neg := h&0x8000 != 0
		switch {
		case abs > 0x7c00:
			if !math.IsNaN(float64(got)) {
				t.Fatalf("Fp16ToFloat32(%#04x) = %v, want NaN", h, got)
			}
			if p := math.Float32bits(got) >> 13 & 0x3ff; p != uint32(abs&0x3ff) {
				t.Fatalf("Fp16ToFloat32(%#04x) payload %#x, want %#x", h, p, abs&0x3ff)
			}
		case abs == 0x7c00:
			if !math.IsInf(float64(got), 0) || math.Signbit(float64(got)) != neg {
				t.Fatalf("Fp16ToFloat32(%#04x) = %v, want signed Inf", h, got)
			}
		default:
			want := halfValues[abs]
			if neg {
				want = -want
			}
			if float64(got) != want || math.Signbit(float64(got)) != neg {
				t.Fatalf("Fp16ToFloat32(%#04x) = %v, want %v", h, got, want)
			}
		}
	}
}

func TestFp16RoundTripAllHalfs(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		want := uint16(h)
		if h&0x7fff > 0x7c00 {
			want |= 0x0200 // NaN comes back quiet
		}
		if got := Float32ToFp16(Fp16ToFloat32(uint16(h))); got != want {
			t.Fatalf("Float32ToFp16(Fp16ToFloat32(%#04x)) = %#04x, want %#04x", h, got, want)
		}
	}
}

func TestFp16EncodeBoundaries(t *testing.T) {
	check := func(x float32) {
		t.Helper()
		if got, want := Float32ToFp16(x), refFp16(x); got != want {
			t.Fatalf("Float32ToFp16(%g [%#08x]) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
	}
	up, down := float32(math.Inf(1)), float32(math.Inf(-1))
	for h := 0; h < 0x7c00; h++ {
		v := float32(halfValues[h])
		next := 65536.0
		if h < 0x7bff {
			next = halfValues[h+1]
		}
		mid := float32((halfValues[h] + next) / 2) // exact: 12 significant bits
		for _, x := range []float32{
			v, math.Nextafter32(v, up), math.Nextafter32(v, down),
			mid, math.Nextafter32(mid, up), math.Nextafter32(mid, down),
		} {
			check(x)
			check(-x)
		}
	}
	for _, x := range []float32{
		0, 65504, 65519.996, 65520, 65536, 1e30, math.MaxFloat32, up,
		0x1p-24, 0x1p-25, math.Nextafter32(0x1p-25, up), 0x1p-26, math.SmallestNonzeroFloat32,
		0x1p-14, math.Nextafter32(0x1p-14, 0), 1, 1.0 / 3,
	} {
		check(x)
		check(-x)
	}
}

func TestFp16EncodeRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	n := 1 << 20
	if testing.Short() {
		n = 1 << 14
	}
	for range n {
		x := math.Float32frombits(r.Uint32())
		if x != x {
			continue
		}
		if got, want := Float32ToFp16(x), refFp16(x); got != want {
			t.Fatalf("Float32ToFp16(%g [%#08x]) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
	}
}

func TestFp16NaN(t *testing.T) {
	for _, b := range []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00000, 0x7fffffff} {
		h := Float32ToFp16(math.Float32frombits(b))
		if h&0x7c00 != 0x7c00 || h&0x3ff == 0 || h&0x200 == 0 {
			t.Errorf("Float32ToFp16(NaN %#08x) = %#04x, want a quiet NaN", b, h)
		}
		if h>>15 != uint16(b>>31) {
			t.Errorf("Float32ToFp16(NaN %#08x) = %#04x lost the sign", b, h)
		}
		if got, want := h&0x1ff, uint16(b>>13)&0x1ff; got != want {
			t.Errorf("Float32ToFp16(NaN %#08x) payload %#x, want %#x", b, got, want)
		}
	}
}

func TestFp16Values(t *testing.T) {
	src := []float32{0, 1, -2.5, 65504, 1e-8}
	want := []uint16{0x0000, 0x3c00, 0xc100, 0x7bff, 0x0000}
	for i, x := range src {
		if h := Float32ToFp16(x); h != want[i] {
			t.Errorf("Float32ToFp16(%v) = %#04x, want %#04x", x, h, want[i])
		}
	}
	for i, w := range []float32{0, 1, -2.5, 65504, 0} {
		if got := Fp16ToFloat32(want[i]); got != w {
			t.Errorf("Fp16ToFloat32(%#04x) = %v, want %v", want[i], got, w)
		}
	}
}

func TestFixedR8(t *testing.T) {
	const r = 1
	step := float32(r) / 128
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		x    float32
		want int8
	}{
		{0, 0},
		{step * 3.6, 4},
		{step * 3.4, 3},
		{-step * 3.6, -4},
		{-step * 3.4, -3},
		{step / 2, 1},   // half a step rounds away from zero
		{-step / 2, -1}, // likewise below zero
		{step * 126.9, 127},
		{step * 127.6, 127},
		{2, 127},
		{-step * 127.9, -128},
		{-2, -128},
		{inf, 127},
		{-inf, -128},
		{nan, 0},
		{1e30, 127},
	}
	if FixedR8Step(r) != step {
		t.Fatalf("FixedR8Step(%v) = %v, want %v", float32(r), FixedR8Step(r), step)
	}
	enc := func(x, r float32) int8 { s := FixedR8Step(r); return quantizeR8(x, s, s/2) }
	for _, tc := range tests {
		if q := enc(tc.x, r); q != tc.want {
			t.Errorf("fixed_r8(%v) = %d, want %d", tc.x, q, tc.want)
		}
	}
	// The fixed_r8 retriever reads code·step.
	ret, err := NewRetriever(fixedR8Config(r), len(tests))
	if err != nil {
		t.Fatal(err)
	}
	src := make([]float32, len(tests))
	for i, tc := range tests {
		src[i] = tc.x
	}
	dec := make([]float32, len(src))
	ret.Fill(dec, src)
	for i, tc := range tests {
		if want := float32(tc.want) * step; dec[i] != want {
			t.Errorf("fixed_r8 read of %v = %v, want %v", tc.x, dec[i], want)
		}
	}
	// Another range: r = 4 gives step 1/32.
	if q0, q1 := enc(0.1, 4), enc(-0.1, 4); q0 != 3 || q1 != -3 {
		t.Errorf("fixed_r8(±0.1, r=4) = %d %d, want 3 -3", q0, q1)
	}
	// A zero range never panics and encodes every value deterministically.
	if q := [3]int8{enc(0, 0), enc(1, 0), enc(-1, 0)}; q != [3]int8{0, 127, -128} {
		t.Errorf("fixed_r8(0 1 -1, r=0) = %v, want [0 127 -128]", q)
	}
}
