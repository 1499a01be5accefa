package compress

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

func fixedR8Config(r float32) *hashtablepb.FloatCompressorConfig {
	return &hashtablepb.FloatCompressorConfig{Type: &hashtablepb.FloatCompressorConfig_FixedR8_{
		FixedR8: &hashtablepb.FloatCompressorConfig_FixedR8{R: proto.Float32(r)},
	}}
}

func oneBitConfig(c *hashtablepb.FloatCompressorConfig_OneBit) *hashtablepb.FloatCompressorConfig {
	return &hashtablepb.FloatCompressorConfig{Type: &hashtablepb.FloatCompressorConfig_OneBit_{OneBit: c}}
}

func TestNewRetrieverIdentity(t *testing.T) {
	for name, cfg := range map[string]*hashtablepb.FloatCompressorConfig{
		"nil":   nil,
		"empty": {},
		"fp32":  {Type: &hashtablepb.FloatCompressorConfig_Fp32_{Fp32: &hashtablepb.FloatCompressorConfig_Fp32{}}},
		"fp16":  {Type: &hashtablepb.FloatCompressorConfig_Fp16_{Fp16: &hashtablepb.FloatCompressorConfig_Fp16{}}},
	} {
		r, err := NewRetriever(cfg, 4)
		if r != nil || err != nil {
			t.Errorf("NewRetriever(%s) = %v, %v; want nil, nil", name, r, err)
		}
	}
}

func TestNewRetrieverErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  *hashtablepb.FloatCompressorConfig
		dim  int
		want string
	}{
		{"dim 0", fixedR8Config(1), 0, "ps/compress: invalid float compressor config: dim 0 must be positive"},
		{"dim -1 nil config", nil, -1, "dim -1 must be positive"},
		{"r 0", fixedR8Config(0), 2, "fixed_r8: invalid float compressor config: r 0 must be finite and positive"},
		{"r NaN", fixedR8Config(float32(math.NaN())), 2, "r NaN must be finite"},
		{"r Inf", fixedR8Config(float32(math.Inf(1))), 2, "r +Inf must be finite"},
		{"step_size 0", oneBitConfig(&hashtablepb.FloatCompressorConfig_OneBit{StepSize: proto.Int64(0)}), 2, "one_bit: invalid float compressor config: step_size 0 must be positive"},
		{"amplitude Inf", oneBitConfig(&hashtablepb.FloatCompressorConfig_OneBit{Amplitude: proto.Float32(float32(math.Inf(-1)))}), 2, "amplitude -Inf must be finite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRetriever(tc.cfg, tc.dim)
			if err == nil {
				t.Fatalf("NewRetriever = %v, nil; want an error", r)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %q does not wrap ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestFixedR8Retriever(t *testing.T) {
	r, err := NewRetriever(fixedR8Config(0.5), 5)
	if err != nil {
		t.Fatal(err)
	}
	w := []float32{0.1, -0.2, 0.7, float32(math.NaN()), 0.001}
	got := make([]float32, len(w))
	r.Fill(got, w)
	// step 0.5/128 = 1/256: codes 26, −51, 127 (clamped), 0 (NaN), 0.
	want := []float32{26.0 / 256, -51.0 / 256, 127.0 / 256, 0, 0}
	for i := range w {
		if got[i] != want[i] {
			t.Errorf("Fill[%d] = %v, want decode(encode(%v)) = %v", i, got[i], w[i], want[i])
		}
	}
	if got[2] != 127*0.5/128 {
		t.Errorf("Fill(0.7) with r 0.5 = %v, want the clamped %v", got[2], 127*0.5/128)
	}
	g := []float32{1, 2, 3, 4, 5}
	r.Backward(g, w, 0)
	for i, v := range []float32{1, 2, 3, 4, 5} {
		if g[i] != v {
			t.Errorf("Backward changed g[%d] to %v (straight-through expected)", i, g[i])
		}
	}
}

func TestOneBitRetriever(t *testing.T) {
	newR := func(c *hashtablepb.FloatCompressorConfig_OneBit) *oneBitRetriever {
		t.Helper()
		r, err := NewRetriever(oneBitConfig(c), 3)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*oneBitRetriever)
	}
	r := newR(&hashtablepb.FloatCompressorConfig_OneBit{}) // proto defaults: 200, 1, 10000, 0.1
	if s := r.currentScale(); s != 1 {
		t.Fatalf("initial scale = %v, want init_scale 1", s)
	}
	w := []float32{0.5, -1, 0}
	fill := make([]float32, 3)
	r.Fill(fill, w)
	for i, x := range w {
		if want := 0.1 * float32(math.Tanh(float64(x))); !near(fill[i], want, 1e-7) {
			t.Errorf("Fill(%v) = %v, want %v", x, fill[i], want)
		}
	}

	backward := func(step int64, scale float64) {
		t.Helper()
		g := []float32{1, 2, -3}
		r.Backward(g, w, step)
		if got := r.currentScale(); !near(got, float32(scale), 1e-6) {
			t.Fatalf("scale after step %d = %v, want %v", step, got, scale)
		}
		for i, x := range w {
			y := math.Tanh(scale * float64(x))
			want := float32([]float64{1, 2, -3}[i] * 0.1 * scale * (1 - y*y))
			if !near(g[i], want, 1e-6) {
				t.Errorf("step %d: g[%d] = %v, want %v", step, i, g[i], want)
			}
		}
	}
	backward(0, 1)                     // step 0 refreshes: init_scale·1
	backward(150, 1)                   // not a multiple of 200: scale unchanged
	backward(200, math.Sqrt(2))        // (1 + 0.005·200)^0.5
	backward(201, math.Sqrt(2))        // unchanged
	backward(2000, math.Sqrt(11))      // (1 + 10)^0.5
	backward(-400, math.Sqrt(11))      // negative steps keep the scale
	backward(400_000, math.Sqrt(2001)) // below max_scale 10000

	capped := newR(&hashtablepb.FloatCompressorConfig_OneBit{
		StepSize: proto.Int64(10), InitScale: proto.Float32(2), MaxScale: proto.Float32(2.5), Amplitude: proto.Float32(0.05),
	})
	capped.Backward(make([]float32, 3), w, 1000) // 2·√6 ≈ 4.9 > 2.5
	if s := capped.currentScale(); s != 2.5 {
		t.Errorf("scale = %v, want max_scale 2.5", s)
	}
	capped.Fill(fill, w)
	if want := 0.05 * float32(math.Tanh(2.5*0.5)); !near(fill[0], want, 1e-7) {
		t.Errorf("Fill after the scale change = %v, want %v", fill[0], want)
	}
}

// TestOneBitRetrieverConcurrent exercises the shared scale from many goroutines; run it
// with -race.
func TestOneBitRetrieverConcurrent(t *testing.T) {
	r, err := NewRetriever(oneBitConfig(&hashtablepb.FloatCompressorConfig_OneBit{StepSize: proto.Int64(1)}), 4)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Go(func() {
			w := []float32{0.1, -0.2, 0.3, float32(k)}
			g := make([]float32, 4)
			dst := make([]float32, 4)
			for step := range int64(200) {
				copy(g, []float32{1, 1, 1, 1})
				r.Backward(g, w, step*int64(k+1))
				r.Fill(dst, w)
				for _, v := range dst {
					if math.IsNaN(float64(v)) {
						t.Error("Fill returned NaN")
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if s := r.(*oneBitRetriever).currentScale(); !(s >= 1) {
		t.Errorf("final scale %v, want ≥ init_scale", s)
	}
}

func near(got, want, tol float32) bool {
	return math.Abs(float64(got-want)) <= float64(tol)*math.Max(1, math.Abs(float64(want)))
}
