package compress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// Codec names a whole-stream compression format. The zero value is None.
type Codec int

// The codecs. Their numeric values are ours and differ from Monolith's compression_type
// numbers (see the package documentation for those).
const (
	// None passes bytes through unchanged (Monolith NO and UNKNOW).
	None Codec = iota
	// Snappy is Hadoop block-snappy with big-endian lengths (Monolith SNAPPY).
	Snappy
	// Zstd is a sequence of standard zstd frames (Monolith ZSTD).
	Zstd
	// Zlib is an RFC 1950 zlib stream (Monolith ZLIB).
	Zlib
	// Gzip is an RFC 1952 gzip stream of one or more members (Monolith GZIP).
	Gzip
	// Auto is not a codec: callers resolve it with Detect on a file name. NewReader and
	// NewWriter reject it.
	Auto
)

// validNames lists the names ParseCodec accepts, for error messages.
const validNames = `"" (none), "none", "no", "gzip", "zlib", "snappy", "zstd", "auto"`

// ParseCodec returns the codec named by s, ignoring case. The empty string, "none" and "no"
// name None; "gzip", "zlib", "snappy", "zstd" and "auto" name the others.
func ParseCodec(s string) (Codec, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none", "no":
		return None, nil
	case "snappy":
		return Snappy, nil
	case "zstd":
		return Zstd, nil
	case "zlib":
		return Zlib, nil
	case "gzip":
		return Gzip, nil
	case "auto":
		return Auto, nil
	}
	return None, fmt.Errorf("io/compress: unknown codec %q; valid names: %s", s, validNames)
}

// String returns the lower-case name of c, as accepted by ParseCodec.
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Snappy:
		return "snappy"
	case Zstd:
		return "zstd"
	case Zlib:
		return "zlib"
	case Gzip:
		return "gzip"
	case Auto:
		return "auto"
	}
	return fmt.Sprintf("Codec(%d)", int(c))
}

// Detect picks a codec from the suffix of a file name, ignoring case: ".gz" and ".gzip" give
// Gzip, ".zlib" and ".zz" give Zlib, ".snappy" gives Snappy, ".zst" and ".zstd" give Zstd, and
// anything else gives None. Monolith itself only recognises ".snappy".
func Detect(name string) Codec {
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, ".gz"), strings.HasSuffix(lower, ".gzip"):
		return Gzip
	case strings.HasSuffix(lower, ".zlib"), strings.HasSuffix(lower, ".zz"):
		return Zlib
	case strings.HasSuffix(lower, ".snappy"):
		return Snappy
	case strings.HasSuffix(lower, ".zst"), strings.HasSuffix(lower, ".zstd"):
		return Zstd
	}
	return None
}

// Ext is the file-name suffix writers give the codec's files (".gz", ".zlib", ".snappy",
// ".zst"; "" for None), one Detect maps back to c.
func (c Codec) Ext() string {
	switch c {
	case Gzip:
		return ".gz"
	case Zlib:
		return ".zlib"
	case Snappy:
		return ".snappy"
	case Zstd:
		return ".zst"
	}
	return ""
}

// ErrCorrupt is wrapped by every error caused by damaged or incomplete compressed data.
var ErrCorrupt = errors.New("io/compress: corrupt compressed data")

// ErrTruncated is wrapped, together with ErrCorrupt and io.ErrUnexpectedEOF, by the error a
// reader returns when the compressed stream stops in the middle.
var ErrTruncated = fmt.Errorf("%w: truncated stream", ErrCorrupt)

// Limits applied by readers.
const (
	// MaxSnappyChunk is the largest compressed Hadoop snappy chunk a reader accepts
	// (Monolith's default 64 MiB input buffer, beyond which it fails with ResourceExhausted).
	MaxSnappyChunk = 64 << 20
	// MaxZstdWindow is the largest zstd window a reader accepts (zstd's default limit,
	// 2^27 bytes, the one Monolith's ZSTD_decompressStream uses).
	MaxZstdWindow = 1 << 27
)

// Defaults applied by writers.
const (
	// DefaultSnappyBlockSize is the uncompressed size of a Hadoop snappy block (Hadoop's
	// io.compression.codec.snappy.buffersize default).
	DefaultSnappyBlockSize = 256 << 10
)

// Option configures NewReader or NewWriter.
type Option func(*options)

type options struct {
	level      int
	levelSet   bool
	blockSize  int
	chunkSize  int
	bufferSize int
}

// WithLevel sets the compression level of a writer: a flate level (1..9, -1 default, -2
// Huffman only) for Gzip and Zlib, a zstd level (1..22) for Zstd. Ignored for None and Snappy.
func WithLevel(level int) Option {
	return func(o *options) { o.level, o.levelSet = level, true }
}

// WithSnappyBlockSize sets the uncompressed size of the Hadoop snappy blocks a writer emits
// (default DefaultSnappyBlockSize; values < 1 or above 1<<30 keep the default).
func WithSnappyBlockSize(n int) Option {
	return func(o *options) {
		if n > 0 && n <= 1<<30 {
			o.blockSize = n
		}
	}
}

// WithSnappyChunkSize sets the uncompressed size of each snappy chunk inside a block
// (default: the block size, i.e. one chunk per block; values < 1 keep the default).
func WithSnappyChunkSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.chunkSize = n
		}
	}
}

// WithBufferSize sets the size of the read buffer placed in front of the compressed source
// (default 64 KiB; values < 16 keep the default).
func WithBufferSize(n int) Option {
	return func(o *options) {
		if n >= 16 {
			o.bufferSize = n
		}
	}
}

