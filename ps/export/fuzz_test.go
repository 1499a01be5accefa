package export

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// FuzzRoundTrip writes random entries (every optimizer kind, NaN payloads, fids ≥ 2^63,
// optional fields set or not) in every format, with random block and row group sizes,
// and reads them back exactly.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint16(100), uint8(2))
	f.Add(uint64(2), uint8(20), uint16(1), uint8(1))
	f.Add(uint64(3), uint8(0), uint16(60000), uint8(0))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, block uint16, rowGroup uint8) {
		rng := rand.New(rand.NewPCG(seed, 0))
		entries := randEntries(rng, int(n%40))
		codecs := []string{"null", "deflate", "snappy"}
		pcodecs := []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Zstd}
		for _, fm := range formats {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			data := writeEntries(t, fm, TableInfo{Name: "fuzz", Dim: int(seed % 5)}, entries, WithAllocator(mem),
				WithAvroCodec(codecs[seed%3]), WithAvroBlockSize(int(block)), WithRowGroupSize(int(rowGroup%16), 0),
				WithParquetCompression(pcodecs[seed%3]))
			table, got, err := readEntries(fm, data, WithAllocator(mem))
			if err != nil {
				t.Fatalf("%v: %v", fm, err)
			}
			if fm != EntryDump && table != "fuzz" {
				t.Fatalf("%v: table %q", fm, table)
			}
			sameEntries(t, got, entries)
			mem.AssertSize(t, 0)
		}
	})
}

// fuzzReader feeds arbitrary bytes to a reader: it returns entries or a *CorruptError,
// never panics, and returns its memory when it succeeds.
func fuzzReader(f *testing.F, fm Format, seeds ...[]byte) {
	rng := rand.New(rand.NewPCG(7, 7))
	entries := randEntries(rng, 5)
	f.Add(writeEntries(f, fm, TableInfo{Name: "t", Dim: 3}, entries))
	f.Add(writeEntries(f, fm, TableInfo{Name: "t"}, edgeEntries(), WithAvroCodec("null"), WithAvroBlockSize(50),
		WithRowGroupSize(2, 0), WithParquetCompression(compress.Codecs.Uncompressed)))
	f.Add(writeEntries(f, fm, TableInfo{Name: "t"}, nil))
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		_, _, err := readEntries(fm, data, WithAllocator(mem), WithFileName("fuzz"))
		var ce *CorruptError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("%v is not a *CorruptError", err)
		}
		if err == nil {
			mem.AssertSize(t, 0)
		}
	})
}

// FuzzAvroReader: arbitrary bytes to the Avro reader.
func FuzzAvroReader(f *testing.F) {
	fuzzReader(f, Avro, []byte("Obj\x01"), writeEntries(f, Avro, TableInfo{Name: "t"}, edgeEntries(), WithAvroCodec("snappy")))
}

// FuzzParquetReader: arbitrary bytes to the Parquet reader.
func FuzzParquetReader(f *testing.F) {
	fuzzReader(f, Parquet, []byte("PAR1PAR1"))
}

// FuzzEntryDumpReader: arbitrary bytes to the EntryDump (TFRecord) reader.
func FuzzEntryDumpReader(f *testing.F) {
	fuzzReader(f, EntryDump)
}
