package initializer

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

func uniformConfig(lo, hi *float32) *hashtablepb.InitializerConfig {
	return &hashtablepb.InitializerConfig{Type: &hashtablepb.InitializerConfig_RandomUniform{
		RandomUniform: &hashtablepb.RandomUniformInitializerConfig{Minval: lo, Maxval: hi},
	}}
}

func TestConstants(t *testing.T) {
	tests := []struct {
		kind string
		cfg  *hashtablepb.InitializerConfig
		want float32
	}{
		{"zeros", &hashtablepb.InitializerConfig{Type: &hashtablepb.InitializerConfig_Zeros{Zeros: &hashtablepb.ZerosInitializerConfig{}}}, 0},
		{"ones", &hashtablepb.InitializerConfig{Type: &hashtablepb.InitializerConfig_Ones{Ones: &hashtablepb.OnesInitializerConfig{}}}, 1},
		{"constants", &hashtablepb.InitializerConfig{Type: &hashtablepb.InitializerConfig_Constants{
			Constants: &hashtablepb.ConstantsInitializerConfig{Constant: proto.Float32(-2.5)}}}, -2.5},
		{"constants", &hashtablepb.InitializerConfig{Type: &hashtablepb.InitializerConfig_Constants{
			Constants: &hashtablepb.ConstantsInitializerConfig{}}}, 0}, // proto default
	}
	for _, tc := range tests {
		// The dim_size inside the config is ignored: the segment dim wins.
		ini, err := New(tc.cfg, 3)
		if err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		if ini.Kind() != tc.kind || ini.Dim() != 3 {
			t.Errorf("Kind, Dim = %q, %d; want %q, 3", ini.Kind(), ini.Dim(), tc.kind)
		}
		dst := []float32{9, 9, 9, 9}
		ini.Fill(dst, nil) // constants never touch the generator
		for i, v := range dst[:3] {
			if v != tc.want {
				t.Errorf("%s: dst[%d] = %v, want %v", tc.kind, i, v, tc.want)
			}
		}
		if dst[3] != 9 {
			t.Errorf("%s wrote past Dim()", tc.kind)
		}
	}
}

func TestRandomUniform(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	tests := []struct {
		name   string
		lo, hi *float32
		wantLo float32
		wantHi float32
	}{
		{"proto defaults", nil, nil, -0.05, 0.05},
		{"positive", proto.Float32(1), proto.Float32(3), 1, 3},
		{"tiny span", proto.Float32(1), proto.Float32(math.Nextafter32(1, 2)), 1, math.Nextafter32(1, 2)},
		{"huge span", proto.Float32(-math.MaxFloat32), proto.Float32(math.MaxFloat32), -math.MaxFloat32, math.MaxFloat32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ini, err := New(uniformConfig(tc.lo, tc.hi), 64)
			if err != nil {
				t.Fatal(err)
			}
			if ini.Kind() != "random_uniform" {
				t.Errorf("Kind = %q", ini.Kind())
			}
			r := rand.New(rand.NewPCG(seed, 7))
			dst := make([]float32, 64)
			var sum float64
			const rounds = 2000
			for range rounds {
				ini.Fill(dst, r)
				for _, v := range dst {
					if v < tc.wantLo || v >= tc.wantHi {
						t.Fatalf("value %v outside [%v, %v)", v, tc.wantLo, tc.wantHi)
					}
					sum += float64(v)
				}
			}
			mean := sum / (rounds * 64)
			mid := (float64(tc.wantLo) + float64(tc.wantHi)) / 2
			span := float64(tc.wantHi) - float64(tc.wantLo)
			// The mean of 128000 uniform draws is within 5 standard errors (span/√12/√n).
			if d := math.Abs(mean - mid); d > 5*span/math.Sqrt(12*rounds*64) && span > 1e-6 {
				t.Errorf("mean %v, want %v ± %v", mean, mid, 5*span/math.Sqrt(12*rounds*64))
			}
		})
	}
}

func TestRandomUniformReproducible(t *testing.T) {
	ini, err := New(uniformConfig(nil, nil), 8)
	if err != nil {
		t.Fatal(err)
	}
	a, b := make([]float32, 8), make([]float32, 8)
	ini.Fill(a, rand.New(rand.NewPCG(1, 2)))
	ini.Fill(b, rand.New(rand.NewPCG(1, 2)))
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed gave %v and %v", a, b)
		}
	}
}

func TestRandomUniformEqualBounds(t *testing.T) {
	ini, err := New(uniformConfig(proto.Float32(0.25), proto.Float32(0.25)), 4)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 4)
	ini.Fill(dst, rand.New(rand.NewPCG(3, 4)))
	for _, v := range dst {
		if v != 0.25 {
			t.Fatalf("minval == maxval 0.25 gave %v", v)
		}
	}
}

// TestRandomUniformRoundsBelowMax pins the guard for a draw that rounds up to maxval.
func TestRandomUniformRoundsBelowMax(t *testing.T) {
	// u just below 1 times the span 2 rounds, in float32, to exactly 1 + 2 = 3 = maxval.
	u := &uniform{dim: 1, lo: 1, hi: 3, below: math.Nextafter32(3, 0)}
	dst := make([]float32, 1)
	u.Fill(dst, rand.New(constSource(math.MaxUint64)))
	if dst[0] != math.Nextafter32(3, 0) {
		t.Fatalf("draw at the top of the range = %v, want %v", dst[0], math.Nextafter32(3, 0))
	}
}

// constSource always returns the same 64 bits.
type constSource uint64

func (c constSource) Uint64() uint64 { return uint64(c) }

func TestNewErrors(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name string
		cfg  *hashtablepb.InitializerConfig
		dim  int
		want string
	}{
		{"nil", nil, 2, "ps/initializer: invalid initializer config: nil InitializerConfig"},
		{"no type", &hashtablepb.InitializerConfig{}, 2, "InitializerConfig has no type set"},
		{"dim 0", uniformConfig(nil, nil), 0, "dim 0 must be positive"},
		{"min > max", uniformConfig(proto.Float32(1), proto.Float32(0)), 2, "random_uniform: invalid initializer config: minval 1 > maxval 0"},
		{"NaN", uniformConfig(&nan, nil), 2, "minval NaN must be finite"},
		{"Inf", uniformConfig(nil, &inf), 2, "maxval +Inf must be finite"},
	}
	for _, tc := range tests {
		_, err := New(tc.cfg, tc.dim)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one wrapping ErrConfig containing %q", tc.name, err, tc.want)
		}
	}
}

func TestFillShortDstPanics(t *testing.T) {
	ini, err := New(uniformConfig(nil, nil), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("Fill with a short dst did not panic")
		}
	}()
	ini.Fill(make([]float32, 3, 8), rand.New(rand.NewPCG(1, 1)))
}

// go test -run '^$' -bench . ./ps/initializer
func BenchmarkFill(b *testing.B) {
	for _, name := range []string{"zeros", "random_uniform"} {
		cfg := uniformConfig(nil, nil)
		if name == "zeros" {
			cfg = &hashtablepb.InitializerConfig{Type: &hashtablepb.InitializerConfig_Zeros{Zeros: &hashtablepb.ZerosInitializerConfig{}}}
		}
		ini, err := New(cfg, 32)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			dst := make([]float32, 32)
			b.ReportAllocs()
			for b.Loop() {
				ini.Fill(dst, r)
			}
			b.ReportMetric(float64(32*b.N)/b.Elapsed().Seconds(), "values/s")
		})
	}
}
