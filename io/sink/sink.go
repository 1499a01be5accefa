// Package sink writes Arrow batches (schemas/batch) to training-data files: framed
// TFRecord or Monolith PB stream files of ExampleBatch, Example or Instance messages, and
// Parquet, Avro or JSON-lines batch files. `monolith convert` and the Beam sinks of
// transforms/beamio share it.
//
// Files are created atomically (internal/atomicfile): Close commits a complete file, Abort
// removes the partial one, and a reader never sees half a file. Standard output ("-") is
// written directly. A Writer is not safe for concurrent use and does not retain batches.
package sink

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/io/avro"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/jsonl"
	"github.com/monolith-go/monolith/io/parquet"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/schemas/batch"
)

// Format is an output file format.
type Format int

// Formats.
const (
	TFRecord Format = iota + 1
	PBStream
	Parquet
	Avro
	JSONL
)

var formatNames = map[Format]string{TFRecord: "tfrecord", PBStream: "pbstream", Parquet: "parquet", Avro: "avro", JSONL: "jsonl"}

func (f Format) String() string {
	if n, ok := formatNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Ext returns the usual file name suffix of the format.
func (f Format) Ext() string {
	if f == PBStream {
		return ".pb"
	}
	return "." + f.String()
}

// ParseFormat parses a format name.
func ParseFormat(s string) (Format, error) {
	for f, n := range formatNames {
		if strings.EqualFold(s, n) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("io/sink: unknown format %q (want tfrecord, pbstream, parquet, avro or jsonl)", s)
}

// ErrSchema is returned by Write when a Parquet file cannot hold a batch's columns (the
// file schema is fixed when the file is opened); the caller may start a new file.
var ErrSchema = errors.New("io/sink: the batch does not fit the file schema")

// Options configures a Writer.
type Options struct {
	Format Format
	// Record configures framed output (TFRecord, PBStream): codec (Auto or None picks by
	// file name) and PB-stream headers. Its Framing is set from Format.
	Record recordio.Options
	// Type is the message type of framed output; 0 writes each batch as its own source.
	Type batch.Source
	// FileSchema is the Parquet file schema (parquet.FileSchema of every batch to come);
	// nil takes the schema of the first batch, and a later batch with columns outside it
	// fails with ErrSchema.
	FileSchema *arrow.Schema
	// Mem allocates conversion buffers (default memory.DefaultAllocator).
	Mem memory.Allocator
}

// Writer writes batches into one file.
type Writer struct {
	path string
	o    Options
	file *atomicfile.File // nil for standard output
	out  io.Writer

	rec    *recordio.Writer // framed output
	lx     bool
	buf    []byte
	bw     batchWriter    // batch files
	enc    io.WriteCloser // outer compression of JSON lines
	rows   int64
	closed bool
}

// batchWriter is the common shape of the batch file writers.
type batchWriter interface {
	Write(rec arrow.RecordBatch) error
	Close() error
}

// Create opens a writer of path ("-" for standard output, except Parquet).
func Create(path string, o Options) (*Writer, error) {
	if o.Mem == nil {
		o.Mem = memory.DefaultAllocator
	}
	w := &Writer{path: path, o: o}
	switch o.Format {
	case TFRecord, PBStream:
		ro := o.Record
		ro.Framing = recordio.PBStream
		if o.Format == TFRecord {
			ro.Framing = recordio.TFRecord
		}
		r, err := recordio.Create(path, ro)
		if err != nil {
			return nil, err
		}
		w.rec, w.lx = r, ro.Framing == recordio.PBStream && ro.PB.LagrangeX
		return w, nil
	case Parquet, Avro, JSONL:
	default:
		return nil, fmt.Errorf("io/sink: %s: unknown format %d", path, o.Format)
	}
	if o.Format == Parquet && path == recordio.Stdout {
		return nil, fmt.Errorf("io/sink: Parquet cannot be written to standard output")
	}
	if o.Type != 0 {
		return nil, fmt.Errorf("io/sink: %s: a message type applies to tfrecord and pbstream output; %s keeps the batches as they are", path, o.Format)
	}
	w.out = os.Stdout
	if path != recordio.Stdout {
		f, err := atomicfile.Create(path)
		if err != nil {
			return nil, fmt.Errorf("io/sink: %w", err)
		}
		w.file, w.out = f, f
	}
	var err error
	switch o.Format {
	case Parquet:
		if o.FileSchema != nil {
			w.bw, err = parquet.NewWriter(w.out, o.FileSchema, parquet.WithAllocator(o.Mem))
		}
	case Avro:
		w.bw, err = avro.NewWriter(w.out)
	case JSONL:
		out := w.out
		if codec := compress.Detect(path); codec != compress.None {
			if w.enc, err = compress.NewWriter(out, codec); err != nil {
				break
			}
			out = w.enc
		}
		w.bw, err = jsonl.NewWriter(out)
	}
	if err != nil {
		_ = w.Abort()
		return nil, fmt.Errorf("io/sink: %s: %w", path, err)
	}
	return w, nil
}

// Path returns the path being written.
func (w *Writer) Path() string { return w.path }

// Rows returns the number of rows written so far.
func (w *Writer) Rows() int64 { return w.rows }

// Write appends the rows of rec.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.closed {
		return fmt.Errorf("io/sink: %s: write after close", w.path)
	}
	var err error
	if w.rec != nil {
		err = w.writeMessages(rec)
	} else {
		if w.bw == nil { // Parquet without a declared schema: the first batch decides
			fs, ferr := parquet.FileSchema(rec.Schema())
			if ferr != nil {
				return fmt.Errorf("io/sink: %s: %w", w.path, ferr)
			}
			if w.bw, err = parquet.NewWriter(w.out, fs, parquet.WithAllocator(w.o.Mem)); err != nil {
				return fmt.Errorf("io/sink: %s: %w", w.path, err)
			}
			w.o.FileSchema = fs
		}
		if w.o.Format == Parquet && !fits(w.o.FileSchema, rec.Schema()) {
			return fmt.Errorf("%w: %s", ErrSchema, w.path)
		}
		err = w.bw.Write(rec)
	}
	if err != nil {
		return fmt.Errorf("io/sink: %s: %w", w.path, err)
	}
	w.rows += rec.NumRows()
	return nil
}

