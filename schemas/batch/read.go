package batch

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/monolith-go/monolith/schemas/fid"
)

// featureReader reads the cells of one feature column back.
type featureReader struct {
	name   string
	kind   Kind // kind of every non-null cell (when !mixed)
	null   Kind // meaning of a null cell (when !mixed)
	mixed  bool
	cells  logical // per-cell kinds (uint8) when mixed
	main   logical
	hi     logical // v1 signature bits, or zero value
	id     int32
	sorted int32
	inst   string
	shared bool
}

func metaInt(f arrow.Field, key string) (int32, error) {
	v, ok := f.Metadata.GetValue(key)
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: feature %q: %s=%q: %v", ErrLayout, f.Name, key, v, err)
	}
	return int32(n), nil
}

// columns indexes a record's columns by role.
type columns struct {
	src      Source
	rows     int
	features []*featureReader
	byName   map[string]int // feature name -> index in features
	label    *arrow.Field
	labelCol logical
	iw       *arrow.Field
	iwCol    logical
	lineID   *arrow.Field
	lineCol  logical
	dsk      logical
	hasDsk   bool
	extra    logical
	hasExtra bool
	fidOrder logical // Instance "__fid_order__", values nil when absent
	groups   []int   // feature indexes of Instance slot columns, in schema order
	// order lists the ExampleBatch lists in schema order: feature index, or -1 label,
	// -2 line_id, -3 instance_weight.
	order []int
}

const (
	orderLabel = -1 - iota
	orderLineID
	orderIW
)

func readColumns(rec arrow.RecordBatch) (*columns, error) {
	s := rec.Schema()
	src, err := SourceOf(s)
	if err != nil {
		return nil, err
	}
	cs := &columns{src: src, rows: int(rec.NumRows()), byName: map[string]int{}}
	companions := map[string]map[Role]arrow.Array{}
	for i, f := range s.Fields() {
		col := rec.Column(i)
		if col.Len() != cs.rows {
			return nil, fmt.Errorf("%w: column %q has %d rows, record has %d", ErrLayout, f.Name, col.Len(), cs.rows)
		}
		if err := checkShared(f.Name, col, cs.rows); err != nil {
			return nil, err
		}
		switch RoleOf(f) {
		case RoleFeature:
			fr, err := newFeatureReader(f, col)
			if err != nil {
				return nil, err
			}
			cs.byName[f.Name] = len(cs.features)
			cs.order = append(cs.order, len(cs.features))
			cs.features = append(cs.features, fr)
		case RoleLabel:
			cs.label, cs.labelCol = &s.Fields()[i], logicalOf(col)
			// labelAt reads the values as float32: a list of another type (a decoded IPC
			// element can hold any) must fail here, not panic there.
			if l, ok := cs.labelCol.values.(*array.List); !ok || !isFloat32(l.ListValues()) {
				return nil, fmt.Errorf("%w: %s has type %s", ErrLayout, f.Name, col.DataType())
			}
			cs.order = append(cs.order, orderLabel)
		case RoleLineID:
			cs.lineID, cs.lineCol = &s.Fields()[i], logicalOf(col)
			if _, ok := cs.lineCol.values.(*array.Binary); !ok {
				return nil, fmt.Errorf("%w: %s has type %s", ErrLayout, f.Name, col.DataType())
			}
			cs.order = append(cs.order, orderLineID)
		case RoleInstanceWeight:
			cs.iw, cs.iwCol = &s.Fields()[i], logicalOf(col)
			if _, ok := cs.iwCol.values.(*array.Float32); !ok {
				return nil, fmt.Errorf("%w: %s has type %s", ErrLayout, f.Name, col.DataType())
			}
			cs.order = append(cs.order, orderIW)
		case RoleDataSourceKey:
			cs.dsk, cs.hasDsk = logicalOf(col), true
			if _, ok := cs.dsk.values.(*array.Uint32); !ok {
				return nil, fmt.Errorf("%w: %s has type %s", ErrLayout, f.Name, col.DataType())
			}
		case RoleExtra:
			cs.extra, cs.hasExtra = logicalOf(col), true
			if _, ok := cs.extra.values.(*array.Binary); !ok {
				return nil, fmt.Errorf("%w: %s has type %s", ErrLayout, f.Name, col.DataType())
			}
		case RoleV1Hi, RoleCell:
			of, _ := f.Metadata.GetValue(MetaOf)
			if companions[of] == nil {
				companions[of] = map[Role]arrow.Array{}
			}
			companions[of][RoleOf(f)] = col
		case RoleFidOrder:
			cs.fidOrder = logicalOf(col)
			l, ok := cs.fidOrder.values.(*array.List)
			if !ok || !arrow.TypeEqual(l.DataType(), arrow.ListOf(arrow.PrimitiveTypes.Int32)) {
				return nil, fmt.Errorf("%w: %s has type %s", ErrLayout, f.Name, col.DataType())
			}
		case RoleLineIDField:
			// Derived from the line_id column; nothing to read back.
		default:
			return nil, fmt.Errorf("%w: column %q has unknown role %q", ErrLayout, f.Name, RoleOf(f))
		}
	}
	for of, comp := range companions {
		i, ok := cs.byName[of]
		if !ok {
			return nil, fmt.Errorf("%w: companion column of missing feature %q", ErrLayout, of)
		}
		fr := cs.features[i]
		if a, ok := comp[RoleV1Hi]; ok {
			fr.hi = logicalOf(a)
			hl, ok1 := fr.hi.values.(*array.List)
			ml, ok2 := fr.main.values.(*array.List)
			if !ok1 || !ok2 || hl.ListValues().Len() != ml.ListValues().Len() || fr.hi.shared() != fr.main.shared() {
				return nil, fmt.Errorf("%w: feature %q: v1 signature column does not match its fids", ErrLayout, of)
			}
			if _, ok := hl.ListValues().(*array.Uint8); !ok {
				return nil, fmt.Errorf("%w: feature %q: v1 signature column has type %s", ErrLayout, of, a.DataType())
			}
			if err := fr.checkHi(cs.rows); err != nil {
				return nil, err
			}
		}
		if a, ok := comp[RoleCell]; ok {
			fr.cells = logicalOf(a)
			if _, ok := fr.cells.values.(*array.Uint8); !ok || !fr.mixed {
				return nil, fmt.Errorf("%w: feature %q: bad cell-kind column", ErrLayout, of)
			}
		}
		if fr.mixed && fr.cells.values == nil {
			return nil, fmt.Errorf("%w: feature %q has mixed kinds but no cell-kind column", ErrLayout, of)
		}
		if fr.mixed {
			if err := fr.checkCells(cs.rows); err != nil {
				return nil, err
			}
		}
	}
	for i, fr := range cs.features {
		if fr.inst == "fid" {
			cs.groups = append(cs.groups, i)
		}
		if fr.mixed && fr.cells.values == nil {
			return nil, fmt.Errorf("%w: feature %q has mixed kinds but no cell-kind column", ErrLayout, fr.name)
		}
	}
	return cs, nil
}

