package pipeline

import (
	"context"
	"testing"
)

// BenchmarkRun runs the loop and the pipeline over the suite's 1× input (65 536 rows in 4
// files) in this process, for CPU and allocation profiles of the two side by side:
//
//	go test -run '^$' -bench Run -benchmem -count 5 ./benchmarks/pipeline
//	go test -run '^$' -bench Run/pipeline -memprofile mem.out ./benchmarks/pipeline
//	go tool pprof -sample_index=alloc_space -top mem.out
//
// B/op is what a run allocates (the pipeline's prism job included).
func BenchmarkRun(b *testing.B) {
	ctx := context.Background()
	d, err := Prepare(ctx, Shape{BaseRows: 65536, BaseFiles: 4, MaxScale: 1, PS: 4, Version: 5, Unique: true}, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{ModeLoop, ModePipeline} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := Run(ctx, d.Job(mode, 1, 0))
				if err != nil {
					b.Fatal(err)
				}
				if res.Rows != 65536 {
					b.Fatalf("%s: %d rows, want 65536", mode, res.Rows)
				}
			}
		})
	}
}
