package avro

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

// FuzzRoundTrip writes random small batches (every source, zero-row batches, NaN and
// infinities) and reads them back exactly, with a random codec and block size.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint16(100))
	f.Add(uint64(2), uint8(1), uint16(1))
	f.Add(uint64(3), uint8(5), uint16(60000))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, blockSize uint16) {
		rng := rand.New(rand.NewPCG(seed, 0))
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		var recs []arrow.RecordBatch
		for range int(n % 6) {
			recs = append(recs, batchtest.RandBatch(t, mem, rng, 4))
		}
		defer batchtest.ReleaseAll(recs)
		data := writeAll(t, recs, WithCompression(compressions[seed%3]), WithBlockSize(int(blockSize)))
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
	})
}

// FuzzReader feeds arbitrary bytes after a valid header: the reader returns batches or a
// *CorruptError, never panics and never leaks.
func FuzzReader(f *testing.F) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	for _, c := range compressions {
		data, recs := smallFile(f, mem, c, 300)
		batchtest.ReleaseAll(recs)
		f.Add(data)
	}
	f.Add([]byte("Obj\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		got, err := readAll(mem, data)
		batchtest.ReleaseAll(got)
		var ce *CorruptError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("%v is not a *CorruptError", err)
		}
	})
}
