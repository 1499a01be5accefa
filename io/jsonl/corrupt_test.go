package jsonl

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

func emptyRecord() arrow.RecordBatch {
	return array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, 0)
}

// smallFile returns a file of three batches (2 rows, none, 3 rows) and the batches.
func smallFile(t testing.TB, mem memory.Allocator) ([]byte, []arrow.RecordBatch) {
	t.Helper()
	var recs []arrow.RecordBatch
	for _, eb := range []*examplepb.ExampleBatch{batchtest.SmallExampleBatch(2), batchtest.SmallExampleBatch(0), batchtest.SmallExampleBatch(3)} {
		rec, err := batch.FromExampleBatch(mem, eb)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return writeAll(t, recs), recs
}

// TestTruncation: a file cut anywhere either fails with an error or, when cut at the end of
// a batch (before or after its newline), reads as a prefix of the batches. It never panics,
// never leaks and never returns a batch that was not written.
func TestTruncation(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	data, recs := smallFile(t, mem)
	defer batchtest.ReleaseAll(recs)
	clean := 0
	for cut := range len(data) {
		got, err := readAll(mem, data[:cut])
		for i, g := range got {
			batchtest.SameBatch(t, i, g, recs[i])
		}
		batchtest.ReleaseAll(got)
		if err == nil {
			clean++
			continue
		}
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("cut at %d: %v is not a *CorruptError", cut, err)
		}
	}
	if want := 1 + 2*(len(recs)-1) + 1; clean != want {
		t.Errorf("%d cuts read cleanly, want %d (the empty file and each batch end)", clean, want)
	}
}

// TestFlipSweep flips every byte of a small file: Read returns an error or valid batches,
// never panics and never leaks.
func TestFlipSweep(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	data, recs := smallFile(t, mem)
	batchtest.ReleaseAll(recs)
	errs := 0
	for i := range data {
		for _, mask := range []byte{0x01, 0xff} {
			bad := bytes.Clone(data)
			bad[i] ^= mask
			got, err := readAll(mem, bad)
			batchtest.ReleaseAll(got)
			if err != nil {
				errs++
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("flip %d: %v is not a *CorruptError", i, err)
				}
			}
		}
	}
	t.Logf("%d of %d flips detected", errs, 2*len(data))
}
