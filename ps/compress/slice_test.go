package compress

import (
	"math"
	"testing"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// TestCodecs: each storage codec's size, and decode(encode(x)) per the spec's table (§2.6):
// fp32 exact, fp16 through half, fixed_r8 the quantized step multiple, one_bit ±amplitude.
func TestCodecs(t *testing.T) {
	src := []float32{0, 1, -1, 0.3, -0.7, 200, float32(math.NaN())}
	for _, tc := range []struct {
		name string
		cfg  *hashtablepb.FloatCompressorConfig
		size int
		want func(x float32) float32
	}{
		{"fp32", nil, 28, func(x float32) float32 { return x }},
		{"fp16", &hashtablepb.FloatCompressorConfig{Type: &hashtablepb.FloatCompressorConfig_Fp16_{Fp16: &hashtablepb.FloatCompressorConfig_Fp16{}}}, 14,
			func(x float32) float32 { return Fp16ToFloat32(Float32ToFp16(x)) }},
		{"fixed_r8", &hashtablepb.FloatCompressorConfig{Type: &hashtablepb.FloatCompressorConfig_FixedR8_{FixedR8: &hashtablepb.FloatCompressorConfig_FixedR8{R: new(float32(2))}}}, 7,
			func(x float32) float32 { return float32(quantizeR8(x, 2.0/128, 1.0/128)) * (2.0 / 128) }},
		{"one_bit", &hashtablepb.FloatCompressorConfig{Type: &hashtablepb.FloatCompressorConfig_OneBit_{OneBit: &hashtablepb.FloatCompressorConfig_OneBit{Amplitude: new(float32(0.5)), InitScale: new(float32(1))}}}, 7,
			func(x float32) float32 {
				if x > 0 {
					return 0.5
				}
				return -0.5
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCodec(tc.cfg)
			if err != nil || c.Name() != tc.name || c.Size(len(src)) != tc.size {
				t.Fatalf("codec %q size %d, %v; want %s, %d", c.Name(), c.Size(len(src)), err, tc.name, tc.size)
			}
			buf := make([]byte, tc.size)
			c.Encode(buf, src)
			got := make([]float32, len(src))
			c.Decode(got, buf)
			for i, x := range src {
				w := tc.want(x)
				if math.Float32bits(got[i]) != math.Float32bits(w) && !(w != w && got[i] != got[i]) {
					t.Errorf("%v → %v, want %v", x, got[i], w)
				}
			}
		})
	}
	// Spot values of fixed_r8 with r = 1 (step 1/128): 0.3 → 38/128, 200 → 127/128, −200 → −1.
	c, _ := NewCodec(&hashtablepb.FloatCompressorConfig{Type: &hashtablepb.FloatCompressorConfig_FixedR8_{FixedR8: &hashtablepb.FloatCompressorConfig_FixedR8{R: new(float32(1))}}})
	buf := make([]byte, 3)
	c.Encode(buf, []float32{0.3, 200, -200})
	if int8(buf[0]) != 38 || int8(buf[1]) != 127 || int8(buf[2]) != -128 {
		t.Errorf("fixed_r8 codes %v, want 38 127 -128", []int8{int8(buf[0]), int8(buf[1]), int8(buf[2])})
	}
	if _, err := NewCodec(&hashtablepb.FloatCompressorConfig{Type: &hashtablepb.FloatCompressorConfig_FixedR8_{FixedR8: &hashtablepb.FloatCompressorConfig_FixedR8{R: new(float32(0))}}}); err == nil {
		t.Error("fixed_r8 with r 0 accepted")
	}
}
