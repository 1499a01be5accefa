package synth

import (
	"math/bits"
	"math/rand/v2"

	"github.com/monolith-go/monolith/internal/mix"
)

// rng is the generator's random stream: a math/rand/v2 PCG used directly, with its own
// bounded-integer and float conversions so that the output depends only on PCG's
// documented sequence, not on the algorithms of rand.Rand's helpers.
type rng struct{ p rand.PCG }

// Stream identifiers: each file draws features, labels and LineId fields from three
// independent streams, so replacing the Labeler never changes the features.
const (
	streamFeatures = 1
	streamLabels   = 2
	streamMeta     = 3
)

// newRNG returns the stream of one file.
func newRNG(seed uint64, file int, stream uint64) *rng {
	r := &rng{}
	r.p.Seed(mix.Mix64(seed^stream*0x9e3779b97f4a7c15), mix.Mix64(uint64(file)*0xbf58476d1ce4e5b9+stream))
	return r
}

// uint64 returns 64 random bits.
func (r *rng) uint64() uint64 { return r.p.Uint64() }

// uint64n returns a uniform value in [0, n), n > 0 (Lemire's multiply-shift with rejection).
func (r *rng) uint64n(n uint64) uint64 {
	hi, lo := bits.Mul64(r.p.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.p.Uint64(), n)
		}
	}
	return hi
}

// float64 returns a uniform value in [0, 1) with 53 random bits.
func (r *rng) float64() float64 { return float64(r.p.Uint64()>>11) * 0x1p-53 }

// float32 returns a uniform value in [0, 1) with 24 random bits.
func (r *rng) float32() float32 { return float32(r.p.Uint64()>>40) * 0x1p-24 }

// mix64 is mix.Mix64, the splitmix64 finalizer, under the name the generator's other
// files use.
func mix64(x uint64) uint64 { return mix.Mix64(x) }
