package batch

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Sparse is a zero-copy view of a sparse (fid) feature column: the fids of row i are
// Values[Offsets[i]:Offsets[i+1]], as v2 fids. A shared column has a single cell that
// applies to every row: Offsets then has two entries. Null cells read as empty rows.
// The slices alias the record's buffers: do not modify them, and do not use them after
// the record is released.
type Sparse struct {
	Name    string
	Rows    int      // logical rows of the batch
	Shared  bool     // one cell for all rows (an ExampleBatch SHARED list)
	Offsets []int32  // len Cells()+1; Offsets[0] need not be 0
	Values  []uint64 // v2 fids
}

// Cells is the number of stored cells: 1 when shared, else Rows.
func (s Sparse) Cells() int { return len(s.Offsets) - 1 }

// Row returns the fids of logical row r.
func (s Sparse) Row(r int) []uint64 {
	if s.Shared {
		r = 0
	}
	return s.Values[s.Offsets[r]:s.Offsets[r+1]]
}

// Dense is a zero-copy view of a list<float32> column (dense features, labels); the values
// of row i are Values[Offsets[i]:Offsets[i+1]]. Sharing and lifetime as for Sparse.
type Dense struct {
	Name    string
	Rows    int
	Shared  bool
	Offsets []int32
	Values  []float32
}

// Row returns the values of logical row r.
func (d Dense) Row(r int) []float32 {
	if d.Shared {
		r = 0
	}
	return d.Values[d.Offsets[r]:d.Offsets[r+1]]
}

// noCells holds the offsets of views without values, read-only: one empty shared cell, or
// (noCells[:1]) no cells.
var noCells = []int32{0, 0}

// listView returns the offsets and child array of a (possibly run-end encoded) list column.
func listView(col arrow.Array) (offs []int32, child arrow.Array, shared bool, ok bool) {
	lv := logicalOf(col)
	switch v := lv.values.(type) {
	case *array.List:
		if col.Len() == 0 {
			// An empty list array may come without offsets (an IPC stream's zero-row batch
			// has none), and the values of an empty shared column may be empty too.
			if lv.shared() {
				return noCells, v.ListValues(), true, true
			}
			return noCells[:1], v.ListValues(), false, true
		}
		if lv.shared() {
			p := lv.index(0)
			return v.Offsets()[v.Offset()+p : v.Offset()+p+2], v.ListValues(), true, true
		}
		return v.Offsets()[v.Offset() : v.Offset()+v.Len()+1], v.ListValues(), false, true
	case *array.Null:
		n := v.Len()
		if lv.shared() {
			n = 1
		}
		return make([]int32, n+1), nil, lv.shared(), true
	}
	return nil, nil, false, false
}

// SparseColumn returns the view of the fid feature column called name. Columns whose cells
// are all unset or absent (type null) read as empty rows.
func SparseColumn(rec arrow.RecordBatch, name string) (Sparse, error) {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return Sparse{}, fmt.Errorf("schemas/batch: feature %q: %d columns have that name", name, len(idx))
	}
	return SparseAt(rec, idx[0])
}

// SparseAt returns the view of column i, which must be a fid feature column.
func SparseAt(rec arrow.RecordBatch, i int) (Sparse, error) {
	f := rec.Schema().Field(i)
	s := Sparse{Name: f.Name, Rows: int(rec.NumRows())}
	if RoleOf(f) != RoleFeature {
		return s, fmt.Errorf("schemas/batch: column %q is not a feature (role %q)", f.Name, RoleOf(f))
	}
	k, mixed, err := FeatureKind(f)
	if err != nil {
		return s, err
	}
	if !mixed && !k.IsFid() && k != KindUnset {
		return s, fmt.Errorf("schemas/batch: feature %q holds %s, not fids", f.Name, k)
	}
	if n := rec.Column(i).Len(); n != s.Rows {
		// Row(r) indexes the offsets by logical row: a column shorter than the batch
		// would panic there.
		return s, fmt.Errorf("%w: column %q has %d rows, record has %d", ErrLayout, f.Name, n, s.Rows)
	}
	offs, child, shared, ok := listView(rec.Column(i))
	if ok && child != nil {
		u, isU64 := child.(*array.Uint64)
		if !isU64 {
			return s, fmt.Errorf("schemas/batch: feature %q has type %s, not list<uint64>", f.Name, rec.Column(i).DataType())
		}
		s.Values = u.Uint64Values()
	} else if !ok {
		return s, fmt.Errorf("schemas/batch: feature %q has type %s, not list<uint64>", f.Name, rec.Column(i).DataType())
	}
	s.Offsets, s.Shared = offs, shared
	return s, nil
}