func newFeatureReader(f arrow.Field, col arrow.Array) (*featureReader, error) {
	fr, err := newFeatureReaderType(f)
	if err != nil {
		return nil, err
	}
	fr.main = logicalOf(col)
	fr.shared = fr.main.shared()
	if !arrow.TypeEqual(col.DataType(), f.Type) {
		return nil, fmt.Errorf("%w: feature %q: column has type %s, schema says %s", ErrLayout, f.Name, col.DataType(), f.Type)
	}
	return fr, nil
}

// newFeatureReaderType checks a feature field's metadata against its type and returns a
// reader without data.
func newFeatureReaderType(f arrow.Field) (*featureReader, error) {
	fr := &featureReader{name: f.Name}
	var err error
	if fr.kind, fr.mixed, err = FeatureKind(f); err != nil {
		return nil, err
	}
	flat := FlatType(f.Type)
	if !fr.mixed {
		v, _ := f.Metadata.GetValue(MetaNull)
		if fr.null, err = ParseKind(v); err != nil || fr.null.IsValue() {
			return nil, fmt.Errorf("%w: feature %q: %s=%q", ErrLayout, f.Name, MetaNull, v)
		}
		want := fr.kind.family().arrowType()
		if fr.kind == KindUnset {
			want = arrow.Null
		}
		if !fr.kind.IsValue() && fr.kind != KindUnset {
			return nil, fmt.Errorf("%w: feature %q: %s=%q", ErrLayout, f.Name, MetaKind, fr.kind)
		}
		if !arrow.TypeEqual(flat, want) {
			return nil, fmt.Errorf("%w: feature %q: kind %s needs type %s, column has %s", ErrLayout, f.Name, fr.kind, want, flat)
		}
	}
	if fr.id, err = metaInt(f, MetaID); err != nil {
		return nil, err
	}
	if fr.sorted, err = metaInt(f, MetaSortedID); err != nil {
		return nil, err
	}
	fr.inst, _ = f.Metadata.GetValue(MetaInstance)
	return fr, nil
}

