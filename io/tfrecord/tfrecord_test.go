package tfrecord

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCRC(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xE3069283 {
		t.Errorf("crc32c(123456789) = %#x, want 0xe3069283", got)
	}
	if got := MaskedCRC(nil); got != 0xa282ead8 {
		t.Errorf("MaskedCRC(empty) = %#x, want 0xa282ead8", got)
	}
	for _, v := range []uint32{0, 1, 0xE3069283, 0xffffffff, 0x80000000} {
		if got := Unmask(Mask(v)); got != v {
			t.Errorf("Unmask(Mask(%#x)) = %#x", v, got)
		}
	}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		record  string
	}{
		{"empty payload", "", "0000000000000000 29039807 d8ea82a2"},
		{
			"entry dump id=1 num=[0.5,1,2]",
			"09 0100000000000000 15 0000003f 15 0000803f 15 00000040",
			"1800000000000000 a37f4b22 090100000000000000150000003f150000803f1500000040 37170c15",
		},
	}
	for _, tt := range tests {
		payload, want := unhex(t, tt.payload), unhex(t, tt.record)
		var buf bytes.Buffer
		w := NewWriter(&buf)
		if err := w.Write(payload); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: wrote %x, want %x", tt.name, buf.Bytes(), want)
		}
		r := NewReader(bytes.NewReader(want))
		got, err := r.Next()
		if err != nil || !bytes.Equal(got, payload) || got == nil {
			t.Errorf("%s: read %x (nil=%v), %v; want %x", tt.name, got, got == nil, err, payload)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Errorf("%s: second Next = %v, want io.EOF", tt.name, err)
		}
	}
}

func makePayloads(n int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		p := make([]byte, (i*37)%301)
		for j := range p {
			p[j] = byte(i + j*7)
		}
		ps[i] = p
	}
	return ps
}

func encode(t testing.TB, payloads [][]byte) (data []byte, offsets []int64) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, p := range payloads {
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, int64(buf.Len()))
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), append(offsets, int64(buf.Len()))
}

// readAll returns the copied payloads and the terminating error.
func readAll(r *Reader) ([][]byte, error) {
	var out [][]byte
	for {
		p, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, bytes.Clone(p))
	}
}

func TestRoundTrip(t *testing.T) {
	payloads := makePayloads(50)
	payloads = append(payloads, bytes.Repeat([]byte{0xab}, 1<<20), nil, []byte{0})
	data, offsets := encode(t, payloads)
	r := NewReader(bytes.NewReader(data), WithBufferSize(100))
	for i, want := range payloads {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d: payload mismatch", i)
		}
		if r.Index() != int64(i) || r.Offset() != offsets[i] {
			t.Fatalf("record %d: Index %d Offset %d, want %d %d", i, r.Index(), r.Offset(), i, offsets[i])
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if r.Offset() != int64(len(data)) || r.Index() != int64(len(payloads)) {
		t.Errorf("after EOF Offset %d Index %d, want %d %d", r.Offset(), r.Index(), len(data), len(payloads))
	}
}

func TestTruncatedEveryByte(t *testing.T) {
	payloads := makePayloads(6)
	data, offsets := encode(t, payloads)
	boundary := map[int64]int{}
	for i, o := range offsets {
		boundary[o] = i
	}
	for cut := 0; cut < len(data); cut++ {
		for _, allow := range []bool{false, true} {
			r := NewReader(bytes.NewReader(data[:cut]), WithFile("data.tfrecord"), WithAllowTruncatedTail(allow))
			got, err := readAll(r)
			// Records delivered are exactly those ending at or before the cut.
			complete := 0
			for complete < len(payloads) && offsets[complete+1] <= int64(cut) {
				complete++
			}
			if len(got) != complete {
				t.Fatalf("cut %d allow=%v: %d records, want %d", cut, allow, len(got), complete)
			}
			for i := range got {
				if !bytes.Equal(got[i], payloads[i]) {
					t.Fatalf("cut %d: record %d differs", cut, i)
				}
			}
			if _, ok := boundary[int64(cut)]; ok || allow {
				if err != io.EOF {
					t.Fatalf("cut %d allow=%v: err %v, want io.EOF", cut, allow, err)
				}
				continue
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("cut %d: err %v, want *CorruptError wrapping ErrTruncated", cut, err)
			}
			if ce.File != "data.tfrecord" || ce.Record != int64(complete) || ce.Offset != offsets[complete] {
				t.Fatalf("cut %d: error fields %+v, want record %d offset %d", cut, ce, complete, offsets[complete])
			}
			if _, again := r.Next(); again != err {
				t.Fatalf("cut %d: error is not sticky: %v", cut, again)
			}
		}
	}
}

func TestFlipEveryByte(t *testing.T) {
	data, offsets := encode(t, makePayloads(4))
	for i := range data {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(data)
			bad[i] ^= mask
			for _, allow := range []bool{false, true} {
				r := NewReader(bytes.NewReader(bad), WithAllowTruncatedTail(allow))
				got, err := readAll(r)
				var ce *CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, ErrChecksum) {
					t.Fatalf("flip %#x at %d allow=%v: err %v, want ErrChecksum", mask, i, allow, err)
				}
				rec := 0
				for offsets[rec+1] <= int64(i) {
					rec++
				}
				if ce.Record != int64(rec) || len(got) != rec || ce.Offset != offsets[rec] {
					t.Fatalf("flip at %d: %+v after %d records, want record %d", i, ce, len(got), rec)
				}
			}
		}
	}
}

