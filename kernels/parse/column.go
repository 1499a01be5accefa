package parse

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"

	"github.com/monolith-go/monolith/schemas/batch"
)

// rowMap maps logical rows to physical cells: the identity, or the runs of a run-end
// encoded (shared) column.
type rowMap struct {
	ends []int32 // run ends; nil for the identity
	base int32   // logical offset of the run-end encoded array
}

// unwrap returns the physical values of a column of n rows and its row map, checking that
// every logical row has a physical cell.
func unwrap(col arrow.Array, n int) (arrow.Array, rowMap, error) {
	ree, ok := col.(*array.RunEndEncoded)
	if !ok {
		if col.Len() != n {
			return nil, rowMap{}, fmt.Errorf("%w: column has %d rows, the batch %d", batch.ErrLayout, col.Len(), n)
		}
		return col, rowMap{}, nil
	}
	ends, ok := ree.RunEndsArr().(*array.Int32)
	if !ok {
		return nil, rowMap{}, fmt.Errorf("%w: run ends of type %s (want int32)", batch.ErrLayout, ree.RunEndsArr().DataType())
	}
	e := ends.Int32Values()
	base := ree.Data().Offset()
	if ree.Len() != n || n > 0 && (len(e) == 0 || int64(e[len(e)-1]) < int64(base)+int64(n)) || ree.Values().Len() < len(e) {
		return nil, rowMap{}, fmt.Errorf("%w: run-end encoded column does not cover its %d rows", batch.ErrLayout, n)
	}
	return ree.Values(), rowMap{ends: e, base: int32(base)}, nil
}

// cursor walks a rowMap over ascending logical rows.
type cursor struct {
	m rowMap
	k int
}

// at returns the physical cell of logical row r; rows must be visited in ascending order.
func (c *cursor) at(r int) int {
	if c.m.ends == nil {
		return r
	}
	l := c.m.base + int32(r)
	for c.m.ends[c.k] <= l {
		c.k++
	}
	return c.k
}

// dataType is the Arrow type of a column's physical values, among those the parsers read.
type dataType uint8

const (
	dtOther    dataType = iota
	dtFids              // list<uint64>
	dtFloats            // list<float32>
	dtDoubles           // list<float64>
	dtInt64s            // list<int64>
	dtBytes             // list<binary>
	dtFidLists          // list<list<uint64>>
	dtFloat             // float32
	dtBinary            // binary
)

// colView is a read-only view of one feature column of a batch, with the slices of the
// value families the parsers read. Every slice aliases the record.
type colView struct {
	name  string
	inst  string // batch.MetaInstance: "fid", "value" or "" (Instance batches)
	rows  int
	kind  batch.Kind // kind of non-null cells (when !mixed)
	null  batch.Kind // kind of null cells (when !mixed)
	mixed bool
	cells []uint8 // physical cell kinds (when mixed)
	cmap  rowMap
	m     rowMap

	allNull  bool
	validity []byte // nil: no nulls
	voff     int

	data  dataType // what the physical values hold
	offs  []int32  // list offsets of the physical cells (len cells+1), nil for non-lists
	inner []int32  // list<list<uint64>>: offsets of the inner lists
	u64   []uint64
	f32   []float32
	f64   []float64
	i64   []int64
	bin   *array.Binary // list<binary> child

	// v1 signature companion (list<uint8>, same cells), for raw v1 fids.
	hiOffs []int32
	hi     []uint8
	hmap   rowMap
}

// isNull reports whether physical cell p is null.
func (v *colView) isNull(p int) bool {
	return v.allNull || v.validity != nil && !bitutil.BitIsSet(v.validity, v.voff+p)
}

// iter walks the cells of a column in row order.
type iter struct {
	v  *colView
	r  int
	mc cursor
	cc cursor
	hc cursor
}

func (v *colView) iter() iter {
	return iter{v: v, mc: cursor{m: v.m}, cc: cursor{m: v.cmap}, hc: cursor{m: v.hmap}}
}

// next returns the physical cell and the kind of the next row.
func (it *iter) next() (int, batch.Kind) {
	v := it.v
	r := it.r
	it.r++
	p := it.mc.at(r)
	if v.mixed {
		return p, batch.Kind(v.cells[it.cc.at(r)])
	}
	if v.isNull(p) {
		return p, v.null
	}
	return p, v.kind
}

// hiRow returns the v1 signature bits of row r (nil when the column has none); rows must
// be asked for in ascending order.
func (it *iter) hiRow(r int) []uint8 {
	v := it.v
	if v.hiOffs == nil {
		return nil
	}
	q := it.hc.at(r)
	return v.hi[v.hiOffs[q]:v.hiOffs[q+1]]
}

