package jsonl

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

// FuzzRoundTrip writes random small batches (every source, zero-row batches, NaN and
// infinities) and reads them back exactly.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(3))
	f.Add(uint64(2), uint8(1))
	f.Add(uint64(3), uint8(5))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8) {
		rng := rand.New(rand.NewPCG(seed, 0))
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		var recs []arrow.RecordBatch
		for range int(n % 6) {
			recs = append(recs, batchtest.RandBatch(t, mem, rng, 4))
		}
		defer batchtest.ReleaseAll(recs)
		got, err := readAll(mem, writeAll(t, recs))
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
	})
}

// FuzzReader feeds arbitrary bytes to the reader: it returns batches or a *CorruptError,
// never panics and never leaks.
func FuzzReader(f *testing.F) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	data, recs := smallFile(f, mem)
	batchtest.ReleaseAll(recs)
	f.Add(data)
	f.Add([]byte(`{"batch_schema":"","batch_rows":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		got, err := readAll(mem, data, WithBufferSize(64))
		batchtest.ReleaseAll(got)
		var ce *CorruptError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("%v is not a *CorruptError", err)
		}
	})
}