// fits reports whether every column of s is in the file schema with the same flat type.
func fits(file, s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		idx := file.FieldIndices(f.Name)
		if len(idx) == 0 || !arrow.TypeEqual(file.Field(idx[0]).Type, batch.FlatType(f.Type)) {
			return false
		}
	}
	return true
}

// writeMessages converts rec to messages and frames them.
func (w *Writer) writeMessages(rec arrow.RecordBatch) error {
	typ := w.o.Type
	if typ == 0 {
		var err error
		if typ, err = batch.SourceOf(rec.Schema()); err != nil {
			return err
		}
	}
	var msgs []proto.Message
	var keys []uint32
	switch typ {
	case batch.SourceExampleBatch:
		eb, err := batch.ToExampleBatch(rec)
		if err != nil {
			return err
		}
		msgs, keys = append(msgs, eb), append(keys, eb.GetDataSourceKey())
	case batch.SourceExample:
		exs, err := batch.ToExamples(rec)
		if err != nil {
			return err
		}
		for _, ex := range exs {
			msgs, keys = append(msgs, ex), append(keys, ex.GetDataSourceKey())
		}
	case batch.SourceInstance:
		ins, err := batch.ToInstances(rec)
		if err != nil {
			return err
		}
		for _, in := range ins {
			msgs, keys = append(msgs, in), append(keys, in.GetDataSourceKey())
		}
	default:
		return fmt.Errorf("unknown message type %v", typ)
	}
	// LagrangeX headers carry pb_type 0 for Instances and 1 otherwise (io.md §1.2.2).
	var pbType uint8
	if typ != batch.SourceInstance {
		pbType = 1
	}
	opts := proto.MarshalOptions{Deterministic: true}
	for i, m := range msgs {
		var err error
		if w.buf, err = opts.MarshalAppend(w.buf[:0], m); err != nil {
			return fmt.Errorf("marshal: %w", err)
		}
		r := recordio.Record{Payload: w.buf}
		if w.lx {
			r.DataSourceKey, r.PBType = keys[i], pbType
		}
		if err := w.rec.WriteRecord(r); err != nil {
			return err
		}
	}
	return nil
}

// Close flushes and commits the file. A Parquet file that never saw a batch is written
// with an empty schema.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.rec != nil {
		return w.rec.Close()
	}
	var err error
	if w.bw == nil {
		fs, ferr := parquet.FileSchema(arrow.NewSchema(nil, nil))
		if ferr == nil {
			w.bw, ferr = parquet.NewWriter(w.out, fs, parquet.WithAllocator(w.o.Mem))
		}
		if ferr != nil {
			return errors.Join(fmt.Errorf("io/sink: %s: %w", w.path, ferr), w.abortFile())
		}
	}
	err = w.bw.Close()
	if w.enc != nil {
		if cerr := w.enc.Close(); err == nil {
			err = cerr
		}
	}
	if w.file == nil {
		return err
	}
	if err != nil {
		return errors.Join(fmt.Errorf("io/sink: %s: %w", w.path, err), w.file.Abort())
	}
	return w.file.Commit()
}

// Abort removes the partial file. Safe after Close (then it does nothing).
func (w *Writer) Abort() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.rec != nil {
		return w.rec.Abort()
	}
	return w.abortFile()
}

func (w *Writer) abortFile() error {
	if w.file != nil {
		return w.file.Abort()
	}
	return nil
}
