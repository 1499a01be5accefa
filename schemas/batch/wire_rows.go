package batch

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
)

// rowWire is the part of the Example and Instance wire decoders that does not depend on
// the message: the feature columns, collected cell by cell, and the row-level fields,
// held as wire bytes, then built into a batch laid out as FromExamples or FromInstances
// lays it out. Its slices hold the records' bytes; nothing is copied until the columns are
// built.
type rowWire struct {
	src     Source // SourceExample or SourceInstance
	n       int
	records [][]byte
	cols    []*wireCol // in first-appearance order
	index   map[string]int
	next    int // column expected for the row's next named feature (rows tend to agree)
	rows    []wireRow
	gather  []byte // values of cells that are not contiguous in their record (wireRef.gathered)
}

func newRowWire(src Source, records [][]byte) rowWire {
	return rowWire{src: src, n: len(records), records: records, index: map[string]int{}, rows: make([]wireRow, len(records))}
}

// decodeRows is DecodeExamples and DecodeInstances: the wire path when it decodes the
// records itself, else the message path.
func decodeRows(mem memory.Allocator, records [][]byte, keys []uint32, opts []Option,
	wire func(memory.Allocator, [][]byte, []uint32, []Option) (arrow.RecordBatch, bool),
	slow func(memory.Allocator, [][]byte, []uint32, []Option) (arrow.RecordBatch, error)) (arrow.RecordBatch, error) {
	if keys != nil && len(keys) != len(records) {
		return nil, fmt.Errorf("schemas/batch: %d data source keys for %d records", len(keys), len(records))
	}
	if rec, ok := wire(mem, records, keys, opts); ok {
		return rec, nil
	}
	return slow(mem, records, keys, opts)
}

// unmarshalRecords unmarshals each record into a message made by newMsg; a record that
// does not parse is a *RecordError naming it ("parse Example: ...").
func unmarshalRecords[M proto.Message](records [][]byte, newMsg func() M) ([]M, error) {
	out := make([]M, len(records))
	for i, b := range records {
		m := newMsg()
		if err := proto.Unmarshal(b, m); err != nil {
			return nil, &RecordError{Record: i, Err: fmt.Errorf("parse %s: %w", m.ProtoReflect().Descriptor().Name(), err)}
		}
		out[i] = m
	}
	return out, nil
}

// decode runs the wire path over the records: record reads one record into its row, more
// (see build) adds the source's own columns. It reports false when the message path must
// decode the records instead.
func (d *rowWire) decode(mem memory.Allocator, keys []uint32, opts []Option, record func(r int, b []byte) bool,
	more func(rb *recordBuilder) error) (arrow.RecordBatch, bool) {
	if d.n == 0 || !littleEndian {
		return nil, false // the copies into Arrow buffers assume little-endian memory
	}
	for r, b := range d.records {
		if uint64(len(b)) > math.MaxUint32 || !record(r, b) {
			return nil, false // cells locate values with 32-bit offsets
		}
	}
	rec, err := d.build(newRecordBuilder(mem, d.src, opts), keys, more)
	if err != nil {
		return nil, false // the message path reports the error, with the same precedence
	}
	return rec, true
}

// wireCol collects the cells of one feature column, row by row.
type wireCol struct {
	name       string
	id, sorted int32  // Example NamedFeature ids
	inst       string // Instance origin: "fid", "value" or "" (named feature)
	ord        int32  // Instance slot columns: ordinal among the slot columns
	lastRow    int    // last row holding the feature; -1 before the first
	cells      []wireRef
}

// wireRef is one row's cell of a column: KindAbsent or KindNoFeature; KindUnset for a
// serialized Feature at [off, off+size) of the row's record, parsed when the column is
// built; or a value kind whose packed values are at [off, off+size) of the row's record,
// or of rowWire.gather when gathered. It holds no pointer, so the garbage collector does not
// scan the cells.
type wireRef struct {
	kind      Kind
	gathered  bool
	off, size uint32
}

