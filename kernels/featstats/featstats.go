// Package featstats accumulates per-feature statistics of sparse (fid) columns: fid
// counts, rows with fids, the slots seen and a fids-per-row histogram.
// It is a kernel: pure Go over the zero-copy slices of schemas/batch, no Beam, no
// allocation per fid. Used by `monolith inspect` and the validation pipeline.
package featstats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/monolith-go/monolith/schemas/batch"
)

// HistBuckets is the number of fids-per-row histogram buckets: bucket 0 counts rows
// with no fid, bucket b ≥ 1 rows with [2^(b-1), 2^b) fids; the last bucket is open.
const HistBuckets = 18

// Feature holds the statistics of one feature. The zero value is an empty accumulator.
// Not safe for concurrent use; merge per-goroutine accumulators with Merge.
type Feature struct {
	Rows         int64 // logical rows seen
	Fids         int64 // stored fids (a shared cell counts once per batch)
	RowsWithFids int64 // logical rows holding at least one fid
	Shared       bool  // the feature was shared in at least one batch
	Hist         [HistBuckets]int64
	slots        [32768 / 64]uint64 // bitset of v2 slots
}

// Bucket returns the histogram bucket of a row with n fids.
func Bucket(n int) int {
	if n <= 0 {
		return 0
	}
	b := bits.Len(uint(n))
	if b >= HistBuckets {
		return HistBuckets - 1
	}
	return b
}

// Add accumulates one sparse column view.
func (f *Feature) Add(s batch.Sparse) {
	f.Rows += int64(s.Rows)
	if len(s.Offsets) == 0 {
		f.Hist[0] += int64(s.Rows)
		return
	}
	// Offsets are absolute positions in Values, which may hold more than this view's rows
	// when the record is a slice of a larger one.
	n := 1
	if !s.Shared {
		n = s.Rows
	}
	vals := s.Values[s.Offsets[0]:s.Offsets[n]]
	f.Fids += int64(len(vals))
	for _, v := range vals {
		slot := (v >> 48) & 0x7FFF
		f.slots[slot>>6] |= 1 << (slot & 63)
	}
	if s.Shared {
		f.Shared = true
		n := int(s.Offsets[1] - s.Offsets[0])
		if n > 0 {
			f.RowsWithFids += int64(s.Rows)
		}
		f.Hist[Bucket(n)] += int64(s.Rows)
		return
	}
	for i := 0; i < s.Rows; i++ {
		n := int(s.Offsets[i+1] - s.Offsets[i])
		if n > 0 {
			f.RowsWithFids++
		}
		f.Hist[Bucket(n)]++
	}
}

// AddRows counts rows of a batch in which the feature holds no fids (a non-fid column, or
// a feature missing from the batch).
func (f *Feature) AddRows(n int) {
	f.Rows += int64(n)
	f.Hist[0] += int64(n)
}

// Merge adds the statistics of o.
func (f *Feature) Merge(o *Feature) {
	f.Rows += o.Rows
	f.Fids += o.Fids
	f.RowsWithFids += o.RowsWithFids
	f.Shared = f.Shared || o.Shared
	for i := range f.Hist {
		f.Hist[i] += o.Hist[i]
	}
	for i := range f.slots {
		f.slots[i] |= o.slots[i]
	}
}

// Slots returns the slots seen, in increasing order.
func (f *Feature) Slots() []int {
	var out []int
	for w, word := range f.slots {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			out = append(out, w*64+b)
			word &= word - 1
		}
	}
	return out
}

// AppendBinary appends a compact encoding of f (counters as uvarints, the slot set as its
// non-zero words) to b.
func (f *Feature) AppendBinary(b []byte) ([]byte, error) {
	for _, v := range []int64{f.Rows, f.Fids, f.RowsWithFids} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	if f.Shared {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, v := range f.Hist {
		b = binary.AppendUvarint(b, uint64(v))
	}
	n := 0
	for _, w := range f.slots {
		if w != 0 {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for i, w := range f.slots {
		if w != 0 {
			b = binary.AppendUvarint(b, uint64(i))
			b = binary.LittleEndian.AppendUint64(b, w)
		}
	}
	return b, nil
}

// MarshalBinary encodes f.
func (f *Feature) MarshalBinary() ([]byte, error) { return f.AppendBinary(nil) }

// ErrCorrupt is returned for an encoding that does not decode.
var ErrCorrupt = errors.New("kernels/featstats: corrupt encoding")

// Decode decodes one encoded Feature from the front of b and returns the rest of b.
func (f *Feature) Decode(b []byte) ([]byte, error) {
	*f = Feature{}
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	fail := func(what string) ([]byte, error) {
		*f = Feature{}
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	for _, p := range []*int64{&f.Rows, &f.Fids, &f.RowsWithFids} {
		v, ok := next()
		if !ok || v > math.MaxInt64 {
			return fail("counter")
		}
		*p = int64(v)
	}
	if len(b) == 0 || b[0] > 1 {
		return fail("shared flag")
	}
	f.Shared, b = b[0] == 1, b[1:]
	for i := range f.Hist {
		v, ok := next()
		if !ok || v > math.MaxInt64 {
			return fail("histogram")
		}
		f.Hist[i] = int64(v)
	}
	n, ok := next()
	if !ok || n > uint64(len(f.slots)) {
		return fail("slot words")
	}
	for range n {
		i, ok := next()
		if !ok || i >= uint64(len(f.slots)) || len(b) < 8 {
			return fail("slot word")
		}
		f.slots[i] = binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	return b, nil
}

// UnmarshalBinary decodes an encoding made by MarshalBinary.
func (f *Feature) UnmarshalBinary(b []byte) error {
	rest, err := f.Decode(b)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		*f = Feature{}
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(rest))
	}
	return nil
}
