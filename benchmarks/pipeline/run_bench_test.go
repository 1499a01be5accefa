package pipeline

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkRun runs the loop and the pipeline over the full suite's 1× input (131 072 rows
// in 8 files) in this process, for CPU and allocation profiles of the two side by side:
//
//	go test -run '^$' -bench Run -benchmem -count 5 ./benchmarks/pipeline
//	go test -run '^$' -bench Run/pipeline -memprofile mem.out ./benchmarks/pipeline
//	go tool pprof -sample_index=alloc_space -top mem.out
//
// B/op is what a run allocates (the pipeline's prism job included).
func BenchmarkRun(b *testing.B) {
	benchRun(b, Shape{BaseRows: 131072, BaseFiles: 8, MaxScale: 1, PS: 4, Version: 5, Unique: true}, 1)
}

// BenchmarkRunBatchRows runs both at 4× (262 144 rows) with ExampleBatch records of 256
// rows (the suite's) and of 1 024: the pipeline's extra cost is paid per element, so its
// ratio to the loop (ns/op of loop ÷ ns/op of pipeline) is closer to 1 with the larger
// records (benchmarks/NOTES.md, "The gap is per element"):
//
//	go test -run '^$' -bench RunBatchRows -count 5 ./benchmarks/pipeline
func BenchmarkRunBatchRows(b *testing.B) {
	for _, rows := range []int{256, 1024} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			benchRun(b, Shape{BaseRows: 65536, BaseFiles: 4, MaxScale: 4, PS: 4, Version: 5, Unique: true, BatchRows: rows}, 4)
		})
	}
}

// benchRun prepares sh and times the loop and the pipeline over its scale s.
func benchRun(b *testing.B, sh Shape, s int) {
	ctx := context.Background()
	d, err := Prepare(ctx, sh, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	want := sh.BaseRows * int64(s)
	for _, mode := range []string{ModeLoop, ModePipeline} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := Run(ctx, d.Job(mode, s, 0))
				if err != nil {
					b.Fatal(err)
				}
				if res.Rows != want {
					b.Fatalf("%s: %d rows, want %d", mode, res.Rows, want)
				}
			}
		})
	}
}
