package modelserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
)

// fidIndex is the loaded fids of a served table: a set of distinct uint64 fids, numbered
// 0…n-1 in ascending order (fid i's row is row i of the table), kept in fewer bytes than
// the fids themselves where they share bits, as real fids do (v1 and v2 fids keep their
// slot in the top bits; the fids of a slot spread evenly over the rest).
//
// Each fid splits at two bit positions low ≤ top into three parts:
//
//	block  = fid >> top                      the distinct blocks are kept, ascending
//	bucket = fid >> low & (1<<(top-low) - 1)  every bucket of a block has an entry in dir
//	rest   = fid & (1<<low - 1)              low bits per fid, packed
//
// dir[b<<(top-low) | bucket] is the number of the first fid of that bucket of the b-th
// block (the number of fids before it), and its last entry n, so the fids of a bucket are
// numbers dir[j] to dir[j+1]-1, their rests ascending. A lookup is a binary search over the
// blocks (a handful: the slots), one dir read, and a binary search over the rests of one
// bucket (a few fids). low = top = 64 is the plain case: one block, one bucket, each fid
// whole in 8 bytes. fidStats.plan chooses low and top per table from its fids: the
// smallest layout.
type fidIndex struct {
	n          int
	low, top   uint     // bit positions: low ∈ [0, maxRestBits] or 64; low ≤ top ≤ 64
	restMask   uint64   // 1<<low - 1
	bucketMask uint64   // 1<<(top-low) - 1
	blocks     []uint64 // distinct fid >> top, ascending
	dir        []uint32 // len(blocks) << (top-low) + 1 entries
	rests      []byte   // n × low bits, little-endian, and 8 bytes of padding
}

// maxRestBits is the widest rest but the plain 64 bits: a rest is read with one 8-byte
// load from the byte holding its first bit, which may be its 8th bit, so 57 bits at most.
const maxRestBits = 57

// maxDirBits bounds top-low: a block has at most 2^maxDirBits buckets.
const maxDirBits = 30

// maxIndexFids is the most fids an index holds (dir counts them in uint32).
const maxIndexFids = math.MaxUint32

// fidLayout is where an index splits its fids: low and top of fidIndex.
type fidLayout struct{ low, top uint }

// indexBytes is the bytes of an index of n fids in layout l holding blocks blocks.
func indexBytes(n int, blocks int, l fidLayout) float64 {
	rests := math.Ceil(float64(n)*float64(l.low)/8) + 8
	return rests + 8*float64(blocks) + 4*(math.Ldexp(float64(blocks), int(l.top-l.low))+1)
}

// errUnsorted is fidStats.add's error for a fid below the one before it.
var errUnsorted = errors.New("fids out of ascending order")

// duplicateFidError is fidStats.add's error for a fid equal to the one before it.
type duplicateFidError struct{ fid uint64 }

func (e duplicateFidError) Error() string {
	return fmt.Sprintf("fid %d twice", int64(e.fid))
}

// fidStats reads a table's fids in ascending order and counts what plan needs: for
// every bit position the number of distinct fid >> position.
type fidStats struct {
	n    int
	prev uint64
	// diff[d] is the consecutive fids whose highest differing bit is bit d-1: fid >> p
	// differs between them for every p < d.
	diff [65]int
}

// add counts the next fid: errUnsorted if it is below the last one, a duplicateFidError
// if equal.
func (s *fidStats) add(f uint64) error {
	if s.n > 0 {
		switch {
		case f < s.prev:
			return errUnsorted
		case f == s.prev:
			return duplicateFidError{f}
		}
		s.diff[bits.Len64(f^s.prev)]++
	}
	s.n++
	s.prev = f
	return nil
}

// blocks is the distinct fid >> top of the fids counted.
func (s *fidStats) blocks(top uint) int {
	if s.n == 0 {
		return 0
	}
	b := 1
	for d := int(top) + 1; d <= 64; d++ {
		b += s.diff[d]
	}
	return b
}

// plan is the layout taking the fewest bytes for the fids counted, and its block count.
func (s *fidStats) plan() (fidLayout, int) {
	var blocks [65]int // by top
	for top := range blocks {
		blocks[top] = s.blocks(uint(top))
	}
	best := fidLayout{64, 64} // each fid whole
	bestBytes := indexBytes(s.n, blocks[64], best)
	for low := uint(0); low <= maxRestBits; low++ {
		for top := low; top <= 64 && top-low <= maxDirBits; top++ {
			if b := indexBytes(s.n, blocks[top], fidLayout{low, top}); b < bestBytes {
				best, bestBytes = fidLayout{low, top}, b
			}
		}
	}
	return best, blocks[best.top]
}

// fidIndexBuilder builds a fidIndex from its fids in ascending order.
type fidIndexBuilder struct {
	x      fidIndex
	filled int // dir entries set
	prev   uint64
}