// checkOffsets verifies that offs (one per cell, plus one) are non-decreasing and index
// into a child of length n.
func checkOffsets(offs []int32, n int) bool {
	if len(offs) == 0 || offs[0] < 0 {
		return false
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return false
		}
	}
	return int(offs[len(offs)-1]) <= n
}

// listOffsets returns the offsets of the cells of l.
func listOffsets(l *array.List) ([]int32, bool) {
	all := l.Offsets()
	lo, hi := l.Offset(), l.Offset()+l.Len()+1
	if l.Len() == 0 && len(all) == 0 {
		return []int32{0}, true
	}
	if hi > len(all) {
		return nil, false
	}
	return all[lo:hi], true
}

// validityOf fills the null information of v from the physical values a.
func (v *colView) validityOf(a arrow.Array) {
	switch {
	case a.DataType().ID() == arrow.NULL:
		v.allNull = true
	case a.NullN() > 0:
		v.validity, v.voff = a.NullBitmapBytes(), a.Data().Offset()
	}
}

// companions indexes the companion columns of a batch by the feature they belong to.
type companions struct {
	cell map[string]int
	hi   map[string]int
}

func companionsOf(s *arrow.Schema) companions {
	var c companions
	for i, f := range s.Fields() {
		role := batch.RoleOf(f)
		if role != batch.RoleCell && role != batch.RoleV1Hi {
			continue
		}
		of, _ := f.Metadata.GetValue(batch.MetaOf)
		m := &c.cell
		if role == batch.RoleV1Hi {
			m = &c.hi
		}
		if *m == nil {
			*m = map[string]int{}
		}
		(*m)[of] = i
	}
	return c
}

// openCol returns the view of feature column i of rec. With wantHi it also reads the v1
// signature companion, when there is one.
func openCol(rec arrow.RecordBatch, i int, comp *companions, wantHi bool) (*colView, error) {
	f := rec.Schema().Field(i)
	v := &colView{name: f.Name, rows: int(rec.NumRows())}
	fail := func(format string, args ...any) (*colView, error) {
		return nil, fmt.Errorf("%w: feature %q: %s", batch.ErrLayout, f.Name, fmt.Sprintf(format, args...))
	}
	k, mixed, err := batch.FeatureKind(f)
	if err != nil {
		return nil, err
	}
	v.kind, v.mixed = k, mixed
	if !mixed {
		s, _ := f.Metadata.GetValue(batch.MetaNull)
		if v.null, err = batch.ParseKind(s); err != nil || v.null.IsValue() {
			return fail("%s=%q", batch.MetaNull, s)
		}
		if !k.IsValue() && k != batch.KindUnset {
			return fail("%s=%q", batch.MetaKind, k)
		}
	}
	v.inst, _ = f.Metadata.GetValue(batch.MetaInstance)
	if err := v.openData(rec.Column(i)); err != nil {
		return fail("%v", err)
	}
	n := v.rows
	if mixed {
		j, ok := comp.cell[f.Name]
		if !ok {
			return fail("mixed kinds without a cell-kind column")
		}
		cvals, cm, err := unwrap(rec.Column(j), n)
		if err != nil {
			return fail("cell kinds: %v", err)
		}
		u, ok := cvals.(*array.Uint8)
		if !ok {
			return fail("cell-kind column of type %s", cvals.DataType())
		}
		v.cells, v.cmap = u.Uint8Values(), cm
	}
	if j, ok := comp.hi[f.Name]; ok && wantHi && v.data == dtFids {
		hvals, hm, err := unwrap(rec.Column(j), n)
		if err != nil {
			return fail("v1 signatures: %v", err)
		}
		hl, ok := hvals.(*array.List)
		if !ok {
			return fail("v1 signature column of type %s", hvals.DataType())
		}
		hu, ok := hl.ListValues().(*array.Uint8)
		hoffs, ok2 := listOffsets(hl)
		if !ok || !ok2 || !checkOffsets(hoffs, hu.Len()) {
			return fail("bad v1 signature column")
		}
		v.hiOffs, v.hi, v.hmap = hoffs, hu.Uint8Values(), hm
	}
	return v, nil
}

// openCanon returns the view of a canonical column (label, instance weight or line id):
// non-null cells are of kind k, null cells unset.
func openCanon(rec arrow.RecordBatch, i int, k batch.Kind) (*colView, error) {
	f := rec.Schema().Field(i)
	v := &colView{name: f.Name, rows: int(rec.NumRows()), kind: k, null: batch.KindUnset}
	if err := v.openData(rec.Column(i)); err != nil {
		return nil, fmt.Errorf("%w: column %q: %v", batch.ErrLayout, f.Name, err)
	}
	want := map[batch.Kind]dataType{batch.KindFloatList: dtFloats, batch.KindFloatValue: dtFloat, batch.KindBytesValue: dtBinary}[k]
	if v.data != want && !v.allNull {
		return nil, fmt.Errorf("%w: column %q has type %s", batch.ErrLayout, f.Name, rec.Column(i).DataType())
	}
	return v, nil
}

