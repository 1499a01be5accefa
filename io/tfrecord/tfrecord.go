package tfrecord

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

const (
	// HeaderSize is the size of a record header: the u64 length and its masked CRC.
	HeaderSize = 12
	// FooterSize is the size of a record footer: the masked CRC of the payload.
	FooterSize = 4
	// maskDelta is the constant added when masking a CRC.
	maskDelta = 0xa282ead8
	// DefaultMaxRecordSize is the largest payload a Reader accepts unless configured
	// otherwise (2 GiB, the protobuf message size limit).
	DefaultMaxRecordSize = 2 << 30
	// DefaultBufferSize is the default read buffer size of a Reader.
	DefaultBufferSize = 256 << 10
	// maxLength is TensorFlow's bound: lengths >= 2^64-4 are "record size too large".
	maxLength = ^uint64(0) - 4
)

// castagnoli is the CRC-32C table; it is computed once and never modified.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC returns the masked CRC-32C of b, as stored in TFRecord headers and footers.
func MaskedCRC(b []byte) uint32 {
	return Mask(crc32.Checksum(b, castagnoli))
}

// Mask masks a CRC-32C value: rotate right by 15 bits, then add 0xA282EAD8.
func Mask(crc uint32) uint32 {
	return (crc>>15 | crc<<17) + maskDelta
}

// Unmask inverts Mask.
func Unmask(masked uint32) uint32 {
	rot := masked - maskDelta
	return rot>>17 | rot<<15
}

// Sentinel errors, wrapped by *CorruptError.
var (
	// ErrChecksum means a header or payload CRC does not match (TensorFlow's "corrupted
	// record"). It is an error in every mode.
	ErrChecksum = errors.New("io/tfrecord: checksum mismatch")
	// ErrTruncated means the input ended inside a record.
	ErrTruncated = errors.New("io/tfrecord: truncated record")
	// ErrTooLarge means a record length is at or above 2^64-4 or above the reader's maximum
	// record size.
	ErrTooLarge = errors.New("io/tfrecord: record size too large")
)

// CorruptError describes a record that could not be read. Err holds the cause: an error
// wrapping ErrChecksum, ErrTruncated or ErrTooLarge, an io/compress error for damaged
// compressed input, or an I/O error of the underlying reader.
type CorruptError struct {
	File   string // file name given WithFile; may be empty
	Offset int64  // byte offset of the start of the record in the (decompressed) stream
	Record int64  // 0-based index of the record
	Err    error  // the cause
}

const errPrefix = "io/tfrecord: "

// Error returns a message naming the file, record index, offset and cause.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString(errPrefix)
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "record %d at offset %d", e.Record, e.Offset)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), errPrefix))
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }
