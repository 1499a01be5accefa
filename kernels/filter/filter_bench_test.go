package filter

// go test -run '^$' -bench . -count 6 ./kernels/filter | tee new.txt   (compare with benchstat)

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/matrixpb"
)

const benchRows = 4096

// benchBatch builds benchRows Examples with a v1 and a v2 fid feature (8 fids each),
// labels and LineIds with actions and req_time.
func benchBatch(b *testing.B, opts ...batch.Option) arrow.RecordBatch {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	exs := make([]*examplepb.Example, benchRows)
	for i := range exs {
		v1 := make([]uint64, 8)
		v2 := make([]uint64, 8)
		for j := range v1 {
			v1[j] = fid.MakeV1(uint64(j+1), rng.Uint64())
			v2[j] = fid.MakeV2(uint64(j+100), rng.Uint64())
		}
		l := lid(func(l *matrixpb.LineId) {
			l.ReqTime = new(rng.Int64N(1000))
			l.Actions = []int32{rng.Int32N(5), rng.Int32N(5)}
			l.PreActions = []int32{rng.Int32N(5)}
		})
		exs[i] = ex([]float32{float32(rng.IntN(2)), 0.5}, l, fidV1("u", v1...), fidV2("v", v2...))
	}
	return examples(b, memory.DefaultAllocator, exs, opts...)
}

func reportRows(b *testing.B) {
	b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkFilterByFids(b *testing.B) {
	rec := benchBatch(b)
	defer rec.Release()
	f, _ := NewFilterByFids(FidsOptions{FilterFids: []uint64{1, 2, 3}, SelectSlots: []int32{1, 100}, ReqTimeMin: 10})
	var dst []int
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = f.Keep(rec, dst)
	}
	reportRows(b)
}

func BenchmarkFilterByValue(b *testing.B) {
	for _, v := range lineIDVariants {
		b.Run(v.name, func(b *testing.B) {
			rec := benchBatch(b, v.opts...)
			defer rec.Release()
			f, _ := NewFilterByValue(ValueOptions{Field: "actions", Op: "any", Operands: Operands{Ints: []int64{1, 3}}})
			var dst []int
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = f.Keep(rec, dst)
			}
			reportRows(b)
		})
	}
}

func BenchmarkNegativeSample(b *testing.B) {
	rec := benchBatch(b)
	defer rec.Release()
	f, _ := NewNegativeSample(NegativeSampleOptions{DropRate: 0.5, Threshold: 0.5})
	var dst []int
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = f.Keep(rec, dst)
	}
	reportRows(b)
}

func BenchmarkInstanceReweight(b *testing.B) {
	rec := benchBatch(b)
	defer rec.Release()
	w, _ := NewInstanceReweight(ReweightOptions{ActionPriority: []int32{1, 2, 3}, Rules: []ReweightRule{{Action: 1, Weight: 2, Label: 1}, {Action: 4, Weight: 1, Label: 0}}})
	b.ReportAllocs()
	for b.Loop() {
		out, err := w.Apply(memory.DefaultAllocator, rec)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	reportRows(b)
}

func BenchmarkAddLabel(b *testing.B) {
	rec := benchBatch(b)
	defer rec.Release()
	tasks, _ := ParseAddLabelConfig("1,2:3:1.0;4::0.5")
	a, _ := NewAddLabel(AddLabelOptions{Tasks: tasks, NewSampleRate: 0.5})
	b.ReportAllocs()
	for b.Loop() {
		out, err := a.Apply(memory.DefaultAllocator, rec)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	reportRows(b)
}
