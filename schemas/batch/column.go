package batch

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/fid"
)

// featureCol accumulates the cells of one feature column. Its Arrow builder is created
// when the first value cell fixes the column's family; null cells seen before that are
// replayed into it.
type featureCol struct {
	name    string
	fam     family
	kinds   []Kind // one per cell
	shared  bool   // one cell for all rows (ExampleBatch SHARED)
	lb      *array.ListBuilder
	sb      array.Builder  // scalar families
	built   arrow.Array    // the finished main array, when a fast path built it directly
	hi      []uint8        // v1 signature bits 48..53 of every fid value, once one is non-zero
	hiBuf   *memory.Buffer // the memory of hi when the wire path allocated it from the batch's allocator
	anyHi   bool
	nvals   int // fid values appended so far
	id      int32
	sorted  int32
	idSet   bool
	lastRow int    // last row that received a cell (duplicate detection)
	inst    string // Instance origin: "fid", "value" or "" (named feature)
}

func newFeatureCol(name string) *featureCol { return &featureCol{name: name, lastRow: -1} }

// setIDs records the NamedFeature(List) ids, which must be the same for every row.
func (c *featureCol) setIDs(id, sorted int32, row int) error {
	if !c.idSet {
		c.id, c.sorted, c.idSet = id, sorted, true
		return nil
	}
	if c.id != id || c.sorted != sorted {
		return fmt.Errorf("%w: feature %q row %d: id %d / sorted_id %d differ from earlier rows (%d / %d)",
			ErrUnrepresentable, c.name, row, id, sorted, c.id, c.sorted)
	}
	return nil
}

// ensure fixes the column family at the first value cell and checks later cells.
func (c *featureCol) ensure(mem memory.Allocator, k Kind) error {
	f := k.family()
	if c.fam == f {
		return nil
	}
	if c.fam != famNone {
		return fmt.Errorf("%w: feature %q cell %d: kind %s cannot share a column with earlier %s cells",
			ErrUnrepresentable, c.name, len(c.kinds), k, c.firstValueKind())
	}
	c.fam = f
	dt := f.arrowType()
	if lt, ok := dt.(*arrow.ListType); ok {
		c.lb = array.NewListBuilder(mem, lt.Elem())
	} else {
		c.sb = array.NewBuilder(mem, dt)
	}
	for range c.kinds { // replay earlier nulls
		c.appendNullToBuilder()
	}
	return nil
}

func (c *featureCol) firstValueKind() Kind {
	for _, k := range c.kinds {
		if k.IsValue() {
			return k
		}
	}
	return KindUnset
}

func (c *featureCol) appendNullToBuilder() {
	if c.lb != nil {
		c.lb.AppendNull()
	} else if c.sb != nil {
		c.sb.AppendNull()
	}
}

// null appends an unset or absent cell.
func (c *featureCol) null(k Kind) {
	c.kinds = append(c.kinds, k)
	c.appendNullToBuilder()
}

// fids appends a fid_v1_list or fid_v2_list cell; v1 values are converted to v2.
func (c *featureCol) fids(mem memory.Allocator, k Kind, vals []uint64) error {
	if err := c.ensure(mem, k); err != nil {
		return err
	}
	c.kinds = append(c.kinds, k)
	c.lb.Append(true)
	vb := c.lb.ValueBuilder().(*array.Uint64Builder)
	if k == KindFidV2List {
		vb.AppendValues(vals, nil)
		if c.anyHi {
			for range vals {
				c.hi = append(c.hi, 0)
			}
		}
		c.nvals += len(vals)
		return nil
	}
	vb.Reserve(len(vals))
	for i, v := range vals {
		vb.UnsafeAppend(V1ToV2(v))
		h := fid.V1Hi(v)
		if h != 0 && !c.anyHi {
			c.anyHi = true
			c.hi = make([]uint8, c.nvals+i, c.nvals+len(vals))
		}
		if c.anyHi {
			c.hi = append(c.hi, h)
		}
	}
	c.nvals += len(vals)
	return nil
}

// list appends a flat list cell of a non-fid kind. appendVals writes the values into the
// element builder.
func (c *featureCol) list(mem memory.Allocator, k Kind, appendVals func(b array.Builder)) error {
	if err := c.ensure(mem, k); err != nil {
		return err
	}
	c.kinds = append(c.kinds, k)
	c.lb.Append(true)
	appendVals(c.lb.ValueBuilder())
	return nil
}

// nested appends a list-of-lists cell with n inner lists.
func (c *featureCol) nested(mem memory.Allocator, k Kind, n int, appendInner func(i int, b array.Builder)) error {
	if err := c.ensure(mem, k); err != nil {
		return err
	}
	c.kinds = append(c.kinds, k)
	c.lb.Append(true)
	inner := c.lb.ValueBuilder().(*array.ListBuilder)
	for i := 0; i < n; i++ {
		inner.Append(true)
		appendInner(i, inner.ValueBuilder())
	}
	return nil
}

// scalar appends a scalar cell.
func (c *featureCol) scalar(mem memory.Allocator, k Kind, appendVal func(b array.Builder)) error {
	if err := c.ensure(mem, k); err != nil {
		return err
	}
	c.kinds = append(c.kinds, k)
	appendVal(c.sb)
	return nil
}

