package initializer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// ErrConfig is wrapped by every error New returns.
var ErrConfig = errors.New("invalid initializer config")

// New returns the initializer of a segment of dim weights configured by cfg.
//
// Errors: a nil cfg or one with no type set, dim ≤ 0, and for random_uniform a NaN or
// infinite bound or minval > maxval.
func New(cfg *hashtablepb.InitializerConfig, dim int) (Initializer, error) {
	if cfg == nil {
		return nil, fmt.Errorf("ps/initializer: %w: nil InitializerConfig", ErrConfig)
	}
	if dim <= 0 {
		return nil, fmt.Errorf("ps/initializer: %w: dim %d must be positive", ErrConfig, dim)
	}
	switch t := cfg.GetType().(type) {
	case *hashtablepb.InitializerConfig_Zeros:
		return &constant{dim: dim, value: 0, kind: "zeros"}, nil
	case *hashtablepb.InitializerConfig_Ones:
		return &constant{dim: dim, value: 1, kind: "ones"}, nil
	case *hashtablepb.InitializerConfig_Constants:
		return &constant{dim: dim, value: t.Constants.GetConstant(), kind: "constants"}, nil
	case *hashtablepb.InitializerConfig_RandomUniform:
		lo, hi := t.RandomUniform.GetMinval(), t.RandomUniform.GetMaxval()
		for _, b := range [...]struct {
			name string
			v    float32
		}{{"minval", lo}, {"maxval", hi}} {
			if f := float64(b.v); math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("ps/initializer: random_uniform: %w: %s %v must be finite", ErrConfig, b.name, b.v)
			}
		}
		if lo > hi {
			return nil, fmt.Errorf("ps/initializer: random_uniform: %w: minval %v > maxval %v", ErrConfig, lo, hi)
		}
		return &uniform{dim: dim, lo: lo, hi: hi, below: math.Nextafter32(hi, float32(math.Inf(-1)))}, nil
	default:
		return nil, fmt.Errorf("ps/initializer: %w: InitializerConfig has no type set", ErrConfig)
	}
}

// constant fills every weight with one value (zeros, ones, constants).
type constant struct {
	dim   int
	value float32
	kind  string
}

func (c *constant) Dim() int     { return c.dim }
func (c *constant) Kind() string { return c.kind }

// Fill ignores r, which may be nil.
func (c *constant) Fill(dst []float32, _ *rand.Rand) {
	dst = fit(dst, c.dim)
	for i := range dst {
		dst[i] = c.value
	}
}

// uniform draws from [lo, hi).
type uniform struct {
	dim    int
	lo, hi float32
	below  float32 // largest float32 below hi
}

func (u *uniform) Dim() int     { return u.dim }
func (u *uniform) Kind() string { return "random_uniform" }

// Fill draws Dim() values from r, which must not be nil.
func (u *uniform) Fill(dst []float32, r *rand.Rand) {
	dst = fit(dst, u.dim)
	lo, span := float64(u.lo), float64(u.hi)-float64(u.lo)
	for i := range dst {
		v := float32(lo + span*r.Float64())
		if v >= u.hi && span > 0 {
			v = u.below
		}
		dst[i] = v
	}
}

// fit returns dst[:n], panicking when len(dst) < n.
func fit(dst []float32, n int) []float32 {
	if len(dst) < n {
		panic(fmt.Sprintf("ps/initializer: dst has %d values, need %d", len(dst), n))
	}
	return dst[:n]
}
