package optimizer

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/ps/compress"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// These tests pin each documented divergence from Monolith (decision P3 and the package
// doc): the correct value holds and the reference's quirky value does not.

// P3: Adagrad applies weight decay to the weight update of every element, including full
// blocks of 8 (Monolith's AVX path uses the raw gradient there).
func TestP3AdagradWeightDecayEveryElement(t *testing.T) {
	const (
		d    = 16
		lr   = 0.1
		wd   = 0.1
		init = 1.0
	)
	o := mustNew(t, wrap(&hashtablepb.AdagradOptimizerConfig{
		InitialAccumulatorValue: proto.Float32(init), WeightDecayFactor: proto.Float32(wd),
	}), d)
	e := newEntry(o)
	g := make([]float32, d)
	for i := range d {
		e.w[i] = 0.5 - float32(i)/16
		g[i] = 1 + float32(i%3)
	}
	w0 := append([]float32(nil), e.w...)
	o.Step(e.w, g, e.state, lr, 0)
	for i := range d {
		gp := float64(g[i]) + wd*float64(w0[i])
		norm := init + gp*gp
		want := float64(w0[i]) - lr/math.Sqrt(norm)*gp
		quirk := float64(w0[i]) - lr/math.Sqrt(norm)*float64(g[i]) // AVX lanes
		if !closeTo(e.w[i], want, 1e-6) {
			t.Errorf("w[%d] = %.9g, want %.9g", i, e.w[i], want)
		}
		if w0[i] != 0 && closeTo(e.w[i], quirk, 1e-6) {
			t.Errorf("w[%d] = %.9g matches Monolith's AVX quirk", i, e.w[i])
		}
	}
}

// P3: FTRL shrinks zero toward 0 by l1 with sign(zero) = ±1 (Monolith's signbit gives 0/1).
func TestP3FtrlL1Sign(t *testing.T) {
	o := mustNew(t, wrap(&hashtablepb.FtrlOptimizerConfig{L1RegularizationStrength: proto.Float32(1)}), 2)
	e := newEntry(o)
	o.Step(e.w, []float32{10, -10}, e.state, 0.01, 0)
	// zero = ±10, √norm = √100.1: w = 0.01·(sign(z)·1 − z)/√100.1.
	den := math.Sqrt(100.1)
	want := []float64{0.01 * (1 - 10) / den, 0.01 * (-1 + 10) / den} // −0.0089955, +0.0089955
	quirk := []float64{0.01 * (0 - 10) / den, 0.01 * (1 + 10) / den} // −0.009995, +0.010995
	for i := range want {
		if !closeTo(e.w[i], want[i], 1e-6) {
			t.Errorf("w[%d] = %.9g, want %.9g", i, e.w[i], want[i])
		}
		if closeTo(e.w[i], quirk[i], 1e-3) {
			t.Errorf("w[%d] = %.9g matches Monolith's signbit quirk %.9g", i, e.w[i], quirk[i])
		}
	}
	// Within the l1 ball the weight is 0.
	o.Init(e.state)
	o.Step(e.w, []float32{0.5, -0.5}, e.state, 0.01, 0)
	if e.w[0] != 0 || e.w[1] != 0 {
		t.Errorf("|zero| ≤ l1 gave w = %v, want 0", e.w)
	}
}

// P3: Adam's Restore puts beta1_power and beta2_power into their own slots.
func TestP3AdamRestorePowers(t *testing.T) {
	o := mustNew(t, wrap(&hashtablepb.AdamOptimizerConfig{}), 1)
	a := newEntry(o)
	for range 3 {
		o.Step(a.w, []float32{10}, a.state, 0.01, 0)
	}
	b := newEntry(o)
	if err := o.Restore(b.state, o.Dump(a.state)); err != nil {
		t.Fatal(err)
	}
	b1p, b2p := b.state[2], b.state[3]
	if !closeTo(b1p, math.Pow(0.9, 4), 1e-6) || !closeTo(b2p, math.Pow(0.99, 4), 1e-6) {
		t.Errorf("restored powers %v %v, want 0.9⁴ = %v and 0.99⁴ = %v", b1p, b2p, math.Pow(0.9, 4), math.Pow(0.99, 4))
	}
	// Monolith would leave beta1_power = 0.99⁴ and beta2_power = 0.99 (Init).
	if closeTo(b1p, math.Pow(0.99, 4), 1e-6) || b2p == 0.99 {
		t.Error("restored powers follow Monolith's quirk")
	}
	copy(b.w, a.w)
	o.Step(a.w, []float32{10}, a.state, 0.01, 0)
	o.Step(b.w, []float32{10}, b.state, 0.01, 0)
	if a.w[0] != b.w[0] {
		t.Errorf("restored entry stepped to %v, original to %v", b.w[0], a.w[0])
	}
}