func buildOptions(opts []Option) options {
	o := options{blockSize: DefaultSnappyBlockSize, bufferSize: 64 << 10}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.chunkSize == 0 || o.chunkSize > o.blockSize {
		o.chunkSize = o.blockSize
	}
	return o
}

func checkCodec(c Codec) error {
	switch c {
	case None, Snappy, Zstd, Zlib, Gzip:
		return nil
	case Auto:
		return errors.New("io/compress: codec auto must be resolved with Detect before use")
	}
	return fmt.Errorf("io/compress: invalid codec %v", c)
}

// NewReader returns a reader of the bytes that r decompresses to under codec c. The
// decompressor starts on the first Read. Errors caused by damaged data wrap ErrCorrupt; see
// the package documentation for the EOF contract. Close releases the decompressor (it does
// not close r). For None the result passes reads straight to r.
func NewReader(r io.Reader, c Codec, opts ...Option) (io.ReadCloser, error) {
	if err := checkCodec(c); err != nil {
		return nil, err
	}
	if c == None {
		return io.NopCloser(r), nil
	}
	o := buildOptions(opts)
	t := &tracker{r: r}
	return &reader{codec: c, trk: t, src: bufio.NewReaderSize(t, o.bufferSize)}, nil
}

// tracker remembers the first I/O error of the underlying reader, so that decompressor
// errors can be told apart from I/O errors. It sits below the bufio.Reader handed to the
// decompressors, which have fast paths for *bufio.Reader.
type tracker struct {
	r   io.Reader
	err error
}

func (t *tracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

var errClosed = errors.New("io/compress: read after Close")

type reader struct {
	codec Codec
	trk   *tracker
	src   *bufio.Reader
	dec   io.Reader
	zdec  *zstd.Decoder
	err   error // sticky: io.EOF or the first error
}

// atEOF reports whether the compressed input has no more bytes.
func (r *reader) atEOF() (bool, error) {
	_, err := r.src.Peek(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

func (r *reader) start() error {
	empty, err := r.atEOF()
	if err != nil {
		return r.classify(err)
	}
	if empty {
		return io.EOF // an empty input is an empty stream
	}
	switch r.codec {
	case Gzip:
		zr, err := gzip.NewReader(r.src)
		if err != nil {
			return r.classify(err)
		}
		r.dec = zr
	case Zlib:
		zr, err := zlib.NewReader(r.src)
		if err != nil {
			return r.classify(err)
		}
		r.dec = zr
	case Zstd:
		zr, err := zstd.NewReader(r.src,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(MaxZstdWindow),
			zstd.WithDecoderMaxMemory(MaxZstdWindow))
		if err != nil {
			return fmt.Errorf("io/compress: start zstd decoder: %w", err)
		}
		r.dec, r.zdec = zr, zr
	case Snappy:
		r.dec = newSnappyReader(r.src)
	}
	return nil
}

// Read implements io.Reader.
func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.dec == nil {
		if err := r.start(); err != nil {
			r.err = err
			return 0, err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := r.dec.Read(p)
	if err != nil {
		err = r.classify(err)
		r.err = err
	}
	return n, err
}

// classify turns a decompressor error into the documented error kinds.
func (r *reader) classify(err error) error {
	if r.trk.err != nil {
		return fmt.Errorf("io/compress: read %s stream: %w", r.codec, r.trk.err)
	}
	if err == io.EOF {
		if r.codec == Zlib {
			// A zlib stream has one member; bytes after it would be silently lost.
			empty, perr := r.atEOF()
			if perr != nil {
				return fmt.Errorf("io/compress: read %s stream: %w", r.codec, perr)
			}
			if !empty {
				return fmt.Errorf("%w (%s): trailing data after the end of the stream", ErrCorrupt, r.codec)
			}
		}
		return io.EOF
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w (%s): %w", ErrTruncated, r.codec, io.ErrUnexpectedEOF)
	}
	if errors.Is(err, ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w (%s): %w", ErrCorrupt, r.codec, err)
}

// Close releases the decompressor; it does not close the underlying reader.
func (r *reader) Close() error {
	if r.zdec != nil {
		r.zdec.Close()
		r.zdec = nil
	}
	r.dec = nil
	r.err = errClosed
	return nil
}

// NewWriter returns a writer that compresses into w under codec c. Close flushes all pending
// data and writes any trailer; it does not close w. For None, writes go straight to w.
func NewWriter(w io.Writer, c Codec, opts ...Option) (io.WriteCloser, error) {
	if err := checkCodec(c); err != nil {
		return nil, err
	}
	o := buildOptions(opts)
	switch c {
	case Gzip:
		level := gzip.DefaultCompression
		if o.levelSet {
			level = o.level
		}
		zw, err := gzip.NewWriterLevel(w, level)
		if err != nil {
			return nil, fmt.Errorf("io/compress: gzip writer: %w", err)
		}
		return zw, nil
	case Zlib:
		level := flate.DefaultCompression
		if o.levelSet {
			level = o.level
		}
		zw, err := zlib.NewWriterLevel(w, level)
		if err != nil {
			return nil, fmt.Errorf("io/compress: zlib writer: %w", err)
		}
		return zw, nil
	case Zstd:
		zopts := []zstd.EOption{zstd.WithEncoderConcurrency(1)}
		if o.levelSet {
			zopts = append(zopts, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(o.level)))
		}
		zw, err := zstd.NewWriter(w, zopts...)
		if err != nil {
			return nil, fmt.Errorf("io/compress: zstd writer: %w", err)
		}
		return zw, nil
	case Snappy:
		return newSnappyWriter(w, o.blockSize, o.chunkSize), nil
	}
	return nopWriteCloser{w}, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
