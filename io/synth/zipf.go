package synth

import (
	"fmt"
	"math"
	"math/bits"
)

// zipf draws ranks k in [1, n] with P(k) proportional to k^-s, for any exponent s >= 0
// (s = 0 is uniform). It is our own sampler, not math/rand/v2's Zipf (which needs s > 1
// and draws (v+k)^-s over [0, imax]): fid frequencies often have exponents at or below 1.
//
// Method: rejection from a step hat, with the hat drawn from one Vose alias table.
//   - Head: each of the first min(n, headRanks) ranks is an outcome of weight k^-s (hat =
//     target, always accepted).
//   - Tail: the remaining ranks are cut into geometric bands [L, R) with R ≈ L·2^(1/8);
//     a band is an outcome of weight (R-L)·L^-s (its largest weight for every rank). A band
//     draw proposes a uniform rank k of the band and accepts it with probability
//     (k/L)^-s >= 2^(-s/8); a rejection starts over.
//
// The result has P(k) ∝ k^-s exactly, up to float64 rounding of the weights and the 32-bit
// alias thresholds. The table has a power-of-two number of columns (zero-weight padding),
// so one 64-bit word picks the column (high bits) and decides between it and its alias
// (low 32 bits): a head draw costs one random word and one look-up in a table of at most
// 8192 columns (64 KiB); a band draw three words, plus a log and an exp only when the
// uniform falls above the band's smallest ratio (about s/8·ln 2 of band draws). Memory is
// O(headRanks + log n) whatever n. For s = 0 the draw is uniform (Lemire's method).
//
// A zipf is read-only after newZipf and safe to share between goroutines.
type zipf struct {
	n     uint64
	s     float64
	head  uint64       // ranks 1..head are columns 0..head-1
	bands []band       // column head+i is bands[i]
	shift uint         // 64 - log2(len(alias))
	alias []aliasEntry // padded to a power of two with zero-weight columns
}

// band is the tail ranks [lo, lo+count).
type band struct {
	lo, count uint64
	logLo     float64 // log(lo)
	minRatio  float64 // ((lo+count-1)/lo)^-s: below it a proposal is accepted outright
}

// aliasEntry is one column of the alias table: column i yields outcome i when the low 32
// bits of the draw are below thresh, else outcome alias.
type aliasEntry struct{ thresh, alias uint32 }

const (
	// headRanks is the number of ranks with their own alias column, chosen so that the head
	// and the at most 48·bandsPerOctave bands fit an 8192-column (64 KiB) table.
	headRanks = 1<<13 - 48*bandsPerOctave
	// bandsPerOctave sets the band ratio 2^(1/bandsPerOctave).
	bandsPerOctave = 8
	// maxVocab is the largest n: fid signatures have 48 bits.
	maxVocab = 1 << 48
)

func newZipf(n uint64, s float64) (*zipf, error) {
	if n == 0 || n > maxVocab || s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return nil, fmt.Errorf("io/synth: zipf over %d ranks with exponent %v", n, s)
	}
	z := &zipf{n: n, s: s}
	if s == 0 {
		z.alias, z.shift = []aliasEntry{{}}, 64 // one column, never a head rank
		return z, nil
	}
	z.head = min(n, headRanks)
	ratio := math.Exp2(1.0 / bandsPerOctave)
	for lo := z.head + 1; lo <= n; {
		hi := max(lo+1, uint64(float64(lo)*ratio)) // exclusive
		if hi > n {
			hi = n + 1
		}
		b := band{lo: lo, count: hi - lo, logLo: math.Log(float64(lo))}
		b.minRatio = math.Exp(-s * (math.Log(float64(hi-1)) - b.logLo))
		z.bands = append(z.bands, b)
		if hi > n {
			break
		}
		lo = hi
	}
	outcomes := int(z.head) + len(z.bands)
	size := 1 << bits.Len(uint(outcomes-1))
	w := make([]float64, size)
	for k := uint64(1); k <= z.head; k++ {
		w[k-1] = math.Pow(float64(k), -s)
	}
	for i, b := range z.bands {
		w[int(z.head)+i] = float64(b.count) * math.Exp(-s*b.logLo)
	}
	z.alias = buildAlias(w)
	z.shift = uint(64 - bits.Len(uint(size-1)))
	if size == 1 {
		z.shift = 64 // Go: v >> 64 is 0
	}
	return z, nil
}

// buildAlias builds Vose's alias table for the weights w (len(w) a power of two).
func buildAlias(w []float64) []aliasEntry {
	n := len(w)
	var sum float64
	for i := n - 1; i >= 0; i-- { // smallest terms first
		sum += w[i]
	}
	t := make([]aliasEntry, n)
	p := make([]float64, n)
	var small, large []int
	for i, x := range w {
		p[i] = x * float64(n) / sum
		if p[i] < 1 {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		t[s] = aliasEntry{thresh: uint32(p[s] * (1 << 32)), alias: uint32(l)}
		p[l] -= 1 - p[s]
		if p[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	// Left-overs have probability 1 up to rounding.
	for _, i := range append(small, large...) {
		t[i] = aliasEntry{thresh: 1<<32 - 1, alias: uint32(i)}
	}
	return t
}

// sample returns a rank in [1, n]. The common case, a head rank, costs one random word and
// one table look-up; the rest is in sampleSlow.
func (z *zipf) sample(r *rng) uint64 {
	v := r.uint64()
	col := v >> z.shift
	e := z.alias[col]
	if uint32(v) >= e.thresh {
		col = uint64(e.alias)
	}
	if col < z.head {
		return col + 1
	}
	return z.sampleSlow(r, col)
}

// sampleSlow finishes a draw whose first word picked band column col (or any column when
// s = 0: the table is one "band" column and the word is discarded).
func (z *zipf) sampleSlow(r *rng, col uint64) uint64 {
	if z.s == 0 {
		return 1 + r.uint64n(z.n)
	}
	for {
		b := &z.bands[col-z.head]
		k := b.lo + r.uint64n(b.count)
		u := r.float64()
		if u < b.minRatio || u < math.Exp(-z.s*(math.Log(float64(k))-b.logLo)) {
			return k
		}
		// Rejected: start over.
		v := r.uint64()
		col = v >> z.shift
		e := z.alias[col]
		if uint32(v) >= e.thresh {
			col = uint64(e.alias)
		}
		if col < z.head {
			return col + 1
		}
	}
}
