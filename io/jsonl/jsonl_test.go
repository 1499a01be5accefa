package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

func writeAll(t testing.TB, recs []arrow.RecordBatch, opts ...Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll reads every batch of data; on error it returns the batches read so far.
func readAll(mem memory.Allocator, data []byte, opts ...Option) ([]arrow.RecordBatch, error) {
	r, err := NewReader(bytes.NewReader(data), mem, opts...)
	if err != nil {
		return nil, err
	}
	var out []arrow.RecordBatch
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

// TestFixtureRoundTrip: the golden ExampleBatch survives a file and converts back to the
// same 34292 bytes.
func TestFixtureRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	data := writeAll(t, []arrow.RecordBatch{rec})
	if n := bytes.Count(data, []byte("\n")); n != int(rec.NumRows()) {
		t.Errorf("%d lines for %d rows", n, rec.NumRows())
	}
	got, err := readAll(mem, data)
	defer batchtest.ReleaseAll(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("read %d batches, want 1", len(got))
	}
	batchtest.SameBatch(t, 0, got[0], rec)
	batchtest.CheckFixture(t, got[0])
}

// TestManyBatches: batches of different sources and columns, zero-row batches and special
// floats share one file; tiny buffers change nothing.
func TestManyBatches(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	recs := batchtest.MixedBatches(t, mem, rand.New(rand.NewPCG(seed, 1)))
	defer batchtest.ReleaseAll(recs)
	for _, bs := range []int{1, DefaultBufferSize} {
		data := writeAll(t, recs, WithBufferSize(bs))
		if !bytes.Contains(data, []byte(`"NaN"`)) || !bytes.Contains(data, []byte(`"-Infinity"`)) {
			t.Errorf("special floats are not written as strings")
		}
		got, err := readAll(mem, data, WithBufferSize(bs))
		if err != nil {
			batchtest.ReleaseAll(got)
			t.Fatal(err)
		}
		if len(got) != len(recs) {
			t.Fatalf("read %d batches, want %d", len(got), len(recs))
		}
		for i := range recs {
			batchtest.SameBatch(t, i, got[i], recs[i])
		}
		batchtest.CheckFixture(t, got[7])
		batchtest.ReleaseAll(got)
	}
}

// TestEmptyInput: empty and blank inputs read as a clean EOF, repeatedly.
func TestEmptyInput(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, in := range []string{"", " \n\n\t"} {
		r, _ := NewReader(strings.NewReader(in), mem)
		for range 2 {
			if rec, err := r.Read(); rec != nil || err != io.EOF {
				t.Fatalf("%q: Read = %v, %v; want nil, io.EOF", in, rec, err)
			}
		}
	}
	if data := writeAll(t, nil); len(data) != 0 {
		t.Errorf("no batches wrote %q", data)
	}
}

// TestErrors: damaged input is reported with the batch, the record index and the byte
// offset of the record.
func TestErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	data, recs := smallFile(t, mem)
	batchtest.ReleaseAll(recs)
	lines := strings.SplitAfter(string(data), "\n")
	off := func(i int) int64 { return int64(len(strings.Join(lines[:i], ""))) }
	with := func(i int, line string) string {
		l := append([]string{}, lines...)
		l[i] = line
		return strings.Join(l, "")
	}
	for _, c := range []struct {
		name, in      string
		sentinel      error
		batch, record int
		offset        int64
		text          string
	}{
		{"unknown field", with(1, `{"features":[],"bogus":1}`+"\n"), ErrFormat, 0, 1, off(1), "unknown field"},
		{"null record", with(1, "null\n"), ErrFormat, 0, 1, off(1), "null"},
		{"not an object", with(3, "  [1]\n"), ErrFormat, 2, 3, off(3) + 2, "cannot unmarshal"},
		{"no schema", with(0, `{"features":[]}`+"\n"), ErrFormat, 0, 0, 0, "no batch schema"},
		{"new batch inside", with(1, lines[2]), ErrFormat, 0, 1, off(1), "next row starts a batch"},
		{"truncated row", string(data[:off(4)+10]), ErrTruncated, 2, 4, off(4), "unexpected EOF"},
		{"truncated batch", strings.Join(lines[:4], ""), ErrTruncated, 2, 3, off(3), "ends after 1 rows"},
		{"bad kind", strings.Replace(string(data), `"fid_v2_list"`, `"fid_v9_list"`, 1), ErrFormat, 0, 0, 0, "unknown cell kind"},
		{"bad float", strings.Replace(string(data), `-1.5`, `"-1.5x"`, 1), ErrFormat, 0, 0, 0, "float"},
		{"garbage", string(data) + "}", ErrFormat, 3, 6, int64(len(data)), "invalid character"},
		{"bad schema", with(0, badSchema(t, lines[0])), ErrFormat, 0, 0, 0, "not a batch layout type"},
	} {
		got, err := readAll(mem, []byte(c.in))
		batchtest.ReleaseAll(got)
		var ce *CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, c.sentinel) || ce.Batch != c.batch || ce.Record != int64(c.record) ||
			ce.Offset != c.offset || !strings.Contains(err.Error(), c.text) || !strings.HasPrefix(err.Error(), errPrefix) {
			t.Errorf("%s: err = %v; want %v in batch %d, record %d at offset %d, with %q", c.name, err, c.sentinel, c.batch, c.record, c.offset, c.text)
		}
	}
}

// badSchema returns the line with a batch schema whose column type the layout lacks.
func badSchema(t *testing.T, line string) string {
	var row batch.Row
	if err := json.Unmarshal([]byte(line), &row); err != nil {
		t.Fatal(err)
	}
	row.BatchSchema = []byte(`{"fields":[{"name":"x","type":"large_utf8"}]}`)
	b, err := json.Marshal(&row)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// TestWriterErrors: use after Close fails cleanly; Close does not close w.
func TestWriterErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cw := &closeWriter{}
	w, _ := NewWriter(cw)
	if err := w.Close(); err != nil || cw.closed {
		t.Fatalf("Close = %v, closed w = %v", err, cw.closed)
	}
	rec, _ := batch.FromExamples(mem, nil)
	defer rec.Release()
	if err := w.Write(rec); err == nil {
		t.Error("Write after Close succeeded")
	}
	w, _ = NewWriter(io.Discard)
	if err := w.Write(emptyRecord()); err == nil || !strings.Contains(err.Error(), "batch 0") {
		t.Errorf("non-batch record: %v", err)
	}
}

type closeWriter struct {
	bytes.Buffer
	closed bool
}

func (c *closeWriter) Close() error { c.closed = true; return nil }
