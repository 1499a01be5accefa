package avro

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/linkedin/goavro/v2"

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
func readAll(mem memory.Allocator, data []byte) ([]arrow.RecordBatch, error) {
	r, err := NewReader(bytes.NewReader(data), mem)
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

var compressions = []Compression{CompressionNull, CompressionDeflate, CompressionSnappy}

// TestFixtureRoundTrip: the golden ExampleBatch survives a file and converts back to the
// same 34292 bytes, with every codec.
func TestFixtureRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	for _, c := range compressions {
		t.Run(string(c), func(t *testing.T) {
			data := writeAll(t, []arrow.RecordBatch{rec}, WithCompression(c))
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
		})
	}
}

// TestManyBatches: batches of different sources and columns, zero-row batches and special
// floats share one file; with small blocks a batch spans blocks and a block holds parts of
// several batches.
func TestManyBatches(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	recs := batchtest.MixedBatches(t, mem, rand.New(rand.NewPCG(seed, 1)))
	defer batchtest.ReleaseAll(recs)
	for _, c := range compressions {
		for _, bs := range []int{1, 700, DefaultBlockSize} {
			data := writeAll(t, recs, WithCompression(c), WithBlockSize(bs))
			got, err := readAll(mem, data)
			if err != nil {
				batchtest.ReleaseAll(got)
				t.Fatalf("%s/%d: %v", c, bs, err)
			}
			if len(got) != len(recs) {
				t.Fatalf("%s/%d: read %d batches, want %d", c, bs, len(got), len(recs))
			}
			for i := range recs {
				batchtest.SameBatch(t, i, got[i], recs[i])
			}
			batchtest.CheckFixture(t, got[7])
			batchtest.ReleaseAll(got)
		}
	}
}

// TestEmptyFile: a file without batches reads as a clean EOF, repeatedly.
func TestEmptyFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	data := writeAll(t, nil)
	r, err := NewReader(bytes.NewReader(data), mem)
	if err != nil {
		t.Fatal(err)
	}
	if r.Compression() != CompressionDeflate {
		t.Errorf("compression = %q", r.Compression())
	}
	for range 2 {
		if rec, err := r.Read(); rec != nil || err != io.EOF {
			t.Fatalf("Read = %v, %v; want nil, io.EOF", rec, err)
		}
	}
}

// TestRowNullVsEmpty: every nullable field keeps null apart from empty, and fids at or above
// 2^63 survive the bit-cast to long.
func TestRowNullVsEmpty(t *testing.T) {
	codec, err := rowCodec()
	if err != nil {
		t.Fatal(err)
	}
	w, dsk := float32(0.5), uint32(math.MaxUint32)
	rows := []batch.Row{
		{BatchSchema: []byte{}, BatchRows: 3},
		{Label: batch.Float32s{}, InstanceWeight: &w, LineID: []byte{}, DataSourceKey: &dsk, Extra: []byte{}, FidOrder: []int32{}},
		{Label: batch.Float32s{1, -2}, LineID: []byte{1}, Extra: []byte{2}, FidOrder: []int32{0, 3},
			Features: []batch.Cell{{Name: "a", Kind: batch.KindFidV1List, Fids: []uint64{0, 1 << 63, math.MaxUint64}},
				{Name: "", Kind: batch.KindAbsent, FidLists: [][]uint64{nil, {7}}, BytesLists: [][][]byte{{{}, {1}}}},
				{Name: "é", Kind: batch.KindDoubleLists, DoubleLists: []batch.Float64s{{1}, nil}, Bytes: [][]byte{{}}}}},
	}
	for i, row := range rows {
		bin, err := codec.BinaryFromNative(nil, rowNative(&row))
		if err != nil {
			t.Fatal(err)
		}
		d := decoder{buf: bin}
		got, err := d.row()
		if err != nil {
			t.Fatal(err)
		}
		if len(d.buf) != 0 {
			t.Errorf("row %d: %d bytes left", i, len(d.buf))
		}
		if !reflect.DeepEqual(normalize(got), normalize(row)) {
			t.Errorf("row %d:\n got %#v\nwant %#v", i, got, row)
		}
		for _, p := range []struct {
			name     string
			got, exp bool
		}{
			{"batch_schema", got.BatchSchema == nil, row.BatchSchema == nil},
			{"label", got.Label == nil, row.Label == nil},
			{"line_id", got.LineID == nil, row.LineID == nil},
			{"extra", got.Extra == nil, row.Extra == nil},
			{"fid_order", got.FidOrder == nil, row.FidOrder == nil},
			{"instance_weight", got.InstanceWeight == nil, row.InstanceWeight == nil},
			{"data_source_key", got.DataSourceKey == nil, row.DataSourceKey == nil},
		} {
			if p.got != p.exp {
				t.Errorf("row %d: %s null = %v, want %v", i, p.name, p.got, p.exp)
			}
		}
	}
}

// normalize makes the empty slices of cells nil, where null and empty mean the same.
func normalize(r batch.Row) batch.Row {
	cells := make([]batch.Cell, len(r.Features))
	for i, c := range r.Features {
		if len(c.Fids) == 0 {
			c.Fids = nil
		}
		if len(c.Bytes) == 0 {
			c.Bytes = nil
		}
		for j := range c.Bytes {
			if len(c.Bytes[j]) == 0 {
				c.Bytes[j] = nil
			}
		}
		for j := range c.FidLists {
			if len(c.FidLists[j]) == 0 {
				c.FidLists[j] = nil
			}
		}
		for j := range c.DoubleLists {
			if len(c.DoubleLists[j]) == 0 {
				c.DoubleLists[j] = nil
			}
		}
		for _, l := range c.BytesLists {
			for j := range l {
				if len(l[j]) == 0 {
					l[j] = nil
				}
			}
		}
		cells[i] = c
	}
	if len(cells) == 0 {
		cells = nil
	}
	r.Features = cells
	return r
}

