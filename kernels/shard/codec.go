package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Result encoding, for carrying a sharded batch between processes (the Beam element
// coder in transforms/element uses it):
//
//	magic "MSR1"
//	uvarint Version, PS, Tables, BatchSize
//	then each slice as uvarint length + little-endian values, in this order:
//	Fids, listStart, listEnd, FidOffset, FeatureOffset, NflOffset, RowSplits,
//	splitStart, splitEnd, EmbSize, TableRowLength, ShardRowLength, EmbRowLength, Counts
//
// The format is frozen for a given magic.
const resultMagic = "MSR1"

// ErrCorrupt is wrapped by DecodeResult errors.
var ErrCorrupt = errors.New("kernels/shard: corrupt encoded result")

// Clone returns a deep copy of r that stays valid after the Sharder's next call.
func (r *Result) Clone() *Result {
	return &Result{
		Version: r.Version, PS: r.PS, Tables: r.Tables, BatchSize: r.BatchSize,
		Fids:           clone(r.Fids),
		listStart:      clone(r.listStart),
		listEnd:        clone(r.listEnd),
		FidOffset:      clone(r.FidOffset),
		FeatureOffset:  clone(r.FeatureOffset),
		NflOffset:      clone(r.NflOffset),
		RowSplits:      clone(r.RowSplits),
		splitStart:     clone(r.splitStart),
		splitEnd:       clone(r.splitEnd),
		EmbSize:        clone(r.EmbSize),
		TableRowLength: clone(r.TableRowLength),
		ShardRowLength: clone(r.ShardRowLength),
		EmbRowLength:   clone(r.EmbRowLength),
		Counts:         clone(r.Counts),
	}
}

func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	c := make([]T, len(s))
	copy(c, s) // make and copy: the runtime skips clearing memory that is overwritten
	return c
}

// AppendBinary appends the encoding of r to dst.
func (r *Result) AppendBinary(dst []byte) ([]byte, error) {
	dst = append(dst, resultMagic...)
	for _, v := range []int{r.Version, r.PS, r.Tables, r.BatchSize} {
		if v < 0 {
			return dst, fmt.Errorf("kernels/shard: cannot encode a result with a negative header value %d", v)
		}
		dst = binary.AppendUvarint(dst, uint64(v))
	}
	dst = appendU64s(dst, r.Fids)
	dst = appendInts(dst, r.listStart)
	dst = appendInts(dst, r.listEnd)
	dst = appendU64s(dst, r.FidOffset)
	dst = appendI32s(dst, r.FeatureOffset)
	dst = appendU32s(dst, r.NflOffset)
	dst = appendI64s(dst, r.RowSplits)
	dst = appendInts(dst, r.splitStart)
	dst = appendInts(dst, r.splitEnd)
	dst = appendI32s(dst, r.EmbSize)
	dst = appendI32s(dst, r.TableRowLength)
	dst = appendI32s(dst, r.ShardRowLength)
	dst = appendI32s(dst, r.EmbRowLength)
	dst = appendI32s(dst, r.Counts)
	return dst, nil
}

// MarshalBinary encodes r.
func (r *Result) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// DecodeResult decodes an encoded Result and checks that its index vectors stay inside
// its lists, so that List, Splits and ListStart cannot go out of range. It never panics;
// errors wrap ErrCorrupt and give the byte offset.
func DecodeResult(b []byte) (*Result, error) {
	d := decoder{b: b}
	if len(b) < len(resultMagic) || string(b[:len(resultMagic)]) != resultMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	d.off = len(resultMagic)
	r := &Result{}
	hdr := []*int{&r.Version, &r.PS, &r.Tables, &r.BatchSize}
	for _, p := range hdr {
		*p = d.int()
	}
	r.Fids = d.u64s()
	r.listStart = d.ints()
	r.listEnd = d.ints()
	r.FidOffset = d.u64s()
	r.FeatureOffset = d.i32s()
	r.NflOffset = d.u32s()
	r.RowSplits = d.i64s()
	r.splitStart = d.ints()
	r.splitEnd = d.ints()
	r.EmbSize = d.i32s()
	r.TableRowLength = d.i32s()
	r.ShardRowLength = d.i32s()
	r.EmbRowLength = d.i32s()
	r.Counts = d.i32s()
	if d.err != nil {
		return nil, d.err
	}
	if d.off != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes at offset %d", ErrCorrupt, len(b)-d.off, d.off)
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return r, nil
}

