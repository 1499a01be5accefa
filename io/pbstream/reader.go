package pbstream

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// ReaderOption configures a Reader.
type ReaderOption func(*Reader)

// WithFile sets the file name reported in errors.
func WithFile(name string) ReaderOption { return func(r *Reader) { r.file = name } }

// WithMaxRecordSize sets the largest payload or sort id accepted (default
// DefaultMaxRecordSize); n <= 0 keeps the default.
func WithMaxRecordSize(n int64) ReaderOption {
	return func(r *Reader) {
		if n > 0 {
			r.maxSize = n
		}
	}
}

// WithAllowTruncatedTail makes a partial last record end the stream with io.EOF instead of
// an ErrTruncated error, as Monolith does for plain, snappy, zlib and gzip input.
func WithAllowTruncatedTail(allow bool) ReaderOption {
	return func(r *Reader) { r.allowTail = allow }
}

// WithBufferSize sets the read buffer size (default DefaultBufferSize); n < 16 keeps it.
func WithBufferSize(n int) ReaderOption {
	return func(r *Reader) {
		if n >= 16 {
			r.bufSize = n
		}
	}
}

// Reader reads PB-stream records. The zero value is not usable; call NewReader.
type Reader struct {
	br        *bufio.Reader
	o         Options
	file      string
	maxSize   int64
	allowTail bool
	bufSize   int

	u64     [8]byte
	payload []byte // reused between records
	sortID  []byte // reused between records

	off      int64 // bytes consumed so far
	next     int64 // index of the next record
	recStart int64 // offset of the record being read
	err      error // sticky terminal state (io.EOF or an error)
}

// NewReader returns a Reader of the records in r framed according to o. Reads from r are
// buffered, so the reader may read past the last record it returns.
func NewReader(r io.Reader, o Options, opts ...ReaderOption) *Reader {
	rd := &Reader{
		o:       o,
		maxSize: DefaultMaxRecordSize,
		bufSize: DefaultBufferSize,
		payload: make([]byte, 0, 512),
		sortID:  make([]byte, 0, 64),
	}
	for _, opt := range opts {
		if opt != nil {
			opt(rd)
		}
	}
	rd.maxSize = min(rd.maxSize, math.MaxInt) // lengths are converted to int
	rd.br = bufio.NewReaderSize(r, rd.bufSize)
	return rd
}

// Options returns the framing options of the reader.
func (r *Reader) Options() Options { return r.o }

// SetPayloadBuffer makes buf's memory the buffer that payloads are read into, so that a
// caller reading file after file can hand one reader's buffer (PayloadBuffer) to the next
// instead of growing a new one per file. Call it before Next; a nil or empty buf is
// ignored.
func (r *Reader) SetPayloadBuffer(buf []byte) {
	if cap(buf) > cap(r.payload) {
		r.payload = buf[:0]
	}
}

// PayloadBuffer returns the payload buffer, grown to the largest record read so far. The
// reader must not be used after it has been handed on.
func (r *Reader) PayloadBuffer() []byte { return r.payload[:0] }

// Next returns the next record. Its Payload and SortID are valid until the next call to
// Next. It returns io.EOF only at a clean end of the input (see the package documentation);
// every other failure is a *CorruptError. After an error or io.EOF, Next keeps returning it.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	r.recStart = r.off
	rec := Record{Offset: r.off, Index: r.next}
	if r.o.LagrangeX {
		h, err := r.readU64()
		if err != nil {
			return Record{}, err
		}
		rec.DataSourceKey, rec.PBType = ParseLagrangeXHeader(h)
	} else {
		var aggregated uint64 // non-zero A of the Kafka dump prefix: the sort-id length
		if r.o.KafkaDumpPrefix {
			a, err := r.readU64()
			if err != nil {
				return Record{}, err
			}
			if a == 0 {
				if _, err := r.readU64(); err != nil {
					return Record{}, err
				}
			} else {
				aggregated = a
			}
		}
		if r.o.HasSortID {
			n := aggregated
			if n == 0 {
				var err error
				if n, err = r.readU64(); err != nil {
					return Record{}, err
				}
			}
			if err := r.checkLength(n, "sort id"); err != nil {
				return Record{}, err
			}
			var err error
			if r.sortID, err = r.readBytes(r.sortID, int(n)); err != nil {
				return Record{}, r.readFailed(err)
			}
			rec.SortID = r.sortID
		}
		if r.o.KafkaDump {
			if _, err := r.readU64(); err != nil {
				return Record{}, err
			}
		}
	}
	n, err := r.readU64()
	if err != nil {
		return Record{}, err
	}
	if n == SentinelLength {
		return Record{}, r.fail(fmt.Errorf("%w: payload length %#x", ErrSentinel, n))
	}
	if err := r.checkLength(n, "payload"); err != nil {
		return Record{}, err
	}
	if r.payload, err = r.readBytes(r.payload, int(n)); err != nil {
		return Record{}, r.readFailed(err)
	}
	rec.Payload = r.payload
	r.next++
	return rec, nil
}

func (r *Reader) checkLength(n uint64, what string) error {
	if n >= maxLength {
		return r.fail(fmt.Errorf("%w: %s length %d (check the framing options %+v)", ErrTooLarge, what, n, r.o))
	}
	if n > uint64(r.maxSize) {
		return r.fail(fmt.Errorf("%w: %s length %d exceeds the limit of %d bytes (check the framing options %+v)",
			ErrTooLarge, what, n, r.maxSize, r.o))
	}
	return nil
}

// readU64 reads one little-endian u64. io.EOF before the first byte of a record is the
// clean end of the stream.
func (r *Reader) readU64() (uint64, error) {
	n, err := io.ReadFull(r.br, r.u64[:])
	r.off += int64(n)
	if err != nil {
		if err == io.EOF && r.off == r.recStart {
			r.err = io.EOF
			return 0, io.EOF
		}
		return 0, r.readFailed(err)
	}
	return binary.LittleEndian.Uint64(r.u64[:]), nil
}

// readBytes reads n bytes into buf (reused). Beyond its capacity the buffer grows only as
// data arrives (doubling), so a corrupt length cannot force a large allocation.
func (r *Reader) readBytes(buf []byte, n int) ([]byte, error) {
	if n <= cap(buf) {
		buf = buf[:n]
		m, err := io.ReadFull(r.br, buf)
		r.off += int64(m)
		return buf, err
	}
	buf = buf[:0]
	for len(buf) < n {
		step := min(max(len(buf), 64<<10), n-len(buf))
		buf = append(buf, make([]byte, step)...)
		m, err := io.ReadFull(r.br, buf[len(buf)-step:])
		r.off += int64(m)
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// readFailed handles a read error inside a record.
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
	r.err = &CorruptError{File: r.file, Offset: r.recStart, Record: r.next, Err: err}
	return r.err
}
