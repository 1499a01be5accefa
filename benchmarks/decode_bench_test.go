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
	"path/filepath"
	"testing"
	"time"

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

// decodeCases are the files of the decode benchmarks: 8 ExampleBatches of DefaultShape
// as each record type.
var decodeCases = []struct {
	name string
	typ  batch.Source
	n    int // ExampleBatches of DefaultShape in the file
}{
	{"examplebatch", batch.SourceExampleBatch, 8},
	{"example", batch.SourceExample, 8},
	{"instance", batch.SourceInstance, 8},
}

func BenchmarkDecode(b *testing.B) {
	for _, tc := range decodeCases {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "input.pb")
			size, err := WriteDecodeInput(path, tc.typ, tc.n)
			if err != nil {
				b.Fatal(err)
			}
			base := memcpyMBps(int(size))
			b.SetBytes(size)
			b.ReportAllocs()
			rows := int64(0)
			d := NewDecoder()
			for b.Loop() {
				n, err := d.File(context.Background(), path, tc.typ)
				if err != nil {
					b.Fatal(err)
				}
				rows += n
			}
			mbps := float64(size) * float64(b.N) / b.Elapsed().Seconds() / 1e6
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(base, "memcpy_MB/s")
			b.ReportMetric(mbps/base, "x_memcpy")
		})
	}
}

// BenchmarkDecodeParallel is BenchmarkDecode through Decoder.FileParallel on 2 goroutines
// (one more frames the file), the suite's 2-goroutine decode figure.
func BenchmarkDecodeParallel(b *testing.B) {
	for _, tc := range decodeCases {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "input.pb")
			size, err := WriteDecodeInput(path, tc.typ, tc.n)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			d := NewDecoder()
			for b.Loop() {
				if _, err := d.FileParallel(context.Background(), path, tc.typ, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