// P3: RMSProp v1 uses the per-call learning rate. With the call's rate equal to the
// configured 0.01 it reproduces the spec vector; with 0.02 it moves twice as far.
func TestP3RmspropV1PerCallLR(t *testing.T) {
	o := mustNew(t, wrap(&hashtablepb.RmspropOptimizerConfig{}), 1) // config lr 0.01
	for _, tc := range []struct {
		lr   float32
		want float64
	}{
		{0.01, -0.01 / (math.Sqrt(10) + 1) * 10}, // −0.024025, the spec vector
		{0.02, -0.02 / (math.Sqrt(10) + 1) * 10}, // Monolith would still give −0.024025
		{0, 0},
	} {
		e := newEntry(o)
		o.Step(e.w, []float32{10}, e.state, tc.lr, 0)
		if !closeTo(e.w[0], tc.want, 1e-6) {
			t.Errorf("lr %v: w = %.9g, want %.9g", tc.lr, e.w[0], tc.want)
		}
	}
}

// The decorator passes the global step through: BatchSoftmax moves to α·step (rounded to
// a binary16 neighbour), where Monolith's decorator, stepping at 0, would leave 0.
func TestRoundingPassesGlobalStep(t *testing.T) {
	o := mustNew(t, rounded(wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{})), 1)
	e := newEntry(o)
	o.Step(e.w, []float32{0}, e.state, 0.1, 1)
	lo, hi := halfNeighbours(0.1)
	if e.w[0] != lo && e.w[0] != hi {
		t.Errorf("w = %v, want a binary16 neighbour of 0.1 (%v or %v)", e.w[0], lo, hi)
	}
	if got := o.Dump(e.state).GetBatchSoftmax().GetGlobalStep(); got != 1 {
		t.Errorf("stored step %d, want 1", got)
	}
}

// The decorator rounds only its own segment, even when w extends into later segments.
func TestRoundingOwnSegmentOnly(t *testing.T) {
	o := mustNew(t, rounded(wrap(&hashtablepb.SgdOptimizerConfig{})), 2)
	w := []float32{0.1, 0.2, 0.3, 0.4} // a 2-weight segment followed by another segment
	o.Step(w, []float32{0, 0}, nil, 0.1, 0)
	for i, x := range []float32{0.1, 0.2} {
		if lo, hi := halfNeighbours(x); w[i] != lo && w[i] != hi {
			t.Errorf("w[%d] = %v, want a binary16 neighbour of %v", i, w[i], x)
		}
	}
	if w[2] != 0.3 || w[3] != 0.4 {
		t.Errorf("following segment changed to %v, %v", w[2], w[3])
	}
}

func halfNeighbours(x float32) (float32, float32) {
	h := compress.Float32ToFp16(x)
	v := compress.Fp16ToFloat32(h)
	if v < x {
		return v, compress.Fp16ToFloat32(h + 1)
	}
	return compress.Fp16ToFloat32(h - 1), v
}

