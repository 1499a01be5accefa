package recordio

import (
	"errors"
	"fmt"
	"strings"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/tfrecord"
)

// Framing names a record framing. The zero value is PBStream.
type Framing int

// The framings.
const (
	// PBStream is Monolith's length-prefixed framing with optional headers (io/pbstream).
	PBStream Framing = iota
	// TFRecord is TensorFlow's checksummed framing (io/tfrecord).
	TFRecord
)

// ParseFraming returns the framing named by s, ignoring case: "pbstream", "pb" or
// "pb_stream" for PBStream; "tfrecord" or "tf" for TFRecord.
func ParseFraming(s string) (Framing, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "pbstream", "pb", "pb_stream":
		return PBStream, nil
	case "tfrecord", "tf":
		return TFRecord, nil
	}
	return 0, fmt.Errorf("io/recordio: unknown framing %q; valid names: \"pbstream\" (\"pb\"), \"tfrecord\" (\"tf\")", s)
}

// String returns the name of f, as accepted by ParseFraming.
func (f Framing) String() string {
	switch f {
	case PBStream:
		return "pbstream"
	case TFRecord:
		return "tfrecord"
	}
	return fmt.Sprintf("Framing(%d)", int(f))
}

// Options configures readers and writers. The zero value reads and writes uncompressed PB
// streams without headers.
type Options struct {
	// Framing is the record framing.
	Framing Framing
	// Codec is the whole-stream compression; compress.Auto picks it from the file name
	// (compress.Detect), and is None for standard input and output.
	Codec compress.Codec
	// PB holds the PB-stream header options; ignored for TFRecord.
	PB pbstream.Options
	// AllowTruncatedTail makes a partial last record end the stream cleanly (Monolith's
	// behaviour) instead of failing with ErrTruncated. Readers only.
	AllowTruncatedTail bool
	// BufferSize is the read buffer size of each layer; 0 means the defaults (256 KiB for
	// the framing, 64 KiB for the compressed input).
	BufferSize int
	// MaxRecordSize is the largest payload (or sort id) a reader accepts; 0 means 2 GiB.
	MaxRecordSize int64
}

// Validate reports whether o names a known framing and codec and has non-negative sizes.
func (o Options) Validate() error {
	if o.Framing != PBStream && o.Framing != TFRecord {
		return fmt.Errorf("io/recordio: invalid framing %v", o.Framing)
	}
	switch o.Codec {
	case compress.None, compress.Snappy, compress.Zstd, compress.Zlib, compress.Gzip, compress.Auto:
	default:
		return fmt.Errorf("io/recordio: invalid codec %v", o.Codec)
	}
	if o.BufferSize < 0 || o.MaxRecordSize < 0 {
		return fmt.Errorf("io/recordio: negative BufferSize %d or MaxRecordSize %d", o.BufferSize, o.MaxRecordSize)
	}
	return nil
}

// Record is one record of a stream.
type Record struct {
	// Payload is the serialized protobuf. From a Reader it is valid until the next Next.
	Payload []byte
	// Offset is the byte offset of the record in the decompressed stream (set by readers).
	Offset int64
	// Index is the 0-based index of the record (set by readers).
	Index int64
	// DataSourceKey is the LagrangeX data_source_key (PB stream with PB.LagrangeX only).
	DataSourceKey uint32
	// PBType is the LagrangeX pb_type byte (PB stream with PB.LagrangeX only).
	PBType uint8
	// SortID is the PB-stream sort id (PB.HasSortID only). From a Reader it is valid until
	// the next Next.
	SortID []byte
}

// Sentinel errors matched by errors.Is on a *CorruptError, whatever the framing. The
// framing packages' own sentinels (tfrecord.ErrChecksum, pbstream.ErrSentinel, ...) and
// compress.ErrCorrupt match as well.
var (
	// ErrTruncated: the stream ended inside a record, or the compressed stream is incomplete.
	ErrTruncated = errors.New("io/recordio: truncated record")
	// ErrChecksum: a TFRecord CRC mismatch.
	ErrChecksum = errors.New("io/recordio: checksum mismatch")
	// ErrTooLarge: a length at or above 2^64-4 or above MaxRecordSize.
	ErrTooLarge = errors.New("io/recordio: record size too large")
	// ErrSentinel: a PB-stream payload length of 0xFEFEFEFE ("DEADBEEF value found").
	ErrSentinel = errors.New("io/recordio: DEADBEEF value found")
	// ErrInvalidRecord is wrapped by Writer errors for records the framing cannot carry.
	ErrInvalidRecord = errors.New("io/recordio: invalid record for the framing")
)

// CorruptError describes a record that could not be read: truncated or damaged data, or an
// I/O error of the underlying reader (then Err wraps that error and matches no sentinel).
type CorruptError struct {
	File    string         // name given to Open or NewReader
	Framing Framing        // framing in use
	Codec   compress.Codec // codec in use (resolved, never Auto)
	Offset  int64          // byte offset of the record's start in the decompressed stream
	Record  int64          // 0-based index of the record
	Err     error          // the cause, from io/tfrecord, io/pbstream, io/compress or I/O
}

// Error returns a message naming the file, record index, offset and cause.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("io/recordio: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "record %d at offset %d", e.Record, e.Offset)
	if e.Err != nil {
		msg := e.Err.Error()
		msg = strings.TrimPrefix(msg, "io/tfrecord: ")
		msg = strings.TrimPrefix(msg, "io/pbstream: ")
		b.WriteString(": ")
		b.WriteString(msg)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }

// Is maps this package's sentinels onto the framing packages' ones.
func (e *CorruptError) Is(target error) bool {
	switch target {
	case ErrTruncated:
		return errors.Is(e.Err, tfrecord.ErrTruncated) || errors.Is(e.Err, pbstream.ErrTruncated)
	case ErrChecksum:
		return errors.Is(e.Err, tfrecord.ErrChecksum)
	case ErrTooLarge:
		return errors.Is(e.Err, tfrecord.ErrTooLarge) || errors.Is(e.Err, pbstream.ErrTooLarge)
	case ErrSentinel:
		return errors.Is(e.Err, pbstream.ErrSentinel)
	}
	return false
}
