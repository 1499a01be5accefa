package parquet

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// smallFile returns a file of three batches (2 rows, none, 3 rows) and the batches.
func smallFile(t testing.TB, mem memory.Allocator, c compress.Compression) ([]byte, []arrow.RecordBatch) {
	t.Helper()
	var recs []arrow.RecordBatch
	for _, eb := range []*examplepb.ExampleBatch{batchtest.SmallExampleBatch(2), batchtest.SmallExampleBatch(0), batchtest.SmallExampleBatch(3)} {
		rec, err := batch.FromExampleBatch(mem, eb)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return writeAll(t, mem, recs, false, WithCompression(c)), recs
}

var sweepCodecs = []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Zstd}

// TestTruncation: every cut of a file is an error (the footer is at the end), never a
// panic or a leak.
func TestTruncation(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, c := range sweepCodecs {
		data, recs := smallFile(t, mem, c)
		batchtest.ReleaseAll(recs)
		for cut := range len(data) {
			got, err := readAll(mem, data[:cut])
			batchtest.ReleaseAll(got)
			if err == nil {
				t.Fatalf("%s: cut at %d of %d: no error", c, cut, len(data))
			}
		}
	}
}

// TestFlipSweep flips bytes across small files: Read returns an error or batches and never
// panics. A read that succeeds returns every byte it allocated; after an error, memory that
// arrow-go's Parquet decoder held when it failed may stay allocated (its error paths leak),
// which is counted and logged. Parquet pages carry no checksum, so a flip inside a page may
// decode to other values without an error.
func TestFlipSweep(t *testing.T) {
	for _, c := range []struct {
		codec  compress.Compression
		stride int
	}{{compress.Codecs.Uncompressed, 5}, {compress.Codecs.Zstd, 13}} {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		data, recs := smallFile(t, mem, c.codec)
		batchtest.ReleaseAll(recs)
		mem.AssertSize(t, 0)
		errs, flips, leaky := 0, 0, 0
		for i := 0; i < len(data)*2; i += c.stride {
			flips++
			bad := bytes.Clone(data)
			bad[i/2] ^= []byte{0x01, 0xff}[i%2]
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			got, err := readAll(mem, bad)
			batchtest.ReleaseAll(got)
			switch {
			case err == nil:
				mem.AssertSize(t, 0)
			case mem.CurrentAlloc() != 0:
				leaky++
				fallthrough
			default:
				errs++
			}
		}
		t.Logf("%s: %d bytes, %d of %d flips detected, %d errors left decoder memory allocated", c.codec, len(data), errs, flips, leaky)
	}
}
