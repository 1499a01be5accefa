package parquet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/monolith-go/monolith/schemas/batch"
)

// FileSchema returns the file schema for batches of the given schemas: their
// batch.UnionSchema plus BatchColumn. A batch column named BatchColumn is an error.
func FileSchema(schemas ...*arrow.Schema) (*arrow.Schema, error) {
	u, err := batch.UnionSchema(schemas...)
	if err != nil {
		return nil, fmt.Errorf("%sfile schema: %w", errPrefix, err)
	}
	if u.HasField(BatchColumn) {
		return nil, fmt.Errorf("%sfile schema: a batch has a column named %q, which this format reserves", errPrefix, BatchColumn)
	}
	return arrow.NewSchema(append(u.Fields(), markerField), nil), nil
}

var markerField = arrow.Field{Name: BatchColumn, Type: arrow.BinaryTypes.String, Nullable: true}

// Writer writes record batches to a Parquet file.
type Writer struct {
	fw       *pqarrow.FileWriter
	file     *arrow.Schema
	marker   int // index of BatchColumn in file
	mem      memory.Allocator
	rows     int64 // rows written
	batches  int
	empties  []emptyBatch
	closed   bool
	broken   bool  // the file writer failed
	buffered bool  // tests only: pack batches into row groups
	err      error // sticky
}

// NewWriter returns a Writer of a file with schema file, normally FileSchema of every batch
// to be written (a schema without BatchColumn gets it appended). Columns may be missing
// from a batch, but every column of a batch must be in file with the same flat type.
func NewWriter(w io.Writer, file *arrow.Schema, opts ...Option) (*Writer, error) {
	cfg := config{compression: compress.Codecs.Zstd, mem: memory.DefaultAllocator}
	for _, o := range opts {
		o(&cfg)
	}
	idx := file.FieldIndices(BatchColumn)
	switch {
	case len(idx) == 0:
		md := file.Metadata()
		file = arrow.NewSchema(append(file.Fields(), markerField), &md)
		idx = []int{file.NumFields() - 1}
	case len(idx) > 1 || !arrow.TypeEqual(file.Field(idx[0]).Type, arrow.BinaryTypes.String):
		return nil, fmt.Errorf("%sfile schema: %q must be one utf8 column", errPrefix, BatchColumn)
	}
	for _, f := range file.Fields() {
		if f.Type.ID() == arrow.RUN_END_ENCODED {
			return nil, fmt.Errorf("%sfile schema: column %q is run-end encoded; build the file schema with FileSchema", errPrefix, f.Name)
		}
	}
	props := []parquet.WriterProperty{parquet.WithCompression(cfg.compression), parquet.WithAllocator(cfg.mem),
		parquet.WithStatsFor(BatchColumn, false)} // min/max of the markers would copy them into the footer
	if cfg.maxRowGroup > 0 {
		props = append(props, parquet.WithMaxRowGroupLength(cfg.maxRowGroup))
	}
	// Hide an io.Closer: pqarrow's Close would close w.
	fw, err := pqarrow.NewFileWriter(file, struct{ io.Writer }{w}, parquet.NewWriterProperties(props...),
		pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(cfg.mem)))
	if err != nil {
		return nil, fmt.Errorf("%snew writer: %w", errPrefix, err)
	}
	return &Writer{fw: fw, file: file, marker: idx[0], mem: cfg.mem}, nil
}

// Write writes rec as one row group (more if it is longer than the row group limit). It
// does not retain rec.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New(errPrefix + "write on a closed Writer")
	}
	if err := w.write(rec); err != nil {
		err = fmt.Errorf("%sbatch %d: %w", errPrefix, w.batches, err)
		if w.broken {
			w.err = err
		}
		return err
	}
	w.batches++
	return nil
}

func (w *Writer) write(rec arrow.RecordBatch) error {
	enc, err := batch.EncodeSchema(rec.Schema())
	if err != nil {
		return err
	}
	for _, f := range rec.Schema().Fields() {
		if f.Name == BatchColumn {
			return fmt.Errorf("column %q is reserved by this format", BatchColumn)
		}
		if !w.file.HasField(f.Name) {
			return fmt.Errorf("column %q is not in the file schema (build it with FileSchema over every batch)", f.Name)
		}
	}
	n := rec.NumRows()
	if n == 0 {
		w.empties = append(w.empties, emptyBatch{At: w.rows, Schema: enc})
		return nil
	}
	flat, err := batch.Flatten(w.mem, rec)
	if err != nil {
		return err
	}
	defer flat.Release()
	wide, err := batch.Widen(w.mem, flat, w.file)
	if err != nil {
		return err
	}
	defer wide.Release()
	js, err := json.Marshal(marker{Rows: n, Schema: enc})
	if err != nil {
		return err
	}
	b := array.NewStringBuilder(w.mem)
	defer b.Release()
	b.Append(string(js))
	b.AppendNulls(int(n) - 1)
	mark := b.NewArray()
	defer mark.Release()
	cols := append([]arrow.Array{}, wide.Columns()...)
	cols[w.marker] = mark
	out := array.NewRecordBatch(w.file, cols, n)
	defer out.Release()
	write := w.fw.Write
	if w.buffered {
		write = w.fw.WriteBuffered // tests: several batches per row group
	}
	if err := write(out); err != nil {
		w.broken = true // pqarrow closes its writer on a failed Write
		return err
	}
	w.rows += n
	return nil
}

// Close writes the footer. It does not close the underlying writer. Calling Close again
// returns nil.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	if w.err != nil {
		errs = append(errs, w.err)
	}
	if len(w.empties) > 0 {
		js, err := json.Marshal(w.empties)
		if err == nil {
			err = w.fw.AppendKeyValueMetadata(MetaEmptyBatches, string(js))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%sempty batches: %w", errPrefix, err))
		}
	}
	if err := w.fw.Close(); err != nil {
		errs = append(errs, fmt.Errorf("%sclose: %w", errPrefix, err))
	}
	return errors.Join(errs...)
}
