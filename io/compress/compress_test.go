package compress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/golang/snappy"
)

var realCodecs = []Codec{None, Snappy, Zstd, Zlib, Gzip}

func TestParseCodec(t *testing.T) {
	tests := []struct {
		in      string
		want    Codec
		wantErr bool
	}{
		{"", None, false},
		{"none", None, false},
		{"NO", None, false},
		{"gzip", Gzip, false},
		{"GZIP", Gzip, false},
		{"Zlib", Zlib, false},
		{"snappy", Snappy, false},
		{"zstd", Zstd, false},
		{"auto", Auto, false},
		{"lz4", None, true},
		{"gz", None, true},
	}
	for _, tt := range tests {
		got, err := ParseCodec(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseCodec(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if err != nil {
			for _, name := range []string{"none", "gzip", "zlib", "snappy", "zstd", "auto"} {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("ParseCodec(%q) error %q does not list %q", tt.in, err, name)
				}
			}
			continue
		}
		if got != tt.want {
			t.Errorf("ParseCodec(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if tt.in != "" && !strings.EqualFold(tt.in, "no") {
			if back, _ := ParseCodec(got.String()); back != got {
				t.Errorf("ParseCodec(%v.String()) = %v", got, back)
			}
		}
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name string
		want Codec
	}{
		{"part-00000.gz", Gzip},
		{"a/b/c.GZIP", Gzip},
		{"x.zlib", Zlib},
		{"x.zz", Zlib},
		{"/data/20240101/part.snappy", Snappy},
		{"x.zst", Zstd},
		{"x.ZSTD", Zstd},
		{"x.tfrecord", None},
		{"x.gz.tmp", None},
		{"-", None},
		{"", None},
	}
	for _, tt := range tests {
		if got := Detect(tt.name); got != tt.want {
			t.Errorf("Detect(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestAutoAndInvalidRejected(t *testing.T) {
	for _, c := range []Codec{Auto, Codec(42), Codec(-1)} {
		if _, err := NewReader(bytes.NewReader(nil), c); err == nil {
			t.Errorf("NewReader(%v) succeeded", c)
		}
		if _, err := NewWriter(io.Discard, c); err == nil {
			t.Errorf("NewWriter(%v) succeeded", c)
		}
	}
}

func compressBytes(t testing.TB, c Codec, data []byte, opts ...Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	// Write in uneven pieces to exercise buffering.
	for rest, i := data, 1; len(rest) > 0; i = i*3 + 1 {
		n := min(i, len(rest))
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decompressBytes(c Codec, data []byte) ([]byte, error) {
	r, err := NewReader(bytes.NewReader(data), c)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func testPayloads(seed uint64) map[string][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	random := make([]byte, 300<<10)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	text := bytes.Repeat([]byte("monolith training data "), 40000)
	return map[string][]byte{
		"empty":  {},
		"one":    {0x42},
		"small":  []byte("hello, monolith"),
		"random": random,
		"text":   text,
	}
}

func TestRoundTrip(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	optSets := map[string][]Option{
		"default":     nil,
		"smallblocks": {WithSnappyBlockSize(1000), WithSnappyChunkSize(300), WithLevel(1)},
		"level9":      {WithLevel(9), WithBufferSize(17)},
	}
	for name, data := range testPayloads(seed) {
		for _, c := range realCodecs {
			for oname, opts := range optSets {
				comp := compressBytes(t, c, data, opts...)
				got, err := decompressBytes(c, comp)
				if err != nil {
					t.Fatalf("%s/%v/%s: %v", name, c, oname, err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("%s/%v/%s: round trip mismatch (got %d bytes, want %d)", name, c, oname, len(got), len(data))
				}
			}
		}
	}
}

func TestEmptyInputIsEmptyStream(t *testing.T) {
	for _, c := range realCodecs {
		got, err := decompressBytes(c, nil)
		if err != nil || len(got) != 0 {
			t.Errorf("%v: empty input gave %d bytes, %v", c, len(got), err)
		}
	}
}

func TestPythonGolden(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "plain.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file string
		c    Codec
	}{
		{"python_zlib.zz", Zlib},
		{"python_gzip.gz", Gzip},
	} {
		comp, err := os.ReadFile(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if d := Detect(tt.file); d != tt.c {
			t.Errorf("Detect(%s) = %v", tt.file, d)
		}
		got, err := decompressBytes(tt.c, comp)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: decoded %q, want %q", tt.file, got, want)
		}
	}
}

// hadoopBlock builds one Hadoop snappy block by hand from the given chunks.
func hadoopBlock(chunks ...[]byte) []byte {
	var out []byte
	total := 0
	for _, c := range chunks {
		total += len(c)
	}
	out = binary.BigEndian.AppendUint32(out, uint32(total))
	for _, c := range chunks {
		enc := snappy.Encode(nil, c)
		out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
		out = append(out, enc...)
	}
	return out
}

func TestHadoopSnappyHandBuilt(t *testing.T) {
	a := bytes.Repeat([]byte("a"), 300) // 300 = 0x012c: a little-endian reader would misread it
	b := []byte("second chunk of block one")
	c := []byte("block two, single chunk")
	var stream []byte
	stream = append(stream, hadoopBlock(a, b)...)
	stream = append(stream, 0, 0, 0, 0) // an empty block is skipped
	stream = append(stream, hadoopBlock(c)...)
	if got := stream[:4]; !bytes.Equal(got, []byte{0, 0, 0x01, 0x45}) {
		t.Fatalf("block length bytes %x, want big-endian 00000145", got)
	}
	got, err := decompressBytes(Snappy, stream)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte{}, a...), b...), c...)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// parseHadoop splits a Hadoop snappy stream into block lengths and chunk counts.
func parseHadoop(t *testing.T, s []byte) (blocks []uint32, chunks []int) {
	t.Helper()
	for len(s) > 0 {
		blen := binary.BigEndian.Uint32(s)
		s = s[4:]
		n, decoded := 0, 0
		for decoded < int(blen) {
			clen := binary.BigEndian.Uint32(s)
			d, err := snappy.Decode(nil, s[4:4+clen])
			if err != nil {
				t.Fatal(err)
			}
			decoded += len(d)
			s = s[4+clen:]
			n++
		}
		if decoded != int(blen) {
			t.Fatalf("block decodes to %d bytes, header says %d", decoded, blen)
		}
		blocks = append(blocks, blen)
		chunks = append(chunks, n)
	}
	return blocks, chunks
}

func TestHadoopSnappyWriterLayout(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 25) // 250 bytes
	comp := compressBytes(t, Snappy, data, WithSnappyBlockSize(100), WithSnappyChunkSize(30))
	blocks, chunks := parseHadoop(t, comp)
	if want := []uint32{100, 100, 50}; !equalSlices(blocks, want) {
		t.Errorf("block lengths %v, want %v", blocks, want)
	}
	if want := []int{4, 4, 2}; !equalSlices(chunks, want) {
		t.Errorf("chunks per block %v, want %v", chunks, want)
	}
	if comp[0] != 0 || comp[3] != 100 {
		t.Errorf("first block header % x is not big-endian 100", comp[:4])
	}
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestZstdConcatenatedFrames(t *testing.T) {
	one := compressBytes(t, Zstd, []byte("first frame|"))
	two := compressBytes(t, Zstd, []byte("second frame"))
	// A skippable frame (magic 0x184D2A50, u32 LE size) between them is ignored.
	skip := []byte{0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'x', 'y', 'z'}
	stream := append(append(append([]byte{}, one...), skip...), two...)
	got, err := decompressBytes(Zstd, stream)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "first frame|second frame" {
		t.Fatalf("got %q", got)
	}
}

func TestGzipMultiMember(t *testing.T) {
	stream := append(compressBytes(t, Gzip, []byte("member one|")), compressBytes(t, Gzip, []byte("member two"))...)
	got, err := decompressBytes(Gzip, stream)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "member one|member two" {
		t.Fatalf("got %q", got)
	}
}

func TestZlibTrailingData(t *testing.T) {
	stream := append(compressBytes(t, Zlib, []byte("payload")), 0x00)
	got, err := decompressBytes(Zlib, stream)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %q, %v; want ErrCorrupt for trailing data", got, err)
	}
}

func TestTruncatedEveryByte(t *testing.T) {
	data := bytes.Repeat([]byte("hello world monolith "), 500)
	for _, c := range realCodecs[1:] {
		full := compressBytes(t, c, data, WithSnappyBlockSize(4000), WithSnappyChunkSize(1000))
		// Hadoop snappy has no end marker: a cut exactly between blocks is a valid, shorter
		// stream. Every other cut must be reported.
		boundary := map[int]bool{}
		if c == Snappy {
			blocks, _ := parseHadoop(t, full)
			off := 0
			for range blocks {
				blen := int(binary.BigEndian.Uint32(full[off:]))
				off += 4
				for decoded := 0; decoded < blen; {
					clen := int(binary.BigEndian.Uint32(full[off:]))
					n, _ := snappy.DecodedLen(full[off+4 : off+4+clen])
					decoded += n
					off += 4 + clen
				}
				boundary[off] = true
			}
			if len(boundary) != 3 {
				t.Fatalf("expected 3 snappy blocks, found %d", len(boundary))
			}
		}
		for i := 1; i < len(full); i++ {
			got, err := decompressBytes(c, full[:i])
			if boundary[i] {
				if err != nil || !bytes.HasPrefix(data, got) || len(got)%4000 != 0 {
					t.Fatalf("%v cut at block boundary %d: %d bytes, %v", c, i, len(got), err)
				}
				continue
			}
			if !errors.Is(err, ErrTruncated) || !errors.Is(err, ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%v truncated at %d/%d: got %d bytes, err %v; want ErrTruncated", c, i, len(full), len(got), err)
			}
			if !bytes.HasPrefix(data, got) {
				t.Fatalf("%v truncated at %d: delivered bytes are not a prefix of the data", c, i)
			}
		}
	}
}

func TestCorruptData(t *testing.T) {
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	enc := snappy.Encode(nil, []byte("0123456789"))
	tests := []struct {
		name string
		c    Codec
		in   []byte
		msg  string
	}{
		{"gzip garbage", Gzip, []byte("not gzip at all"), ""},
		{"zlib garbage", Zlib, []byte("not zlib at all"), ""},
		{"zstd garbage", Zstd, []byte("not zstd at all"), ""},
		{"snappy empty chunk", Snappy, cat(u32(10), u32(0)), "empty chunk"},
		{"snappy huge chunk", Snappy, cat(u32(10), u32(MaxSnappyChunk+1)), "exceeds"},
		{"snappy overrun", Snappy, cat(u32(5), u32(uint32(len(enc))), enc), "past the end"},
		{"snappy expansion", Snappy, cat(u32(1<<30), u32(5), []byte{0x80, 0x80, 0x80, 0x80, 0x01}), "impossible"},
		{"snappy bad chunk", Snappy, cat(u32(10), u32(3), []byte{10, 0xff, 0xff}), ""},
	}
	for _, tt := range tests {
		_, err := decompressBytes(tt.c, tt.in)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: err %v; want ErrCorrupt containing %q", tt.name, err, tt.msg)
		}
		if errors.Is(err, ErrTruncated) {
			t.Errorf("%s: err %v is not a truncation", tt.name, err)
		}
	}
}

func TestChecksumErrors(t *testing.T) {
	data := bytes.Repeat([]byte("checksummed "), 100)
	for _, c := range []Codec{Gzip, Zlib, Zstd} {
		comp := compressBytes(t, c, data)
		bad := append([]byte{}, comp...)
		bad[len(bad)-5] ^= 0x01 // inside the trailer checksum
		got, err := decompressBytes(c, bad)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v: flipped trailer gave %d bytes, err %v; want ErrCorrupt", c, len(got), err)
		}
	}
}

type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestIOErrorIsNotCorruption(t *testing.T) {
	ioErr := errors.New("disk on fire")
	data := bytes.Repeat([]byte("x"), 10000)
	for _, c := range realCodecs {
		comp := compressBytes(t, c, data)
		r, err := NewReader(&failingReader{data: comp[:len(comp)/2], err: ioErr}, c)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(r)
		if !errors.Is(err, ioErr) || errors.Is(err, ErrCorrupt) {
			t.Errorf("%v: err %v; want the I/O error without ErrCorrupt", c, err)
		}
	}
}

func TestReadAfterClose(t *testing.T) {
	comp := compressBytes(t, Zstd, []byte("abc"))
	r, _ := NewReader(bytes.NewReader(comp), Zstd)
	if _, err := r.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after Close succeeded")
	}
}

func TestSnappyWriteAfterClose(t *testing.T) {
	w, _ := NewWriter(io.Discard, Snappy)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("write after Close succeeded")
	}
}

func TestExtRoundTrip(t *testing.T) {
	for _, c := range []Codec{None, Gzip, Zlib, Snappy, Zstd} {
		if got := Detect("f.pb" + c.Ext()); got != c {
			t.Errorf("Detect(%q) = %v, want %v", "f.pb"+c.Ext(), got, c)
		}
	}
}