// openData reads the physical values of a column: list offsets and the child slices, or
// the values of a scalar column.
func (v *colView) openData(col arrow.Array) error {
	vals, m, err := unwrap(col, v.rows)
	if err != nil {
		return err
	}
	v.m = m
	v.validityOf(vals)
	switch a := vals.(type) {
	case *array.List:
		offs, ok := listOffsets(a)
		child := a.ListValues()
		if !ok || !checkOffsets(offs, child.Len()) {
			return fmt.Errorf("bad list offsets")
		}
		v.offs = offs
		switch c := child.(type) {
		case *array.Uint64:
			v.data, v.u64 = dtFids, c.Uint64Values()
		case *array.Float32:
			v.data, v.f32 = dtFloats, c.Float32Values()
		case *array.Float64:
			v.data, v.f64 = dtDoubles, c.Float64Values()
		case *array.Int64:
			v.data, v.i64 = dtInt64s, c.Int64Values()
		case *array.Binary:
			v.data, v.bin = dtBytes, c
		case *array.List:
			if g, ok := c.ListValues().(*array.Uint64); ok {
				inner, ok := listOffsets(c)
				if !ok || !checkOffsets(inner, g.Len()) {
					return fmt.Errorf("bad inner list offsets")
				}
				v.data, v.inner, v.u64 = dtFidLists, inner, g.Uint64Values()
			}
		}
	case *array.Float32:
		v.data, v.f32 = dtFloat, a.Float32Values()
	case *array.Binary:
		v.data, v.bin = dtBinary, a
	}
	return nil
}

// floats returns the values of float_list cell p.
func (v *colView) floats(p int) ([]float32, bool) {
	if v.data != dtFloats {
		return nil, false
	}
	s, e := v.cellRange(p)
	return v.f32[s:e], true
}

// doubles returns the values of double_list cell p.
func (v *colView) doubles(p int) ([]float64, bool) {
	if v.data != dtDoubles {
		return nil, false
	}
	s, e := v.cellRange(p)
	return v.f64[s:e], true
}

// int64s returns the values of int64_list cell p.
func (v *colView) int64s(p int) ([]int64, bool) {
	if v.data != dtInt64s {
		return nil, false
	}
	s, e := v.cellRange(p)
	return v.i64[s:e], true
}

// bytesRange returns the child range of bytes_list cell p.
func (v *colView) bytesRange(p int) (int, int, bool) {
	if v.data != dtBytes {
		return 0, 0, false
	}
	s, e := v.cellRange(p)
	return s, e, true
}

// binBound bounds the bytes that the rows of a binary (or list<binary>) column hold in
// total.
func (v *colView) binBound() int {
	if v.bin == nil {
		return 0
	}
	b := len(v.bin.ValueBytes())
	if v.m.ends != nil {
		b *= v.rows
	}
	return min(b, 1<<28)
}

// plainFids reports whether every row of v is a fid list in its own, non-null cell (no
// sharing, no per-cell kinds), so that the rows' fids are contiguous.
func (v *colView) plainFids() bool {
	return v.kind.IsFid() && !v.mixed && v.m.ends == nil && !v.allNull && v.validity == nil && v.data == dtFids
}

// cellRange returns the child range of list cell p.
func (v *colView) cellRange(p int) (int, int) { return int(v.offs[p]), int(v.offs[p+1]) }

// fidsAt returns the fids of physical cell p of kind k: a flat fid list, or (with flatten)
// the concatenated inner lists of a fid_v2_lists cell. ok is false when the column does not
// hold the data the kind says.
func (v *colView) fidsAt(p int, k batch.Kind) (vals []uint64, ok bool) {
	switch {
	case k.IsFid() && v.data == dtFids:
		s, e := v.cellRange(p)
		return v.u64[s:e], true
	case (k == batch.KindFidV2Lists || k == batch.KindFidV1Lists) && v.data == dtFidLists:
		s, e := v.cellRange(p)
		return v.u64[v.inner[s]:v.inner[e]], true
	}
	return nil, false
}

// layoutErr reports a cell whose kind does not match the column's data.
func (v *colView) layoutErr(r int, k batch.Kind) error {
	return fmt.Errorf("%w: feature %q row %d: cell kind %s does not match the column type", batch.ErrLayout, v.name, r, k)
}
