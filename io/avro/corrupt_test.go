package avro

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

func arrowEmptyRecord() arrow.RecordBatch {
	return array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, 0)
}

// smallFile returns a small file of three batches (one without rows) and the batches.
func smallFile(t testing.TB, mem memory.Allocator, c Compression, blockSize int) ([]byte, []arrow.RecordBatch) {
	t.Helper()
	var recs []arrow.RecordBatch
	for _, eb := range []*examplepb.ExampleBatch{batchtest.SmallExampleBatch(2), batchtest.SmallExampleBatch(0), batchtest.SmallExampleBatch(3)} {
		rec, err := batch.FromExampleBatch(mem, eb)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return writeAll(t, recs, WithCompression(c), WithBlockSize(blockSize)), recs
}

// TestTruncation: a file cut anywhere either fails with an error or, when cut at a block
// boundary that is also a batch boundary, reads as a prefix of the batches. It never
// panics, never leaks and never returns a batch that was not written.
func TestTruncation(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, c := range compressions {
		data, recs := smallFile(t, mem, c, 100)
		clean := 0
		for cut := range len(data) {
			got, err := readAll(mem, data[:cut])
			rows := int64(0) // the Avro records of the batches read
			for i, g := range got {
				batchtest.SameBatch(t, i, g, recs[i])
				rows += max(g.NumRows(), 1) // a batch without rows is one record
			}
			batchtest.ReleaseAll(got)
			if err == nil {
				clean++
				if len(got) >= len(recs) {
					t.Fatalf("%s: cut at %d of %d reads all batches", c, cut, len(data))
				}
				continue
			}
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("%s: cut at %d: %v is not a *CorruptError", c, cut, err)
			}
			// The error is about the header or a record of the batch being read: one after
			// the records of the batches read.
			if ce.Batch != len(got) || ce.Record >= 0 && ce.Record < rows || ce.Record < -1 || ce.Record == -1 && cut > 0 && len(got) > 0 {
				t.Fatalf("%s: cut at %d after %d batches (%d rows): error at batch %d, record %d: %v", c, cut, len(got), rows, ce.Batch, ce.Record, err)
			}
		}
		if clean > len(recs)+1 {
			t.Errorf("%s: %d cuts read cleanly, want at most %d (batch ends at block ends)", c, clean, len(recs)+1)
		}
		batchtest.ReleaseAll(recs)
	}
}

// TestFlipSweep flips every byte of a small file (every 11th of the header's schema JSON):
// Read returns an error or valid batches, never panics and never leaks.
func TestFlipSweep(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, c := range compressions {
		data, recs := smallFile(t, mem, c, 1<<20)
		batchtest.ReleaseAll(recs)
		header := len(writeAll(t, nil, WithCompression(c))) // the same header, sync marker aside
		errs, flips := 0, 0
		for i := range data {
			if i < header-syncSize && i%11 != 0 {
				continue // sample the schema JSON of the header
			}
			for _, mask := range []byte{0x01, 0xff} {
				flips++
				bad := bytes.Clone(data)
				bad[i] ^= mask
				got, err := readAll(mem, bad)
				batchtest.ReleaseAll(got)
				if err != nil {
					errs++
					var ce *CorruptError
					if !errors.As(err, &ce) {
						t.Fatalf("%s: flip %d: %v is not a *CorruptError", c, i, err)
					}
				}
			}
		}
		t.Logf("%s: %d of %d flips detected", c, errs, flips)
	}
}
