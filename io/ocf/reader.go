package ocf

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync"

	"github.com/golang/snappy"
	"github.com/linkedin/goavro/v2"
)

// Reader reads the header and the blocks of an object container file and hands out a
// Decoder positioned at each item in turn. It checks every count and size against the bytes
// that are left, and the block size against Config.MaxBlockSize, before allocating, so that
// corrupt input cannot exhaust memory.
type Reader struct {
	in    *bufio.Reader
	n     int64 // bytes consumed
	cfg   *Config
	codec string
	meta  map[string][]byte
	sync  [SyncSize]byte

	dec   Decoder // the items left in the current block
	left  int64   // items left in the current block
	off   int64   // file offset of the current block
	items int64   // items handed out by Next
	at    int64   // index of the current item (see Item)
}

// NewReader reads and checks the header: the magic, the metadata, the sync marker, a codec
// this package decodes and the presence of avro.schema. Errors are about the header, at
// offset 0.
func NewReader(r io.Reader, cfg *Config) (*Reader, error) {
	rd := &Reader{in: bufio.NewReaderSize(r, 64<<10), cfg: cfg}
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	return rd, nil
}

// Codec returns the block codec named in the header: Null, Deflate or Snappy.
func (r *Reader) Codec() string { return r.codec }

// Meta returns the header metadata value of key.
func (r *Reader) Meta(key string) ([]byte, bool) {
	v, ok := r.meta[key]
	return v, ok
}

// MatchSchema reports whether the header's avro.schema is want or has the parsing canonical
// form of want. When it has not, got is the file schema's canonical form. A file schema that
// does not parse is an error wrapping Config.ErrFormat.
func (r *Reader) MatchSchema(want string) (got string, ok bool, err error) {
	schema := r.meta["avro.schema"]
	if string(schema) == want {
		return "", true, nil
	}
	w, err := canonical(want)
	if err != nil {
		return "", false, err
	}
	codec, err := goavro.NewCodec(string(schema))
	if err != nil {
		return "", false, fmt.Errorf("%w: avro.schema: %v", r.cfg.ErrFormat, err)
	}
	got = codec.CanonicalSchema()
	return got, got == w, nil
}

// canonicalForms caches the parsing canonical forms of the schemas callers expect.
var canonicalForms sync.Map // schema JSON → canonical form

func canonical(schema string) (string, error) {
	if c, ok := canonicalForms.Load(schema); ok {
		return c.(string), nil
	}
	codec, err := goavro.NewCodec(schema)
	if err != nil {
		return "", fmt.Errorf("io/ocf: the expected schema: %w", err)
	}
	c, _ := canonicalForms.LoadOrStore(schema, codec.CanonicalSchema())
	return c.(string), nil
}

// Next returns the Decoder positioned at the next item, reading the next block when the
// items of the current one are used up. It returns io.EOF only at the end of the input at a
// block boundary. The Decoder is valid until the next call; the caller decodes exactly one
// item from it. After an error other than io.EOF the Reader must not be used again.
func (r *Reader) Next() (*Decoder, error) {
	for r.left == 0 {
		if n := r.dec.Len(); n != 0 {
			return nil, fmt.Errorf("%w: %d bytes after the last %s of the block", r.cfg.ErrFormat, n, r.cfg.Item)
		}
		r.off = r.n
		err := r.readBlock()
		if err == io.EOF {
			return nil, io.EOF
		}
		if err != nil {
			r.at = r.items
			return nil, err
		}
	}
	r.left--
	r.at = r.items
	r.items++
	return &r.dec, nil
}

// Offset returns the file offset of the current block: the block of the item Next returned
// last, or the block a failed Next was reading.
func (r *Reader) Offset() int64 { return r.off }

// Items returns the number of items Next has handed out: the index in the file of the
// item the next call returns.
func (r *Reader) Items() int64 { return r.items }

// Item returns the 0-based index in the file of the current item: the item Next returned
// last, or the item a failed Next is about (the last item of a block followed by stray
// bytes, the first item of a block that could not be read). It is 0 before the first item.
func (r *Reader) Item() int64 { return r.at }

// readHeader reads the magic, the metadata and the sync marker.
func (r *Reader) readHeader() error {
	var m [len(Magic)]byte
	if err := r.full(m[:]); err != nil {
		return err
	}
	if string(m[:]) != Magic {
		return fmt.Errorf("%w: not an Avro object container file (magic %q)", r.cfg.ErrFormat, m[:])
	}
	meta := map[string][]byte{}
	for {
		n, err := r.long()
		if err != nil {
			return r.truncated(err)
		}
		if n == 0 {
			break
		}
		if n < 0 {
			if n == math.MinInt64 {
				return fmt.Errorf("%w: header map count %d", r.cfg.ErrFormat, n)
			}
			n = -n
			if _, err := r.long(); err != nil {
				return r.truncated(err)
			}
		}
		for ; n > 0; n-- {
			k, err := r.bytes(MaxHeaderValue)
			if err != nil {
				return err
			}
			v, err := r.bytes(MaxHeaderValue)
			if err != nil {
				return err
			}
			meta[string(k)] = v
		}
	}
	if err := r.full(r.sync[:]); err != nil {
		return err
	}
	r.meta = meta
	r.codec = string(meta["avro.codec"])
	if r.codec == "" {
		r.codec = Null // the spec's default
	}
	if !KnownCodec(r.codec) {
		return fmt.Errorf("%w: unsupported codec %q", r.cfg.ErrFormat, r.codec)
	}
	if _, ok := meta["avro.schema"]; !ok {
		return fmt.Errorf("%w: no avro.schema in the header", r.cfg.ErrFormat)
	}
	return nil
}

