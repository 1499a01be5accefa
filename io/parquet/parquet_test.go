package parquet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

func schemasOf(recs []arrow.RecordBatch) []*arrow.Schema {
	out := make([]*arrow.Schema, len(recs))
	for i, r := range recs {
		out[i] = r.Schema()
	}
	return out
}

// writeAll writes recs to a file whose schema is FileSchema of recs. With buffered, batches
// are packed into row groups (of WithMaxRowGroupRows rows).
func writeAll(t testing.TB, mem memory.Allocator, recs []arrow.RecordBatch, buffered bool, opts ...Option) []byte {
	t.Helper()
	fs, err := FileSchema(schemasOf(recs)...)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, fs, append([]Option{WithAllocator(mem)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	w.buffered = buffered
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
	defer r.Close()
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

func checkAll(t testing.TB, mem memory.Allocator, data []byte, recs []arrow.RecordBatch) {
	t.Helper()
	got, err := readAll(mem, data)
	defer batchtest.ReleaseAll(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("read %d batches, want %d", len(got), len(recs))
	}
	for i := range recs {
		batchtest.SameBatch(t, i, got[i], recs[i])
	}
}

// TestFixtureRoundTrip: the golden ExampleBatch survives a file and converts back to the
// same 34292 bytes, with each compression.
func TestFixtureRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	for _, c := range []compress.Compression{compress.Codecs.Zstd, compress.Codecs.Snappy, compress.Codecs.Uncompressed} {
		data := writeAll(t, mem, []arrow.RecordBatch{rec}, false, WithCompression(c))
		got, err := readAll(mem, data)
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: read %d batches: %v", c, len(got), err)
		}
		batchtest.SameBatch(t, 0, got[0], rec)
		batchtest.CheckFixture(t, got[0])
		batchtest.ReleaseAll(got)
	}
}

// TestManyBatches: batches of every source share one file through the union schema: a
// column only some batches have, a column SHARED in one batch and INDIVIDUAL in another, a
// null-typed column typed elsewhere, zero-row batches, NaN and infinities. Batches span row
// groups (small row group limits) or share them (buffered writes), and come back exactly.
func TestManyBatches(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	recs := batchtest.MixedBatches(t, mem, rand.New(rand.NewPCG(seed, 1)))
	defer batchtest.ReleaseAll(recs)
	fs, err := FileSchema(schemasOf(recs)...)
	if err != nil {
		t.Fatal(err)
	}
	// The union: "u" is run-end encoded in batch 3, a plain list in batch 4.
	if recs[3].Schema().Field(recs[3].Schema().FieldIndices("u")[0]).Type.ID() != arrow.RUN_END_ENCODED ||
		recs[4].Schema().Field(recs[4].Schema().FieldIndices("u")[0]).Type.ID() != arrow.LIST ||
		!fs.HasField("only_here") || recs[0].Schema().HasField("only_here") {
		t.Fatalf("test batches do not cover the union cases")
	}
	// Small row groups split the fixture into many row groups, slow under -race: those
	// cases run without it.
	small := append(recs[:7:7], recs[8:]...)
	for _, c := range []struct {
		name     string
		buffered bool
		rg       int64
		recs     []arrow.RecordBatch
	}{
		{"one row group per batch", false, 0, recs},
		{"packed", true, 1 << 20, recs},
		{"split", false, 2, small},
		{"packed 3", true, 3, small},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opts []Option
			if c.rg > 0 {
				opts = append(opts, WithMaxRowGroupRows(c.rg))
			}
			data := writeAll(t, mem, c.recs, c.buffered, opts...)
			checkAll(t, mem, data, c.recs)
			pf, err := file.NewParquetReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d row groups", pf.NumRowGroups())
		})
	}
}

