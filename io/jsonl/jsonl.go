package jsonl

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultBufferSize is the default size of the Writer's and Reader's buffers.
const DefaultBufferSize = 256 << 10

// Option configures a Writer or a Reader.
type Option func(*config)

type config struct {
	bufferSize int
}

// WithBufferSize sets the size of the I/O buffer (default DefaultBufferSize).
func WithBufferSize(n int) Option { return func(c *config) { c.bufferSize = n } }

func newConfig(opts []Option) config {
	c := config{bufferSize: DefaultBufferSize}
	for _, o := range opts {
		o(&c)
	}
	c.bufferSize = max(c.bufferSize, 16)
	return c
}

// Sentinel errors, wrapped by *CorruptError.
var (
	// ErrTruncated means the input ended inside a row or a batch.
	ErrTruncated = errors.New("io/jsonl: truncated file")
	// ErrFormat means the input is not JSON lines of batch rows, or breaks the layout.
	ErrFormat = errors.New("io/jsonl: malformed file")
)

const errPrefix = "io/jsonl: "

// CorruptError describes input that could not be read.
type CorruptError struct {
	Offset int64 // byte offset of the start of the record
	Record int64 // 0-based index of the record (row) in the file
	Batch  int   // 0-based index of the batch being read
	Err    error // the cause: wraps ErrTruncated, ErrFormat, a JSON, batch or I/O error
}

// Error returns a message naming the batch, record, offset and cause.
func (e *CorruptError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%sbatch %d, record %d at offset %d", errPrefix, e.Batch, e.Record, e.Offset)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), errPrefix))
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }
