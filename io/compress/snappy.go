package compress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/golang/snappy"
)

// snappyMaxExpansion bounds how many bytes one compressed snappy byte can decode to: the
// densest element is a 3-byte copy of 64 bytes (64/3 < 22). A chunk that claims more is
// corrupt; the bound keeps allocations proportional to the input actually read.
const snappyMaxExpansion = 22

// snappyReader decodes Hadoop block-snappy from src.
type snappyReader struct {
	src       io.Reader
	hdr       [4]byte
	blockLeft uint64 // uncompressed bytes still expected in the current block
	inBlock   bool   // a block header has been read and the block is not complete
	chunk     []byte // compressed chunk, reused
	out       []byte // decoded chunk, reused
	pos       int    // read position in out
}

func newSnappyReader(src io.Reader) *snappyReader { return &snappyReader{src: src} }

var (
	errSnappyChunkEmpty = errors.New("snappy: empty chunk")
	errSnappyOverrun    = errors.New("snappy: chunk decodes past the end of its block")
	errSnappyExpansion  = errors.New("snappy: chunk claims an impossible decoded size")
)

func (s *snappyReader) readU32() (uint32, error) {
	if _, err := io.ReadFull(s.src, s.hdr[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(s.hdr[:]), nil
}

// Read implements io.Reader.
func (s *snappyReader) Read(p []byte) (int, error) {
	for s.pos == len(s.out) {
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.out[s.pos:])
	s.pos += n
	return n, nil
}

// fill decodes the next chunk into s.out.
func (s *snappyReader) fill() error {
	for !s.inBlock {
		n, err := s.readU32()
		if err != nil {
			return err // io.EOF at a block boundary is the clean end
		}
		if n > 0 {
			s.blockLeft, s.inBlock = uint64(n), true
		}
	}
	clen, err := s.readU32()
	if err != nil {
		return noEOF(err)
	}
	if clen == 0 {
		return errSnappyChunkEmpty
	}
	if clen > MaxSnappyChunk {
		return fmt.Errorf("snappy: compressed chunk of %d bytes exceeds the %d-byte limit", clen, MaxSnappyChunk)
	}
	if err := s.readChunk(int(clen)); err != nil {
		return noEOF(err)
	}
	dlen, err := snappy.DecodedLen(s.chunk)
	if err != nil {
		return err
	}
	if uint64(dlen) > s.blockLeft {
		return fmt.Errorf("%w (%d bytes, %d left in block)", errSnappyOverrun, dlen, s.blockLeft)
	}
	if dlen > snappyMaxExpansion*len(s.chunk) {
		return fmt.Errorf("%w (%d bytes from %d)", errSnappyExpansion, dlen, len(s.chunk))
	}
	if cap(s.out) < dlen {
		s.out = make([]byte, dlen)
	}
	out, err := snappy.Decode(s.out[:cap(s.out)], s.chunk)
	if err != nil {
		return err
	}
	s.out, s.pos = out, 0
	s.blockLeft -= uint64(len(out))
	if s.blockLeft == 0 {
		s.inBlock = false
	}
	return nil
}

// readChunk reads n compressed bytes into s.chunk, growing the buffer only as data arrives
// so that a corrupt length cannot force a large allocation.
func (s *snappyReader) readChunk(n int) error {
	if cap(s.chunk) >= n {
		s.chunk = s.chunk[:n]
		_, err := io.ReadFull(s.src, s.chunk)
		return err
	}
	s.chunk = s.chunk[:0]
	for len(s.chunk) < n {
		step := max(len(s.chunk), 64<<10)
		step = min(step, n-len(s.chunk))
		s.chunk = append(s.chunk, make([]byte, step)...)
		if _, err := io.ReadFull(s.src, s.chunk[len(s.chunk)-step:]); err != nil {
			return err
		}
	}
	return nil
}

// noEOF turns an io.EOF inside a block into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// snappyWriter encodes Hadoop block-snappy into w.
type snappyWriter struct {
	w         io.Writer
	blockSize int
	chunkSize int
	buf       []byte // pending uncompressed bytes, at most blockSize
	enc       []byte // encoded chunk, reused
	hdr       [4]byte
	err       error
	closed    bool
}

func newSnappyWriter(w io.Writer, blockSize, chunkSize int) *snappyWriter {
	return &snappyWriter{w: w, blockSize: blockSize, chunkSize: chunkSize}
}

// Write implements io.Writer.
func (s *snappyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.closed {
		return 0, errors.New("io/compress: snappy write after Close")
	}
	written := 0
	for len(p) > 0 {
		if s.buf == nil {
			s.buf = make([]byte, 0, min(s.blockSize, max(len(p), 4<<10)))
		}
		n := min(len(p), s.blockSize-len(s.buf))
		s.buf = append(s.buf, p[:n]...)
		p = p[n:]
		written += n
		if len(s.buf) == s.blockSize {
			if err := s.flushBlock(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

func (s *snappyWriter) writeU32(v uint32) error {
	binary.BigEndian.PutUint32(s.hdr[:], v)
	_, err := s.w.Write(s.hdr[:])
	return err
}

func (s *snappyWriter) flushBlock() error {
	if len(s.buf) == 0 {
		return nil
	}
	if err := s.writeU32(uint32(len(s.buf))); err != nil {
		s.err = fmt.Errorf("io/compress: write snappy block: %w", err)
		return s.err
	}
	for rest := s.buf; len(rest) > 0; {
		n := min(len(rest), s.chunkSize)
		if need := snappy.MaxEncodedLen(n); cap(s.enc) < need {
			s.enc = make([]byte, need)
		}
		enc := snappy.Encode(s.enc[:cap(s.enc)], rest[:n])
		if err := s.writeU32(uint32(len(enc))); err != nil {
			s.err = fmt.Errorf("io/compress: write snappy chunk: %w", err)
			return s.err
		}
		if _, err := s.w.Write(enc); err != nil {
			s.err = fmt.Errorf("io/compress: write snappy chunk: %w", err)
			return s.err
		}
		rest = rest[n:]
	}
	s.buf = s.buf[:0]
	return nil
}

// Close writes the pending partial block; it does not close the underlying writer.
func (s *snappyWriter) Close() error {
	if s.closed {
		return s.err
	}
	s.closed = true
	if s.err != nil {
		return s.err
	}
	return s.flushBlock()
}