// TestPlainColumns: other tools see plain columns: no run-end encoding, one row per sample,
// the union schema's types, the marker JSON on the first row of each batch only.
func TestPlainColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	recs := batchtest.MixedBatches(t, mem, rand.New(rand.NewPCG(1, 1)))
	defer batchtest.ReleaseAll(recs)
	recs = append(recs[:7:7], recs[8:]...) // without the fixture: faster under -race
	data := writeAll(t, mem, recs, false)
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// The Parquet schema: fids are INT64 UINT_64 in a 3-level LIST, the marker is a string.
	sc := pf.MetaData().Schema
	u := sc.Column(sc.ColumnIndexByName("u.list.element"))
	if u.PhysicalType() != parquet.Types.Int64 || !u.LogicalType().Equals(schema.NewIntLogicalType(64, false)) {
		t.Errorf("u: %s %s", u.PhysicalType(), u.LogicalType())
	}
	m := sc.Column(sc.ColumnIndexByName(BatchColumn))
	if m.PhysicalType() != parquet.Types.ByteArray || !m.LogicalType().Equals(schema.StringLogicalType{}) {
		t.Errorf("%s: %s %s", BatchColumn, m.PhysicalType(), m.LogicalType())
	}
	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), nil, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	if tbl.NumRows() != rows {
		t.Errorf("table has %d rows, batches %d", tbl.NumRows(), rows)
	}
	for i, f := range tbl.Schema().Fields() {
		if f.Type.ID() == arrow.RUN_END_ENCODED {
			t.Errorf("column %q is run-end encoded", f.Name)
		}
		if f.Name == BatchColumn && i != int(tbl.NumCols())-1 {
			t.Errorf("%s is column %d", BatchColumn, i)
		}
	}
	col := tbl.Column(int(tbl.NumCols()) - 1).Data()
	row := int64(0)
	var markers []marker
	for _, ch := range col.Chunks() {
		s := ch.(*array.String)
		for i := range s.Len() {
			if s.IsValid(i) {
				var mk marker
				if err := json.Unmarshal([]byte(s.Value(i)), &mk); err != nil {
					t.Fatalf("row %d: %v", row, err)
				}
				markers = append(markers, mk)
			}
			row++
		}
	}
	nonEmpty := 0
	for _, r := range recs {
		if r.NumRows() > 0 {
			if markers[nonEmpty].Rows != r.NumRows() {
				t.Errorf("marker %d says %d rows, want %d", nonEmpty, markers[nonEmpty].Rows, r.NumRows())
			}
			nonEmpty++
		}
	}
	if len(markers) != nonEmpty {
		t.Errorf("%d markers for %d batches with rows", len(markers), nonEmpty)
	}
	kv := pf.MetaData().KeyValueMetadata().FindValue(MetaEmptyBatches)
	var empties []emptyBatch
	if kv == nil || json.Unmarshal([]byte(*kv), &empties) != nil || len(empties) != 2 || empties[0].At != 5 {
		t.Errorf("%s = %v", MetaEmptyBatches, kv)
	}
}

// TestEmptyBatches: batches without rows at the start, between batches, at the end, alone,
// and a file without batches.
func TestEmptyBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	mk := func(rows int) arrow.RecordBatch {
		rec, err := batch.FromExampleBatch(mem, batchtest.SmallExampleBatch(rows))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	// A sliced batch without rows keeps its run-end encoded column.
	full := mk(3)
	defer full.Release()
	sliced := full.NewSlice(1, 1)
	defer sliced.Release()
	for _, rows := range [][]int{{}, {0}, {0, 0}, {0, 2, 0, 0, 3, 0}, {2, -1, 1}} {
		var recs []arrow.RecordBatch
		for _, n := range rows {
			if n < 0 {
				sliced.Retain()
				recs = append(recs, sliced)
				continue
			}
			recs = append(recs, mk(n))
		}
		checkAll(t, mem, writeAll(t, mem, recs, false), recs)
		batchtest.ReleaseAll(recs)
	}
}

