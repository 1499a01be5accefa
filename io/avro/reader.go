package avro

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/golang/snappy"
	"github.com/linkedin/goavro/v2"

	"github.com/monolith-go/monolith/schemas/avsc"
	"github.com/monolith-go/monolith/schemas/batch"
)

var magic = []byte{'O', 'b', 'j', 1}

const syncSize = 16

// Reader reads record batches from an Avro object container file.
type Reader struct {
	in          *countingReader
	mem         memory.Allocator
	compression Compression
	sync        [syncSize]byte

	dec       decoder // the rows left in the current block
	blockLeft int64   // rows left in the current block
	blockOff  int64   // file offset of the current block
	record    int64   // index of the next row
	batch     int     // index of the next batch
	err       error   // sticky
}

// NewReader reads and checks the file header. Records are allocated from mem.
func NewReader(r io.Reader, mem memory.Allocator) (*Reader, error) {
	rd := &Reader{in: &countingReader{r: bufio.NewReaderSize(r, 64<<10)}, mem: mem}
	if err := rd.readHeader(); err != nil {
		return nil, &CorruptError{Offset: 0, Record: -1, Err: err}
	}
	return rd, nil
}

// Compression returns the block codec named in the file header.
func (r *Reader) Compression() Compression { return r.compression }

// Read returns the next batch, or (nil, io.EOF) at a clean end of the file. The caller owns
// the record and must Release it.
func (r *Reader) Read() (arrow.RecordBatch, error) {
	if r.err != nil {
		return nil, r.err
	}
	rec, err := r.read()
	if err != nil {
		r.err = err
		return nil, err
	}
	r.batch++
	return rec, nil
}

func (r *Reader) read() (arrow.RecordBatch, error) {
	first := r.record
	rows, err := batch.CollectRows(r.next)
	if err != nil {
		return nil, r.rowsError(err)
	}
	rec, err := fromRows(r.mem, rows)
	if err != nil {
		return nil, &CorruptError{Offset: r.blockOff, Record: first, Batch: r.batch, Err: err}
	}
	return rec, nil
}

// corrupt wraps err with the position of the last row read.
func (r *Reader) corrupt(err error) error {
	return &CorruptError{Offset: r.blockOff, Record: max(r.record-1, 0), Batch: r.batch, Err: err}
}

// next decodes the next row, reading a block when the current one is used up. It returns
// io.EOF only at the end of the input at a block boundary.
func (r *Reader) next() (batch.Row, error) {
	for r.blockLeft == 0 {
		if len(r.dec.buf) != 0 {
			return batch.Row{}, r.corrupt(fmt.Errorf("%w: %d bytes after the last row of the block", ErrFormat, len(r.dec.buf)))
		}
		r.blockOff = r.in.n
		err := r.readBlock()
		if err == io.EOF {
			return batch.Row{}, io.EOF
		}
		if err != nil {
			return batch.Row{}, &CorruptError{Offset: r.blockOff, Record: r.record, Batch: r.batch, Err: err}
		}
	}
	row, err := r.dec.row()
	if err != nil {
		return batch.Row{}, &CorruptError{Offset: r.blockOff, Record: r.record, Batch: r.batch, Err: err}
	}
	r.blockLeft--
	r.record++
	return row, nil
}

// readHeader reads the magic, the metadata and the sync marker.
func (r *Reader) readHeader() error {
	var m [4]byte
	if err := r.in.full(m[:]); err != nil {
		return err
	}
	if !bytes.Equal(m[:], magic) {
		return fmt.Errorf("%w: not an Avro object container file (magic %q)", ErrFormat, m[:])
	}
	meta := map[string][]byte{}
	for {
		n, err := r.in.long()
		if err != nil {
			return truncated(err)
		}
		if n == 0 {
			break
		}
		if n < 0 {
			if n == minLong {
				return fmt.Errorf("%w: header map count %d", ErrFormat, n)
			}
			n = -n
			if _, err := r.in.long(); err != nil {
				return truncated(err)
			}
		}
		for ; n > 0; n-- {
			k, err := r.in.bytes(maxHeaderValue)
			if err != nil {
				return err
			}
			v, err := r.in.bytes(maxHeaderValue)
			if err != nil {
				return err
			}
			meta[string(k)] = v
		}
	}
	if err := r.in.full(r.sync[:]); err != nil {
		return err
	}
	switch c := Compression(meta["avro.codec"]); c {
	case "":
		r.compression = CompressionNull
	case CompressionNull, CompressionDeflate, CompressionSnappy:
		r.compression = c
	default:
		return fmt.Errorf("%w: unsupported codec %q", ErrFormat, c)
	}
	schema, ok := meta["avro.schema"]
	if !ok {
		return fmt.Errorf("%w: no avro.schema in the header", ErrFormat)
	}
	if string(schema) == avsc.Row {
		return nil
	}
	want, err := rowCodec()
	if err != nil {
		return err
	}
	got, err := goavro.NewCodec(string(schema))
	if err != nil {
		return fmt.Errorf("%w: avro.schema: %v", ErrFormat, err)
	}
	if got.CanonicalSchema() != want.CanonicalSchema() {
		return fmt.Errorf("%w: the file's schema is not schemas/avsc.Row: %s", ErrFormat, got.CanonicalSchema())
	}
	return nil
}

// readBlock reads, checks and decompresses the next block.
func (r *Reader) readBlock() error {
	count, err := r.in.long()
	if err == io.EOF && r.in.n == r.blockOff {
		return io.EOF // clean end
	}
	if err != nil {
		return truncated(err)
	}
	size, err := r.in.long()
	if err != nil {
		return truncated(err)
	}
	if count <= 0 || size <= 0 || size > MaxBlockSize {
		return fmt.Errorf("%w: block of %d rows in %d bytes", ErrFormat, count, size)
	}
	data, err := r.in.n64(size)
	if err != nil {
		return err
	}
	var s [syncSize]byte
	if err := r.in.full(s[:]); err != nil {
		return err
	}
	if s != r.sync {
		return fmt.Errorf("%w: sync marker mismatch after the block", ErrFormat)
	}
	switch r.compression {
	case CompressionDeflate:
		data, err = inflate(data)
	case CompressionSnappy:
		data, err = unsnappy(data)
	}
	if err != nil {
		return err
	}
	if count > int64(len(data)/minRowSize) {
		return fmt.Errorf("%w: block claims %d rows in %d bytes", ErrFormat, count, len(data))
	}
	r.dec = decoder{buf: data}
	r.blockLeft = count
	return nil
}

func inflate(data []byte) ([]byte, error) {
	fr := flate.NewReader(bytes.NewReader(data))
	out, err := io.ReadAll(io.LimitReader(fr, MaxBlockSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: deflate: %v", ErrFormat, err)
	}
	if len(out) > MaxBlockSize {
		return nil, fmt.Errorf("%w: block inflates beyond %d bytes", ErrFormat, MaxBlockSize)
	}
	return out, nil
}

// unsnappy decodes an Avro snappy block: snappy data followed by the big-endian CRC-32
// (IEEE) of the uncompressed data.
func unsnappy(data []byte) ([]byte, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: snappy block of %d bytes has no checksum", ErrFormat, len(data))
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	n, err := snappy.DecodedLen(body)
	if err != nil || n > MaxBlockSize {
		return nil, fmt.Errorf("%w: snappy block: length %d: %v", ErrFormat, n, err)
	}
	out, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrFormat, err)
	}
	if crc32.ChecksumIEEE(out) != sum {
		return nil, fmt.Errorf("%w: snappy block checksum mismatch", ErrFormat)
	}
	return out, nil
}

// truncated maps an unexpected end of input to ErrTruncated.
func truncated(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", ErrTruncated, io.ErrUnexpectedEOF)
	}
	return err
}

// countingReader reads the container and counts the bytes consumed.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// full fills p; running out of input is ErrTruncated.
func (c *countingReader) full(p []byte) error {
	n, err := io.ReadFull(c.r, p)
	c.n += int64(n)
	return truncated(err)
}

// n64 reads n bytes, growing the buffer as data arrives so that a corrupt length does not
// allocate more than the input holds.
func (c *countingReader) n64(n int64) ([]byte, error) {
	var buf bytes.Buffer
	m, err := io.CopyN(&buf, c.r, n)
	c.n += m
	if err != nil {
		return nil, truncated(err)
	}
	return buf.Bytes(), nil
}

// long reads a zig-zag varint. io.EOF means no byte at all was available.
func (c *countingReader) long() (int64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		b, err := c.ReadByte()
		if err != nil {
			if shift > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if shift == 63 && b > 1 {
			return 0, fmt.Errorf("%w: varint overflows 64 bits", ErrFormat)
		}
		u |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
}

// bytes reads an Avro bytes value of at most limit bytes.
func (c *countingReader) bytes(limit int64) ([]byte, error) {
	n, err := c.long()
	if err != nil {
		return nil, truncated(err)
	}
	if n < 0 || n > limit {
		return nil, fmt.Errorf("%w: header value of %d bytes", ErrFormat, n)
	}
	return c.n64(n)
}

// fromRows rebuilds a batch; a batch that breaks the layout is ErrFormat too.
func fromRows(mem memory.Allocator, rows []batch.Row) (arrow.RecordBatch, error) {
	rec, err := batch.FromRows(mem, rows)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return rec, nil
}

// rowsError maps the errors of batch.CollectRows onto this package's: a row error from next
// is returned as it is, io.EOF stays the clean end.
func (r *Reader) rowsError(err error) error {
	switch {
	case errors.Is(err, batch.ErrRowsEnded):
		return r.corrupt(fmt.Errorf("%w: %w", ErrTruncated, err))
	case errors.Is(err, batch.ErrLayout):
		return r.corrupt(fmt.Errorf("%w: %w", ErrFormat, err))
	}
	return err
}
