package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/monolith-go/monolith/io/pqfile"
	"github.com/monolith-go/monolith/schemas/batch"
)

// readBatchRows is the number of rows the Reader decodes at a time.
const readBatchRows = 4096

// Reader reads record batches from a Parquet file written by Writer.
type Reader struct {
	pf      *pqfile.File
	rr      pqarrow.RecordReader
	mem     memory.Allocator
	marker  int                 // index of BatchColumn in the decoded records
	queue   []arrow.RecordBatch // decoded rows not yet returned; queue[0] from row off
	off     int64
	drained bool  // rr has no more records
	row     int64 // file index of the next row to return
	total   int64 // rows in the file
	empties []emptyBatch
	batch   int
	err     error // sticky
}

// NewReader opens a Parquet file written by Writer. Records are allocated from mem. Close
// the Reader when done; it does not close r.
func NewReader(r parquet.ReaderAtSeeker, mem memory.Allocator) (rd *Reader, err error) {
	rd = &Reader{mem: mem}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrFormat, p)
		}
		if err != nil {
			rd.Close()
			rd, err = nil, fmt.Errorf("%sopen: %w", errPrefix, err)
		}
	}()
	if rd.pf, err = pqfile.Open(r, mem, readBatchRows); err != nil {
		return rd, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	fr := rd.pf.Arrow
	sc, err := fr.Schema()
	if err != nil {
		return rd, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	idx := sc.FieldIndices(BatchColumn)
	if len(idx) != 1 || !arrow.TypeEqual(sc.Field(idx[0]).Type, arrow.BinaryTypes.String) {
		return rd, fmt.Errorf("%w: no utf8 column %q: not a file of batches", ErrFormat, BatchColumn)
	}
	rd.marker, rd.total = idx[0], rd.pf.Parquet.NumRows()
	if v := rd.pf.Parquet.MetaData().KeyValueMetadata().FindValue(MetaEmptyBatches); v != nil {
		if err := json.Unmarshal([]byte(*v), &rd.empties); err != nil {
			return rd, fmt.Errorf("%w: %s: %v", ErrFormat, MetaEmptyBatches, err)
		}
		for i, e := range rd.empties {
			if e.At < 0 || e.At > rd.total || i > 0 && e.At < rd.empties[i-1].At {
				return rd, fmt.Errorf("%w: %s: entry %d at row %d is out of order", ErrFormat, MetaEmptyBatches, i, e.At)
			}
		}
	}
	if rd.total > 0 {
		if rd.rr, err = fr.GetRecordReader(context.Background(), nil, nil); err != nil {
			return rd, fmt.Errorf("%w: %v", ErrFormat, err)
		}
	}
	return rd, nil
}

// Read returns the next batch, or (nil, io.EOF) after the last one. The caller owns the
// record and must Release it.
func (r *Reader) Read() (rec arrow.RecordBatch, err error) {
	if r.err != nil {
		return nil, r.err
	}
	first := r.row
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("%w: decoder panic: %v", ErrFormat, p)
		}
		if err != nil {
			if err != io.EOF {
				err = fmt.Errorf("%sbatch %d (from row %d): %w", errPrefix, r.batch, first, err)
			}
			r.err = err
		}
	}()
	if len(r.empties) > 0 && r.empties[0].At == r.row {
		e := r.empties[0]
		r.empties = r.empties[1:]
		rec, err := emptyRecord(r.mem, e.Schema)
		if err == nil {
			r.batch++
		}
		return rec, err
	}
	if err := r.fill(); err != nil {
		return nil, err
	}
	if len(r.queue) == 0 {
		if r.row != r.total {
			return nil, fmt.Errorf("%w: the file has %d rows, the row groups %d", ErrFormat, r.total, r.row)
		}
		if len(r.empties) > 0 {
			return nil, fmt.Errorf("%w: %s lists a batch at row %d, after the last row", ErrFormat, MetaEmptyBatches, r.empties[0].At)
		}
		return nil, io.EOF
	}
	rec, err = r.readBatch()
	if err != nil {
		return nil, err
	}
	if len(r.empties) > 0 && r.empties[0].At < r.row {
		rec.Release()
		return nil, fmt.Errorf("%w: %s lists a batch at row %d, inside the batch", ErrFormat, MetaEmptyBatches, r.empties[0].At)
	}
	r.batch++
	return rec, nil
}

// fill makes sure the queue holds a row, unless the file has no more.
func (r *Reader) fill() error {
	for len(r.queue) == 0 && !r.drained {
		if r.rr == nil || !r.rr.Next() {
			r.drained = true
			if r.rr != nil && r.rr.Err() != nil && r.rr.Err() != io.EOF {
				return fmt.Errorf("%w: %v", ErrFormat, r.rr.Err())
			}
			return nil
		}
		rec := r.rr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		rec.Retain()
		r.queue, r.off = append(r.queue, rec), 0
	}
	return nil
}

// take removes up to n rows from the head of the queue and returns them.
func (r *Reader) take(n int64) arrow.RecordBatch {
	head := r.queue[0]
	k := min(n, head.NumRows()-r.off)
	out := head.NewSlice(r.off, r.off+k)
	r.off += k
	r.row += k
	if r.off == head.NumRows() {
		head.Release()
		r.queue[0] = nil
		r.queue, r.off = r.queue[1:], 0
	}
	return out
}