// checkShared checks that a run-end encoded (shared) column is one run covering every row,
// as the layout has it. The readers of a shared column read its first cell for every row,
// so a column of several runs (which a decoded IPC element can hold) would lose the others.
func checkShared(name string, col arrow.Array, rows int) error {
	ree, ok := col.(*array.RunEndEncoded)
	if !ok || rows == 0 {
		return nil
	}
	if first, last := ree.GetPhysicalIndex(0), ree.GetPhysicalIndex(rows-1); first != last {
		return fmt.Errorf("%w: shared column %q has %d runs, want one", ErrLayout, name, last-first+1)
	}
	return nil
}

func isFloat32(a arrow.Array) bool {
	_, ok := a.(*array.Float32)
	return ok
}

// checkHi checks that the v1 signature column has one entry per fid in every non-null
// cell of the feature: fidsAt indexes the two cells in step, and a decoded IPC element
// whose companion has the right total but other cell boundaries (a fuzz-found crash)
// would index past the shorter one. O(rows), no allocation.
func (fr *featureReader) checkHi(rows int) error {
	ml, hl := fr.main.values.(*array.List), fr.hi.values.(*array.List)
	if fr.main.shared() && rows > 0 {
		rows = 1 // one cell for every row (checkShared)
	}
	for r := 0; r < rows; r++ {
		p := fr.main.index(r)
		if ml.IsNull(p) {
			continue // never read
		}
		ms, me := listRange(ml, p)
		hs, he := listRange(hl, fr.hi.index(r))
		if me-ms != he-hs {
			return fmt.Errorf("%w: feature %q row %d: %d fids but %d v1 signatures in %s%s", ErrLayout, fr.name, r, me-ms, he-hs, v1hiPrefix, fr.name)
		}
	}
	return nil
}

// isNull reports whether element i of a is null; every element of a null-typed array is
// (arrow-go's Null array has no validity bitmap and answers false).
func isNull(a arrow.Array, i int) bool {
	return a.DataType().ID() == arrow.NULL || a.IsNull(i)
}

// checkCells verifies that every per-cell kind agrees with the column: value kinds of the
// column's family on non-null cells, null kinds on null cells.
func (fr *featureReader) checkCells(rows int) error {
	fam := famNone
	flat := FlatType(fr.main.values.DataType())
	for f := famFid; f <= famFidV1Lists; f++ {
		if arrow.TypeEqual(flat, f.arrowType()) {
			fam = f
			break
		}
	}
	if fam == famNone && flat.ID() != arrow.NULL {
		return fmt.Errorf("%w: feature %q has type %s", ErrLayout, fr.name, flat)
	}
	for r := 0; r < rows; r++ {
		if err := fr.checkCellFam(r, fam); err != nil {
			return err
		}
	}
	return nil
}

// checkCell is checkCells for row r alone.
func (fr *featureReader) checkCell(r int) error {
	flat := FlatType(fr.main.values.DataType())
	for f := famFid; f <= famFidV1Lists; f++ {
		if arrow.TypeEqual(flat, f.arrowType()) {
			return fr.checkCellFam(r, f)
		}
	}
	if flat.ID() != arrow.NULL {
		return fmt.Errorf("%w: feature %q has type %s", ErrLayout, fr.name, flat)
	}
	return fr.checkCellFam(r, famNone)
}

// checkCellFam checks the kind of row r against a column of family fam (famNone: null type).
func (fr *featureReader) checkCellFam(r int, fam family) error {
	k := Kind(fr.cells.values.(*array.Uint8).Value(fr.cells.index(r)))
	null := isNull(fr.main.values, fr.main.index(r))
	switch {
	case k.IsValue() && (null || k.family() != fam && !(fam == famFidLists && k == KindFidV1Lists)):
		return fmt.Errorf("%w: feature %q row %d: cell kind %s does not match the column", ErrLayout, fr.name, r, k)
	case !k.IsValue() && (!null || k != KindUnset && k != KindNoFeature && k != KindAbsent):
		return fmt.Errorf("%w: feature %q row %d: cell kind %s on a cell with a value", ErrLayout, fr.name, r, k)
	}
	return nil
}