// TestGoavroReadsOurFiles: goavro's own OCF reader reads our files and sees the rows we
// wrote; and our reader reads a file goavro wrote from the same rows.
func TestGoavroReadsOurFiles(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	rows, err := batch.Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range compressions {
		data := writeAll(t, []arrow.RecordBatch{rec}, WithCompression(c), WithBlockSize(10_000))
		ocf, err := goavro.NewOCFReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for ocf.Scan() {
			datum, err := ocf.Read()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(datum, any(rowNative(&rows[i]))) {
				t.Fatalf("%s: row %d: goavro reads\n%v\nwant\n%v", c, i, datum, rowNative(&rows[i]))
			}
			i++
		}
		if ocf.Err() != nil || i != len(rows) {
			t.Fatalf("%s: goavro read %d of %d rows: %v", c, i, len(rows), ocf.Err())
		}

		// A file written by goavro directly, one block per row.
		var buf bytes.Buffer
		codec, _ := rowCodec()
		gw, err := goavro.NewOCFWriter(goavro.OCFConfig{W: &buf, Codec: codec, CompressionName: string(c)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			if err := gw.Append([]any{rowNative(&rows[i])}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := readAll(mem, buf.Bytes())
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: read %d batches: %v", c, len(got), err)
		}
		batchtest.SameBatch(t, 0, got[0], rec)
		batchtest.ReleaseAll(got)
	}
}

// TestSchemaCheck: a file with the Row schema written differently (docs stripped) is read;
// a file of another schema is rejected.
func TestSchemaCheck(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	codec, _ := rowCodec()
	var buf bytes.Buffer
	if _, err := goavro.NewOCFWriter(goavro.OCFConfig{W: &buf, Schema: codec.CanonicalSchema()}); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(mem, buf.Bytes()); err != nil {
		t.Errorf("canonical Row schema: %v", err)
	}
	buf.Reset()
	if _, err := goavro.NewOCFWriter(goavro.OCFConfig{W: &buf, Schema: `{"type":"record","name":"Row","fields":[{"name":"a","type":"long"}]}`}); err != nil {
		t.Fatal(err)
	}
	_, err := readAll(mem, buf.Bytes())
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrFormat) || ce.Record != -1 || !strings.Contains(err.Error(), "not schemas/avsc.Row") {
		t.Errorf("foreign schema: %v", err)
	}
	if _, err := readAll(mem, []byte("PAR1")); !errors.Is(err, ErrFormat) {
		t.Errorf("not avro: %v", err)
	}
	if _, err := readAll(mem, nil); !errors.Is(err, ErrTruncated) {
		t.Errorf("empty input: %v", err)
	}
}

// TestDecoderBlocks: arrays written in several blocks, negative (sized) block counts
// included, decode; counts larger than the data are rejected before allocating.
func TestDecoderBlocks(t *testing.T) {
	// fid_order = [1, 2, 3] as blocks {-2 (size 2): 1, 2} {1: 3} {0}.
	row := []byte{0, 0, 0, 0, 0, 0, 0, 0, 2, 0x03, 4, 2, 4, 2, 6, 0}
	d := decoder{buf: row}
	got, err := d.row()
	if err != nil || !reflect.DeepEqual(got.FidOrder, []int32{1, 2, 3}) || len(d.buf) != 0 {
		t.Fatalf("row = %+v, %v, %d bytes left", got, err, len(d.buf))
	}
	for _, bad := range [][]byte{
		{0, 0, 0, 0, 0, 0, 0, 0, 2, 0xfe, 0xff, 0xff, 0xff, 0x0f}, // 2^31-1 items in 0 bytes
		{0, 0, 0, 0, 0, 0, 0, 0, 2, 1},                            // count -1 without a size
		{0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		{4},        // union branch 2
		{2, 0x7f},  // negative bytes length
		{0, 0, 24}, // 12 cells in no bytes
	} {
		d := decoder{buf: bad}
		if _, err := d.row(); !errors.Is(err, ErrFormat) {
			t.Errorf("%x: err = %v", bad, err)
		}
	}
}

// TestWriterErrors: bad options and use after Close fail cleanly; Close does not close w.
func TestWriterErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	if _, err := NewWriter(io.Discard, WithCompression("zstd")); err == nil || !strings.HasPrefix(err.Error(), errPrefix) {
		t.Errorf("unknown codec: %v", err)
	}
	cw := &closeWriter{}
	w, err := NewWriter(cw)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil || cw.closed {
		t.Fatalf("Close = %v, closed w = %v", err, cw.closed)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	rec, _ := batch.FromExamples(mem, nil)
	defer rec.Release()
	if err := w.Write(rec); err == nil {
		t.Error("Write after Close succeeded")
	}
	bad := arrowEmptyRecord()
	w, _ = NewWriter(io.Discard)
	if err := w.Write(bad); err == nil || !strings.Contains(err.Error(), "batch 0") {
		t.Errorf("non-batch record: %v", err)
	}
	bad.Release()
}

type closeWriter struct {
	bytes.Buffer
	closed bool
}

func (c *closeWriter) Close() error { c.closed = true; return nil }
