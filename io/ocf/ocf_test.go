package ocf

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

var (
	errFormat    = errors.New("test: malformed")
	errTruncated = errors.New("test: truncated")
	testConfig   = Config{ErrFormat: errFormat, ErrTruncated: errTruncated, Item: "item", Items: "items",
		MinItemSize: 1, MaxBlockSize: 1 << 20}
)

// schema is the schema of the test items: a long, a float array and a nullable string.
const schema = `{"type":"record","name":"T","fields":[{"name":"a","type":"long"},` +
	`{"name":"f","type":{"type":"array","items":"float"}},{"name":"s","type":["null","string"]}]}`

type item struct {
	a int64
	f []float32
	s *string
}

func appendItem(b []byte, it item) []byte {
	b = AppendFloats(AppendLong(b, it.a), it.f)
	if it.s == nil {
		return append(b, 0)
	}
	return AppendString(append(b, 2), *it.s)
}

func decodeItem(d *Decoder) item {
	it := item{a: d.Long(), f: d.Floats("f", nil)}
	if d.Union("s") {
		s := string(d.StringBytes())
		it.s = &s
	}
	return it
}

// file writes items in blocks of perBlock items.
func file(t testing.TB, codec string, items []item, perBlock int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, schema, codec, [2]string{"k", "v"})
	if err != nil {
		t.Fatal(err)
	}
	var block []byte
	n := 0
	for i, it := range items {
		block = appendItem(block, it)
		if n++; n == perBlock || i == len(items)-1 {
			if err := w.WriteBlock(int64(n), block); err != nil {
				t.Fatal(err)
			}
			block, n = block[:0], 0
		}
	}
	return buf.Bytes()
}