// wireRow holds the row-level fields of one row, as wire bytes.
type wireRow struct {
	label     []byte // packed float values
	iw        []byte // the 4 bytes of instance_weight; nil when absent
	lineID    []byte // serialized LineId
	hasLineID bool
	dsk       uint32
	hasDSK    bool // an Instance's data_source_key is set (an Example's always counts as set)
}

// column returns the column of a named feature, creating it on first use.
func (d *rowWire) column(name []byte) *wireCol {
	c, _ := d.columnNew(name)
	return c
}

// columnNew is column, also reporting whether the column is new (name seen for the first
// time in the batch).
func (d *rowWire) columnNew(name []byte) (*wireCol, bool) {
	if i := d.next; i < len(d.cols) && d.cols[i].name == string(name) {
		d.next++
		return d.cols[i], false
	}
	i, ok := d.index[string(name)]
	if !ok {
		d.newColumn(string(name))
		i = len(d.cols) - 1
	}
	d.next = i + 1
	return d.cols[i], !ok
}

// newColumn adds a column of absent cells.
func (d *rowWire) newColumn(name string) *wireCol {
	c := &wireCol{name: name, lastRow: -1, cells: make([]wireRef, d.n)}
	for j := range c.cells {
		c.cells[j].kind = KindAbsent
	}
	d.index[name] = len(d.cols)
	d.cols = append(d.cols, c)
	return c
}

// cellBytes returns the bytes a cell of row r refers to.
func (d *rowWire) cellBytes(r int, cell wireRef) []byte {
	if cell.gathered {
		return d.gather[cell.off : cell.off+cell.size]
	}
	return d.records[r][cell.off : cell.off+cell.size]
}

// zeroFloat32 is the wire value of an absent Example instance_weight.
var zeroFloat32 [4]byte

// build makes the batch: the feature columns in first-appearance order, then the columns of
// the row-level fields, as FromExamples and FromInstances lay them out; more, unless nil,
// adds the source's own columns after those. keys, unless nil, replace the rows'
// data_source_keys. On error rb is released.
func (d *rowWire) build(rb *recordBuilder, keys []uint32, more func(rb *recordBuilder) error) (arrow.RecordBatch, error) {
	fail := func(err error) (arrow.RecordBatch, error) {
		rb.release()
		return nil, err
	}
	cells := make([]wireCell, d.n) // scratch, one cell per row
	for _, wc := range d.cols {
		fc, err := d.feature(rb.mem, wc, cells)
		if err != nil {
			return fail(err)
		}
		rb.cols = append(rb.cols, fc)
	}
	canonical := func(name string) error {
		if _, ok := rb.wireCanonical(name, cells); !ok {
			return fmt.Errorf("schemas/batch: internal: %s cells do not fit", name)
		}
		return nil
	}
	for r := range d.rows {
		cells[r] = wireCell{kind: KindFloatList, data: d.rows[r].label}
	}
	if err := canonical(ListLabel); err != nil {
		return fail(err)
	}
	for r := range d.rows {
		switch iw := d.rows[r].iw; {
		case iw != nil:
			cells[r] = wireCell{kind: KindFloatList, data: iw}
		case d.src == SourceInstance:
			cells[r] = wireCell{kind: KindUnset} // optional in an Instance
		default:
			cells[r] = wireCell{kind: KindFloatList, data: zeroFloat32[:]}
		}
	}
	if err := canonical(ListInstanceWeight); err != nil {
		return fail(err)
	}
	var lid *matrixpb.LineId
	for r := range d.rows {
		row := &d.rows[r]
		switch {
		case !row.hasLineID:
			cells[r] = wireCell{kind: KindUnset}
		case canonicalLineID(row.lineID):
			cells[r] = wireCell{kind: KindBytesList, data: row.lineID}
		default:
			// The message path stores the LineId re-encoded: do the same for this row.
			if lid == nil {
				lid = &matrixpb.LineId{}
			}
			b, err := reencodeLineID(lid, row.lineID)
			if err != nil {
				return fail(err)
			}
			cells[r] = wireCell{kind: KindBytesList, data: b}
		}
	}
	if err := canonical(ListLineID); err != nil {
		return fail(err)
	}
	dsk := rb.simple(ColDataSourceKey, RoleDataSourceKey, arrow.PrimitiveTypes.Uint32, false)
	db := dsk.b.(*array.Uint32Builder)
	db.Reserve(d.n)
	for r := range d.rows {
		row := &d.rows[r]
		switch {
		case keys != nil:
			db.UnsafeAppend(keys[r])
		case row.hasDSK || d.src == SourceExample:
			db.UnsafeAppend(row.dsk)
		default:
			db.AppendNull()
		}
	}
	if more != nil {
		if err := more(rb); err != nil {
			return fail(err)
		}
	}
	return rb.finish(d.n)
}