// header returns a record header for length with a valid CRC.
func header(length uint64) []byte {
	h := binary.LittleEndian.AppendUint64(nil, length)
	return binary.LittleEndian.AppendUint32(h, MaskedCRC(h))
}

func TestTooLarge(t *testing.T) {
	tests := []struct {
		name   string
		length uint64
		opts   []Option
	}{
		{"2^64-1", ^uint64(0), nil},
		{"2^64-4", ^uint64(0) - 3, nil},
		{"above default max", DefaultMaxRecordSize + 1, nil},
		{"above configured max", 101, []Option{WithMaxRecordSize(100)}},
	}
	for _, tt := range tests {
		for _, allow := range []bool{false, true} {
			in := append(header(tt.length), make([]byte, 200)...)
			r := NewReader(bytes.NewReader(in), append(tt.opts, WithAllowTruncatedTail(allow))...)
			_, err := r.Next()
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s allow=%v: err %v, want ErrTooLarge", tt.name, allow, err)
			}
		}
	}
	// At the configured maximum the record is fine.
	data, _ := encode(t, [][]byte{make([]byte, 100)})
	if _, err := NewReader(bytes.NewReader(data), WithMaxRecordSize(100)).Next(); err != nil {
		t.Errorf("record at the limit: %v", err)
	}
}

func TestHugeLengthDoesNotAllocate(t *testing.T) {
	in := append(header(1<<30), make([]byte, 100)...) // claims 1 GiB, holds 100 bytes
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := NewReader(bytes.NewReader(in)).Next()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("err %v, want ErrTruncated", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("reading a 112-byte input allocated %d bytes", alloc)
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

func TestIOError(t *testing.T) {
	ioErr := errors.New("disk on fire")
	data, offsets := encode(t, makePayloads(3))
	for _, allow := range []bool{false, true} {
		r := NewReader(&failingReader{data: data[:offsets[2]+5], err: ioErr}, WithAllowTruncatedTail(allow))
		got, err := readAll(r)
		var ce *CorruptError
		if len(got) != 2 || !errors.As(err, &ce) || !errors.Is(err, ioErr) || errors.Is(err, ErrTruncated) {
			t.Fatalf("allow=%v: %d records, err %v; want 2 records and the I/O error", allow, len(got), err)
		}
		if ce.Record != 2 || ce.Offset != offsets[2] {
			t.Fatalf("error fields %+v", ce)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	data, offsets := encode(t, makePayloads(2))
	r := NewReader(bytes.NewReader(data[:len(data)-1]), WithFile("data.tfrecord"))
	_, err := readAll(r)
	want := fmt.Sprintf("io/tfrecord: data.tfrecord: record 1 at offset %d: truncated record: unexpected EOF", offsets[1])
	if err == nil || err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	r = NewReader(bytes.NewReader(data[:5]))
	_, err = r.Next()
	if want := "io/tfrecord: record 0 at offset 0: truncated record: unexpected EOF"; err == nil || err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

func TestWriterError(t *testing.T) {
	wErr := errors.New("disk full")
	w := NewWriter(failingWriter{wErr})
	if err := w.Write(make([]byte, 1<<17)); !errors.Is(err, wErr) {
		t.Fatalf("Write: %v", err)
	}
	if err := w.Write(nil); !errors.Is(err, wErr) {
		t.Fatalf("Write after error: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, wErr) {
		t.Fatalf("Flush: %v", err)
	}
}

func TestNoAllocPerRecord(t *testing.T) {
	payloads := make([][]byte, 300)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{byte(i)}, 1000)
	}
	data, _ := encode(t, payloads)
	r := NewReader(bytes.NewReader(data))
	if _, err := r.Next(); err != nil { // sizes the payload buffer
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record, want 0", allocs)
	}
}