func readItems(data []byte) ([]item, *Reader, error) {
	r, err := NewReader(bytes.NewReader(data), &testConfig)
	if err != nil {
		return nil, nil, err
	}
	var out []item
	for {
		d, err := r.Next()
		if err == io.EOF {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		it := decodeItem(d)
		if err := d.Err(); err != nil {
			return out, r, err
		}
		out = append(out, it)
	}
}

func testItems() []item {
	s, empty := "héllo", ""
	return []item{
		{a: 0},
		{a: -1, f: []float32{1, float32(math.Inf(-1)), math.Float32frombits(0x7fc00001)}, s: &s},
		{a: math.MaxInt64, s: &empty},
		{a: math.MinInt64, f: []float32{float32(math.Copysign(0, -1))}},
		{a: 300},
	}
}

func sameItems(t *testing.T, got, want []item) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d items, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		ok := g.a == w.a && len(g.f) == len(w.f) && (g.s == nil) == (w.s == nil) && (g.s == nil || *g.s == *w.s)
		for j := range w.f {
			ok = ok && math.Float32bits(g.f[j]) == math.Float32bits(w.f[j])
		}
		if !ok {
			t.Errorf("item %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestRoundTrip writes and reads items with every codec and block size, and checks the
// header.
func TestRoundTrip(t *testing.T) {
	for _, codec := range []string{Null, Deflate, Snappy} {
		for _, per := range []int{1, 2, 100} {
			got, r, err := readItems(file(t, codec, testItems(), per))
			if err != nil {
				t.Fatalf("%s/%d: %v", codec, per, err)
			}
			sameItems(t, got, testItems())
			if v, ok := r.Meta("k"); r.Codec() != codec || !ok || string(v) != "v" {
				t.Errorf("%s: codec %q, meta k = %q", codec, r.Codec(), v)
			}
			if _, ok, err := r.MatchSchema(schema); !ok || err != nil {
				t.Errorf("%s: schema does not match: %v", codec, err)
			}
		}
	}
	if _, err := NewWriter(io.Discard, schema, "zstd"); err == nil {
		t.Error("codec zstd accepted")
	}
}

// TestMatchSchema compares parsing canonical forms.
func TestMatchSchema(t *testing.T) {
	r, err := NewReader(bytes.NewReader(file(t, Null, testItems(), 5)), &testConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.MatchSchema(" " + schema + " "); !ok || err != nil {
		t.Errorf("same canonical form: %v %v", ok, err)
	}
	other := strings.Replace(schema, `"name":"a"`, `"name":"b"`, 1)
	if got, ok, err := r.MatchSchema(other); ok || err != nil || !strings.Contains(got, `"name":"a"`) {
		t.Errorf("other schema: %q %v %v", got, ok, err)
	}
	var buf bytes.Buffer
	if _, err := NewWriter(&buf, "{", Null); err != nil {
		t.Fatal(err)
	}
	r, _ = NewReader(&buf, &testConfig)
	if _, _, err := r.MatchSchema(schema); !errors.Is(err, errFormat) {
		t.Errorf("bad schema JSON: %v", err)
	}
}

// TestErrors: damage wraps the Config's errors, names its items, and Item and Offset say
// where it is.
func TestErrors(t *testing.T) {
	good := file(t, Null, testItems()[:2], 1)
	header := len(file(t, Null, nil, 1))
	sync := good[header-SyncSize : header]
	block0 := len(appendItem(nil, testItems()[0]))
	badSync := bytes.Clone(good)
	badSync[len(badSync)-1] ^= 1
	for _, tc := range []struct {
		name        string
		data        []byte
		err         error
		msg         string
		item, off   int64
		itemsBefore int
	}{
		{"empty", nil, errTruncated, "unexpected EOF", 0, 0, 0},
		{"magic", []byte("PAR1"), errFormat, "not an Avro object container file", 0, 0, 0},
		{"cut in a block", good[:len(good)-3], errTruncated, "unexpected EOF", 1, int64(header + 2 + block0 + SyncSize), 1},
		{"sync", badSync, errFormat, "sync marker mismatch", 1, int64(header + 2 + block0 + SyncSize), 1},
		{"count 0", append(bytes.Clone(good[:header]), 0, 2, 0), errFormat, "block of 0 items in 1 bytes", 0, int64(header), 0},
		{"too large", append(bytes.Clone(good[:header]), 2, 0x80, 0x80, 0x80, 0x02), errFormat, "block of 1 items in 2097152 bytes", 0, int64(header), 0},
		{"claims", append(append(bytes.Clone(good[:header]), 4, 2, 0), sync...), errFormat, "block claims 2 items in 1 bytes", 0, int64(header), 0},
	} {
		got, r, err := readItems(tc.data)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) || len(got) != tc.itemsBefore {
			t.Errorf("%s: %d items, %v; want %v with %q", tc.name, len(got), err, tc.err, tc.msg)
			continue
		}
		if r != nil && (r.Item() != tc.item || r.Offset() != tc.off) {
			t.Errorf("%s: item %d at %d, want %d at %d", tc.name, r.Item(), r.Offset(), tc.item, tc.off)
		}
	}
	// Stray bytes after the last item are reported when the next item is asked for, at the
	// last item and its block.
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, schema, Snappy, [2]string{"k", "v"})
	if err := w.WriteBlock(1, append(appendItem(nil, testItems()[1]), 0)); err != nil {
		t.Fatal(err)
	}
	header = len(file(t, Snappy, nil, 1))
	got, r, err := readItems(buf.Bytes())
	if !errors.Is(err, errFormat) || !strings.Contains(err.Error(), "1 bytes after the last item of the block") ||
		len(got) != 1 || r.Item() != 0 || r.Offset() != int64(header) {
		t.Errorf("stray bytes: %d items, %v, item %d at %d", len(got), err, r.Item(), r.Offset())
	}
}

// countingWriter counts the calls to Write.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestWriterWrites: the header and every block reach the underlying writer in one Write
// each, the same bytes as to a bytes.Buffer.
func TestWriterWrites(t *testing.T) {
	for _, codec := range []string{Null, Deflate, Snappy} {
		var cw countingWriter
		w, err := NewWriter(&cw, schema, codec)
		if err != nil {
			t.Fatal(err)
		}
		items := testItems()
		for _, it := range items {
			if err := w.WriteBlock(1, appendItem(nil, it)); err != nil {
				t.Fatal(err)
			}
		}
		if cw.writes != 1+len(items) {
			t.Errorf("%s: %d writes for the header and %d blocks", codec, cw.writes, len(items))
		}
		got, r, err := readItems(cw.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		sameItems(t, got, items)
		if r.Items() != int64(len(items)) {
			t.Errorf("%s: Items() = %d after %d items", codec, r.Items(), len(items))
		}
	}
}

// TestItems: Items counts the items Next handed out; Item is the last one's index.
func TestItems(t *testing.T) {
	r, err := NewReader(bytes.NewReader(file(t, Null, testItems(), 2)), &testConfig)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(len(testItems())) {
		if r.Items() != i {
			t.Fatalf("Items() = %d before item %d", r.Items(), i)
		}
		d, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		decodeItem(d)
		if r.Item() != i || r.Items() != i+1 {
			t.Fatalf("after item %d: Item() = %d, Items() = %d", i, r.Item(), r.Items())
		}
	}
	if _, err := r.Next(); err != io.EOF || r.Items() != int64(len(testItems())) {
		t.Errorf("at the end: %v, Items() = %d", err, r.Items())
	}
}

// TestDecoder: every primitive stops at the end of the data or at a bad value with an error
// that names the item, or the field where there is one.
func TestDecoder(t *testing.T) {
	for _, tc := range []struct {
		data []byte
		dec  func(*Decoder)
		msg  string
	}{
		{[]byte{0x80}, func(d *Decoder) { d.Long() }, "item ends inside a varint"},
		{bytes.Repeat([]byte{0xff}, 10), func(d *Decoder) { d.Long() }, "varint overflows 64 bits"},
		{AppendLong(nil, 1<<40), func(d *Decoder) { d.Int() }, "int 1099511627776 out of range"},
		{[]byte{1, 2, 3}, func(d *Decoder) { d.Float() }, "item ends inside a float"},
		{[]byte{1, 2, 3, 4, 5, 6, 7}, func(d *Decoder) { d.Double() }, "item ends inside a double"},
		{[]byte{4, 1}, func(d *Decoder) { d.Bytes() }, "bytes of length 2 with 1 bytes left"},
		{[]byte{1}, func(d *Decoder) { d.StringBytes() }, "string of length -1 with 0 bytes left"},
		{[]byte{4}, func(d *Decoder) { d.Union("") }, "test: malformed: union branch 2 of a [null, T] union"},
		{[]byte{4}, func(d *Decoder) { d.Union("u") }, "u: union branch 2"},
		{[]byte{6, 0, 0, 0, 0}, func(d *Decoder) { d.Floats("f", nil) }, "f: array block of 3 items with 4 bytes left"},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, func(d *Decoder) { d.Count("", 1) }, "array block count -9223372036854775808"},
	} {
		d := NewDecoder(tc.data, &testConfig)
		tc.dec(&d)
		if err := d.Err(); !errors.Is(err, errFormat) || !strings.Contains(err.Error(), tc.msg) || d.Len() != 0 {
			t.Errorf("%x: %v, %d bytes left; want %q", tc.data, d.Err(), d.Len(), tc.msg)
		}
	}
	// Blocks with negative counts (and sizes), as other writers may write them.
	data := []byte{3, 8}
	data = AppendFloat(AppendFloat(data, 1), 2)
	data = append(AppendFloat(append(data, 2), 3), 0)
	d := NewDecoder(data, &testConfig)
	if f := d.Doubles("", nil); len(f) != 0 || d.Err() == nil {
		t.Errorf("doubles from floats: %v %v", f, d.Err())
	}
	d = NewDecoder(data, &testConfig)
	if f := d.Floats("", nil); len(f) != 3 || f[2] != 3 || d.Err() != nil || d.Len() != 0 {
		t.Errorf("floats = %v, %v", f, d.Err())
	}
	d = NewDecoder(append(append(AppendLong(nil, 2), make([]byte, 16)...), 0, 7), &testConfig)
	if f := d.Doubles("", []float64{9}); len(f) != 3 || f[0] != 9 || d.Err() != nil || d.Len() != 1 {
		t.Errorf("doubles = %v, %v", f, d.Err())
	}
}

// TestDecodeAllocs: decoding items of a block allocates nothing but the arrays' storage.
func TestDecodeAllocs(t *testing.T) {
	data := appendItem(nil, testItems()[1])
	dst := make([]float32, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		d := NewDecoder(data, &testConfig)
		d.Long()
		d.Floats("f", dst[:0])
		d.Union("s")
		d.StringBytes()
		if d.Err() != nil || d.Len() != 0 {
			t.Fatal(d.Err())
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations", allocs)
	}
}

// FuzzReader: arbitrary input yields items or an error wrapping the Config's errors,
// never a panic.
func FuzzReader(f *testing.F) {
	for _, codec := range []string{Null, Deflate, Snappy} {
		f.Add(file(f, codec, testItems(), 2))
	}
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, err := readItems(data)
		if err != nil && !errors.Is(err, errFormat) && !errors.Is(err, errTruncated) {
			t.Fatalf("%v wraps neither error", err)
		}
	})
}