// kindAt returns the kind of the cell at logical row r.
func (fr *featureReader) kindAt(r int) Kind {
	if fr.mixed {
		return Kind(fr.cells.values.(*array.Uint8).Value(fr.cells.index(r)))
	}
	if isNull(fr.main.values, fr.main.index(r)) {
		return fr.null
	}
	return fr.kind
}

// listRange returns the child value range of the list cell at physical index p.
func listRange(l *array.List, p int) (int, int) {
	s, e := l.ValueOffsets(p)
	return int(s), int(e)
}

// fidsAt returns the fids of a fid cell at logical row r: v2 as stored, or the original
// v1 values rebuilt with their signature bits when k is KindFidV1List.
func (fr *featureReader) fidsAt(r int, k Kind) []uint64 {
	p := fr.main.index(r)
	l := fr.main.values.(*array.List)
	s, e := listRange(l, p)
	vals := l.ListValues().(*array.Uint64).Uint64Values()[s:e]
	out := slices.Clone(vals)
	if k != KindFidV1List {
		return out
	}
	var hi []uint8
	if fr.hi.values != nil {
		hl := fr.hi.values.(*array.List)
		hs, he := listRange(hl, fr.hi.index(r))
		hi = hl.ListValues().(*array.Uint8).Uint8Values()[hs:he]
	}
	for i, v := range out {
		var h uint8
		if hi != nil {
			h = hi[i]
		}
		out[i] = fid.V2ToV1(v, h)
	}
	return out
}

// listValues returns a copy of the values of a flat list cell.
func listValues[T any](fr *featureReader, r int, get func(a arrow.Array) []T) []T {
	l := fr.main.values.(*array.List)
	s, e := listRange(l, fr.main.index(r))
	return slices.Clone(get(l.ListValues())[s:e])
}

// binaryValues returns copies of the values of a bytes cell (l's child must be binary).
func binaryValues(l *array.List, p int) [][]byte {
	s, e := listRange(l, p)
	b := l.ListValues().(*array.Binary)
	out := make([][]byte, e-s)
	for i := s; i < e; i++ {
		out[i-s] = slices.Clone(b.Value(i))
	}
	return out
}

// nestedValues returns copies of the inner lists of a list-of-lists cell.
func nestedValues[T any](fr *featureReader, r int, get func(a arrow.Array, s, e int) T) []T {
	l := fr.main.values.(*array.List)
	s, e := listRange(l, fr.main.index(r))
	inner := l.ListValues().(*array.List)
	out := make([]T, e-s)
	for i := s; i < e; i++ {
		is, ie := listRange(inner, i)
		out[i-s] = get(inner.ListValues(), is, ie)
	}
	return out
}

func u64s(a arrow.Array) []uint64  { return a.(*array.Uint64).Uint64Values() }
func f32s(a arrow.Array) []float32 { return a.(*array.Float32).Float32Values() }
func f64s(a arrow.Array) []float64 { return a.(*array.Float64).Float64Values() }
func i64s(a arrow.Array) []int64   { return a.(*array.Int64).Int64Values() }

func binSlice(a arrow.Array, s, e int) [][]byte {
	b := a.(*array.Binary)
	out := make([][]byte, e-s)
	for i := s; i < e; i++ {
		out[i-s] = slices.Clone(b.Value(i))
	}
	return out
}

// labelAt returns a copy of the labels of row r and whether the cell is non-null.
func (cs *columns) labelAt(r int) ([]float32, bool) {
	if cs.label == nil {
		return nil, false
	}
	l := cs.labelCol.values.(*array.List)
	p := cs.labelCol.index(r)
	if l.IsNull(p) {
		return nil, false
	}
	s, e := listRange(l, p)
	return slices.Clone(l.ListValues().(*array.Float32).Float32Values()[s:e]), true
}

func (cs *columns) lineIDAt(r int) ([]byte, bool) {
	if cs.lineID == nil {
		return nil, false
	}
	b := cs.lineCol.values.(*array.Binary)
	p := cs.lineCol.index(r)
	if b.IsNull(p) {
		return nil, false
	}
	return slices.Clone(b.Value(p)), true
}

func (cs *columns) iwAt(r int) (float32, bool) {
	if cs.iw == nil {
		return 0, false
	}
	a := cs.iwCol.values.(*array.Float32)
	p := cs.iwCol.index(r)
	if a.IsNull(p) {
		return 0, false
	}
	return a.Value(p), true
}

