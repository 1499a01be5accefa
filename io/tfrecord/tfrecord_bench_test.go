package tfrecord

// go test -run '^$' -bench . -count 6 ./io/tfrecord | tee new.txt   (compare with benchstat)

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

func benchStream(b *testing.B, size int) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := range 64 {
		if err := w.Write(bytes.Repeat([]byte{byte(i)}, size)); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkReader measures Next on uncompressed records; one op is one record.
func BenchmarkReader(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			r := NewReader(&cycleReader{data: benchStream(b, size)})
			b.SetBytes(int64(size + HeaderSize + FooterSize))
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

// BenchmarkWriter measures Write of uncompressed records; one op is one record.
func BenchmarkWriter(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			w := NewWriter(discard{})
			payload := bytes.Repeat([]byte{7}, size)
			b.SetBytes(int64(size + HeaderSize + FooterSize))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Write(payload); err != nil {
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
			dst := make([]byte, size+HeaderSize+FooterSize)
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
