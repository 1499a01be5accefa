package reduce

import (
	"fmt"
)

// OffsetMap lists, for each unique key u (flattened over rows), the value-buffer
// offsets of all its occurrences: Offsets[Splits[u]:Splits[u+1]]. It is the
// value_offset output of [UniqueKeyWithValueAndOffset] with its outer (per-row)
// dimension dropped, which is how fill_with_offset_map consumes it.
type OffsetMap struct {
	Offsets []int64
	Splits  []int64
}

// Keys returns the number of unique keys the map describes.
func (m OffsetMap) Keys() int { return max(len(m.Splits)-1, 0) }

// UniqueKeys holds the outputs of [UniqueKeyWithValueAndOffset] plus reusable
// scratch. The zero value is ready to use; reusing one makes the op allocation-free
// once warmed up. Outputs are overwritten by the next call. Not safe for concurrent
// use.
type UniqueKeys[K ID] struct {
	// Keys is the per-row deduplicated keys, first-occurrence order, same rows as the
	// input.
	Keys Ragged[K]
	// ValueOffset maps each unique key (flattened) to its occurrences' offsets.
	// Monolith's ragged-ragged value_offset is [Keys.RowSplits, ValueOffset.Splits,
	// ValueOffset.Offsets].
	ValueOffset OffsetMap
	// BufferLen is the value buffer's length in floats: Σ_i len(row i)·dims[i].
	// The caller allocates the buffer (Monolith's per-step shared tensor resource);
	// finalize_shared_tensor is then the identity on it, and so is its gradient.
	BufferLen int

	table  idTable
	uidx   []int32 // per occurrence: global unique index
	cursor []int64 // per unique: next write position in Offsets
}

// UniqueKeyWithValueAndOffset deduplicates the keys of each row of key (first
// occurrence order) and assigns every occurrence a value-buffer offset: occurrences
// take dims[row] floats each, sequentially over all rows in order. Example:
// key [[],[0,1,2,1,0],[0,1,0],[]], dims [1,2,3,4] give unique [[],[0,1,2],[0,1],[]],
// offsets [[],[[0,8],[2,6],[4]],[[10,16],[13]],[]] and a 19-float buffer.
//
// key must have exactly len(dims) rows ([ErrShape] otherwise).
func UniqueKeyWithValueAndOffset[K ID](dst *UniqueKeys[K], key Ragged[K], dims []int) error {
	if err := checkSplits("key", key.RowSplits, len(key.Values)); err != nil {
		return err
	}
	rows := key.Rows()
	if rows != len(dims) {
		return fmt.Errorf("%w: ragged key should have %d rows but got %d", ErrShape, len(dims), rows)
	}
	if err := checkDims("dims", dims); err != nil {
		return err
	}
	n := len(key.Values)
	if n > MaxIndexLen {
		return fmt.Errorf("%w: %d keys", ErrOverflow, n)
	}
	bufLen := 0
	for r := 0; r < rows; r++ {
		c, ok := mulLen(int(key.RowSplits[r+1]-key.RowSplits[r]), dims[r])
		if !ok || bufLen > MaxIndexLen-c {
			return fmt.Errorf("%w: value buffer larger than %d floats", ErrOverflow, MaxIndexLen)
		}
		bufLen += c
	}

	dst.uidx = growLen(dst.uidx, n)
	dst.Keys.RowSplits = growLen(dst.Keys.RowSplits, rows+1)
	dst.Keys.RowSplits[0] = 0
	uk := growCap(dst.Keys.Values, n)
	counts := growCap(dst.cursor, n)
	for r := 0; r < rows; r++ {
		lo, hi := int(key.RowSplits[r]), int(key.RowSplits[r+1])
		dst.table.reset(hi - lo)
		for i := lo; i < hi; i++ {
			u, isNew := dst.table.getOrInsert(uint64(key.Values[i]), int32(len(uk)))
			if isNew {
				uk = append(uk, key.Values[i])
				counts = append(counts, 0)
			}
			counts[u]++
			dst.uidx[i] = u
		}
		dst.Keys.RowSplits[r+1] = int64(len(uk))
	}
	dst.Keys.Values = uk

	U := len(uk)
	splits := growLen(dst.ValueOffset.Splits, U+1)
	var s int64
	for u, c := range counts {
		splits[u] = s
		counts[u] = s // counts becomes the write cursor of key u
		s += c
	}
	splits[U] = s
	offsets := growLen(dst.ValueOffset.Offsets, n)
	var off int64
	for r := 0; r < rows; r++ {
		d := int64(dims[r])
		for i := key.RowSplits[r]; i < key.RowSplits[r+1]; i++ {
			u := dst.uidx[i]
			offsets[counts[u]] = off
			counts[u]++
			off += d
		}
	}
	dst.cursor = counts
	dst.ValueOffset = OffsetMap{Offsets: offsets, Splits: splits}
	dst.BufferLen = bufLen
	return nil
}