// check validates the index vectors of a decoded result.
func (r *Result) check() error {
	if r.Version < 1 || r.Version > 5 || r.PS < 1 || r.Tables < 0 {
		return fmt.Errorf("%w: version %d, ps %d, tables %d", ErrCorrupt, r.Version, r.PS, r.Tables)
	}
	if r.Tables > math.MaxInt32/r.PS {
		return fmt.Errorf("%w: %d tables × %d shards", ErrCorrupt, r.Tables, r.PS)
	}
	K := r.Tables * r.PS
	if len(r.listStart) != K || len(r.listEnd) != K || len(r.splitStart) != K || len(r.splitEnd) != K || len(r.EmbSize) != K {
		return fmt.Errorf("%w: per-list vectors do not have %d entries", ErrCorrupt, K)
	}
	for k := 0; k < K; k++ {
		if r.listStart[k] < 0 || r.listStart[k] > r.listEnd[k] || r.listEnd[k] > len(r.Fids) {
			return fmt.Errorf("%w: list %d spans [%d, %d) of %d fids", ErrCorrupt, k, r.listStart[k], r.listEnd[k], len(r.Fids))
		}
		if r.splitStart[k] < 0 || r.splitStart[k] > r.splitEnd[k] || r.splitEnd[k] > len(r.RowSplits) {
			return fmt.Errorf("%w: splits of list %d span [%d, %d) of %d", ErrCorrupt, k, r.splitStart[k], r.splitEnd[k], len(r.RowSplits))
		}
	}
	return nil
}

type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d", ErrCorrupt, what, d.off)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) int() int {
	v := d.uvarint()
	if v > math.MaxInt32 {
		d.fail("value out of range")
		return 0
	}
	return int(v)
}

// n reads a slice length of elements of size bytes and checks the bytes are there.
func (d *decoder) n(size int) int {
	v := d.uvarint()
	if d.err != nil {
		return 0
	}
	if v > uint64(len(d.b)-d.off)/uint64(size) {
		d.fail("slice longer than the input")
		return 0
	}
	return int(v)
}

func decodeSlice[T any](d *decoder, size int, get func([]byte) T) []T {
	n := d.n(size)
	if d.err != nil || n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = get(d.b[d.off:])
		d.off += size
	}
	return out
}

func (d *decoder) u64s() []uint64 { return decodeSlice(d, 8, binary.LittleEndian.Uint64) }
func (d *decoder) i64s() []int64 {
	return decodeSlice(d, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
}
func (d *decoder) u32s() []uint32 { return decodeSlice(d, 4, binary.LittleEndian.Uint32) }
func (d *decoder) i32s() []int32 {
	return decodeSlice(d, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
}
func (d *decoder) ints() []int {
	s := decodeSlice(d, 4, func(b []byte) int { return int(int32(binary.LittleEndian.Uint32(b))) })
	return s
}

func appendU64s(dst []byte, s []uint64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	for _, v := range s {
		dst = binary.LittleEndian.AppendUint64(dst, v)
	}
	return dst
}

func appendI64s(dst []byte, s []int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	for _, v := range s {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

func appendU32s(dst []byte, s []uint32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	for _, v := range s {
		dst = binary.LittleEndian.AppendUint32(dst, v)
	}
	return dst
}

func appendI32s(dst []byte, s []int32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	for _, v := range s {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
	}
	return dst
}

// appendInts stores index vectors as int32 (they index slices bounded by int32 lengths).
func appendInts(dst []byte, s []int) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	for _, v := range s {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(int32(v)))
	}
	return dst
}
