package recordio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/tfrecord"
)

var codecs = []compress.Codec{compress.None, compress.Snappy, compress.Zstd, compress.Zlib, compress.Gzip}

var framings = []Framing{PBStream, TFRecord}

// pbOpts is the PB-stream configuration of the matrix tests (FilePBDataset's default).
var pbOpts = pbstream.Options{HasSortID: true}

// testRecords returns records of varied sizes, including an empty one.
func testRecords(f Framing) []Record {
	var recs []Record
	for i := range 9 {
		rec := Record{Payload: bytes.Repeat([]byte{byte('a' + i)}, (i*29)%97)}
		if f == PBStream {
			rec.SortID = []byte(fmt.Sprintf("user-%d", i))
		}
		recs = append(recs, rec)
	}
	return recs
}

// framed returns the uncompressed stream of recs and the offsets of each record (plus the end).
func framed(t testing.TB, f Framing, recs []Record) ([]byte, []int64) {
	t.Helper()
	var buf bytes.Buffer
	var offsets []int64
	for _, rec := range recs {
		offsets = append(offsets, int64(buf.Len()))
		w, err := NewWriter(&buf, Options{Framing: f, PB: pbOpts})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes(), append(offsets, int64(buf.Len()))
}

// compressed compresses plain with c; snappy uses small blocks and chunks so that cuts
// land inside and between blocks.
func compressed(t testing.TB, c compress.Codec, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := compress.NewWriter(&buf, c, compress.WithSnappyBlockSize(200), compress.WithSnappyChunkSize(64))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll reads every record of data, copying payloads, and returns them with the final error.
func readAll(data []byte, name string, o Options) ([]Record, error) {
	r, err := NewReader(bytes.NewReader(data), name, o)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Record
	for {
		rec, err := r.Next()
		if err != nil {
			return out, err
		}
		rec.Payload = bytes.Clone(rec.Payload)
		rec.SortID = bytes.Clone(rec.SortID)
		out = append(out, rec)
	}
}

func sameRecords(t *testing.T, ctx string, got, want []Record, offsets []int64) {
	t.Helper()
	for i := range got {
		if i >= len(want) {
			t.Fatalf("%s: extra record %d", ctx, i)
		}
		g, w := got[i], want[i]
		if !bytes.Equal(g.Payload, w.Payload) || !bytes.Equal(g.SortID, w.SortID) || g.Index != int64(i) || g.Offset != offsets[i] {
			t.Fatalf("%s: record %d = {%q %q idx %d off %d}, want {%q %q idx %d off %d}",
				ctx, i, g.Payload, g.SortID, g.Index, g.Offset, w.Payload, w.SortID, i, offsets[i])
		}
	}
}

func TestRoundTripMatrix(t *testing.T) {
	for _, f := range framings {
		for _, c := range codecs {
			recs := testRecords(f)
			var buf bytes.Buffer
			w, err := NewWriter(&buf, Options{Framing: f, Codec: c, PB: pbOpts})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				if err := w.WriteRecord(rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			_, offsets := framed(t, f, recs)
			got, err := readAll(buf.Bytes(), "x", Options{Framing: f, Codec: c, PB: pbOpts})
			if err != io.EOF || len(got) != len(recs) {
				t.Fatalf("%v/%v: %d records, %v", f, c, len(got), err)
			}
			sameRecords(t, fmt.Sprintf("%v/%v", f, c), got, recs, offsets)
		}
	}
}

// TestTruncationMatrix cuts every framing x codec file at every byte. The oracle is the
// decompressor itself: the bytes it yields from the cut file decide how many records are
// complete, and whether the end is clean.
func TestTruncationMatrix(t *testing.T) {
	for _, f := range framings {
		for _, c := range codecs {
			recs := testRecords(f)
			plain, offsets := framed(t, f, recs)
			file := compressed(t, c, plain)
			for cut := 0; cut < len(file); cut++ {
				checkCut(t, f, c, file, cut, recs, offsets)
			}
		}
	}
}

// TestTruncationMatrixLarge repeats the check on files big enough for every decompressor to
// deliver data before the cut (several zstd blocks, deflate blocks and snappy blocks), with
// a dense sample of cut points.
func TestTruncationMatrixLarge(t *testing.T) {
	const seed = 20240601
	t.Logf("seed %d", seed)
	for _, f := range framings {
		recs := largeRecords(f, seed)
		plain, offsets := framed(t, f, recs)
		for _, c := range codecs {
			file := compressed(t, c, plain)
			samples := 40
			if raceEnabled {
				samples = 4
			}
			step := max(1, len(file)/samples)
			for cut := 0; cut < len(file); cut += step {
				checkCut(t, f, c, file, cut, recs, offsets)
			}
			checkCut(t, f, c, file, len(file)-1, recs, offsets)
		}
	}
}

// largeRecords returns ~430 KiB of records of up to 24 KiB each, compressible about 2:1.
func largeRecords(f Framing, seed uint64) []Record {
	x := seed | 1
	var recs []Record
	for i := range 36 {
		n := int(x % (24 << 10))
		p := make([]byte, n)
		for j := range p {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			p[j] = "abcdefghijklmnop"[x%16]
		}
		rec := Record{Payload: p}
		if f == PBStream {
			rec.SortID = []byte(fmt.Sprintf("user-%d", i))
		}
		recs = append(recs, rec)
	}
	return recs
}

// checkCut reads file[:cut] strictly and with AllowTruncatedTail and checks the outcome
// against what the decompressor yields for the cut file.
func checkCut(t *testing.T, f Framing, c compress.Codec, file []byte, cut int, recs []Record, offsets []int64) {
	t.Helper()
	name := fmt.Sprintf("data.%v.%v", f, c)
	ctx := fmt.Sprintf("%v/%v cut %d/%d", f, c, cut, len(file))
	prefix, derr := decompress(c, file[:cut])
	complete := 0
	for complete < len(recs) && offsets[complete+1] <= int64(len(prefix)) {
		complete++
	}
	clean := derr == nil && int64(len(prefix)) == offsets[complete]
	if clean && cut != 0 && c != compress.None && c != compress.Snappy {
		t.Fatalf("%s: a cut %v stream decompressed cleanly", ctx, c)
	}

	o := Options{Framing: f, Codec: c, PB: pbOpts, BufferSize: 4096}
	got, err := readAll(file[:cut], name, o)
	sameRecords(t, ctx, got, recs, offsets)
	if len(got) != complete {
		t.Fatalf("%s: %d records, want %d", ctx, len(got), complete)
	}
	if clean {
		if err != io.EOF {
			t.Fatalf("%s: %v, want io.EOF", ctx, err)
		}
	} else {
		var ce *CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%s: %v, want *CorruptError wrapping ErrTruncated", ctx, err)
		}
		if ce.File != name || ce.Record != int64(complete) || ce.Offset != offsets[complete] ||
			ce.Framing != f || ce.Codec != c {
			t.Fatalf("%s: %+v, want record %d at offset %d", ctx, ce, complete, offsets[complete])
		}
		want := fmt.Sprintf("io/recordio: %s: record %d at offset %d: truncated record: ", name, complete, offsets[complete])
		if !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("%s: message %q, want prefix %q", ctx, err, want)
		}
	}

	o.AllowTruncatedTail = true
	got, err = readAll(file[:cut], name, o)
	sameRecords(t, ctx+" allow", got, recs, offsets)
	if err != io.EOF || len(got) != complete {
		t.Fatalf("%s allow: %d records, %v; want %d and io.EOF", ctx, len(got), err, complete)
	}
}

func decompress(c compress.Codec, data []byte) ([]byte, error) {
	r, err := compress.NewReader(bytes.NewReader(data), c)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// TestCorruptionMatrix flips bytes of every framing x codec file. Nothing may panic; every
// error is a *CorruptError; a TFRecord file never yields wrong data: by default it either
// fails or, when the flip hit bytes no decoder depends on, yields exactly the original; with
// AllowTruncatedTail it may also end early, as for a truncation, with a correct prefix.
func TestCorruptionMatrix(t *testing.T) {
	for _, f := range framings {
		for _, c := range codecs {
			recs := testRecords(f)
			plain, offsets := framed(t, f, recs)
			file := compressed(t, c, plain)
			unnoticed := 0
			for i := range file {
				masks := []byte{0x01, 0x80, 0xff}
				if raceEnabled {
					masks = masks[2:]
				}
				for _, mask := range masks {
					bad := bytes.Clone(file)
					bad[i] ^= mask
					for _, allow := range []bool{false, true} {
						ctx := fmt.Sprintf("%v/%v flip %#x at %d allow=%v", f, c, mask, i, allow)
						got, err := readAll(bad, "bad", Options{Framing: f, Codec: c, PB: pbOpts, AllowTruncatedTail: allow, MaxRecordSize: 1 << 20, BufferSize: 4096})
						var ce *CorruptError
						if err != io.EOF && !errors.As(err, &ce) {
							t.Fatalf("%s: error %v is not a *CorruptError", ctx, err)
						}
						if f != TFRecord {
							continue
						}
						if err == io.EOF {
							// With AllowTruncatedTail a flip that makes the compressed stream
							// look cut short (e.g. a snappy block length) drops the tail like a
							// truncation would; what is delivered must still be correct.
							if allow && len(got) < len(recs) {
								sameRecords(t, ctx, got, recs, offsets)
								continue
							}
							if len(got) != len(recs) {
								t.Fatalf("%s: silently delivered %d of %d records", ctx, len(got), len(recs))
							}
							sameRecords(t, ctx, got, recs, offsets)
							unnoticed++
							continue
						}
						if c == compress.None && !errors.Is(err, ErrChecksum) {
							t.Fatalf("%s: %v, want ErrChecksum", ctx, err)
						}
						sameRecords(t, ctx, got, recs, offsets)
					}
				}
			}
			if f == TFRecord && c == compress.None && unnoticed > 0 {
				t.Errorf("%v/%v: %d flips went unnoticed", f, c, unnoticed)
			}
			// Harmless flips: unchecked gzip/zstd header fields, a snappy element re-encoded to
			// the same output, or (with AllowTruncatedTail) a last snappy block made longer.
			t.Logf("%v/%v: %d bytes, %d flips read back the original records", f, c, len(file), unnoticed)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	u64 := func(v uint64) []byte {
		b := make([]byte, 8)
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		return b
	}
	tfData, tfOffsets := framed(t, TFRecord, testRecords(TFRecord))
	badCRC := bytes.Clone(tfData)
	badCRC[tfOffsets[2]+13] ^= 1 // payload byte of record 2 (length 58)

	tests := []struct {
		name   string
		o      Options
		data   []byte
		target []error
		record int64
		offset int64
	}{
		{"tfrecord checksum", Options{Framing: TFRecord}, badCRC, []error{ErrChecksum, tfrecord.ErrChecksum}, 2, tfOffsets[2]},
		{"pb sentinel", Options{}, append(u64(0), u64(pbstream.SentinelLength)...), []error{ErrSentinel, pbstream.ErrSentinel}, 1, 8},
		{"pb too large", Options{MaxRecordSize: 10}, u64(11), []error{ErrTooLarge, pbstream.ErrTooLarge}, 0, 0},
		{"tf too large", Options{Framing: TFRecord}, tfHeader(1 << 62), []error{ErrTooLarge, tfrecord.ErrTooLarge}, 0, 0},
		{"gzip corrupt", Options{Codec: compress.Gzip}, []byte("definitely not gzip"), []error{compress.ErrCorrupt}, 0, 0},
	}
	for _, tt := range tests {
		for _, allow := range []bool{false, true} {
			o := tt.o
			o.AllowTruncatedTail = allow
			_, err := readAll(tt.data, "f", o)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Record != tt.record || ce.Offset != tt.offset {
				t.Fatalf("%s: %v (%+v), want record %d offset %d", tt.name, err, ce, tt.record, tt.offset)
			}
			for _, target := range tt.target {
				if !errors.Is(err, target) {
					t.Errorf("%s: %v does not match %v", tt.name, err, target)
				}
			}
			if errors.Is(err, ErrTruncated) {
				t.Errorf("%s: %v matches ErrTruncated", tt.name, err)
			}
		}
	}
}

func tfHeader(length uint64) []byte {
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf)
	_ = w.Write(nil)
	_ = w.Flush()
	h := buf.Bytes()[:12]
	for i := range 8 {
		h[i] = byte(length >> (8 * i))
	}
	crc := tfrecord.MaskedCRC(h[:8])
	h[8], h[9], h[10], h[11] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
	return h
}

func TestLagrangeXThroughRecordio(t *testing.T) {
	o := Options{PB: pbstream.Options{LagrangeX: true}, Codec: compress.Zstd}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, o)
	if err != nil {
		t.Fatal(err)
	}
	key := pbstream.DataSourceKey("datasource_inst")
	if err := w.WriteRecord(Record{Payload: []byte("p"), DataSourceKey: key, PBType: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRecord(Record{Payload: []byte("q"), SortID: []byte("x")}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("sort id with LagrangeX: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(buf.Bytes(), "", o)
	if err != io.EOF || len(got) != 1 || got[0].DataSourceKey != 0x5D120000 || got[0].PBType != 1 || string(got[0].Payload) != "p" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestTFRecordRejectsPBFields(t *testing.T) {
	w, err := NewWriter(io.Discard, Options{Framing: TFRecord})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []Record{{DataSourceKey: 0x100}, {PBType: 1}, {SortID: []byte("u")}} {
		if err := w.WriteRecord(rec); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("WriteRecord(%+v) = %v, want ErrInvalidRecord", rec, err)
		}
	}
	if err := w.Write([]byte("ok")); err != nil {
		t.Fatalf("writer unusable after a rejected record: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(nil); err == nil {
		t.Fatal("write after Close succeeded")
	}
}

func TestParseFraming(t *testing.T) {
	tests := []struct {
		in      string
		want    Framing
		wantErr bool
	}{
		{"pbstream", PBStream, false},
		{"PB", PBStream, false},
		{"pb_stream", PBStream, false},
		{"tfrecord", TFRecord, false},
		{"TF", TFRecord, false},
		{"", 0, true},
		{"avro", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseFraming(tt.in)
		if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
			t.Errorf("ParseFraming(%q) = %v, %v", tt.in, got, err)
		}
		if err == nil {
			if back, _ := ParseFraming(got.String()); back != got {
				t.Errorf("round trip of %v failed", got)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []Options{
		{Framing: Framing(7)},
		{Codec: compress.Codec(99)},
		{BufferSize: -1},
		{MaxRecordSize: -1},
	}
	for _, o := range bad {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", o)
		}
		if _, err := NewReader(bytes.NewReader(nil), "x", o); err == nil {
			t.Errorf("NewReader(%+v) succeeded", o)
		}
		if _, err := NewWriter(io.Discard, o); err == nil {
			t.Errorf("NewWriter(%+v) succeeded", o)
		}
	}
}

func TestCreateOpenAuto(t *testing.T) {
	dir := t.TempDir()
	magic := map[compress.Codec][]byte{
		compress.Gzip: {0x1f, 0x8b},
		compress.Zstd: {0x28, 0xb5, 0x2f, 0xfd},
		compress.Zlib: {0x78},
	}
	for _, f := range framings {
		for _, name := range []string{"a.bin", "a.gz", "a.zlib", "a.snappy", "a.zst"} {
			path := filepath.Join(dir, f.String()+"-"+name)
			o := Options{Framing: f, Codec: compress.Auto, PB: pbOpts}
			w, err := Create(path, o)
			if err != nil {
				t.Fatal(err)
			}
			recs := testRecords(f)
			for _, rec := range recs {
				if err := w.WriteRecord(rec); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s exists before Close: %v", path, err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if m := magic[compress.Detect(path)]; m != nil && !bytes.HasPrefix(raw, m) {
				t.Fatalf("%s does not start with %x", path, m)
			}
			r, err := Open(path, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Codec() != compress.Detect(path) || r.Name() != path {
				t.Fatalf("%s: codec %v name %q", path, r.Codec(), r.Name())
			}
			n := 0
			for {
				rec, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if !bytes.Equal(rec.Payload, recs[n].Payload) {
					t.Fatalf("%s: record %d differs", path, n)
				}
				n++
			}
			if n != len(recs) {
				t.Fatalf("%s: %d records", path, n)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Next(); err == nil {
				t.Fatal("Next after Close succeeded")
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestCreateAbortKeepsOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keep.tfrecord")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Create(path, Options{Framing: TFRecord})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("file now %q", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries after Abort", len(entries))
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open("-", Options{Codec: compress.Gzip}); err == nil {
		t.Error("Open(-) with gzip succeeded")
	}
	if _, err := Create("-", Options{Codec: compress.Zstd}); err == nil {
		t.Error("Create(-) with zstd succeeded")
	}
	if _, err := Create(filepath.Join(t.TempDir(), "no", "such", "dir", "f"), Options{}); err == nil {
		t.Error("Create in a missing directory succeeded")
	}
}

func TestStdinNeverDecompressed(t *testing.T) {
	plain, _ := framed(t, PBStream, testRecords(PBStream))
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = pw.Write(plain)
		pw.Close()
	}()
	saved := os.Stdin
	os.Stdin = pr
	defer func() { os.Stdin = saved; pr.Close() }()

	// ".gz" would select gzip for a file; "-" is read as is.
	r, err := Open("-", Options{Codec: compress.Auto, PB: pbOpts})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := r.Next(); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		n++
	}
	if n != len(testRecords(PBStream)) || r.Codec() != compress.None {
		t.Fatalf("%d records, codec %v", n, r.Codec())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

func TestWriterErrorsSurface(t *testing.T) {
	wErr := errors.New("disk full")
	for _, f := range framings {
		for _, c := range codecs {
			w, err := NewWriter(failingWriter{wErr}, Options{Framing: f, Codec: c})
			if err != nil {
				t.Fatal(err)
			}
			for range 10 {
				_ = w.Write(make([]byte, 100<<10))
			}
			if err := w.Close(); !errors.Is(err, wErr) {
				t.Errorf("%v/%v: Close = %v, want the write error", f, c, err)
			}
		}
	}
}

func TestCreateFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mode.pb")
	w, err := Create(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(filepath.Dir(path), "ref")
	f, err := os.Create(ref)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _ := os.Stat(path)
	want, _ := os.Stat(ref)
	if got.Mode() != want.Mode() {
		t.Fatalf("Create made mode %v, os.Create makes %v", got.Mode(), want.Mode())
	}
}

// TestPayloadBufferHandOff: a reader started with the payload buffer of an earlier reader
// (PayloadBuffer, SetPayloadBuffer) reads its payloads into that memory and returns the
// same records, in both framings, with records larger and smaller than the buffer's.
func TestPayloadBufferHandOff(t *testing.T) {
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			file := func(sizes ...int) []byte {
				var buf bytes.Buffer
				w, err := NewWriter(&buf, Options{Framing: f})
				if err != nil {
					t.Fatal(err)
				}
				for i, n := range sizes {
					if err := w.Write(bytes.Repeat([]byte{byte(i + 1)}, n)); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				return buf.Bytes()
			}
			first, err := NewReader(bytes.NewReader(file(10, 300_000, 3)), "first", Options{Framing: f})
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := first.Next(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			lent := first.PayloadBuffer()
			if cap(lent) < 300_000 {
				t.Fatalf("payload buffer holds %d bytes, want at least the largest record's 300000", cap(lent))
			}
			second, err := NewReader(bytes.NewReader(file(7, 5000, 400_000)), "second", Options{Framing: f})
			if err != nil {
				t.Fatal(err)
			}
			second.SetPayloadBuffer(lent)
			for i, n := range []int{7, 5000, 400_000} {
				rec, err := second.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rec.Payload, bytes.Repeat([]byte{byte(i + 1)}, n)) {
					t.Fatalf("record %d: %d bytes, not the %d written", i, len(rec.Payload), n)
				}
				if i == 0 && &rec.Payload[0] != &lent[:1][0] {
					t.Error("the first record was not read into the lent buffer")
				}
			}
		})
	}
}

// TestReadsThroughCallersBuffer: with no codec, a reader over a *bufio.Reader at least as
// large as its read buffer uses it as is instead of buffering again (no second buffer is
// allocated), in both framings.
func TestReadsThroughCallersBuffer(t *testing.T) {
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			var ms runtime.MemStats
			for range 20 {
				br := bufio.NewReaderSize(bytes.NewReader(nil), 256<<10)
				runtime.ReadMemStats(&ms) // the caller's buffer is not the reader's allocation
				before := ms.TotalAlloc
				if _, err := NewReader(br, "x", Options{Framing: f}); err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&ms)
				if got := ms.TotalAlloc - before; got >= 64<<10 {
					t.Fatalf("a reader over a 256 KiB *bufio.Reader allocated %d bytes: a buffer of its own", got)
				}
			}
		})
	}
}