// checkFill validates the arguments shared by FillWithOffsetMap and its gradient
// and returns the expected value length Σ_row len(pos row)·dims[row].
func checkFill(pos Ragged[int64], m OffsetMap, dims []int, bufLen int) (int, error) {
	if err := checkSplits("pos", pos.RowSplits, len(pos.Values)); err != nil {
		return 0, err
	}
	if pos.Rows() != len(dims) {
		return 0, fmt.Errorf("%w: pos's first dim doesn't match dim size: %d vs %d", ErrShape, pos.Rows(), len(dims))
	}
	if err := checkDims("dims", dims); err != nil {
		return 0, err
	}
	if err := checkSplits("value offset map", m.Splits, len(m.Offsets)); err != nil {
		return 0, err
	}
	keys := int64(m.Keys())
	want := 0
	for r := 0; r < len(dims); r++ {
		d := int64(dims[r])
		for i := pos.RowSplits[r]; i < pos.RowSplits[r+1]; i++ {
			p := pos.Values[i]
			if p < 0 || p >= keys {
				return 0, fmt.Errorf("%w: pos %d not in [0, %d) unique keys", ErrRange, p, keys)
			}
			for _, o := range m.Offsets[m.Splits[p]:m.Splits[p+1]] {
				if o < 0 || o > int64(bufLen)-d {
					return 0, fmt.Errorf("%w: offset %d with dim %d outside the %d-float value buffer", ErrRange, o, d, bufLen)
				}
			}
		}
		c, ok := mulLen(int(pos.RowSplits[r+1]-pos.RowSplits[r]), dims[r])
		if !ok || want > MaxIndexLen-c {
			return 0, fmt.Errorf("%w: value larger than %d floats", ErrOverflow, MaxIndexLen)
		}
		want += c
	}
	return want, nil
}

// FillWithOffsetMap copies value into buffer: the pos entries (row r of pos uses
// dims[r]) consume value sequentially, dims[r] floats each, and each chunk is copied
// to every offset m lists for unique key pos[i] (Monolith's fill_with_offset_map;
// pos indexes the flattened unique keys). Example, continuing
// [UniqueKeyWithValueAndOffset]'s: pos [[],[0,1,2],[3,4],[]] and value 0..11 give
// [0,1,2,3,4,5,2,3,0,1,6,7,8,9,10,11,6,7,8].
//
// Everything is checked before anything is written, so on error buffer is
// unchanged: a pos outside the unique keys or an offset whose chunk leaves buffer is
// [ErrRange]; len(value) different from the expected Σ len(pos row)·dims[row] is
// [ErrShape] with both sizes in the message ("expected 12, actual 10"). Monolith only
// rejects a value that is too short; a longer one would drop data silently, so it is
// rejected too.
func FillWithOffsetMap(buffer []float32, pos Ragged[int64], value []float32, m OffsetMap, dims []int) error {
	want, err := checkFill(pos, m, dims, len(buffer))
	if err != nil {
		return err
	}
	if len(value) != want {
		return fmt.Errorf("%w: value size doesn't match expected size: expected %d, actual %d (pos splits %v)", ErrShape, want, len(value), pos.RowSplits)
	}
	v := 0
	for r, d := range dims {
		for i := pos.RowSplits[r]; i < pos.RowSplits[r+1]; i++ {
			p := pos.Values[i]
			chunk := value[v : v+d]
			for _, o := range m.Offsets[m.Splits[p]:m.Splits[p+1]] {
				copy(buffer[o:int(o)+d], chunk)
			}
			v += d
		}
	}
	return nil
}

// FillWithOffsetMapGrad is the gradient of [FillWithOffsetMap] with respect to value:
// for each pos entry, the sum over its key's offsets o (in order) of
// grad[o : o+dims[row]], written sequentially into dst (the value's length, fully
// overwritten). grad has the buffer's length. Example: the gradient of range(19)
// in the FillWithOffsetMap example is [8,10,8,10,4,5,26,28,30,13,14,15].
func FillWithOffsetMapGrad(dst []float32, pos Ragged[int64], grad []float32, m OffsetMap, dims []int) error {
	want, err := checkFill(pos, m, dims, len(grad))
	if err != nil {
		return err
	}
	if len(dst) != want {
		return fmt.Errorf("%w: dst size doesn't match expected size: expected %d, actual %d", ErrShape, want, len(dst))
	}
	clear(dst)
	v := 0
	for r, d := range dims {
		for i := pos.RowSplits[r]; i < pos.RowSplits[r+1]; i++ {
			p := pos.Values[i]
			out := dst[v : v+d]
			for _, o := range m.Offsets[m.Splits[p]:m.Splits[p+1]] {
				addTo(out, grad[o:int(o)+d])
			}
			v += d
		}
	}
	return nil
}
