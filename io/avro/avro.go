package avro

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/linkedin/goavro/v2"

	"github.com/monolith-go/monolith/io/ocf"
	"github.com/monolith-go/monolith/schemas/avsc"
)

// Compression is the Avro block codec of a file (the avro.codec header value).
type Compression string

// Block codecs. Frozen: these are the Avro spec's names.
const (
	CompressionNull    Compression = ocf.Null
	CompressionDeflate Compression = ocf.Deflate // the default
	CompressionSnappy  Compression = ocf.Snappy
)

const (
	// DefaultBlockSize is the approximate uncompressed size at which the Writer ends a block.
	DefaultBlockSize = 1 << 20
	// MaxBlockSize is the largest block the Reader accepts, compressed or uncompressed.
	MaxBlockSize = ocf.MaxBlockSize
	// minRowSize is the encoded size of the smallest Row: nine one-byte fields.
	minRowSize = 9
)

// Option configures a Writer.
type Option func(*config)

type config struct {
	compression Compression
	blockSize   int
}

// WithCompression sets the block codec (default CompressionDeflate).
func WithCompression(c Compression) Option { return func(cf *config) { cf.compression = c } }

// WithBlockSize sets the approximate uncompressed size in bytes at which the Writer ends a
// block (default DefaultBlockSize). A block holds at least one row.
func WithBlockSize(n int) Option { return func(cf *config) { cf.blockSize = n } }

// Sentinel errors, wrapped by *CorruptError.
var (
	// ErrTruncated means the input ended inside the header, a block or a batch.
	ErrTruncated = errors.New("io/avro: truncated file")
	// ErrFormat means the input is not an Avro file of batch rows, or breaks the format.
	ErrFormat = errors.New("io/avro: malformed file")
)

const errPrefix = "io/avro: "

// CorruptError describes input that could not be read.
type CorruptError struct {
	Offset int64 // byte offset of the header or block where the problem was found
	Record int64 // 0-based index of the row (Avro record) in the file; -1 for the header
	Batch  int   // 0-based index of the batch being read
	Err    error // the cause: wraps ErrTruncated, ErrFormat, a batch error or an I/O error
}

// Error returns a message naming the batch, row, offset and cause.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString(errPrefix)
	if e.Record < 0 {
		fmt.Fprintf(&b, "header at offset %d", e.Offset)
	} else {
		fmt.Fprintf(&b, "batch %d, record %d (block at offset %d)", e.Batch, e.Record, e.Offset)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), errPrefix))
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }

// rowCodec is the goavro codec of avsc.Row, parsed once.
var rowCodec = sync.OnceValues(func() (*goavro.Codec, error) {
	c, err := goavro.NewCodec(avsc.Row)
	if err != nil {
		return nil, fmt.Errorf("%sschemas/avsc.Row: %w", errPrefix, err)
	}
	return c, nil
})
