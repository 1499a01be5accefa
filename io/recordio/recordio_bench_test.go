package recordio

// go test -run '^$' -bench . -count 6 ./io/recordio | tee new.txt   (compare with benchstat)

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkRead reads a ~1 MiB PB stream (1 KiB payloads with sort ids) through each codec;
// one op is the whole stream, and the bytes counted are the decompressed ones.
func BenchmarkRead(b *testing.B) {
	var recs []Record
	x := uint64(88172645463325252)
	for i := range 1000 {
		p := make([]byte, 1024)
		for j := range p {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			p[j] = "abcdefghijklmnop"[x%16]
		}
		recs = append(recs, Record{Payload: p, SortID: []byte{byte(i)}})
	}
	for _, c := range codecs {
		b.Run(c.String(), func(b *testing.B) {
			o := Options{Codec: c, PB: pbOpts}
			var buf bytes.Buffer
			w, err := NewWriter(&buf, o)
			if err != nil {
				b.Fatal(err)
			}
			for _, rec := range recs {
				if err := w.WriteRecord(rec); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			data := buf.Bytes()
			plainSize := int64(len(recs) * (1024 + 1 + 16))
			b.SetBytes(plainSize)
			b.ReportAllocs()
			src := bytes.NewReader(data)
			for b.Loop() {
				src.Reset(data)
				r, err := NewReader(src, "bench", o)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					if _, err := r.Next(); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
					n++
				}
				if n != len(recs) {
					b.Fatalf("%d records", n)
				}
				r.Close()
			}
			b.ReportMetric(float64(len(recs)*b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(len(data))/float64(plainSize), "ratio")
		})
	}
}
