package pbstream

// go test -run '^$' -bench . -count 6 ./io/pbstream | tee new.txt   (compare with benchstat)

import (
	"bytes"
	"fmt"
	"testing"
)

// cycleReader returns data over and over; data holds whole records, so record boundaries
// line up across cycles and a Reader over it never ends.
type cycleReader struct {
	data []byte
	pos  int
}

func (c *cycleReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], c.data[c.pos:])
		n += m
		c.pos = (c.pos + m) % len(c.data)
	}
	return n, nil
}

var benchSizes = []int{256, 16 << 10}

// benchOpts is FilePBDataset's default framing: a sort id before each payload.
var benchOpts = Options{HasSortID: true}

const benchSortID = "21bacb96ae78a72"

func benchStream(b *testing.B, size int) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf, benchOpts)
	for i := range 64 {
		if err := w.WriteRecord(Record{Payload: bytes.Repeat([]byte{byte(i)}, size), SortID: []byte(benchSortID)}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkReader measures Next on uncompressed records with a sort id; one op is one record.
func BenchmarkReader(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			r := NewReader(&cycleReader{data: benchStream(b, size)}, benchOpts)
			b.SetBytes(int64(size + 16 + len(benchSortID)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkWriter measures WriteRecord of uncompressed records; one op is one record.
func BenchmarkWriter(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			w := NewWriter(discard{}, benchOpts)
			rec := Record{Payload: bytes.Repeat([]byte{7}, size), SortID: []byte(benchSortID)}
			b.SetBytes(int64(size + 16 + len(benchSortID)))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.WriteRecord(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkMemcpyBaseline copies the same bytes per op as BenchmarkReader, through the same
// kind of source, into a reused buffer: the ceiling for a reader that must copy.
func BenchmarkMemcpyBaseline(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			src := &cycleReader{data: benchStream(b, size)}
			dst := make([]byte, size+16+len(benchSortID))
			b.SetBytes(int64(len(dst)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := src.Read(dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
