package element

import (
	"encoding/binary"
	"fmt"
	"math"
)

// TableGrads holds gradient rows for the fids of one (table, PS shard) list of one batch.
// Row u belongs to Fids[u] and spans Grads[Offsets[u]:Offsets[u+1]] (features of one table
// may have different widths). Before aggregation there is one row per fid occurrence and
// Counts is nil; after AggregateGrads fids are distinct and Counts[u] is the number of
// occurrences summed into row u.
//
// Encoding: "MTG1", uvarint-prefixed table name, uvarint shard, then Fids, Offsets, Grads
// and Counts, each as a uvarint count followed by little-endian values.
type TableGrads struct {
	Table   string
	Shard   int
	Fids    []uint64
	Offsets []int32
	Grads   []float32
	Counts  []int32
}

// Row returns the gradient row of fid u.
func (g *TableGrads) Row(u int) []float32 { return g.Grads[g.Offsets[u]:g.Offsets[u+1]] }

// Key returns "table:shard", the key AggregateGrads groups by.
func (g *TableGrads) Key() string { return fmt.Sprintf("%s:%d", g.Table, g.Shard) }

// Check reports whether the vectors are consistent.
func (g *TableGrads) Check() error {
	if g.Shard < 0 {
		return fmt.Errorf("table %q: negative shard %d", g.Table, g.Shard)
	}
	if len(g.Fids) == 0 && len(g.Offsets) <= 1 && len(g.Grads) == 0 && len(g.Counts) == 0 {
		return nil
	}
	if len(g.Offsets) != len(g.Fids)+1 || g.Offsets[0] != 0 {
		return fmt.Errorf("table %q shard %d: %d offsets for %d fids", g.Table, g.Shard, len(g.Offsets), len(g.Fids))
	}
	for u := 0; u < len(g.Fids); u++ {
		if g.Offsets[u+1] < g.Offsets[u] {
			return fmt.Errorf("table %q shard %d: offsets decrease at fid %d", g.Table, g.Shard, u)
		}
	}
	if int(g.Offsets[len(g.Fids)]) != len(g.Grads) {
		return fmt.Errorf("table %q shard %d: offsets end at %d, %d grads", g.Table, g.Shard, g.Offsets[len(g.Fids)], len(g.Grads))
	}
	if g.Counts != nil && len(g.Counts) != len(g.Fids) {
		return fmt.Errorf("table %q shard %d: %d counts for %d fids", g.Table, g.Shard, len(g.Counts), len(g.Fids))
	}
	return nil
}

// EncodeTableGrads encodes g.
func EncodeTableGrads(g TableGrads) ([]byte, error) {
	if err := g.Check(); err != nil {
		return nil, fmt.Errorf("transforms/element: encode TableGrads: %w", err)
	}
	out := make([]byte, 0, 32+len(g.Table)+8*len(g.Fids)+4*(len(g.Offsets)+len(g.Grads)+len(g.Counts)))
	out = append(out, "MTG1"...)
	out = binary.AppendUvarint(out, uint64(len(g.Table)))
	out = append(out, g.Table...)
	out = binary.AppendUvarint(out, uint64(g.Shard))
	out = binary.AppendUvarint(out, uint64(len(g.Fids)))
	for _, v := range g.Fids {
		out = binary.LittleEndian.AppendUint64(out, v)
	}
	out = appendI32s(out, g.Offsets)
	out = binary.AppendUvarint(out, uint64(len(g.Grads)))
	for _, v := range g.Grads {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	// Counts: 0 = nil, else count+1, so nil and empty stay distinct.
	if g.Counts == nil {
		out = binary.AppendUvarint(out, 0)
	} else {
		out = binary.AppendUvarint(out, uint64(len(g.Counts))+1)
		for _, v := range g.Counts {
			out = binary.LittleEndian.AppendUint32(out, uint32(v))
		}
	}
	return out, nil
}

func appendI32s(out []byte, s []int32) []byte {
	out = binary.AppendUvarint(out, uint64(len(s)))
	for _, v := range s {
		out = binary.LittleEndian.AppendUint32(out, uint32(v))
	}
	return out
}

// DecodeTableGrads decodes an encoded TableGrads and checks it.
func DecodeTableGrads(b []byte) (TableGrads, error) {
	var g TableGrads
	if len(b) < 4 || string(b[:4]) != "MTG1" {
		return g, fmt.Errorf("%w: TableGrads: bad magic", ErrCorrupt)
	}
	off := 4
	var bad error
	next := func(size int) int {
		if bad != nil {
			return 0
		}
		v, k := binary.Uvarint(b[off:])
		if k <= 0 || v > math.MaxInt32 || (size > 0 && v > uint64(len(b)-off-k)/uint64(size)) {
			bad = fmt.Errorf("%w: TableGrads: bad length at offset %d", ErrCorrupt, off)
			return 0
		}
		off += k
		return int(v)
	}
	n := next(1)
	if bad == nil {
		g.Table = string(b[off : off+n])
		off += n
	}
	g.Shard = next(0)
	if n = next(8); bad == nil && n > 0 {
		g.Fids = make([]uint64, n)
		for i := range g.Fids {
			g.Fids[i] = binary.LittleEndian.Uint64(b[off:])
			off += 8
		}
	}
	if n = next(4); bad == nil && n > 0 {
		g.Offsets = make([]int32, n)
		for i := range g.Offsets {
			g.Offsets[i] = int32(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		}
	}
	if n = next(4); bad == nil && n > 0 {
		g.Grads = make([]float32, n)
		for i := range g.Grads {
			g.Grads[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		}
	}
	if n = next(0); bad == nil && n > 0 {
		n--
		if n > (len(b)-off)/4 {
			return g, fmt.Errorf("%w: TableGrads: counts longer than the input", ErrCorrupt)
		}
		g.Counts = make([]int32, n)
		for i := range g.Counts {
			g.Counts[i] = int32(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		}
	}
	if bad != nil {
		return TableGrads{}, bad
	}
	if off != len(b) {
		return TableGrads{}, fmt.Errorf("%w: TableGrads: %d trailing bytes", ErrCorrupt, len(b)-off)
	}
	if err := g.Check(); err != nil {
		return TableGrads{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return g, nil
}