func (cs *columns) dskAt(r int) (uint32, bool) {
	if !cs.hasDsk {
		return 0, false
	}
	a := cs.dsk.values.(*array.Uint32)
	p := cs.dsk.index(r)
	if a.IsNull(p) {
		return 0, false
	}
	return a.Value(p), true
}

// extraAt returns the unmodelled bytes of row r, nil when there are none.
func (cs *columns) extraAt(r int) []byte {
	b, _ := cs.extraOK(r)
	return b
}

// extraOK returns the unmodelled bytes of row r and whether the cell is non-null.
func (cs *columns) extraOK(r int) ([]byte, bool) {
	if !cs.hasExtra {
		return nil, false
	}
	a := cs.extra.values.(*array.Binary)
	p := cs.extra.index(r)
	if a.IsNull(p) {
		return nil, false
	}
	return a.Value(p), true
}

// fidRuns returns the (slot column ordinal, run length) pairs of row r's original
// top-level fid order, or nil when the row is grouped in column order.
func (cs *columns) fidRuns(r int) ([]int32, error) {
	if cs.fidOrder.values == nil {
		return nil, nil
	}
	l := cs.fidOrder.values.(*array.List)
	p := cs.fidOrder.index(r)
	if l.IsNull(p) {
		return nil, nil
	}
	s, e := listRange(l, p)
	runs := l.ListValues().(*array.Int32).Int32Values()[s:e]
	if len(runs)%2 != 0 {
		return nil, fmt.Errorf("%w: %s row %d has an odd length", ErrLayout, ColFidOrder, r)
	}
	for i := 0; i < len(runs); i += 2 {
		if runs[i] < 0 || int(runs[i]) >= len(cs.groups) || runs[i+1] < 0 {
			return nil, fmt.Errorf("%w: %s row %d: bad run (%d, %d)", ErrLayout, ColFidOrder, r, runs[i], runs[i+1])
		}
	}
	return runs, nil
}

// instanceFids rebuilds the top-level v1 fids of an Instance row in their original order.
func (cs *columns) instanceFids(r int) ([]uint64, error) {
	runs, err := cs.fidRuns(r)
	if err != nil {
		return nil, err
	}
	var out []uint64
	if runs == nil {
		for _, i := range cs.groups {
			if fr := cs.features[i]; fr.kindAt(r) == KindFidV1List {
				out = append(out, fr.fidsAt(r, KindFidV1List)...)
			}
		}
		return out, nil
	}
	cells := make([][]uint64, len(cs.groups))
	for g, i := range cs.groups {
		if fr := cs.features[i]; fr.kindAt(r) == KindFidV1List {
			cells[g] = fr.fidsAt(r, KindFidV1List)
		}
	}
	for k := 0; k < len(runs); k += 2 {
		g, n := runs[k], int(runs[k+1])
		if n > len(cells[g]) {
			return nil, fmt.Errorf("%w: %s row %d: run of %d fids from %q, which has %d left",
				ErrLayout, ColFidOrder, r, n, cs.features[cs.groups[g]].name, len(cells[g]))
		}
		out = append(out, cells[g][:n]...)
		cells[g] = cells[g][n:]
	}
	for g, rest := range cells {
		if len(rest) > 0 {
			return nil, fmt.Errorf("%w: %s row %d leaves %d fids of %q unplaced", ErrLayout, ColFidOrder, r, len(rest), cs.features[cs.groups[g]].name)
		}
	}
	return out, nil
}

// rowOrder returns the feature indexes in the order row r is rebuilt as an Example. For
// Instance rows the slot columns follow the row's first appearance of each slot, as
// Monolith's InstanceToExample does.
func (cs *columns) rowOrder(r int, base []int) ([]int, error) {
	runs, err := cs.fidRuns(r)
	if err != nil || runs == nil {
		return base, err
	}
	out := make([]int, 0, len(base))
	seen := make([]bool, len(cs.groups))
	for _, i := range base {
		if cs.features[i].inst == "value" {
			out = append(out, i)
		}
	}
	for k := 0; k < len(runs); k += 2 {
		if g := runs[k]; !seen[g] {
			seen[g] = true
			out = append(out, cs.groups[g])
		}
	}
	for g, i := range cs.groups {
		if !seen[g] {
			out = append(out, i)
		}
	}
	for _, i := range base {
		if inst := cs.features[i].inst; inst != "value" && inst != "fid" {
			out = append(out, i)
		}
	}
	return out, nil
}
