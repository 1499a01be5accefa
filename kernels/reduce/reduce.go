package reduce

import (
	"errors"
	"fmt"
	"math"
)

// ID is the constraint of id and fid element types: Monolith's int64 ids and this
// project's uint64 fids. Hashing and sharding always use the uint64 bit pattern (D4).
type ID interface{ ~int64 | ~uint64 }

// Ragged is a ragged tensor with one ragged dimension: row r holds
// Values[RowSplits[r]:RowSplits[r+1]]. A valid Ragged has len(RowSplits) ≥ 1,
// RowSplits[0] == 0, non-decreasing splits and RowSplits[len-1] == len(Values).
// The zero value is invalid as an input (it has no row splits); use [NewRagged] or
// RowSplits: []int64{0} for zero rows.
type Ragged[T any] struct {
	Values    []T
	RowSplits []int64
}

// NewRagged builds a Ragged from explicit rows, copying them. It is a convenience for
// tests and cold paths.
func NewRagged[T any](rows ...[]T) Ragged[T] {
	r := Ragged[T]{RowSplits: make([]int64, 1, len(rows)+1)}
	for _, row := range rows {
		r.Values = append(r.Values, row...)
		r.RowSplits = append(r.RowSplits, int64(len(r.Values)))
	}
	return r
}

// Rows returns the number of rows (len(RowSplits)-1, or 0 when RowSplits is empty).
func (r Ragged[T]) Rows() int { return max(len(r.RowSplits)-1, 0) }

// Row returns row i as a subslice of Values. It assumes r is valid and i in range.
func (r Ragged[T]) Row(i int) []T { return r.Values[r.RowSplits[i]:r.RowSplits[i+1]] }

// MaxSplits bounds numSplits / numShards arguments so that a corrupt count cannot
// make an op allocate without limit. 1<<20 is far above any PS count.
const MaxSplits = 1 << 20

// MaxIndexLen is the largest number of positions an [Index], a [FusedReorder] or an
// [Aggregated] can hold: positions and offsets are int32, as in Monolith's outputs.
const MaxIndexLen = math.MaxInt32

var (
	// ErrShape reports buffers whose lengths do not match the declared shapes, or a
	// malformed ragged row-split vector.
	ErrShape = errors.New("kernels/reduce: shape mismatch")
	// ErrRange reports an index, position, shard or offset outside its valid range,
	// or a negative count or dimension.
	ErrRange = errors.New("kernels/reduce: out of range")
	// ErrUnmappedID reports an input id absent from the id lists; the message names
	// the id, as Monolith's "Unable to map id X" does.
	ErrUnmappedID = errors.New("kernels/reduce: unable to map id")
	// ErrOverflow reports a result larger than the int32 positions and offsets
	// Monolith's outputs use (see [MaxIndexLen]).
	ErrOverflow = errors.New("kernels/reduce: result exceeds int32 range")
)

// Shard returns the shard of id among numShards shards: uint64(id) % numShards (D4).
// numShards below 1 counts as one shard (the result is 0).
func Shard[K ID](id K, numShards int) int {
	if numShards <= 1 {
		return 0
	}
	return int(uint64(id) % uint64(numShards))
}

// ShardIDs writes Shard(ids[i], numShards) into dst[i], the indices to feed
// [SplitByIndices] (int64) or [ReorderByIndices] (int32). Monolith's older Python
// paths use a signed floormod instead; the two agree for non-negative ids (D4).
func ShardIDs[K ID, I ~int32 | ~int64](dst []I, ids []K, numShards int) error {
	if numShards < 1 || numShards > MaxSplits {
		return fmt.Errorf("%w: numShards %d not in [1, %d]", ErrRange, numShards, MaxSplits)
	}
	if len(dst) != len(ids) {
		return fmt.Errorf("%w: dst has %d entries for %d ids", ErrShape, len(dst), len(ids))
	}
	p := uint64(numShards)
	dst = dst[:len(ids)]
	if p&(p-1) == 0 {
		for i, id := range ids {
			dst[i] = I(uint64(id) & (p - 1))
		}
		return nil
	}
	for i, id := range ids {
		dst[i] = I(uint64(id) % p)
	}
	return nil
}

// checkSplits validates a row-split vector against the number of values it covers.
func checkSplits(what string, splits []int64, n int) error {
	if len(splits) == 0 {
		return fmt.Errorf("%w: %s row splits are empty (need at least [0])", ErrShape, what)
	}
	if splits[0] != 0 {
		return fmt.Errorf("%w: %s row splits start at %d, not 0", ErrShape, what, splits[0])
	}
	for i := 1; i < len(splits); i++ {
		if splits[i] < splits[i-1] {
			return fmt.Errorf("%w: %s row splits decrease at %d (%d < %d)", ErrShape, what, i, splits[i], splits[i-1])
		}
	}
	if last := splits[len(splits)-1]; last != int64(n) {
		return fmt.Errorf("%w: %s row splits end at %d but there are %d values", ErrShape, what, last, n)
	}
	return nil
}

// mulLen returns a*b for non-negative a, b, or false when it overflows int.
func mulLen(a, b int) (int, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > math.MaxInt/b {
		return 0, false
	}
	return a * b, true
}

// checkMatrix checks that buf holds exactly rows×dim elements.
func checkMatrix(what string, n, rows, dim int) error {
	if rows < 0 || dim < 0 {
		return fmt.Errorf("%w: %s shape [%d, %d] is negative", ErrRange, what, rows, dim)
	}
	want, ok := mulLen(rows, dim)
	if !ok || n != want {
		return fmt.Errorf("%w: %s has %d elements, want %d×%d", ErrShape, what, n, rows, dim)
	}
	return nil
}

// checkDims checks a list of per-entry dimensions for negatives.
func checkDims(what string, dims []int) error {
	for i, d := range dims {
		if d < 0 {
			return fmt.Errorf("%w: %s[%d] = %d is negative", ErrRange, what, i, d)
		}
	}
	return nil
}

// growLen returns s resliced to length n, reallocating only when its capacity is short.
// The contents are unspecified.
func growLen[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// growCap returns s emptied, with capacity for at least n elements.
func growCap[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}
