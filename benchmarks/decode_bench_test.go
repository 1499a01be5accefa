package benchmarks

// Decode throughput, file bytes → Arrow batches, against memcpy bandwidth measured in the
// same run. Reproduce:
//
//	go test -run '^$' -bench 'BenchmarkDecode' -benchmem -count 5 ./benchmarks | tee decode.txt
//
// Each sub-benchmark reports MB/s of file bytes and "x_memcpy": its MB/s divided by the
// memcpy MB/s measured just before it in the same process.

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/schemas/batch"
)

// memcpyMBps measures copy bandwidth for buffers of n bytes.
func memcpyMBps(n int) float64 {
	src := make([]byte, n)
	dst := make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	var copied int
	start := time.Now()
	for time.Since(start) < 200*time.Millisecond {
		copy(dst, src)
		copied += n
	}
	return float64(copied) / time.Since(start).Seconds() / 1e6
}

// writeInput writes records of the given type derived from the synthetic shape and
// returns the file path and size.
func writeInput(b *testing.B, typ batch.Source, records int) (string, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "input.pb")
	w, err := recordio.Create(path, recordio.Options{PB: pbstream.Options{HasSortID: true}})
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	for i := range records {
		eb := SyntheticExampleBatch(uint64(i), DefaultShape)
		var msgs []proto.Message
		switch typ {
		case batch.SourceExampleBatch:
			msgs = append(msgs, eb)
		default:
			rec, err := batch.FromExampleBatch(mem, eb)
			if err != nil {
				b.Fatal(err)
			}
			if typ == batch.SourceExample {
				exs, err := batch.ToExamples(rec)
				if err != nil {
					b.Fatal(err)
				}
				for _, ex := range exs {
					msgs = append(msgs, ex)
				}
			} else {
				ins, err := batch.ToInstances(rec)
				if err != nil {
					b.Fatal(err)
				}
				for _, in := range ins {
					msgs = append(msgs, in)
				}
			}
			rec.Release()
		}
		for _, m := range msgs {
			p, err := proto.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Write(p); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, st.Size()
}

func BenchmarkDecode(b *testing.B) {
	for _, tc := range []struct {
		name string
		typ  batch.Source
		n    int // ExampleBatches of DefaultShape in the file
	}{
		{"examplebatch", batch.SourceExampleBatch, 8},
		{"example", batch.SourceExample, 8},
		{"instance", batch.SourceInstance, 8},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path, size := writeInput(b, tc.typ, tc.n)
			base := memcpyMBps(int(size))
			o := dataset.Options{Type: tc.typ, BatchRows: DefaultShape.Rows}
			o.Record.PB.HasSortID = true
			b.SetBytes(size)
			b.ReportAllocs()
			rows := int64(0)
			for b.Loop() {
				r, err := dataset.Open([]string{path}, o)
				if err != nil {
					b.Fatal(err)
				}
				for {
					rec, err := r.Next(context.Background())
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					rows += rec.NumRows()
					rec.Release()
				}
			}
			mbps := float64(size) * float64(b.N) / b.Elapsed().Seconds() / 1e6
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(base, "memcpy_MB/s")
			b.ReportMetric(mbps/base, "x_memcpy")
		})
	}
}

var _ arrow.RecordBatch