func (c *featureCol) release() {
	if c.built != nil {
		c.built.Release()
		c.built = nil
	}
	if c.lb != nil {
		c.lb.Release()
	}
	if c.sb != nil {
		c.sb.Release()
	}
	c.dropHiBuf()
}

// dropHiBuf releases the memory of hi when it came from the batch's allocator.
func (c *featureCol) dropHiBuf() {
	if c.hiBuf != nil {
		c.hiBuf.Release()
		c.hiBuf, c.hi = nil, nil
	}
}

// finish builds the column and its companions for a batch of n rows.
func (c *featureCol) finish(mem memory.Allocator, n int) ([]arrow.Field, []arrow.Array, error) {
	var main arrow.Array
	switch {
	case c.built != nil:
		main, c.built = c.built, nil
	case c.lb != nil:
		main = c.lb.NewArray()
	case c.sb != nil:
		main = c.sb.NewArray()
	default:
		main = array.NewNull(len(c.kinds))
	}
	// Column-level kind and null meaning, or per-cell kinds when they vary.
	valueKind, nullKind := Kind(0), Kind(0)
	var sawValue, sawNull, mixed bool
	for _, k := range c.kinds {
		if k.IsValue() {
			if sawValue && k != valueKind {
				mixed = true
			}
			valueKind, sawValue = k, true
		} else {
			if sawNull && k != nullKind {
				mixed = true
			}
			nullKind, sawNull = k, true
		}
	}
	keys := []string{MetaKind}
	vals := []string{valueKind.String()}
	switch {
	case mixed:
		vals[0] = "mixed"
	case !sawValue:
		vals[0] = KindUnset.String()
	}
	if !mixed {
		null := KindUnset
		if sawNull {
			null = nullKind
		}
		keys, vals = append(keys, MetaNull), append(vals, null.String())
	}
	if c.id != 0 {
		keys, vals = append(keys, MetaID), append(vals, strconv.Itoa(int(c.id)))
	}
	if c.sorted != 0 {
		keys, vals = append(keys, MetaSortedID), append(vals, strconv.Itoa(int(c.sorted)))
	}
	if c.inst != "" {
		keys, vals = append(keys, MetaInstance), append(vals, c.inst)
	}
	fields := []arrow.Field{{Name: c.name, Type: main.DataType(), Nullable: true, Metadata: arrow.NewMetadata(keys, vals)}}
	arrs := []arrow.Array{main}

	if c.anyHi {
		hi := v1HiArray(mem, main.(*array.List), c.hi, c.hiBuf)
		c.dropHiBuf() // the array holds its own reference
		fields = append(fields, companionField(v1hiPrefix+c.name, hi.DataType(), RoleV1Hi, c.name))
		arrs = append(arrs, hi)
	}
	if mixed {
		b := array.NewUint8Builder(mem)
		for _, k := range c.kinds {
			b.Append(uint8(k))
		}
		cells := b.NewArray()
		b.Release()
		fields = append(fields, companionField(cellPrefix+c.name, cells.DataType(), RoleCell, c.name))
		arrs = append(arrs, cells)
	}
	if c.shared {
		for i := range arrs {
			ree, err := runEndEncode(mem, arrs[i], n)
			arrs[i].Release()
			if err != nil {
				releaseAll(arrs[i+1:])
				releaseAll(arrs[:i])
				return nil, nil, err
			}
			arrs[i] = ree
			fields[i].Type = ree.DataType()
		}
	}
	return fields, arrs, nil
}

func companionField(name string, dt arrow.DataType, role Role, of string) arrow.Field {
	return arrow.Field{Name: name, Type: dt, Nullable: true, Metadata: arrow.NewMetadata(
		[]string{MetaRole, MetaOf}, []string{string(role), of})}
}

// v1HiArray builds a list<uint8> that shares the offsets and validity of fids. Its values
// are hiBuf when not nil (hi is its memory), else a copy of hi.
func v1HiArray(mem memory.Allocator, fids *array.List, hi []uint8, hiBuf *memory.Buffer) arrow.Array {
	var child arrow.ArrayData
	if hiBuf != nil {
		child = array.NewData(arrow.PrimitiveTypes.Uint8, len(hi), []*memory.Buffer{nil, hiBuf}, nil, 0, 0)
	} else {
		b := array.NewUint8Builder(mem)
		b.AppendValues(hi, nil)
		a := b.NewArray()
		b.Release()
		child = a.Data()
		child.Retain()
		a.Release()
	}
	defer child.Release()
	d := fids.Data()
	data := array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Uint8), d.Len(), d.Buffers(),
		[]arrow.ArrayData{child}, d.NullN(), d.Offset())
	defer data.Release()
	return array.MakeFromData(data)
}

// runEndEncode wraps a one-element array into a run-end encoded array of n rows.
func runEndEncode(mem memory.Allocator, values arrow.Array, n int) (arrow.Array, error) {
	if values.Len() != 1 || n <= 0 {
		return nil, fmt.Errorf("schemas/batch: internal: shared column with %d values for %d rows", values.Len(), n)
	}
	b := array.NewInt32Builder(mem)
	b.Append(int32(n))
	ends := b.NewArray()
	b.Release()
	defer ends.Release()
	return array.NewRunEndEncodedArray(ends, values, n, 0), nil
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}
