package compress

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// Codec is the storage form of one segment of a SERVING entry (spec/ps.md §2.6): Size
// bytes for dim values, Encode to them, Decode from them. A row of several segments is
// their encodings concatenated in segment order.
type Codec struct {
	kind      string // "fp32", "fp16", "fixed_r8", "one_bit"
	step      float32
	amplitude float32
	scale     float32 // one_bit's init_scale
}

// NewCodec is the codec of a segment's compressor config: fp32 for a nil config or one
// without a type, as the reference stores it. fixed_r8's r must be finite and positive,
// one_bit's amplitude finite.
func NewCodec(cfg *hashtablepb.FloatCompressorConfig) (Codec, error) {
	switch t := cfg.GetType().(type) {
	case *hashtablepb.FloatCompressorConfig_Fp16_:
		return Codec{kind: "fp16"}, nil
	case *hashtablepb.FloatCompressorConfig_FixedR8_:
		r := t.FixedR8.GetR()
		if !(r > 0) || math.IsInf(float64(r), 0) {
			return Codec{}, fmt.Errorf("ps/compress: fixed_r8: %w: r %v must be finite and positive", ErrConfig, r)
		}
		return Codec{kind: "fixed_r8", step: FixedR8Step(r)}, nil
	case *hashtablepb.FloatCompressorConfig_OneBit_:
		a := t.OneBit.GetAmplitude()
		if math.IsNaN(float64(a)) || math.IsInf(float64(a), 0) {
			return Codec{}, fmt.Errorf("ps/compress: one_bit: %w: amplitude %v must be finite", ErrConfig, a)
		}
		return Codec{kind: "one_bit", amplitude: a, scale: t.OneBit.GetInitScale()}, nil
	default:
		return Codec{kind: "fp32"}, nil
	}
}

// Name is the codec's name: fp32, fp16, fixed_r8 or one_bit.
func (c Codec) Name() string { return c.kind }

// Size is the bytes of dim values.
func (c Codec) Size(dim int) int {
	switch c.kind {
	case "fp32":
		return 4 * dim
	case "fp16":
		return 2 * dim
	default:
		return dim
	}
}

// Encode writes src into dst[:Size(len(src))] (little-endian for the 2- and 4-byte forms).
func (c Codec) Encode(dst []byte, src []float32) {
	dst = fit(dst, c.Size(len(src)))
	switch c.kind {
	case "fp32":
		for i, x := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(x))
		}
	case "fp16":
		for i, x := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToFp16(x))
		}
	case "fixed_r8":
		half := c.step / 2
		for i, x := range src {
			dst[i] = byte(quantizeR8(x, c.step, half))
		}
	case "one_bit": // +1 when amplitude·tanh(init_scale·x) > 0, else −1 (so 0 → −1)
		for i, x := range src {
			v := int8(-1)
			if c.amplitude*tanh32(c.scale*x) > 0 {
				v = 1
			}
			dst[i] = byte(v)
		}
	}
}

// Decode reads len(dst) values from src.
func (c Codec) Decode(dst []float32, src []byte) {
	src = fit(src, c.Size(len(dst)))
	switch c.kind {
	case "fp32":
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case "fp16":
		for i := range dst {
			dst[i] = Fp16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case "fixed_r8":
		for i := range dst {
			dst[i] = float32(int8(src[i])) * c.step
		}
	case "one_bit":
		for i := range dst {
			dst[i] = float32(int8(src[i])) * c.amplitude
		}
	}
}
