package export

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// Format is an export file format.
type Format int

// The export formats. The zero Format is invalid.
const (
	// EntryDump is a TFRecord of hashtablepb.EntryDump protos, the format of Monolith's
	// single-table save (uncompressed).
	EntryDump Format = iota + 1
	// Avro is an Avro object container file of schemas/avsc.EntryDump records.
	Avro
	// Parquet is a Parquet file with one row per entry (see the package doc).
	Parquet
)

var formatNames = map[Format]string{EntryDump: "entrydump", Avro: "avro", Parquet: "parquet"}

// ParseFormat parses a format name: entrydump, avro or parquet.
func ParseFormat(s string) (Format, error) {
	for f, n := range formatNames {
		if strings.EqualFold(s, n) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%sunknown format %q (want entrydump, avro or parquet)", errPrefix, s)
}

// String returns the name ParseFormat accepts.
func (f Format) String() string {
	if n, ok := formatNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Ext returns the file extension of the format, with its dot: ".entries", ".avro" or
// ".parquet".
func (f Format) Ext() string {
	switch f {
	case EntryDump:
		return ".entries"
	case Avro:
		return ".avro"
	case Parquet:
		return ".parquet"
	}
	return ""
}

// FileName is the name of the export file of table in format f: checkpoint.SafeName(table)
// (every run of characters other than ASCII letters, digits, '_', '.' and '-' replaced by
// '_', as in the checkpoint's own file names), then f.Ext(). Two tables whose names map to
// the same file cannot be exported together.
func FileName(table string, f Format) string {
	return checkpoint.SafeName(table) + f.Ext()
}

const errPrefix = "ps/export: "

// Sentinel errors.
var (
	// ErrFormat means a file is not an export file of its format, or breaks the format.
	ErrFormat = errors.New("ps/export: malformed file")
	// ErrTruncated means a file ends inside its header, a block or a record.
	ErrTruncated = errors.New("ps/export: truncated file")
	// ErrMismatch means an export file does not hold what the checkpoint holds
	// (*MismatchError wraps it).
	ErrMismatch = errors.New("ps/export: export differs from the checkpoint")
	// ErrUnsupported means an entry has something the format cannot store exactly: no
	// id, or proto fields unknown to this build.
	ErrUnsupported = errors.New("ps/export: entry cannot be stored exactly")
)

// CorruptError describes an export file that could not be read.
type CorruptError struct {
	File     string // the file name given to the reader (WithFileName); may be empty
	Record   int64  // 0-based index of the entry being read; -1 for the header or file metadata
	Offset   int64  // byte offset of the Avro block or TFRecord record; -1 when unknown
	RowGroup int    // Parquet row group; -1 for the other formats
	Err      error  // the cause: wraps ErrFormat, ErrTruncated or an I/O error
}

// Error returns a message naming the file, the entry, its position and the cause.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString(errPrefix)
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	switch {
	case e.Record < 0 && e.RowGroup >= 0:
		fmt.Fprintf(&b, "row group %d", e.RowGroup)
	case e.Record < 0 && e.Offset >= 0:
		b.WriteString("header")
	case e.Record < 0:
		b.WriteString("file metadata")
	default:
		fmt.Fprintf(&b, "entry %d", e.Record)
		switch {
		case e.RowGroup >= 0:
			fmt.Fprintf(&b, " (row group %d)", e.RowGroup)
		case e.Offset >= 0:
			fmt.Fprintf(&b, " (at offset %d)", e.Offset)
		}
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), errPrefix))
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }

// MismatchError is the first difference Verify found between a checkpoint table and its
// export file.
type MismatchError struct {
	Table string // the table
	File  string // the export file
	Entry int64  // 0-based index of the entry in the file; -1 for the file's metadata
	Fid   uint64 // the checkpoint's fid at that index (the export's when it has more entries)
	Field string // the differing field, e.g. "embedding[3]" or "opt[1].adam.m[0]"
	Got   string // the export's value
	Want  string // the checkpoint's value
}

// Error returns a message naming the table, file, entry, fid and field.
func (e *MismatchError) Error() string {
	at := ""
	if e.Entry >= 0 {
		at = fmt.Sprintf(" entry %d (fid %d)", e.Entry, e.Fid)
	}
	return fmt.Sprintf("%s%s: table %q%s: %s: export has %s, checkpoint has %s",
		errPrefix, e.File, e.Table, at, e.Field, e.Got, e.Want)
}

// Unwrap returns ErrMismatch.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// TableInfo describes the table a file holds; Avro and Parquet writers record it in the
// file's metadata (MetaTable, MetaDim) and in every row (the table column).
type TableInfo struct {
	Name string
	Dim  int // the embedding dim of the table; 0 when unknown
}