// readBatch reads the batch that starts at the head of the queue.
func (r *Reader) readBatch() (arrow.RecordBatch, error) {
	mcol, ok := r.queue[0].Column(r.marker).(*array.String)
	if !ok {
		return nil, fmt.Errorf("%w: column %q is %s", ErrFormat, BatchColumn, r.queue[0].Column(r.marker).DataType())
	}
	if mcol.IsNull(int(r.off)) {
		return nil, fmt.Errorf("%w: row %d does not start a batch (%q is null)", ErrFormat, r.row, BatchColumn)
	}
	var m marker
	if err := json.Unmarshal([]byte(mcol.Value(int(r.off))), &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, BatchColumn, err)
	}
	if m.Rows <= 0 || m.Rows > r.total-r.row {
		return nil, fmt.Errorf("%w: batch of %d rows at row %d of %d", ErrFormat, m.Rows, r.row, r.total)
	}
	target, err := batch.DecodeSchema(m.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	for got := int64(0); got < m.Rows; {
		if err := r.fill(); err != nil {
			return nil, err
		}
		if len(r.queue) == 0 {
			return nil, fmt.Errorf("%w: batch of %d rows ends after %d rows", ErrFormat, m.Rows, got)
		}
		p := r.take(m.Rows - got)
		parts = append(parts, p)
		starts := int(p.NumRows() - int64(p.Column(r.marker).NullN()))
		if got == 0 {
			starts-- // the batch's own marker
		}
		if starts != 0 {
			return nil, fmt.Errorf("%w: batch of %d rows: another batch starts inside it", ErrFormat, m.Rows)
		}
		got += p.NumRows()
	}
	flat, err := concat(r.mem, parts)
	if err != nil {
		return nil, err
	}
	defer flat.Release()
	typed := retypeRecord(flat, target)
	defer typed.Release()
	rec, err := batch.Conform(r.mem, typed, target)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return rec, nil
}

// Close releases the Reader's buffers. It does not close the file. Calling Close again
// returns nil.
func (r *Reader) Close() error {
	for _, rec := range r.queue {
		rec.Release()
	}
	r.queue = nil
	if r.rr != nil {
		r.rr.Release()
		r.rr = nil
	}
	if r.err == nil {
		r.err = errors.New(errPrefix + "read on a closed Reader")
	}
	if err := r.pf.Close(); err != nil {
		return fmt.Errorf("%sclose: %w", errPrefix, err)
	}
	return nil
}

// concat joins record slices into one record. The result belongs to the caller.
func concat(mem memory.Allocator, parts []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(parts) == 1 {
		parts[0].Retain()
		return parts[0], nil
	}
	var n int64
	for _, p := range parts {
		n += p.NumRows()
	}
	cols := make([]arrow.Array, parts[0].NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	arrs := make([]arrow.Array, len(parts))
	for i := range cols {
		for j, p := range parts {
			arrs[j] = p.Column(i)
		}
		c, err := array.Concatenate(arrs, mem)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", ErrFormat, parts[0].ColumnName(i), err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(parts[0].Schema(), cols, n), nil
}

// retypeRecord gives the columns of flat the exact flat types of the target schema where
// they are equal up to names: Parquet names list elements "element" where the batch layout
// has "item". Other columns are kept for Conform to check.
func retypeRecord(flat arrow.RecordBatch, target *arrow.Schema) arrow.RecordBatch {
	fields := append([]arrow.Field{}, flat.Schema().Fields()...)
	cols := make([]arrow.Array, len(fields))
	for i, col := range flat.Columns() {
		cols[i] = col
		tf, ok := target.FieldsByName(fields[i].Name)
		if !ok || len(tf) != 1 {
			col.Retain()
			continue
		}
		want := batch.FlatType(tf[0].Type)
		if !arrow.TypeEqual(col.DataType(), want) {
			col.Retain()
			continue
		}
		d := retypeData(col.Data(), want)
		cols[i] = array.MakeFromData(d)
		d.Release()
		fields[i].Type = want
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, flat.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

// retypeData returns d with type dt (equal to d's type up to field names). The result
// belongs to the caller.
func retypeData(d arrow.ArrayData, dt arrow.DataType) arrow.ArrayData {
	var children []arrow.ArrayData
	switch t := dt.(type) {
	case *arrow.ListType:
		c := retypeData(d.Children()[0], t.Elem())
		defer c.Release()
		children = []arrow.ArrayData{c}
	default: // no other nested types in the batch layout
		children = d.Children()
	}
	return array.NewData(dt, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
}

// emptyRecord returns a batch without rows of the encoded schema.
func emptyRecord(mem memory.Allocator, enc []byte) (arrow.RecordBatch, error) {
	s, err := batch.DecodeSchema(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	cols := make([]arrow.Array, s.NumFields())
	for i, f := range s.Fields() {
		b := array.NewBuilder(mem, f.Type)
		cols[i] = b.NewArray()
		b.Release()
	}
	rec := array.NewRecordBatch(s, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}
