package metrics

import (
	"math/rand/v2"
	"testing"
)

// go test -run '^$' -bench . -benchmem -count 6 ./kernels/metrics | tee new.txt   (compare with benchstat)

func benchData(n int) (scores, labels []float32) {
	r := rand.New(rand.NewPCG(1, 2))
	scores, labels = make([]float32, n), make([]float32, n)
	for i := range scores {
		scores[i] = r.Float32()
		if r.Float32() < scores[i] {
			labels[i] = 1
		}
	}
	return scores, labels
}

func BenchmarkAUC(b *testing.B) {
	const n = 1 << 20
	scores, labels := benchData(n)
	b.SetBytes(8 * n)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := AUC(scores, labels); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkLogLoss(b *testing.B) {
	const n = 1 << 20
	probs, labels := benchData(n)
	b.SetBytes(8 * n)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LogLoss(probs, labels); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
