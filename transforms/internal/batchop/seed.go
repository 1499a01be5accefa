package batchop

import (
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	kfilter "github.com/monolith-go/monolith/kernels/filter"
	"github.com/monolith-go/monolith/schemas/batch"
)

// BatchSeed is filter.BatchSeed, which documents it: the seed a random op named op uses
// for rec when the user's seed is seed (0 means kfilter.DefaultSeed), a hash of the op
// name and the content of rec. It does not allocate.
func BatchSeed(seed uint64, op string, rec arrow.RecordBatch) uint64 {
	if seed == 0 {
		seed = kfilter.DefaultSeed
	}
	h := hasher{h: seed ^ prime5}
	hashBytes(&h, op)
	n := int(rec.NumRows())
	h.word(uint64(n))
	hashLineIDs(&h, rec, n)
	hashLabels(&h, rec, n)
	return h.sum()
}

// Markers written for absent values, so that "absent" and "empty" differ.
const (
	markAbsent = 0xa5e7_0000_0000_0001 // the batch has no such column
	markNull   = 0xa5e7_0000_0000_0002 // the row's cell is null
)

// hashLineIDs hashes the "__line_id__" bytes of every row (null rows as markNull).
func hashLineIDs(h *hasher, rec arrow.RecordBatch, n int) {
	col, p := only(rec, batch.ColLineID)
	b, ok := col.(*array.Binary)
	if !ok { // absent, all-null (arrow.NULL) or malformed (the kernel reports it)
		h.word(markAbsent)
		return
	}
	for r := range n {
		i := p.at(r)
		if b.IsNull(i) {
			h.word(markNull)
			continue
		}
		hashBytes(h, b.Value(i))
	}
}

// hashLabels hashes the "__label__" values of every row (null rows as markNull).
func hashLabels(h *hasher, rec arrow.RecordBatch, n int) {
	col, p := only(rec, batch.ColLabel)
	l, ok := col.(*array.List)
	var vals []float32
	if ok {
		f, isF32 := l.ListValues().(*array.Float32)
		ok = isF32
		if ok {
			vals = f.Float32Values()
		}
	}
	if !ok {
		h.word(markAbsent)
		return
	}
	for r := range n {
		i := p.at(r)
		if l.IsNull(i) {
			h.word(markNull)
			continue
		}
		s, e := l.ValueOffsets(i)
		if s < 0 || e < s || int(e) > len(vals) {
			h.word(markNull) // malformed: the kernel reports it
			continue
		}
		h.word(uint64(e - s))
		for _, v := range vals[s:e] {
			h.word(uint64(math.Float32bits(v)))
		}
	}
}

// physRows maps the logical rows of a column onto its physical values.
type physRows struct{ ree *array.RunEndEncoded }

func (p physRows) at(r int) int {
	if p.ree == nil {
		return r
	}
	return p.ree.GetPhysicalIndex(r)
}

// only returns the physical values of the single column called name (nil when there is
// none, or more than one) and the map from its rows.
func only(rec arrow.RecordBatch, name string) (arrow.Array, physRows) {
	s, idx := rec.Schema(), -1
	for i := range s.NumFields() { // not FieldIndices, which allocates
		if s.Field(i).Name == name {
			if idx >= 0 {
				return nil, physRows{}
			}
			idx = i
		}
	}
	if idx < 0 {
		return nil, physRows{}
	}
	col := rec.Column(idx)
	if r, ok := col.(*array.RunEndEncoded); ok {
		return r.Values(), physRows{ree: r}
	}
	return col, physRows{}
}

// hasher is a 64-bit word hash with xxHash64's round, merge and avalanche steps. Its
// output is part of the reproducibility contract: changing it changes every sample.
type hasher struct{ h uint64 }

const (
	prime1 uint64 = 0x9e3779b185ebca87
	prime2 uint64 = 0xc2b2ae3d27d4eb4f
	prime3 uint64 = 0x165667b19e3779f9
	prime4 uint64 = 0x85ebca77c2b2ae63
	prime5 uint64 = 0x27d4eb2f165667c5
)

func (h *hasher) word(w uint64) {
	h.h ^= bits.RotateLeft64(w*prime2, 31) * prime1
	h.h = bits.RotateLeft64(h.h, 27)*prime1 + prime4
}

func (h *hasher) sum() uint64 {
	x := h.h
	x ^= x >> 33
	x *= prime2
	x ^= x >> 29
	x *= prime3
	x ^= x >> 32
	return x
}

// hashBytes hashes the length of b, then b in little-endian 8-byte words (the last one
// zero-padded).
func hashBytes[T string | []byte](h *hasher, b T) {
	h.word(uint64(len(b)))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		h.word(uint64(b[i]) | uint64(b[i+1])<<8 | uint64(b[i+2])<<16 | uint64(b[i+3])<<24 |
			uint64(b[i+4])<<32 | uint64(b[i+5])<<40 | uint64(b[i+6])<<48 | uint64(b[i+7])<<56)
	}
	if i < len(b) {
		var w uint64
		for k := 0; i < len(b); i, k = i+1, k+8 {
			w |= uint64(b[i]) << k
		}
		h.word(w)
	}
}