// TestErrors: misuse and files that break the layout fail with errors naming the problem.
func TestErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	a, _ := batch.FromExampleBatch(mem, batchtest.SmallExampleBatch(2))
	defer a.Release()
	b, _ := batch.FromExampleBatch(mem, &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{
		{Name: "fids", Feature: []*examplepb.Feature{{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{}}}}},
		{Name: BatchColumn, Feature: []*examplepb.Feature{{}}}}})
	defer b.Release()
	if _, err := FileSchema(a.Schema(), b.Schema()); err == nil || !strings.HasPrefix(err.Error(), errPrefix) {
		t.Errorf("conflicting types: %v", err)
	}
	if _, err := FileSchema(b.Schema()); err == nil || !strings.Contains(err.Error(), "reserves") {
		t.Errorf("reserved column: %v", err)
	}
	fs, _ := FileSchema(a.Schema())
	w, _ := NewWriter(io.Discard, fs, WithAllocator(mem))
	if err := w.Write(b); err == nil || !strings.Contains(err.Error(), "batch 0") {
		t.Errorf("batch outside the file schema: %v", err)
	}
	if err := w.Write(a); err != nil {
		t.Errorf("a good batch after a rejected one: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Error(err)
	}
	cw := &closeWriter{}
	w, _ = NewWriter(cw, arrow.NewSchema(fs.Fields()[:fs.NumFields()-1], nil)) // BatchColumn added
	if err := w.Close(); err != nil || cw.closed {
		t.Errorf("Close = %v, closed w = %v", err, cw.closed)
	}
	if err := w.Write(a); err == nil {
		t.Error("Write after Close succeeded")
	}
	if _, err := NewWriter(io.Discard, arrow.NewSchema([]arrow.Field{{Name: BatchColumn, Type: arrow.BinaryTypes.Binary}}, nil)); err == nil {
		t.Error("binary marker column accepted")
	}

	// Files that break the layout.
	good := writeAll(t, mem, []arrow.RecordBatch{a, a}, false, WithCompression(compress.Codecs.Uncompressed))
	for _, c := range []struct {
		name string
		data []byte
		text string
	}{
		{"not parquet", []byte("Obj\x01 not parquet at all"), "open"},
		{"no marker column", plainFile(t, mem, nil), "no utf8 column"},
		{"no marker on row 0", plainFile(t, mem, []*string{nil, ptr(`{"rows":1,"schema":""}`)}), "does not start a batch"},
		{"bad marker", plainFile(t, mem, []*string{ptr(`{"rows":`), nil}), "__batch__"},
		{"too many rows", plainFile(t, mem, []*string{ptr(`{"rows":3,"schema":""}`), nil}), "batch of 3 rows at row 0 of 2"},
		{"bad schema", plainFile(t, mem, []*string{ptr(`{"rows":2,"schema":"/////w=="}`), nil}), "batch schema"},
		{"marker inside a batch", markedFile(t, mem, a, 2, 2), "another batch starts inside it"},
		{"short batch", markedFile(t, mem, a, 1, -1), "does not start a batch"},
	} {
		got, err := readAll(mem, c.data)
		batchtest.ReleaseAll(got)
		if err == nil || !strings.Contains(err.Error(), c.text) || !strings.HasPrefix(err.Error(), errPrefix) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.text)
		} else if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v does not wrap ErrFormat", c.name, err)
		}
	}
	r, err := NewReader(bytes.NewReader(good), mem)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(); err == nil {
		t.Error("Read after Close succeeded")
	}
}

func ptr(s string) *string { return &s }

// plainFile writes a two-row file with an int64 column and, when markers is not nil, a
// BatchColumn holding markers.
func plainFile(t *testing.T, mem memory.Allocator, markers []*string) []byte {
	fields := []arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}
	if markers != nil {
		fields = append(fields, markerField)
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	for _, m := range markers {
		if m == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(*m)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
	defer tbl.Release()
	if err := pqarrow.WriteTable(tbl, &buf, 10, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// markedFile writes rec with the marker of row 0 claiming rows0 rows and, unless rows1 is
// negative, a marker on row 1 claiming rows1 rows.
func markedFile(t *testing.T, mem memory.Allocator, rec arrow.RecordBatch, rows0, rows1 int64) []byte {
	enc, err := batch.EncodeSchema(rec.Schema())
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := FileSchema(rec.Schema())
	flat, _ := batch.Flatten(mem, rec)
	defer flat.Release()
	wide, err := batch.Widen(mem, flat, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Release()
	mb := array.NewStringBuilder(mem)
	defer mb.Release()
	for _, n := range []int64{rows0, rows1} {
		if n < 0 {
			mb.AppendNull()
			continue
		}
		js, _ := json.Marshal(marker{Rows: n, Schema: enc})
		mb.Append(string(js))
	}
	m := mb.NewArray()
	defer m.Release()
	cols := append([]arrow.Array{}, wide.Columns()...)
	cols[len(cols)-1] = m
	out := array.NewRecordBatch(fs, cols, 2)
	defer out.Release()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(fs, &buf, nil, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(out); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type closeWriter struct {
	bytes.Buffer
	closed bool
}

func (c *closeWriter) Close() error { c.closed = true; return nil }

// TestCloseKeepsFile: Close releases the reader but leaves the caller's file open.
func TestCloseKeepsFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := emptyOf(t, mem)
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "x.parquet")
	if err := os.WriteFile(path, writeAll(t, mem, []arrow.RecordBatch{rec}, false), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewReader(f, mem)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Errorf("the file was closed by Reader.Close: %v", err)
	}
}

// emptyOf returns a one-row batch with a SHARED column.
func emptyOf(t *testing.T, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	rec, err := batch.FromExampleBatch(mem, &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{{
		Name: "s", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
