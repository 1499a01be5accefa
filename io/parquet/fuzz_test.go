package parquet

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

// FuzzRoundTrip writes random small batches (every source, zero-row batches, NaN and
// infinities, columns only some batches have) into one file, with row groups of random
// size that split or pack batches, and reads them back exactly.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint8(0))
	f.Add(uint64(2), uint8(4), uint8(3))
	f.Add(uint64(3), uint8(5), uint8(0x82))
	f.Fuzz(func(t *testing.T, seed uint64, n, rowGroup uint8) {
		rng := rand.New(rand.NewPCG(seed, 0))
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		var recs []arrow.RecordBatch
		for range int(n % 6) {
			recs = append(recs, batchtest.RandBatch(t, mem, rng, 4))
		}
		defer batchtest.ReleaseAll(recs)
		if _, err := FileSchema(schemasOf(recs)...); err != nil {
			return // two sources gave one column different types
		}
		var opts []Option
		if rg := int64(rowGroup & 0x7f); rg > 0 {
			opts = append(opts, WithMaxRowGroupRows(rg))
		}
		if seed%2 == 0 {
			opts = append(opts, WithCompression(compress.Codecs.Snappy))
		}
		checkAll(t, mem, writeAll(t, mem, recs, rowGroup&0x80 != 0, opts...), recs)
	})
}

// FuzzReader feeds arbitrary bytes to the reader: it returns batches or an error and never
// panics; a successful read returns all its memory.
func FuzzReader(f *testing.F) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	for _, c := range sweepCodecs {
		data, recs := smallFile(f, mem, c)
		batchtest.ReleaseAll(recs)
		f.Add(data)
	}
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		got, err := readAll(mem, data)
		batchtest.ReleaseAll(got)
		if err == nil {
			mem.AssertSize(t, 0)
		}
	})
}
