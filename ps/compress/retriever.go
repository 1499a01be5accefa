package compress

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// ErrConfig is wrapped by every error NewRetriever returns for a bad configuration.
var ErrConfig = errors.New("invalid float compressor config")

// HashNet scale schedule constants (§2.5): scale = init_scale·(1 + gamma·step)^0.5.
const hashNetGamma = 0.005

// NewRetriever returns the training-time retriever of a segment of dim weights compressed
// with cfg (§2.5). It returns a nil Retriever and a nil error when the segment reads its
// raw weights: a nil cfg, a cfg with no type set, fp32 and fp16. fixed_r8 fake-quantizes on
// Fill and passes gradients through; one_bit reads amplitude·tanh(scale·x) and scales the
// gradient by its derivative. The dim_size inside cfg is ignored: dim wins, as the
// segment's dim_size does in Monolith.
//
// Errors: dim ≤ 0; fixed_r8 with r not finite and positive; one_bit with step_size ≤ 0
// (Monolith divides by it) or a non-finite init_scale, max_scale or amplitude.
func NewRetriever(cfg *hashtablepb.FloatCompressorConfig, dim int) (Retriever, error) {
	if dim <= 0 {
		return nil, fmt.Errorf("ps/compress: %w: dim %d must be positive", ErrConfig, dim)
	}
	switch t := cfg.GetType().(type) {
	case *hashtablepb.FloatCompressorConfig_FixedR8_:
		r := t.FixedR8.GetR()
		if !(r > 0) || math.IsInf(float64(r), 0) {
			return nil, fmt.Errorf("ps/compress: fixed_r8: %w: r %v must be finite and positive", ErrConfig, r)
		}
		step := FixedR8Step(r)
		return &fixedR8Retriever{dim: dim, step: step, half: step / 2}, nil
	case *hashtablepb.FloatCompressorConfig_OneBit_:
		c := t.OneBit
		if c.GetStepSize() <= 0 {
			return nil, fmt.Errorf("ps/compress: one_bit: %w: step_size %d must be positive", ErrConfig, c.GetStepSize())
		}
		for _, p := range []struct {
			name string
			v    float32
		}{{"init_scale", c.GetInitScale()}, {"max_scale", c.GetMaxScale()}, {"amplitude", c.GetAmplitude()}} {
			if math.IsNaN(float64(p.v)) || math.IsInf(float64(p.v), 0) {
				return nil, fmt.Errorf("ps/compress: one_bit: %w: %s %v must be finite", ErrConfig, p.name, p.v)
			}
		}
		o := &oneBitRetriever{
			dim:       dim,
			stepSize:  c.GetStepSize(),
			initScale: c.GetInitScale(),
			maxScale:  c.GetMaxScale(),
			amplitude: c.GetAmplitude(),
		}
		o.scale.Store(math.Float32bits(o.initScale))
		return o, nil
	default: // nil config, no type, fp32, fp16
		return nil, nil
	}
}

// fixedR8Retriever is the fixed_r8 retriever: Fill is decode(encode(x)), Backward is the
// straight-through identity.
type fixedR8Retriever struct {
	dim        int
	step, half float32
}

func (f *fixedR8Retriever) Fill(dst, w []float32) {
	w = fit(w, f.dim)
	dst = fit(dst, f.dim)
	for i, x := range w {
		dst[i] = float32(quantizeR8(x, f.step, f.half)) * f.step
	}
}

func (f *fixedR8Retriever) Backward(g, w []float32, step int64) {}

// oneBitRetriever is the one_bit (HashNet) retriever. Its scale is shared by every entry
// of the segment and updated by Backward; all methods are safe for concurrent use.
type oneBitRetriever struct {
	dim                            int
	stepSize                       int64
	initScale, maxScale, amplitude float32
	scale                          atomic.Uint32 // math.Float32bits of the current scale
}

// currentScale returns the current HashNet scale.
func (o *oneBitRetriever) currentScale() float32 { return math.Float32frombits(o.scale.Load()) }

func (o *oneBitRetriever) Fill(dst, w []float32) {
	w = fit(w, o.dim)
	dst = fit(dst, o.dim)
	s, a := o.currentScale(), o.amplitude
	for i, x := range w {
		dst[i] = a * tanh32(s*x)
	}
}

// Backward refreshes the shared scale when step is a multiple of step_size, then scales
// each gradient by the derivative of Fill at the current weight.
func (o *oneBitRetriever) Backward(g, w []float32, step int64) {
	s := o.currentScale()
	if step >= 0 && step%o.stepSize == 0 {
		s = o.initScale * float32(math.Sqrt(float64(1+hashNetGamma*float32(step))))
		s = min(s, o.maxScale)
		o.scale.Store(math.Float32bits(s))
	}
	w = fit(w, o.dim)
	g = fit(g, o.dim)
	k := o.amplitude * s
	for i, x := range w {
		y := tanh32(s * x)
		g[i] *= k * (1 - y*y)
	}
}