// readBlock reads, checks and decompresses the next block.
func (r *Reader) readBlock() error {
	count, err := r.long()
	if err == io.EOF && r.n == r.off {
		return io.EOF // clean end
	}
	if err != nil {
		return r.truncated(err)
	}
	size, err := r.long()
	if err != nil {
		return r.truncated(err)
	}
	if count <= 0 || size <= 0 || size > int64(r.cfg.MaxBlockSize) {
		return fmt.Errorf("%w: block of %d %s in %d bytes", r.cfg.ErrFormat, count, r.cfg.Items, size)
	}
	data, err := r.n64(size)
	if err != nil {
		return err
	}
	var s [SyncSize]byte
	if err := r.full(s[:]); err != nil {
		return err
	}
	if s != r.sync {
		return fmt.Errorf("%w: sync marker mismatch after the block", r.cfg.ErrFormat)
	}
	switch r.codec {
	case Deflate:
		data, err = r.inflate(data)
	case Snappy:
		data, err = r.unsnappy(data)
	}
	if err != nil {
		return err
	}
	if count > int64(len(data)/r.cfg.MinItemSize) {
		return fmt.Errorf("%w: block claims %d %s in %d bytes", r.cfg.ErrFormat, count, r.cfg.Items, len(data))
	}
	r.dec = NewDecoder(data, r.cfg)
	r.left = count
	return nil
}

// inflate decodes a deflate block of at most MaxBlockSize bytes.
func (r *Reader) inflate(data []byte) ([]byte, error) {
	limit := r.cfg.MaxBlockSize
	fr := flate.NewReader(bytes.NewReader(data))
	out, err := io.ReadAll(io.LimitReader(fr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: deflate: %v", r.cfg.ErrFormat, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: block inflates beyond %d bytes", r.cfg.ErrFormat, limit)
	}
	return out, nil
}

// unsnappy decodes a snappy block of at most MaxBlockSize bytes: snappy data followed by the
// big-endian CRC-32 (IEEE) of the uncompressed data.
func (r *Reader) unsnappy(data []byte) ([]byte, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: snappy block of %d bytes has no checksum", r.cfg.ErrFormat, len(data))
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	n, err := snappy.DecodedLen(body)
	if err != nil || n > r.cfg.MaxBlockSize {
		return nil, fmt.Errorf("%w: snappy block: length %d: %v", r.cfg.ErrFormat, n, err)
	}
	out, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", r.cfg.ErrFormat, err)
	}
	if crc32.ChecksumIEEE(out) != sum {
		return nil, fmt.Errorf("%w: snappy block checksum mismatch", r.cfg.ErrFormat)
	}
	return out, nil
}

// truncated maps an unexpected end of input to Config.ErrTruncated.
func (r *Reader) truncated(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", r.cfg.ErrTruncated, io.ErrUnexpectedEOF)
	}
	return err
}

// full fills p; running out of input is ErrTruncated.
func (r *Reader) full(p []byte) error {
	n, err := io.ReadFull(r.in, p)
	r.n += int64(n)
	return r.truncated(err)
}

// n64 reads n bytes, growing the buffer as data arrives so that a corrupt length does not
// allocate more than the input holds.
func (r *Reader) n64(n int64) ([]byte, error) {
	var buf bytes.Buffer
	m, err := io.CopyN(&buf, r.in, n)
	r.n += m
	if err != nil {
		return nil, r.truncated(err)
	}
	return buf.Bytes(), nil
}

// long reads a zig-zag varint. io.EOF means no byte at all was available.
func (r *Reader) long() (int64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		b, err := r.in.ReadByte()
		if err != nil {
			if shift > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		r.n++
		if shift == 63 && b > 1 {
			return 0, fmt.Errorf("%w: varint overflows 64 bits", r.cfg.ErrFormat)
		}
		u |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
}

// bytes reads an Avro bytes value of at most limit bytes.
func (r *Reader) bytes(limit int64) ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, r.truncated(err)
	}
	if n < 0 || n > limit {
		return nil, fmt.Errorf("%w: header value of %d bytes", r.cfg.ErrFormat, n)
	}
	return r.n64(n)
}
