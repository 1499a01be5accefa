package benchmarks

// Payload → batch, without file I/O: the cost of the ExampleBatch decoders alone.
//
//	go test -run '^$' -bench 'BenchmarkExampleBatchPayload' -benchmem ./benchmarks

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

func BenchmarkExampleBatchPayload(b *testing.B) {
	payload, err := proto.Marshal(SyntheticExampleBatch(1, DefaultShape))
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	base := memcpyMBps(len(payload))
	report := func(b *testing.B) {
		mbps := float64(len(payload)) * float64(b.N) / b.Elapsed().Seconds() / 1e6
		b.ReportMetric(float64(DefaultShape.Rows*b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(mbps/base, "x_memcpy")
	}
	b.Run("wire", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			rec, err := batch.DecodeExampleBatch(mem, payload)
			if err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		report(b)
	})
	b.Run("message", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			eb := &examplepb.ExampleBatch{}
			if err := proto.Unmarshal(payload, eb); err != nil {
				b.Fatal(err)
			}
			rec, err := batch.FromExampleBatch(mem, eb)
			if err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		report(b)
	})
}
