package metrics

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrInput is wrapped by every error about the inputs: mismatched lengths, NaN values, or
// labels that lack a class.
var ErrInput = errors.New("kernels/metrics: invalid input")

// Clip bounds of the probabilities in LogLoss and LossSum.
const (
	MinProb = 1e-7
	MaxProb = 1 - 1e-7
)

// AUC returns the area under the ROC curve of scores against labels: the probability that
// a random positive (label > 0) scores higher than a random negative, ties counting half.
// -0 and +0 tie; ±Inf are ordinary scores. It sorts a packed copy of the pairs once (a
// radix sort: O(n) time, 16n bytes) and sums over groups of tied scores, in exact integer
// arithmetic for n < 2^32, so the result depends only on the multiset of pairs, not on their
// order. It returns an error wrapping ErrInput when the lengths differ, a score is NaN, or
// there is no positive or no negative.
func AUC(scores, labels []float32) (float64, error) {
	if len(scores) != len(labels) {
		return 0, fmt.Errorf("%w: auc: %d scores, %d labels", ErrInput, len(scores), len(labels))
	}
	keys := make([]uint64, len(scores))
	var pos uint64
	for i, s := range scores {
		if s != s {
			return 0, fmt.Errorf("%w: auc: score %d is NaN", ErrInput, i)
		}
		k := uint64(orderKey(s)) << 1
		if labels[i] > 0 {
			k |= 1
			pos++
		}
		keys[i] = k
	}
	neg := uint64(len(scores)) - pos
	if pos == 0 || neg == 0 {
		return 0, fmt.Errorf("%w: auc: %d positives and %d negatives; need both classes", ErrInput, pos, neg)
	}
	keys = sortKeys(keys)
	return float64(rankSum2(keys)) / (2 * float64(pos) * float64(neg)), nil
}

// radixMin is the length from which sortKeys radix-sorts; shorter inputs do not repay the
// histograms and the second buffer.
const radixMin = 1 << 12

// sortKeys sorts keys (33-bit values: orderKey<<1 | label) and returns the sorted slice,
// which is keys or a new slice: an LSD radix sort in three 11-bit passes for long inputs.
func sortKeys(keys []uint64) []uint64 {
	if len(keys) < radixMin {
		slices.Sort(keys)
		return keys
	}
	const bits, passes = 11, 3
	var counts [passes][1 << bits]int
	for _, k := range keys {
		for p := range passes {
			counts[p][k>>(p*bits)&(1<<bits-1)]++
		}
	}
	src, dst := keys, make([]uint64, len(keys))
	for p := range passes {
		c := &counts[p]
		if c[src[0]>>(p*bits)&(1<<bits-1)] == len(src) {
			continue // every key has the same digit
		}
		at := 0
		for d, n := range c {
			c[d] = at
			at += n
		}
		for _, k := range src {
			d := k >> (p * bits) & (1<<bits - 1)
			dst[c[d]] = k
			c[d]++
		}
		src, dst = dst, src
	}
	return src
}

// orderKey maps a non-NaN float32 to a uint32 of the same order, -0 and +0 to the same key.
func orderKey(s float32) uint32 {
	if s == 0 {
		s = 0 // -0 → +0
	}
	b := math.Float32bits(s)
	if b&(1<<31) != 0 {
		return ^b
	}
	return b | 1<<31
}

// rankSum2 returns twice the number of (positive, negative) pairs where the positive scores
// higher, plus the number of tied pairs: 2·AUC·P·N. keys are sorted orderKey<<1 | label.
func rankSum2(keys []uint64) uint64 {
	var sum, negBelow uint64
	for i := 0; i < len(keys); {
		score := keys[i] >> 1
		var p, n uint64
		for ; i < len(keys) && keys[i]>>1 == score; i++ {
			if keys[i]&1 != 0 {
				p++
			} else {
				n++
			}
		}
		sum += 2*p*negBelow + p*n
		negBelow += n
	}
	return sum
}

// LogLoss returns the mean binary cross-entropy of probs against labels (label > 0 is 1,
// otherwise 0), each probability clipped to [MinProb, MaxProb], accumulated in float64. It
// returns an error wrapping ErrInput when the lengths differ, the input is empty, or a
// probability is NaN.
func LogLoss(probs, labels []float32) (float64, error) {
	if len(probs) != len(labels) {
		return 0, fmt.Errorf("%w: log loss: %d probabilities, %d labels", ErrInput, len(probs), len(labels))
	}
	if len(probs) == 0 {
		return 0, fmt.Errorf("%w: log loss: no rows", ErrInput)
	}
	var s LossSum
	for i, p := range probs {
		if p != p {
			return 0, fmt.Errorf("%w: log loss: probability %d is NaN", ErrInput, i)
		}
		s.Add(p, labels[i])
	}
	return s.Mean(), nil
}

// LossSum accumulates the binary cross-entropy of rows, for a mean log loss computed in
// pieces (per batch, per worker) and merged. The zero value is an empty sum. It does not
// allocate; it is not safe for concurrent use (give each goroutine its own and Merge).
type LossSum struct {
	// Sum is the total cross-entropy in nats.
	Sum float64
	// N is the number of rows added.
	N int64
}

// Add adds the cross-entropy of one row: -log(p) when y > 0, else -log(1-p), with p clipped
// to [MinProb, MaxProb] (a NaN p adds NaN).
func (s *LossSum) Add(p, y float32) {
	q := min(max(float64(p), MinProb), MaxProb) // NaN stays NaN
	if y > 0 {
		s.Sum -= math.Log(q)
	} else {
		s.Sum -= math.Log1p(-q)
	}
	s.N++
}

// Merge adds the rows of o to s.
func (s *LossSum) Merge(o LossSum) {
	s.Sum += o.Sum
	s.N += o.N
}

// Mean returns the mean cross-entropy, NaN when no row was added.
func (s LossSum) Mean() float64 {
	if s.N == 0 {
		return math.NaN()
	}
	return s.Sum / float64(s.N)
}
