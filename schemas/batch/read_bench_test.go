package batch

// The readers' cost per batch, and the share of it spent indexing and validating the
// columns (readColumns), for batches of every source:
//
//	go test -run '^$' -bench 'BenchmarkRead' -benchmem -count 6 ./schemas/batch | tee new.txt   (compare with benchstat)

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/prototest"
)

const benchRows = 1024

// benchBatches returns one batch of benchRows rows per source, in the order
// ExampleBatch, Example, Instance.
func benchBatches(b *testing.B) (names []string, recs []arrow.RecordBatch) {
	mem := memory.NewGoAllocator()
	rng := rand.New(rand.NewPCG(7, 8))
	for _, mk := range []struct {
		name string
		fn   func() (arrow.RecordBatch, error)
	}{
		{"example_batch", func() (arrow.RecordBatch, error) {
			return FromExampleBatch(mem, prototest.ExampleBatch(rng, benchRows))
		}},
		{"example", func() (arrow.RecordBatch, error) { return FromExamples(mem, prototest.Examples(rng, benchRows)) }},
		{"instance", func() (arrow.RecordBatch, error) { return FromInstances(mem, prototest.Instances(rng, benchRows)) }},
	} {
		rec, err := mk.fn()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(rec.Release)
		names, recs = append(names, mk.name), append(recs, rec)
	}
	return names, recs
}

func benchReader(b *testing.B, read func(rec arrow.RecordBatch) error) {
	names, recs := benchBatches(b)
	for i, rec := range recs {
		b.Run(names[i], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := read(rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rec.NumRows())*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkReadColumns isolates indexing and validating a batch's columns, which every
// reader below pays once per batch.
func BenchmarkReadColumns(b *testing.B) {
	benchReader(b, func(rec arrow.RecordBatch) error { _, err := readColumns(rec); return err })
}

func BenchmarkReadToExampleBatch(b *testing.B) {
	names, recs := benchBatches(b)
	// Example and Instance batches carry fields an ExampleBatch cannot hold; only the
	// ExampleBatch batch converts.
	b.Run(names[0], func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ToExampleBatch(recs[0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(recs[0].NumRows())*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

func BenchmarkReadToInstances(b *testing.B) {
	_, recs := benchBatches(b)
	rec := recs[2] // the other sources hold kinds an Instance cannot
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ToInstances(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rec.NumRows())*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkReadRows(b *testing.B) {
	benchReader(b, func(rec arrow.RecordBatch) error { _, err := Rows(rec); return err })
}

func BenchmarkReadToExamples(b *testing.B) {
	_, recs := benchBatches(b)
	rec := recs[0] // Example rows carry a raw feature and Instance rows unmodelled fields
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ToExamples(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rec.NumRows())*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
