package pbstream

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
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

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestJavaHash(t *testing.T) {
	tests := []struct {
		in   string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"ab", 97*31 + 98},
		{"hello", 99162322}, // Java "hello".hashCode()
		{"datasource_inst", -1487072768},
		{"\xff", -1},              // bytes >= 0x80 count as negative
		{"\xc3\xa9", -61*31 - 87}, // "é" in UTF-8, bytewise and signed
	}
	for _, tt := range tests {
		if got := JavaHash(tt.in); got != tt.want {
			t.Errorf("JavaHash(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
	if got := uint32(JavaHash("datasource_inst")); got != 0xA75D1200 {
		t.Errorf("uint32(JavaHash) = %#x, want 0xa75d1200", got)
	}
	if got := DataSourceKey("datasource_inst"); got != 1561460736 { // 0x5D120000
		t.Errorf("DataSourceKey = %#x, want 0x5d120000", got)
	}
	if got := DataSourceKey(""); got != 0 {
		t.Errorf("DataSourceKey(\"\") = %#x", got)
	}
}

func TestLagrangeXGolden(t *testing.T) {
	golden := unhex(t, "00 00 12 5d 00 00 00 00")
	payload := []byte("payload")
	wire := cat(golden, u64(uint64(len(payload))), payload)

	r := NewReader(bytes.NewReader(wire), Options{LagrangeX: true})
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if rec.DataSourceKey != 0x5D120000 || rec.PBType != 0 || string(rec.Payload) != "payload" {
		t.Fatalf("got key %#x type %d payload %q", rec.DataSourceKey, rec.PBType, rec.Payload)
	}

	var buf bytes.Buffer
	w := NewWriter(&buf, Options{LagrangeX: true, HasSortID: true, KafkaDump: true})
	if err := w.WriteRecord(Record{Payload: payload, DataSourceKey: DataSourceKey("datasource_inst")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), wire) {
		t.Fatalf("wrote %x, want %x", buf.Bytes(), wire)
	}

	// The high 32 bits are ignored; pb_type is the low byte.
	h := uint64(0xDEADBEEF_5D120007)
	if key, typ := ParseLagrangeXHeader(h); key != 0x5D120000 || typ != 7 {
		t.Fatalf("ParseLagrangeXHeader(%#x) = %#x, %d", h, key, typ)
	}
}

// instPayload is inst.pbtext serialized as parser.proto.Instance (io.md §6.2).
const instPayload = "0a10 0100000000000000 0200000000000000 1a08 00000000 0000803f 2a03 320101 4a0d 0a0161 1208 0300000000000000"

func TestInstPbtextGolden(t *testing.T) {
	payload := unhex(t, instPayload)
	if len(payload) != 48 {
		t.Fatalf("payload is %d bytes, want 48", len(payload))
	}
	want := cat(unhex(t, "0000000000000000 3000000000000000"), payload)
	o := Options{HasSortID: true}
	var buf bytes.Buffer
	w := NewWriter(&buf, o)
	if err := w.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("wrote %x, want %x", buf.Bytes(), want)
	}
	r := NewReader(bytes.NewReader(want), o)
	rec, err := r.Next()
	if err != nil || !bytes.Equal(rec.Payload, payload) || rec.SortID == nil || len(rec.SortID) != 0 {
		t.Fatalf("read %+v, %v", rec, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// allOptions returns the 16 option combinations.
func allOptions() []Options {
	var out []Options
	for i := range 16 {
		out = append(out, Options{LagrangeX: i&1 != 0, KafkaDumpPrefix: i&2 != 0, HasSortID: i&4 != 0, KafkaDump: i&8 != 0})
	}
	return out
}

// headerSize is the canonical writer's header size for o.
func headerSize(o Options) int {
	if o.LagrangeX {
		return 8
	}
	n := 0
	if o.KafkaDumpPrefix {
		n += 16
	}
	if o.HasSortID {
		n += 8
	}
	if o.KafkaDump {
		n += 8
	}
	return n
}

func TestRoundTripAllOptions(t *testing.T) {
	for _, o := range allOptions() {
		var buf bytes.Buffer
		w := NewWriter(&buf, o)
		var offsets []int64
		size := 0
		for n := range 16 {
			offsets = append(offsets, int64(size))
			payload := bytes.Repeat([]byte{byte('a' + n)}, n)
			if err := w.Write(payload); err != nil {
				t.Fatal(err)
			}
			size += headerSize(o) + 8 + n
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if buf.Len() != size {
			t.Fatalf("%+v: wrote %d bytes, want %d", o, buf.Len(), size)
		}
		r := NewReader(&buf, o)
		for n := range 16 {
			rec, err := r.Next()
			if err != nil {
				t.Fatalf("%+v record %d: %v", o, n, err)
			}
			if !bytes.Equal(rec.Payload, bytes.Repeat([]byte{byte('a' + n)}, n)) || rec.Index != int64(n) || rec.Offset != offsets[n] {
				t.Fatalf("%+v record %d: %+v", o, n, rec)
			}
			if rec.DataSourceKey != 0 || rec.PBType != 0 || len(rec.SortID) != 0 {
				t.Fatalf("%+v record %d: unexpected header values %+v", o, n, rec)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("%+v: end %v", o, err)
		}
	}
}

func TestRoundTripSortIDs(t *testing.T) {
	for _, o := range allOptions() {
		if o.LagrangeX || !o.HasSortID {
			continue
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, o)
		ids := []string{"21bacb96ae78a72", "", "u"}
		for i, id := range ids {
			if err := w.WriteRecord(Record{Payload: []byte{byte(i)}, SortID: []byte(id)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		r := NewReader(&buf, o)
		for i, id := range ids {
			rec, err := r.Next()
			if err != nil || string(rec.SortID) != id || !bytes.Equal(rec.Payload, []byte{byte(i)}) {
				t.Fatalf("%+v record %d: %+v, %v", o, i, rec, err)
			}
		}
	}
}

// TestWireShapes feeds the reader every wire shape of io.md §1.2.2, including non-canonical
// ones (non-zero A, B and kafka_dump values, real sort ids).
func TestWireShapes(t *testing.T) {
	p1, p2 := []byte("first"), []byte("second!")
	rec := func(payload []byte) []byte { return cat(u64(uint64(len(payload))), payload) }
	tests := []struct {
		name  string
		o     Options
		wire  []byte
		sorts []string
		keys  []uint32
		types []uint8
	}{
		{"none", Options{}, cat(rec(p1), rec(p2)), []string{"", ""}, nil, nil},
		{
			"lagrangex ignores the other options",
			Options{LagrangeX: true, KafkaDumpPrefix: true, HasSortID: true, KafkaDump: true},
			cat(u64(0x5D120003), rec(p1), u64(0xFFFFFFFF_00000100), rec(p2)),
			[]string{"", ""}, []uint32{0x5D120000, 0x100}, []uint8{3, 0},
		},
		{
			"sort id",
			Options{HasSortID: true},
			cat(u64(15), []byte("21bacb96ae78a72"), rec(p1), u64(0), rec(p2)),
			[]string{"21bacb96ae78a72", ""}, nil, nil,
		},
		{
			"sort id + kafka dump",
			Options{HasSortID: true, KafkaDump: true},
			cat(u64(3), []byte("abc"), u64(0xdeadbeef), rec(p1), u64(1), []byte("z"), u64(7), rec(p2)),
			[]string{"abc", "z"}, nil, nil,
		},
		{
			"kafka dump",
			Options{KafkaDump: true},
			cat(u64(123), rec(p1), u64(0), rec(p2)),
			[]string{"", ""}, nil, nil,
		},
		{
			"kafka dump prefix, A==0 then B; A!=0 dropped",
			Options{KafkaDumpPrefix: true},
			cat(u64(0), u64(999), rec(p1), u64(42), rec(p2)),
			[]string{"", ""}, nil, nil,
		},
		{
			"kafka dump prefix + sort id: A==0,B,L,id and A!=0,id",
			Options{KafkaDumpPrefix: true, HasSortID: true},
			cat(u64(0), u64(5), u64(4), []byte("user"), rec(p1), u64(6), []byte("user42"), rec(p2)),
			[]string{"user", "user42"}, nil, nil,
		},
		{
			"kafka dump prefix + sort id + kafka dump",
			Options{KafkaDumpPrefix: true, HasSortID: true, KafkaDump: true},
			cat(u64(0), u64(1), u64(2), []byte("id"), u64(3), rec(p1), u64(2), []byte("xy"), u64(4), rec(p2)),
			[]string{"id", "xy"}, nil, nil,
		},
		{
			"kafka dump prefix + kafka dump",
			Options{KafkaDumpPrefix: true, KafkaDump: true},
			cat(u64(0), u64(1), u64(2), rec(p1), u64(77), u64(3), rec(p2)),
			[]string{"", ""}, nil, nil,
		},
	}
	for _, tt := range tests {
		r := NewReader(bytes.NewReader(tt.wire), tt.o)
		for i, want := range [][]byte{p1, p2} {
			rec, err := r.Next()
			if err != nil {
				t.Fatalf("%s: record %d: %v", tt.name, i, err)
			}
			if !bytes.Equal(rec.Payload, want) || string(rec.SortID) != tt.sorts[i] {
				t.Fatalf("%s: record %d: payload %q sort id %q", tt.name, i, rec.Payload, rec.SortID)
			}
			if tt.keys != nil && (rec.DataSourceKey != tt.keys[i] || rec.PBType != tt.types[i]) {
				t.Fatalf("%s: record %d: key %#x type %d", tt.name, i, rec.DataSourceKey, rec.PBType)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("%s: end %v", tt.name, err)
		}
	}
}

func TestSentinel(t *testing.T) {
	good := cat(u64(1), []byte{9})
	in := cat(good, u64(SentinelLength), make([]byte, 64))
	r := NewReader(bytes.NewReader(in), Options{}, WithFile("f.pb"), WithAllowTruncatedTail(true))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := r.Next()
	var ce *CorruptError
	if !errors.Is(err, ErrSentinel) || !errors.As(err, &ce) || ce.Record != 1 || ce.Offset != 9 || ce.File != "f.pb" {
		t.Fatalf("err %v, want ErrSentinel for record 1 at offset 9", err)
	}
	if !strings.Contains(err.Error(), "DEADBEEF value found") {
		t.Fatalf("message %q", err)
	}
	// Only the payload length is checked: a sort-id length of 0xFEFEFEFE is just a length.
	r = NewReader(bytes.NewReader(cat(u64(SentinelLength), []byte("short"))), Options{HasSortID: true}, WithMaxRecordSize(8<<30))
	want := ErrTruncated
	if math.MaxInt < SentinelLength { // 32-bit: the length exceeds what a slice can hold
		want = ErrTooLarge
	}
	if _, err := r.Next(); !errors.Is(err, want) {
		t.Fatalf("sort id of sentinel length: %v, want %v", err, want)
	}
}

func TestTooLarge(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		wire []byte
		opts []ReaderOption
	}{
		{"payload 2^64-1", Options{}, u64(^uint64(0)), nil},
		{"payload 2^64-4", Options{}, u64(^uint64(0) - 3), nil},
		{"payload above default max", Options{}, u64(DefaultMaxRecordSize + 1), nil},
		{"payload above configured max", Options{}, u64(11), []ReaderOption{WithMaxRecordSize(10)}},
		{"sort id 2^64-2", Options{HasSortID: true}, u64(^uint64(0) - 1), nil},
		{"aggregated sort id", Options{KafkaDumpPrefix: true, HasSortID: true}, u64(1 << 40), nil},
	}
	for _, tt := range tests {
		for _, allow := range []bool{false, true} {
			in := cat(tt.wire, make([]byte, 100))
			r := NewReader(bytes.NewReader(in), tt.o, append(tt.opts, WithAllowTruncatedTail(allow))...)
			if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s allow=%v: err %v, want ErrTooLarge", tt.name, allow, err)
			}
		}
	}
	// An aggregated length is ignored without HasSortID, even if huge.
	r := NewReader(bytes.NewReader(cat(u64(^uint64(0)), u64(1), []byte{1})), Options{KafkaDumpPrefix: true})
	if rec, err := r.Next(); err != nil || !bytes.Equal(rec.Payload, []byte{1}) {
		t.Errorf("dropped A: %+v, %v", rec, err)
	}
}

func TestHugeLengthDoesNotAllocate(t *testing.T) {
	in := cat(u64(1<<30), make([]byte, 8)) // claims 1 GiB, holds 8 bytes
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := NewReader(bytes.NewReader(in), Options{}).Next()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("err %v, want ErrTruncated", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("reading a 16-byte input allocated %d bytes", alloc)
	}
}

// encodeAll writes n records with sort ids (when possible) and returns the stream and the
// record offsets (plus the end offset).
func encodeAll(t testing.TB, o Options, n int) ([]byte, []int64, []Record) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, o)
	var offsets []int64
	var recs []Record
	for i := range n {
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, int64(buf.Len()))
		rec := Record{Payload: bytes.Repeat([]byte{byte(i)}, i*3)}
		if o.LagrangeX {
			rec.DataSourceKey, rec.PBType = uint32(i)<<8, uint8(i)
		} else if o.HasSortID {
			rec.SortID = []byte(fmt.Sprintf("user%d", i))
		}
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), append(offsets, int64(buf.Len())), recs
}

func TestTruncatedEveryByte(t *testing.T) {
	for _, o := range allOptions() {
		data, offsets, recs := encodeAll(t, o, 5)
		for cut := 0; cut < len(data); cut++ {
			complete := 0
			for complete < len(recs) && offsets[complete+1] <= int64(cut) {
				complete++
			}
			atBoundary := offsets[complete] == int64(cut)
			for _, allow := range []bool{false, true} {
				r := NewReader(bytes.NewReader(data[:cut]), o, WithFile("x.pb"), WithAllowTruncatedTail(allow))
				var got int
				var err error
				for {
					var rec Record
					if rec, err = r.Next(); err != nil {
						break
					}
					want := recs[got]
					if !bytes.Equal(rec.Payload, want.Payload) || !bytes.Equal(rec.SortID, want.SortID) ||
						rec.DataSourceKey != want.DataSourceKey || rec.PBType != want.PBType {
						t.Fatalf("%+v cut %d: record %d = %+v, want %+v", o, cut, got, rec, want)
					}
					got++
				}
				if got != complete {
					t.Fatalf("%+v cut %d allow=%v: %d records, want %d", o, cut, allow, got, complete)
				}
				if atBoundary || allow {
					if err != io.EOF {
						t.Fatalf("%+v cut %d allow=%v: %v, want io.EOF", o, cut, allow, err)
					}
					continue
				}
				var ce *CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("%+v cut %d: %v, want ErrTruncated", o, cut, err)
				}
				if ce.File != "x.pb" || ce.Record != int64(complete) || ce.Offset != offsets[complete] {
					t.Fatalf("%+v cut %d: %+v, want record %d at %d", o, cut, ce, complete, offsets[complete])
				}
			}
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

func TestIOError(t *testing.T) {
	ioErr := errors.New("disk on fire")
	o := Options{HasSortID: true}
	data, offsets, _ := encodeAll(t, o, 4)
	for _, allow := range []bool{false, true} {
		r := NewReader(&failingReader{data: data[:offsets[3]], err: ioErr}, o, WithAllowTruncatedTail(allow))
		n := 0
		var err error
		for ; err == nil; n++ {
			_, err = r.Next()
		}
		var ce *CorruptError
		if n-1 != 3 || !errors.As(err, &ce) || !errors.Is(err, ioErr) || errors.Is(err, ErrTruncated) || ce.Record != 3 {
			t.Fatalf("allow=%v: %d records, %v; want 3 records then the I/O error", allow, n-1, err)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	data, offsets, _ := encodeAll(t, Options{}, 3)
	r := NewReader(bytes.NewReader(data[:len(data)-1]), Options{}, WithFile("part-0.pb"))
	var err error
	for err == nil {
		_, err = r.Next()
	}
	want := fmt.Sprintf("io/pbstream: part-0.pb: record 2 at offset %d: truncated record: unexpected EOF", offsets[2])
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
}

func TestWriterRejects(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		rec  Record
	}{
		{"key low byte", Options{LagrangeX: true}, Record{DataSourceKey: 0x5D120001}},
		{"sort id with lagrangex", Options{LagrangeX: true, HasSortID: true}, Record{SortID: []byte("u")}},
		{"key without lagrangex", Options{HasSortID: true}, Record{DataSourceKey: 0x100}},
		{"pb type without lagrangex", Options{}, Record{PBType: 1}},
		{"sort id without has_sort_id", Options{KafkaDump: true}, Record{SortID: []byte("u")}},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		w := NewWriter(&buf, tt.o)
		if err := w.WriteRecord(tt.rec); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: err %v, want ErrInvalidRecord", tt.name, err)
		}
		if err := w.Flush(); err != nil || buf.Len() != 0 {
			t.Errorf("%s: rejected record left %d bytes, %v", tt.name, buf.Len(), err)
		}
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

func TestWriterError(t *testing.T) {
	wErr := errors.New("disk full")
	w := NewWriter(failingWriter{wErr}, Options{})
	if err := w.Write(make([]byte, 1<<17)); !errors.Is(err, wErr) {
		t.Fatalf("Write: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, wErr) {
		t.Fatalf("Flush: %v", err)
	}
}

func TestNoAllocPerRecord(t *testing.T) {
	o := Options{HasSortID: true, KafkaDumpPrefix: true}
	var buf bytes.Buffer
	w := NewWriter(&buf, o)
	for range 300 {
		if err := w.WriteRecord(Record{Payload: make([]byte, 1000), SortID: []byte("21bacb96ae78a72")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&buf, o)
	if _, err := r.Next(); err != nil {
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