func TestRoundFp16(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		x, p, want float32
	}{
		{1, 0, 1}, // exact values stay
		{-2.5, 0.99, -2.5},
		{0, 0.5, 0},
		{65504, 0, 65504},
		{inf, 0, inf},
		{-inf, 0.5, -inf},
		{70000, 0, 65504}, // saturation
		{-70000, 0.99, -65504},
		{math.MaxFloat32, 0, 65504},
		// 1 + 2⁻¹² lies a quarter of the way from 1 to 1 + 2⁻¹⁰.
		{1 + 0x1p-12, 0.2, 1 + 0x1p-10},
		{1 + 0x1p-12, 0.25, 1 + 0x1p-10}, // p ≤ ratio rounds up
		{1 + 0x1p-12, 0.3, 1},
		{-1 - 0x1p-12, 0.7, -1}, // (x − down)/(up − down) = 3/4: up (−1) is the near one
		{-1 - 0x1p-12, 0.8, -1 - 0x1p-10},
		{0x1p-26, 0.1, 0x1p-24}, // subnormal range: a quarter of the smallest step
		{0x1p-26, 0.5, 0},
	} {
		if got := roundFp16(tc.x, tc.p); got != tc.want {
			t.Errorf("roundFp16(%v, %v) = %v, want %v", tc.x, tc.p, got, tc.want)
		}
	}
	if got := roundFp16(float32(math.NaN()), 0); got == got {
		t.Errorf("roundFp16(NaN) = %v", got)
	}
}

// TestRoundingUnbiased checks that the decorator's rounding is unbiased on average over
// steps, and reproducible.
func TestRoundingUnbiased(t *testing.T) {
	const x = 1 + 0x1p-12 // P(up) = 1/4
	var sum float64
	const n = 40000
	for step := range int64(n) {
		sum += float64(roundFp16(x, roundingDraw(x, step, 3)))
	}
	if mean := sum / n; math.Abs(mean-x) > 4*0x1p-10*math.Sqrt(0.25*0.75/n) {
		t.Errorf("mean of %d roundings = %.9g, want %.9g", n, mean, float64(x))
	}
	// The draws are frozen: a rounded model reproduces bit for bit across versions.
	for _, tc := range []struct {
		x    float32
		step int64
		i    int
		want uint32 // math.Float32bits of the draw
	}{
		{0.3, 17, 0, 0x3f7c77d2},
		{0.3, 17, 1, 0x3f4ea2e8},
		{0.3, 17, 31, 0x3cb402a0},
		{-2.5, -1, 7, 0x3e010f18},
		{1e-8, 1 << 40, 1000, 0x3eccf9b2},
	} {
		p := roundingDraw(tc.x, tc.step, tc.i)
		if math.Float32bits(p) != tc.want {
			t.Errorf("roundingDraw(%v, %d, %d) = %v (%#x), want %v", tc.x, tc.step, tc.i, p, math.Float32bits(p), math.Float32frombits(tc.want))
		}
		if !(p >= 0 && p < 1) {
			t.Errorf("roundingDraw = %v, outside [0, 1)", p)
		}
	}
}

// GroupAdaGrad with ‖z‖ = 0 sets the weights to 0 (Monolith stores 0/0 = NaN).
func TestGroupAdagradZeroNorm(t *testing.T) {
	o := mustNew(t, wrap(&hashtablepb.GroupAdaGradOptimizerConfig{}), 3) // l2 0
	e := newEntry(o)
	o.Step(e.w, []float32{0, 0, 0}, e.state, 0.01, 0)
	for i, v := range e.w {
		if v != 0 {
			t.Errorf("w[%d] = %v, want 0", i, v)
		}
	}
}

// BatchSoftmax with a negative step leaves weight and state alone (Monolith aborts).
func TestBatchSoftmaxNegativeStep(t *testing.T) {
	o := mustNew(t, wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{}), 1)
	e := newEntry(o, 0.5)
	o.Step(e.w, []float32{3}, e.state, 0.1, 4)
	w, s := e.w[0], LoadInt64(e.state)
	o.Step(e.w, []float32{3}, e.state, 0.1, -1)
	if e.w[0] != w || LoadInt64(e.state) != s {
		t.Errorf("negative step changed w %v → %v, step %d → %d", w, e.w[0], s, LoadInt64(e.state))
	}
	// Gradients are ignored: (1 − 0.1)·0.5 + 0.1·(4 − 0) = 0.85, then 0.9·0.85 + 0.1·2.
	if !closeTo(w, 0.85, 1e-6) {
		t.Errorf("w after step 4 = %v, want 0.85", w)
	}
	o.Step(e.w, []float32{-100}, e.state, 0.1, 6)
	if !closeTo(e.w[0], 0.9*0.85+0.2, 1e-6) {
		t.Errorf("w after step 6 = %v, want %v", e.w[0], 0.9*0.85+0.2)
	}
}