// newFidIndexBuilder starts an index of n fids in layout l with nb blocks (fidStats.plan).
func newFidIndexBuilder(n int, l fidLayout, nb int) (*fidIndexBuilder, error) {
	if n < 0 || uint64(n) > maxIndexFids {
		return nil, fmt.Errorf("%d fids: an index holds at most %d", n, maxIndexFids)
	}
	if l.low > l.top || l.top > 64 || l.low > maxRestBits && l.low != 64 || l.top-l.low > maxDirBits || nb < 0 || nb > n || nb == 0 && n > 0 {
		return nil, fmt.Errorf("fid layout low %d top %d with %d blocks for %d fids", l.low, l.top, nb, n)
	}
	x := fidIndex{low: l.low, top: l.top, restMask: 1<<l.low - 1, bucketMask: 1<<(l.top-l.low) - 1,
		blocks: make([]uint64, 0, nb), dir: make([]uint32, nb<<(l.top-l.low)+1),
		rests: make([]byte, (uint64(n)*uint64(l.low)+7)/8+8)}
	if l.low == 64 {
		x.restMask = math.MaxUint64
	}
	return &fidIndexBuilder{x: x}, nil
}

// add appends the next fid, which must be above the last.
func (b *fidIndexBuilder) add(f uint64) error {
	x := &b.x
	i := x.n
	if i > 0 && f <= b.prev {
		return fmt.Errorf("fid %d after fid %d: not in ascending order", int64(f), int64(b.prev))
	}
	if uint64(i) == maxIndexFids {
		return fmt.Errorf("more than %d fids", maxIndexFids)
	}
	blk := f >> x.top
	if len(x.blocks) == 0 || x.blocks[len(x.blocks)-1] != blk {
		if len(x.blocks) == cap(x.blocks) {
			return fmt.Errorf("fid %d starts block %d of fids >> %d; the layout has %d", int64(f), len(x.blocks)+1, x.top, cap(x.blocks))
		}
		x.blocks = append(x.blocks, blk)
	}
	j := (len(x.blocks)-1)<<(x.top-x.low) | int(f>>x.low&x.bucketMask)
	for ; b.filled <= j; b.filled++ {
		x.dir[b.filled] = uint32(i)
	}
	// The rests after this one are still zero: or-ing 8 bytes sets only this one's bits.
	bit := uint64(i) * uint64(x.low)
	p := x.rests[bit>>3:]
	binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)|(f&x.restMask)<<(bit&7))
	x.n++
	b.prev = f
	return nil
}

// finish is the index of the fids added, which must be n of them in nb blocks.
func (b *fidIndexBuilder) finish(n int) (fidIndex, error) {
	x := b.x
	if x.n != n || len(x.blocks) != cap(x.blocks) {
		return fidIndex{}, fmt.Errorf("%d fids in %d blocks, the layout has %d in %d", x.n, len(x.blocks), n, cap(x.blocks))
	}
	for j := b.filled; j < len(x.dir); j++ {
		x.dir[j] = uint32(x.n)
	}
	return x, nil
}

// buildFidIndex is the smallest index of fids, which must ascend: a duplicateFidError
// names a fid given twice.
func buildFidIndex(fids []uint64) (fidIndex, error) {
	var s fidStats
	for _, f := range fids {
		if err := s.add(f); err != nil {
			return fidIndex{}, err
		}
	}
	l, nb := s.plan()
	b, err := newFidIndexBuilder(len(fids), l, nb)
	if err != nil {
		return fidIndex{}, err
	}
	for _, f := range fids {
		if err := b.add(f); err != nil {
			return fidIndex{}, err
		}
	}
	return b.finish(len(fids))
}

// bytes is the memory the index holds.
func (x *fidIndex) bytes() int { return len(x.rests) + 8*len(x.blocks) + 4*len(x.dir) }

// rest is the low bits of fid i.
func (x *fidIndex) rest(i int) uint64 {
	bit := uint64(i) * uint64(x.low)
	return binary.LittleEndian.Uint64(x.rests[bit>>3:]) >> (bit & 7) & x.restMask
}

// search is the number of fid f, and whether the index holds it.
func (x *fidIndex) search(f uint64) (int, bool) {
	b, ok := slices.BinarySearch(x.blocks, f>>x.top)
	if !ok {
		return 0, false
	}
	j := b<<(x.top-x.low) | int(f>>x.low&x.bucketMask)
	lo, end := int(x.dir[j]), int(x.dir[j+1])
	r := f & x.restMask
	for hi := end; lo < hi; {
		m := int(uint(lo+hi) >> 1)
		if x.rest(m) < r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < end && x.rest(lo) == r
}

// at is fid i (0 ≤ i < n).
func (x *fidIndex) at(i int) uint64 {
	// The bucket of fid i is the last dir entry at or below i.
	j := sort.Search(len(x.dir), func(j int) bool { return int(x.dir[j]) > i }) - 1
	return x.blocks[j>>(x.top-x.low)]<<x.top | uint64(j)&x.bucketMask<<x.low | x.rest(i)
}