// feature builds one feature column: from the wire when every cell allows it, else from a
// Feature message per cell. scratch holds a cell per row.
func (d *rowWire) feature(mem memory.Allocator, wc *wireCol, scratch []wireCell) (*featureCol, error) {
	newCol := func() *featureCol {
		c := newFeatureCol(wc.name)
		c.inst = wc.inst
		if d.src == SourceExample {
			c.id, c.sorted, c.idSet = wc.id, wc.sorted, true
		}
		return c
	}
	wire := true
	for r, cell := range wc.cells {
		switch {
		case cell.kind == KindUnset: // a serialized Feature
			var ok bool
			if d.src == SourceInstance {
				scratch[r], ok = parseInstanceCell(d.cellBytes(r, cell))
			} else {
				scratch[r], ok = parseWireCell(d.cellBytes(r, cell))
			}
			wire = wire && ok
		case cell.kind.IsValue():
			scratch[r] = wireCell{kind: cell.kind, data: d.cellBytes(r, cell)}
		default:
			scratch[r] = wireCell{kind: cell.kind}
		}
		if !wire {
			break
		}
	}
	if wire {
		c := newCol()
		err := c.buildWire(mem, scratch)
		if err == nil {
			return c, nil
		}
		c.release()
		if err != errSlowList {
			return nil, err
		}
	}
	c := newCol()
	if err := d.appendMessageCells(mem, c, wc.cells); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

// appendMessageCells appends the cells of one column the way FromExamples or FromInstances
// does, through a Feature message per cell (reused from cell to cell).
func (d *rowWire) appendMessageCells(mem memory.Allocator, c *featureCol, cells []wireRef) error {
	var ef *examplepb.Feature
	var mf *matrixpb.Feature
	for r, cell := range cells {
		var err error
		switch {
		case cell.kind == KindAbsent:
			c.null(KindAbsent)
		case cell.kind == KindNoFeature:
			err = appendExampleCell(mem, c, nil)
		case cell.kind != KindUnset:
			// Slot and value columns hold fid and float cells only, always built from the wire.
			err = fmt.Errorf("schemas/batch: internal: feature %q: %s cell needs the message path", c.name, cell.kind)
		case d.src == SourceInstance:
			if mf == nil {
				mf = &matrixpb.Feature{}
			}
			if err = proto.Unmarshal(d.cellBytes(r, cell), mf); err != nil {
				return fmt.Errorf("schemas/batch: feature %q: parse Feature: %w", c.name, err)
			}
			err = appendInstanceCell(mem, c, mf)
		default:
			if ef == nil {
				ef = &examplepb.Feature{}
			}
			if err = proto.Unmarshal(d.cellBytes(r, cell), ef); err != nil {
				return fmt.Errorf("schemas/batch: feature %q: parse Feature: %w", c.name, err)
			}
			err = appendExampleCell(mem, c, ef)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
