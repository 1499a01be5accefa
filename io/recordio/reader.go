package recordio

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/tfrecord"
)

// Stdin is the path Open reads standard input from.
const Stdin = "-"

// Reader yields the records of one file or stream. The zero value is not usable; call Open
// or NewReader.
type Reader struct {
	name  string
	o     Options
	codec compress.Codec
	file  *os.File      // closed by Close when Open opened it
	dec   io.ReadCloser // decompressor
	tf    *tfrecord.Reader
	pb    *pbstream.Reader
	err   error // sticky error returned by Next
}

// Open opens the file at path for reading. Path "-" reads standard input, which is never
// decompressed: with Codec Auto it is read as is, and any other codec but None is an error.
// Codec Auto picks the codec from the file name (compress.Detect).
func Open(path string, o Options) (*Reader, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if path == Stdin {
		if o.Codec != compress.Auto && o.Codec != compress.None {
			return nil, fmt.Errorf("io/recordio: standard input is never decompressed (codec %v requested); "+
				"use NewReader(os.Stdin, ...) to decompress it", o.Codec)
		}
		o.Codec = compress.None
		return NewReader(os.Stdin, path, o)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("io/recordio: %w", err)
	}
	r, err := NewReader(f, path, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.file = f
	return r, nil
}

// NewReader returns a Reader of the records in src. name is used in errors and, with Codec
// Auto, to pick the codec (compress.Detect). Close does not close src.
func NewReader(src io.Reader, name string, o Options) (*Reader, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	codec := o.Codec
	if codec == compress.Auto {
		codec = compress.Detect(name)
	}
	var copts []compress.Option
	if o.BufferSize > 0 {
		copts = append(copts, compress.WithBufferSize(o.BufferSize))
	}
	dec, err := compress.NewReader(src, codec, copts...)
	if err != nil {
		return nil, fmt.Errorf("io/recordio: %s: %w", name, err)
	}
	r := &Reader{name: name, o: o, codec: codec, dec: dec}
	in := io.Reader(dec)
	if codec == compress.None {
		// dec passes reads straight to src; handing src itself to the framing reader lets it
		// use a large enough *bufio.Reader as its buffer instead of adding one.
		in = src
	}
	switch o.Framing {
	case TFRecord:
		r.tf = tfrecord.NewReader(in,
			tfrecord.WithAllowTruncatedTail(o.AllowTruncatedTail),
			tfrecord.WithBufferSize(o.BufferSize),
			tfrecord.WithMaxRecordSize(o.MaxRecordSize))
	default:
		r.pb = pbstream.NewReader(in, o.PB,
			pbstream.WithAllowTruncatedTail(o.AllowTruncatedTail),
			pbstream.WithBufferSize(o.BufferSize),
			pbstream.WithMaxRecordSize(o.MaxRecordSize))
	}
	return r, nil
}

// SetPayloadBuffer makes buf's memory the buffer that payloads are read into (see
// PayloadBuffer). Call it before Next; a nil or empty buf is ignored.
func (r *Reader) SetPayloadBuffer(buf []byte) {
	if r.tf != nil {
		r.tf.SetPayloadBuffer(buf)
	} else {
		r.pb.SetPayloadBuffer(buf)
	}
}

// PayloadBuffer returns the payload buffer, grown to the largest record read so far, for a
// reader of the next file (SetPayloadBuffer). The reader must not be used after it has
// been handed on.
func (r *Reader) PayloadBuffer() []byte {
	if r.tf != nil {
		return r.tf.PayloadBuffer()
	}
	return r.pb.PayloadBuffer()
}

// Name returns the name given to Open or NewReader.
func (r *Reader) Name() string { return r.name }

// Codec returns the codec in use (Auto resolved).
func (r *Reader) Codec() compress.Codec { return r.codec }

var errReaderClosed = errors.New("io/recordio: read after Close")

// Next returns the next record; its Payload and SortID are valid until the next call. It
// returns io.EOF at a clean end of the stream and a *CorruptError for anything else (see
// the package documentation). After an error or io.EOF, Next keeps returning it.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	if r.tf != nil {
		payload, err := r.tf.Next()
		if err != nil {
			return Record{}, r.failed(err)
		}
		return Record{Payload: payload, Offset: r.tf.Offset(), Index: r.tf.Index()}, nil
	}
	rec, err := r.pb.Next()
	if err != nil {
		return Record{}, r.failed(err)
	}
	return Record{
		Payload:       rec.Payload,
		Offset:        rec.Offset,
		Index:         rec.Index,
		DataSourceKey: rec.DataSourceKey,
		PBType:        rec.PBType,
		SortID:        rec.SortID,
	}, nil
}

// failed converts a framing error into a *CorruptError of this package.
func (r *Reader) failed(err error) error {
	if err == io.EOF {
		r.err = io.EOF
		return io.EOF
	}
	ce := &CorruptError{File: r.name, Framing: r.o.Framing, Codec: r.codec, Err: err}
	var tce *tfrecord.CorruptError
	var pce *pbstream.CorruptError
	switch {
	case errors.As(err, &tce):
		ce.Offset, ce.Record, ce.Err = tce.Offset, tce.Record, tce.Err
	case errors.As(err, &pce):
		ce.Offset, ce.Record, ce.Err = pce.Offset, pce.Record, pce.Err
	}
	r.err = ce
	return ce
}

// Close releases the decompressor and closes the file opened by Open (never standard
// input, nor a reader given to NewReader).
func (r *Reader) Close() error {
	if r.err == errReaderClosed {
		return nil
	}
	r.err = errReaderClosed
	var errs []error
	if r.dec != nil {
		errs = append(errs, r.dec.Close())
	}
	if r.file != nil {
		if err := r.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("io/recordio: close %s: %w", r.name, err))
		}
	}
	return errors.Join(errs...)
}
