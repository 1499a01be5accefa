package sink_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/sink"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

func readAll(t *testing.T, path string, typ batch.Source) []arrow.RecordBatch {
	t.Helper()
	r, err := dataset.Open([]string{path}, dataset.Options{Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []arrow.RecordBatch
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

// TestRoundTrip writes the fixture in every format and reads it back unchanged.
func TestRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fix := batchtest.FixtureRecord(t, mem)
	defer fix.Release()
	dir := t.TempDir()
	for _, f := range []sink.Format{sink.TFRecord, sink.PBStream, sink.Parquet, sink.Avro, sink.JSONL} {
		path := filepath.Join(dir, "out"+f.Ext())
		w, err := sink.Create(path, sink.Options{Format: f, Mem: mem})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(fix); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if w.Rows() != fix.NumRows() {
			t.Fatalf("%s: Rows() = %d", f, w.Rows())
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("%s: the file is visible before Close", f)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		typ := batch.Source(0)
		if f == sink.PBStream || f == sink.TFRecord {
			typ = batch.SourceExampleBatch
		}
		got := readAll(t, path, typ)
		if len(got) != 1 {
			t.Fatalf("%s: %d batches", f, len(got))
		}
		batchtest.CheckFixture(t, got[0])
		batchtest.ReleaseAll(got)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []sink.Format{sink.TFRecord, sink.Parquet, sink.Avro} {
		w, err := sink.Create(filepath.Join(dir, "x"+f.Ext()), sink.Options{Format: f})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Fatalf("abort left %d files", len(ents))
	}
}

// TestParquetSchema: without a declared file schema the first batch decides, and a batch
// with other columns gets ErrSchema.
func TestParquetSchema(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	a := batchtest.RandBatch(t, mem, rng, 10)
	defer a.Release()
	var b arrow.RecordBatch
	for i := 0; i < 100 && b == nil; i++ {
		c := batchtest.RandBatch(t, mem, rng, 10)
		for _, f := range c.Schema().Fields() {
			if len(a.Schema().FieldIndices(f.Name)) == 0 {
				b = c
				break
			}
		}
		if b != c {
			c.Release()
		}
	}
	if b == nil {
		t.Fatal("no batch with a new column")
	}
	defer b.Release()
	path := filepath.Join(t.TempDir(), "p.parquet")
	w, err := sink.Create(path, sink.Options{Format: sink.Parquet, Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(a); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(b); !errors.Is(err, sink.ErrSchema) {
		t.Fatalf("Write of a batch with new columns = %v, want ErrSchema", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, path, 0)
	defer batchtest.ReleaseAll(got)
	if len(got) != 1 || got[0].NumRows() != a.NumRows() {
		t.Fatalf("read %d batches", len(got))
	}
}

func TestOptionErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := sink.Create(filepath.Join(dir, "a.avro"), sink.Options{Format: sink.Avro, Type: batch.SourceExample}); err == nil {
		t.Error("a message type was accepted for Avro")
	}
	if _, err := sink.Create("-", sink.Options{Format: sink.Parquet}); err == nil {
		t.Error("Parquet on standard output was accepted")
	}
	if _, err := sink.ParseFormat("csv"); err == nil {
		t.Error("csv parsed")
	}
	for _, n := range []string{"tfrecord", "PBStream", "parquet", "avro", "jsonl"} {
		if _, err := sink.ParseFormat(n); err != nil {
			t.Error(err)
		}
	}
}