// Metadata keys of the Avro header and the Parquet key-value metadata. Frozen.
const (
	MetaTable = "monolith.table" // the table name
	MetaDim   = "monolith.dim"   // the table's dim, decimal
)

// Writer writes the entries of one table to one file. Write does not retain the entry.
// Close finishes the file (the last block, the footer) and does not close the underlying
// io.Writer. Writers are not safe for concurrent use.
type Writer interface {
	Write(d *hashtablepb.EntryDump) error
	Close() error
}

// Reader reads the entries of one export file. Next returns the next entry, or (nil,
// io.EOF) after the last; the entry, including its slices, is valid until the next call.
// Damage is a *CorruptError. Close releases the reader's resources (and closes the file
// when the reader opened it). Readers are not safe for concurrent use.
type Reader interface {
	Next() (*hashtablepb.EntryDump, error)
	// Table returns the table name the file records (MetaTable); "" for EntryDump files,
	// which record none.
	Table() string
	Close() error
}

// Option configures writers, readers and Export.
type Option func(*config)

type config struct {
	avroCodec     string
	avroBlock     int
	parquetCodec  compress.Compression
	rowGroupRows  int
	rowGroupBytes int64
	mem           memory.Allocator
	fileName      string
}

// Defaults.
const (
	DefaultAvroBlockSize = 1 << 20  // uncompressed bytes per Avro block
	DefaultRowGroupRows  = 1 << 16  // rows per Parquet row group, at most
	DefaultRowGroupBytes = 64 << 20 // estimated uncompressed bytes per Parquet row group, at most
	// MaxAvroBlockSize is the largest Avro block the reader accepts, compressed or not.
	MaxAvroBlockSize = 1 << 30
)

func newConfig(opts []Option) config {
	c := config{avroCodec: "deflate", avroBlock: DefaultAvroBlockSize, parquetCodec: compress.Codecs.Zstd,
		rowGroupRows: DefaultRowGroupRows, rowGroupBytes: DefaultRowGroupBytes, mem: memory.DefaultAllocator}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithAvroCodec sets the Avro block codec: "null", "deflate" (the default) or "snappy".
func WithAvroCodec(codec string) Option { return func(c *config) { c.avroCodec = codec } }

// WithAvroBlockSize sets the uncompressed size in bytes at which the Avro writer ends a
// block (default DefaultAvroBlockSize); a block holds at least one entry.
func WithAvroBlockSize(n int) Option { return func(c *config) { c.avroBlock = n } }

// WithParquetCompression sets the Parquet page compression (default zstd).
func WithParquetCompression(codec compress.Compression) Option {
	return func(c *config) { c.parquetCodec = codec }
}

// WithRowGroupSize bounds a Parquet row group by rows and by estimated uncompressed bytes
// (defaults DefaultRowGroupRows and DefaultRowGroupBytes); the writer holds one row group
// in memory. Values below 1 keep the default.
func WithRowGroupSize(rows int, bytes int64) Option {
	return func(c *config) {
		if rows > 0 {
			c.rowGroupRows = rows
		}
		if bytes > 0 {
			c.rowGroupBytes = bytes
		}
	}
}

// WithAllocator sets the Arrow allocator of the Parquet writer and reader (default
// memory.DefaultAllocator).
func WithAllocator(mem memory.Allocator) Option { return func(c *config) { c.mem = mem } }

// WithFileName sets the file name readers put in their errors.
func WithFileName(name string) Option { return func(c *config) { c.fileName = name } }

// NewWriter returns a Writer of format f writing to w.
func NewWriter(w io.Writer, f Format, info TableInfo, opts ...Option) (Writer, error) {
	switch f {
	case EntryDump:
		return NewEntryDumpWriter(w), nil
	case Avro:
		return NewAvroWriter(w, info, opts...)
	case Parquet:
		return NewParquetWriter(w, info, opts...)
	}
	return nil, fmt.Errorf("%sunknown format %v", errPrefix, f)
}

// OpenReader opens the export file at path in format f. Close the Reader to close the file.
func OpenReader(path string, f Format, opts ...Option) (Reader, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	opts = append([]Option{WithFileName(path)}, opts...)
	var r Reader
	switch f {
	case EntryDump:
		r, err = NewEntryDumpReader(fh, opts...), nil
	case Avro:
		r, err = NewAvroReader(fh, opts...)
	case Parquet:
		r, err = NewParquetReader(fh, opts...)
	default:
		err = fmt.Errorf("%sunknown format %v", errPrefix, f)
	}
	if err != nil {
		fh.Close()
		return nil, err
	}
	return &closingReader{Reader: r, f: fh}, nil
}

// closingReader closes the file after the reader.
type closingReader struct {
	Reader
	f *os.File
}

func (c *closingReader) Close() error {
	return errors.Join(c.Reader.Close(), c.f.Close())
}
