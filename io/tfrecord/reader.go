package tfrecord

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Option configures a Reader.
type Option func(*Reader)

// WithFile sets the file name reported in errors.
func WithFile(name string) Option { return func(r *Reader) { r.file = name } }

// WithMaxRecordSize sets the largest payload accepted (default DefaultMaxRecordSize);
// n <= 0 keeps the default.
func WithMaxRecordSize(n int64) Option {
	return func(r *Reader) {
		if n > 0 {
			r.maxSize = n
		}
	}
}

// WithAllowTruncatedTail makes a partial last record end the stream with io.EOF instead of
// an ErrTruncated error (Monolith's silent end of file). Checksum errors are still reported.
func WithAllowTruncatedTail(allow bool) Option { return func(r *Reader) { r.allowTail = allow } }

// WithBufferSize sets the read buffer size (default DefaultBufferSize); n < 16 keeps it.
func WithBufferSize(n int) Option {
	return func(r *Reader) {
		if n >= 16 {
			r.bufSize = n
		}
	}
}

// Reader reads TFRecord records. The zero value is not usable; call NewReader.
type Reader struct {
	br        *bufio.Reader
	file      string
	maxSize   int64
	allowTail bool
	bufSize   int

	hdr [HeaderSize]byte
	ftr [FooterSize]byte
	buf []byte // payload buffer, reused between records

	off    int64 // bytes consumed so far
	next   int64 // index of the next record
	recOff int64 // offset of the record last returned or failed
	recIdx int64 // index of the record last returned or failed
	err    error // sticky terminal state (io.EOF or an error)
}

// NewReader returns a Reader of the records in r. Reads from r are buffered, so the reader
// may read past the last record it returns.
func NewReader(r io.Reader, opts ...Option) *Reader {
	rd := &Reader{maxSize: DefaultMaxRecordSize, bufSize: DefaultBufferSize, buf: make([]byte, 0, 512)}
	for _, o := range opts {
		if o != nil {
			o(rd)
		}
	}
	rd.maxSize = min(rd.maxSize, math.MaxInt) // lengths are converted to int
	rd.br = bufio.NewReaderSize(r, rd.bufSize)
	return rd
}

// SetPayloadBuffer makes buf's memory the buffer that payloads are read into, so that a
// caller reading file after file can hand one reader's buffer (PayloadBuffer) to the next
// instead of growing a new one per file. Call it before Next; a nil or empty buf is
// ignored.
func (r *Reader) SetPayloadBuffer(buf []byte) {
	if cap(buf) > cap(r.buf) {
		r.buf = buf[:0]
	}
}

// PayloadBuffer returns the payload buffer, grown to the largest record read so far. The
// reader must not be used after it has been handed on.
func (r *Reader) PayloadBuffer() []byte { return r.buf[:0] }

// Next returns the payload of the next record. The slice is valid until the next call to
// Next. It returns (nil, io.EOF) only at a clean end of the input (see the package
// documentation); every other failure is a *CorruptError. After an error or io.EOF, Next
// keeps returning it.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	r.recOff, r.recIdx = r.off, r.next
	n, err := io.ReadFull(r.br, r.hdr[:])
	r.off += int64(n)
	if err != nil {
		if err == io.EOF {
			r.err = io.EOF
			return nil, io.EOF
		}
		return nil, r.readFailed(err)
	}
	length := binary.LittleEndian.Uint64(r.hdr[:8])
	if got, want := MaskedCRC(r.hdr[:8]), binary.LittleEndian.Uint32(r.hdr[8:]); got != want {
		return nil, r.fail(fmt.Errorf("%w: length crc %#08x, computed %#08x", ErrChecksum, want, got))
	}
	if length >= maxLength {
		return nil, r.fail(fmt.Errorf("%w: length %d", ErrTooLarge, length))
	}
	if length > uint64(r.maxSize) {
		return nil, r.fail(fmt.Errorf("%w: length %d exceeds the limit of %d bytes", ErrTooLarge, length, r.maxSize))
	}
	if err := r.readPayload(int(length)); err != nil {
		return nil, r.readFailed(err)
	}
	n, err = io.ReadFull(r.br, r.ftr[:])
	r.off += int64(n)
	if err != nil {
		return nil, r.readFailed(err)
	}
	if got, want := MaskedCRC(r.buf), binary.LittleEndian.Uint32(r.ftr[:]); got != want {
		return nil, r.fail(fmt.Errorf("%w: payload crc %#08x, computed %#08x", ErrChecksum, want, got))
	}
	r.next++
	return r.buf, nil
}

// readPayload reads n bytes into r.buf. Beyond the current capacity it grows the buffer
// only as data arrives (doubling), so a corrupt length cannot force a large allocation.
func (r *Reader) readPayload(n int) error {
	if n <= cap(r.buf) {
		r.buf = r.buf[:n]
		m, err := io.ReadFull(r.br, r.buf)
		r.off += int64(m)
		return err
	}
	r.buf = r.buf[:0]
	for len(r.buf) < n {
		step := min(max(len(r.buf), 64<<10), n-len(r.buf))
		r.buf = append(r.buf, make([]byte, step)...)
		m, err := io.ReadFull(r.br, r.buf[len(r.buf)-step:])
		r.off += int64(m)
		if err != nil {
			return err
		}
	}
	return nil
}

// readFailed handles an error of io.ReadFull inside a record (after its first byte, or at
// its first byte when the source itself reports a truncation).
func (r *Reader) readFailed(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		if r.allowTail {
			r.err = io.EOF
			return io.EOF
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = io.ErrUnexpectedEOF
		}
		return r.fail(fmt.Errorf("%w: %w", ErrTruncated, err))
	}
	return r.fail(err)
}

func (r *Reader) fail(err error) error {
	r.err = &CorruptError{File: r.file, Offset: r.recOff, Record: r.recIdx, Err: err}
	return r.err
}

// Offset returns the byte offset, in the (decompressed) input, of the start of the record
// last returned by Next or of the record that failed; after io.EOF it is the end of the
// input consumed.
func (r *Reader) Offset() int64 { return r.recOff }

// Index returns the 0-based index of the record last returned by Next or of the record
// that failed; after io.EOF it is the number of records read.
func (r *Reader) Index() int64 { return r.recIdx }
