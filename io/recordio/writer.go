package recordio

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/tfrecord"
)

// Stdout is the path Create writes standard output to.
const Stdout = "-"

// Writer writes records with one framing and codec. The zero value is not usable; call
// Create or NewWriter.
type Writer struct {
	o      Options
	codec  compress.Codec
	enc    io.WriteCloser // compressor
	tf     *tfrecord.Writer
	pb     *pbstream.Writer
	file   *atomicfile.File // temporary file of Create
	closed bool
}

// Create returns a Writer of a new file at path. The data goes to a temporary file in the
// same directory ("<base>.tmp-*"); Close flushes, fsyncs and renames it to path (replacing
// any existing file), and Abort removes it. Codec Auto picks the codec from path
// (compress.Detect). Path "-" writes standard output, which is never compressed (Auto means
// None there, and other codecs are an error).
func Create(path string, o Options) (*Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if path == Stdout {
		if o.Codec != compress.Auto && o.Codec != compress.None {
			return nil, fmt.Errorf("io/recordio: standard output is never compressed (codec %v requested); "+
				"use NewWriter(os.Stdout, ...) to compress it", o.Codec)
		}
		o.Codec = compress.None
		return NewWriter(os.Stdout, o)
	}
	if o.Codec == compress.Auto {
		o.Codec = compress.Detect(path)
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("io/recordio: %w", err)
	}
	w, err := NewWriter(f, o)
	if err != nil {
		_ = f.Abort()
		return nil, err
	}
	w.file = f
	return w, nil
}

// NewWriter returns a Writer that writes records into dst. Codec Auto means None here (there
// is no file name to detect from). Close does not close dst.
func NewWriter(dst io.Writer, o Options) (*Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	codec := o.Codec
	if codec == compress.Auto {
		codec = compress.None
	}
	enc, err := compress.NewWriter(dst, codec)
	if err != nil {
		return nil, fmt.Errorf("io/recordio: %w", err)
	}
	w := &Writer{o: o, codec: codec, enc: enc}
	if o.Framing == TFRecord {
		w.tf = tfrecord.NewWriter(enc)
	} else {
		w.pb = pbstream.NewWriter(enc, o.PB)
	}
	return w, nil
}

// Codec returns the codec in use (Auto resolved).
func (w *Writer) Codec() compress.Codec { return w.codec }

var errWriterClosed = errors.New("io/recordio: write after Close")

// Write appends a record holding payload (zero-valued PB-stream headers). It does not
// retain payload.
func (w *Writer) Write(payload []byte) error {
	return w.WriteRecord(Record{Payload: payload})
}

// WriteRecord appends rec. DataSourceKey, PBType and SortID are written by the PB-stream
// framing as pbstream.Writer.WriteRecord describes; a TFRecord writer rejects records that
// set them, since it cannot carry them. Rejected records give an error wrapping
// ErrInvalidRecord and leave the Writer usable; write errors are sticky. Offset and Index
// are ignored.
func (w *Writer) WriteRecord(rec Record) error {
	if w.closed {
		return errWriterClosed
	}
	if w.tf != nil {
		if rec.DataSourceKey != 0 || rec.PBType != 0 || len(rec.SortID) > 0 {
			return fmt.Errorf("%w: TFRecord framing cannot carry a data source key, pb type or sort id", ErrInvalidRecord)
		}
		return w.tf.Write(rec.Payload)
	}
	err := w.pb.WriteRecord(pbstream.Record{
		Payload:       rec.Payload,
		DataSourceKey: rec.DataSourceKey,
		PBType:        rec.PBType,
		SortID:        rec.SortID,
	})
	if errors.Is(err, pbstream.ErrInvalidRecord) {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return err
}

// Close flushes the framing and the compressor and, for Create, fsyncs the temporary file
// and renames it into place; on failure the temporary file is removed. Close does not close
// a writer given to NewWriter. Calling Close again returns nil.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	var err error
	if w.tf != nil {
		err = w.tf.Flush()
	} else {
		err = w.pb.Flush()
	}
	if cerr := w.enc.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("io/recordio: close %v compressor: %w", w.codec, cerr)
	}
	if w.file == nil {
		return err
	}
	if err != nil {
		return errors.Join(err, w.file.Abort())
	}
	if err := w.file.Commit(); err != nil {
		return fmt.Errorf("io/recordio: %w", err)
	}
	return nil
}

// Abort discards a Writer: for Create it closes and removes the temporary file, leaving any
// existing file at the path untouched. Abort after Close is a no-op.
func (w *Writer) Abort() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.file == nil {
		return nil
	}
	if err := w.file.Abort(); err != nil {
		return fmt.Errorf("io/recordio: %w", err)
	}
	return nil
}
