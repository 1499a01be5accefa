package pbstream

import (
	"errors"
	"fmt"
	"strings"
)

// Options selects the optional header parts of every record (Monolith DataFormatOptions).
// The zero value (no headers) matches the C++ defaults; note that Python's FilePBDataset
// defaults HasSortID to true.
type Options struct {
	// LagrangeX: one 8-byte header carrying pb_type and data_source_key; when set the other
	// three options are ignored.
	LagrangeX bool
	// KafkaDumpPrefix: a u64 A, followed by a second u64 when A is 0.
	KafkaDumpPrefix bool
	// HasSortID: a length-prefixed sort id (usually the LineId user_id).
	HasSortID bool
	// KafkaDump: one ignored u64 just before the payload length.
	KafkaDump bool
}

// Record is one framed record.
type Record struct {
	// Payload is the serialized protobuf. From a Reader it is valid until the next Next.
	Payload []byte
	// DataSourceKey is the key from the LagrangeX header (low byte always zero); 0 without it.
	DataSourceKey uint32
	// PBType is the low byte of the LagrangeX header; 0 without it. Monolith never uses it.
	PBType uint8
	// SortID is the sort-id blob when Options.HasSortID is set. From a Reader it is valid
	// until the next Next; it is empty (not nil) for a zero-length sort id.
	SortID []byte
	// Offset is the byte offset of the record's first header byte in the (decompressed)
	// stream. Set by the Reader, ignored by the Writer.
	Offset int64
	// Index is the 0-based index of the record. Set by the Reader, ignored by the Writer.
	Index int64
}

const (
	// SentinelLength is the payload length Monolith rejects as "DEADBEEF value found".
	SentinelLength = 0xFEFEFEFE
	// DefaultMaxRecordSize is the largest payload or sort id a Reader accepts unless
	// configured otherwise (2 GiB, the protobuf message size limit).
	DefaultMaxRecordSize = 2 << 30
	// DefaultBufferSize is the default read buffer size of a Reader.
	DefaultBufferSize = 256 << 10
	// maxLength is Monolith's bound: lengths >= 2^64-4 are "record size too large".
	maxLength = ^uint64(0) - 4
)

// Sentinel errors, wrapped by *CorruptError.
var (
	// ErrTruncated means the input ended inside a record.
	ErrTruncated = errors.New("io/pbstream: truncated record")
	// ErrTooLarge means a payload or sort-id length is at or above 2^64-4 or above the
	// reader's maximum record size.
	ErrTooLarge = errors.New("io/pbstream: record size too large")
	// ErrSentinel means the payload length is 0xFEFEFEFE (Monolith: "DEADBEEF value found").
	ErrSentinel = errors.New("io/pbstream: DEADBEEF value found")
	// ErrInvalidRecord is wrapped by Writer errors for records the framing cannot carry.
	ErrInvalidRecord = errors.New("io/pbstream: invalid record for the framing options")
)

// CorruptError describes a record that could not be read. Err holds the cause: an error
// wrapping ErrTruncated, ErrTooLarge or ErrSentinel, an io/compress error for damaged
// compressed input, or an I/O error of the underlying reader.
type CorruptError struct {
	File   string // file name given WithFile; may be empty
	Offset int64  // byte offset of the start of the record in the (decompressed) stream
	Record int64  // 0-based index of the record
	Err    error  // the cause
}

const errPrefix = "io/pbstream: "

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

// JavaHash is Java's String.hashCode computed over the bytes of s, each taken as a signed
// byte: h = 31*h + int8(c) with 32-bit wrap-around, starting from 0.
func JavaHash(s string) int32 {
	var h int32
	for i := 0; i < len(s); i++ {
		h = 31*h + int32(int8(s[i]))
	}
	return h
}

// DataSourceKey returns the data_source_key Monolith derives from a data-source name:
// uint32(JavaHash(name)) << 8 (mod 2^32).
func DataSourceKey(name string) uint32 {
	return uint32(JavaHash(name)) << 8
}

// LagrangeXHeader returns the 8-byte LagrangeX header value for a record, as the writer
// emits it: key | pbType. The low byte of key must be zero.
func LagrangeXHeader(key uint32, pbType uint8) uint64 {
	return uint64(key&0xFFFFFF00 | uint32(pbType))
}

// ParseLagrangeXHeader splits a LagrangeX header into pb_type (low byte) and data_source_key
// (low 32 bits with the low byte cleared); the high 32 bits are ignored, as in Monolith.
func ParseLagrangeXHeader(h uint64) (key uint32, pbType uint8) {
	return uint32(h) & 0xFFFFFF00, uint8(h)
}
