package avro

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/io/ocf"
	"github.com/monolith-go/monolith/schemas/avsc"
	"github.com/monolith-go/monolith/schemas/batch"
)

// ocfConfig describes batch files to the ocf Reader and Decoders.
var ocfConfig = ocf.Config{
	ErrFormat:    ErrFormat,
	ErrTruncated: ErrTruncated,
	Item:         "row",
	Items:        "rows",
	MinItemSize:  minRowSize,
	MaxBlockSize: MaxBlockSize,
}

// Reader reads record batches from an Avro object container file.
type Reader struct {
	ocf   *ocf.Reader // counts the rows read (Items)
	mem   memory.Allocator
	batch int   // index of the next batch
	err   error // sticky
}

// NewReader reads and checks the file header. Records are allocated from mem.
func NewReader(r io.Reader, mem memory.Allocator) (*Reader, error) {
	oc, err := ocf.NewReader(r, &ocfConfig)
	if err == nil {
		err = checkSchema(oc)
	}
	if err != nil {
		return nil, &CorruptError{Offset: 0, Record: -1, Err: err}
	}
	return &Reader{ocf: oc, mem: mem}, nil
}

// checkSchema accepts only files whose schema has the parsing canonical form of avsc.Row.
func checkSchema(oc *ocf.Reader) error {
	got, ok, err := oc.MatchSchema(avsc.Row)
	if err == nil && !ok {
		err = fmt.Errorf("%w: the file's schema is not schemas/avsc.Row: %s", ErrFormat, got)
	}
	return err
}

// Compression returns the block codec named in the file header.
func (r *Reader) Compression() Compression { return Compression(r.ocf.Codec()) }

// Read returns the next batch, or (nil, io.EOF) at a clean end of the file. The caller owns
// the record and must Release it.
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
	first := r.ocf.Items()
	rows, err := batch.CollectRows(r.next)
	if err != nil {
		return nil, r.rowsError(err)
	}
	rec, err := fromRows(r.mem, rows)
	if err != nil {
		return nil, &CorruptError{Offset: r.ocf.Offset(), Record: first, Batch: r.batch, Err: err}
	}
	return rec, nil
}

// corrupt wraps err with the position of the current row: the last row read, or the row a
// failed read is about.
func (r *Reader) corrupt(err error) error {
	return &CorruptError{Offset: r.ocf.Offset(), Record: r.ocf.Item(), Batch: r.batch, Err: err}
}

// next decodes the next row. It returns io.EOF only at the end of the input at a block
// boundary.
func (r *Reader) next() (batch.Row, error) {
	d, err := r.ocf.Next()
	if err == io.EOF {
		return batch.Row{}, io.EOF
	}
	if err != nil {
		return batch.Row{}, r.corrupt(err)
	}
	row, err := readRow(d)
	if err != nil {
		return batch.Row{}, r.corrupt(err)
	}
	return row, nil
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
