package jsonl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
)

// Reader reads record batches from JSON lines.
type Reader struct {
	dec    *json.Decoder
	mem    memory.Allocator
	record int64 // index of the next record
	offset int64 // offset of the last record read
	batch  int   // index of the next batch
	err    error // sticky
}

// NewReader returns a Reader of r. Records are allocated from mem. It never fails today;
// the error is kept for symmetry with the other formats.
func NewReader(r io.Reader, mem memory.Allocator, opts ...Option) (*Reader, error) {
	cfg := newConfig(opts)
	dec := json.NewDecoder(bufio.NewReaderSize(r, cfg.bufferSize))
	dec.DisallowUnknownFields()
	return &Reader{dec: dec, mem: mem}, nil
}

// Read returns the next batch, or (nil, io.EOF) at a clean end of the input. The caller
// owns the record and must Release it.
func (r *Reader) Read() (arrow.RecordBatch, error) {
	if r.err != nil {
		return nil, r.err
	}
	rec, err := r.read()
	if err != nil {
		r.err = err
		return nil, err
	}
	r.batch++
	return rec, nil
}

func (r *Reader) read() (arrow.RecordBatch, error) {
	first, firstOff := r.record, int64(-1)
	rows, err := batch.CollectRows(func() (batch.Row, error) {
		row, err := r.next()
		if firstOff < 0 {
			firstOff = r.offset // where the batch's first row starts
		}
		return row, err
	})
	if err != nil {
		return nil, r.rowsError(err)
	}
	rec, err := fromRows(r.mem, rows)
	if err != nil {
		return nil, &CorruptError{Offset: firstOff, Record: first, Batch: r.batch, Err: err}
	}
	return rec, nil
}

// corrupt wraps err with the position of the last record read.
func (r *Reader) corrupt(err error) error {
	return &CorruptError{Offset: r.offset, Record: max(r.record-1, 0), Batch: r.batch, Err: err}
}

// next decodes the next record. It returns io.EOF only when nothing but white space is left.
func (r *Reader) next() (batch.Row, error) {
	r.dec.More() // skips white space, so that InputOffset is the start of the record
	off := r.dec.InputOffset()
	var row *batch.Row
	err := r.dec.Decode(&row)
	switch {
	case err == io.EOF:
		return batch.Row{}, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("%w: %w", ErrTruncated, err)
	case err != nil:
		err = fmt.Errorf("%w: %w", ErrFormat, err)
	case row == nil:
		err = fmt.Errorf("%w: record is null, not an object", ErrFormat)
	}
	if err != nil {
		return batch.Row{}, &CorruptError{Offset: off, Record: r.record, Batch: r.batch, Err: err}
	}
	r.offset = off
	r.record++
	return *row, nil
}

// fromRows rebuilds a batch; a batch that breaks the layout is ErrFormat too.
func fromRows(mem memory.Allocator, rows []batch.Row) (arrow.RecordBatch, error) {
	rec, err := batch.FromRows(mem, rows)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return rec, nil
}

// rowsError maps the errors of batch.CollectRows onto this package's: a row error from next
// is returned as it is, io.EOF stays the clean end.
func (r *Reader) rowsError(err error) error {
	switch {
	case errors.Is(err, batch.ErrRowsEnded):
		return r.corrupt(fmt.Errorf("%w: %w", ErrTruncated, err))
	case errors.Is(err, batch.ErrLayout):
		return r.corrupt(fmt.Errorf("%w: %w", ErrFormat, err))
	}
	return err
}