// DenseColumn returns the view of the list<float32> column called name (a float_list
// feature, or ColLabel).
func DenseColumn(rec arrow.RecordBatch, name string) (Dense, error) {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return Dense{}, fmt.Errorf("schemas/batch: column %q: %d columns have that name", name, len(idx))
	}
	d := Dense{Name: name, Rows: int(rec.NumRows())}
	if n := rec.Column(idx[0]).Len(); n != d.Rows {
		// As in SparseAt: Row(r) would index past a short column.
		return d, fmt.Errorf("%w: column %q has %d rows, record has %d", ErrLayout, name, n, d.Rows)
	}
	offs, child, shared, ok := listView(rec.Column(idx[0]))
	if !ok {
		return d, fmt.Errorf("schemas/batch: column %q has type %s, not list<float32>", name, rec.Column(idx[0]).DataType())
	}
	if child != nil {
		f, isF32 := child.(*array.Float32)
		if !isF32 {
			return d, fmt.Errorf("schemas/batch: column %q has type %s, not list<float32>", name, rec.Column(idx[0]).DataType())
		}
		d.Values = f.Float32Values()
	}
	d.Offsets, d.Shared = offs, shared
	return d, nil
}

// Features returns the names of the feature columns in schema order.
func Features(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		if IsFeature(f) {
			out = append(out, f.Name)
		}
	}
	return out
}

// RawFids appends to dst the fids of row r of feature column i as the source message held
// them: v1 values for fid_v1_list cells (rebuilt from the v2 column and its signature
// companion), v2 values otherwise; nothing for null cells. It returns the extended slice.
func RawFids(rec arrow.RecordBatch, i, r int, dst []uint64) ([]uint64, error) {
	f := rec.Schema().Field(i)
	fr, err := newFeatureReader(f, rec.Column(i))
	if err != nil {
		return dst, err
	}
	if r < 0 || r >= int(rec.NumRows()) {
		return dst, fmt.Errorf("schemas/batch: feature %q: row %d of %d", f.Name, r, rec.NumRows())
	}
	if n := rec.Column(i).Len(); n != int(rec.NumRows()) {
		return dst, fmt.Errorf("%w: column %q has %d rows, record has %d", ErrLayout, f.Name, n, rec.NumRows())
	}
	// The companions are checked for the one row read, so that a batch off the layout
	// (companions of another type, length or cell boundaries) is an error, not a panic.
	if fr.mixed {
		idx := rec.Schema().FieldIndices(cellPrefix + f.Name)
		if len(idx) != 1 {
			return dst, fmt.Errorf("%w: feature %q has mixed kinds but no cell-kind column", ErrLayout, f.Name)
		}
		col := rec.Column(idx[0])
		fr.cells = logicalOf(col)
		if _, ok := fr.cells.values.(*array.Uint8); !ok || col.Len() != int(rec.NumRows()) {
			return dst, fmt.Errorf("%w: feature %q: bad cell-kind column", ErrLayout, f.Name)
		}
		if err := fr.checkCell(r); err != nil {
			return dst, err
		}
	}
	if idx := rec.Schema().FieldIndices(v1hiPrefix + f.Name); len(idx) == 1 {
		col := rec.Column(idx[0])
		fr.hi = logicalOf(col)
		hl, ok1 := fr.hi.values.(*array.List)
		ml, ok2 := fr.main.values.(*array.List)
		if !ok1 || !ok2 || !isUint8(hl.ListValues()) || col.Len() != int(rec.NumRows()) {
			return dst, fmt.Errorf("%w: feature %q: v1 signature column does not match its fids", ErrLayout, f.Name)
		}
		if p := fr.main.index(r); !ml.IsNull(p) {
			ms, me := listRange(ml, p)
			hs, he := listRange(hl, fr.hi.index(r))
			if me-ms != he-hs {
				return dst, fmt.Errorf("%w: feature %q row %d: %d fids but %d v1 signatures", ErrLayout, f.Name, r, me-ms, he-hs)
			}
		}
	}
	k := fr.kindAt(r)
	if !k.IsFid() {
		return dst, nil
	}
	return append(dst, fr.fidsAt(r, k)...), nil
}

func isUint8(a arrow.Array) bool {
	_, ok := a.(*array.Uint8)
	return ok
}
