package synth

import (
	"context"
	"testing"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/schemas/batch"
)

// benchConfig is 100 sparse features (96 individual, 4 shared) with 1 to 3 fids from
// 10^6 per feature, 16 dense values and 2 tasks.
func benchConfig(typ batch.Source, rows int64) Config {
	c := DefaultConfig()
	c.Type, c.Rows, c.Features, c.Shared, c.Vocab, c.Dense, c.Tasks = typ, rows, 96, 4, 1_000_000, 16, 2
	return c
}

// go test -run '^$' -bench '^BenchmarkGenerate$' -count 6 ./io/synth | tee new.txt   (compare with benchstat)
//
// BenchmarkGenerate writes 20000 rows of benchConfig to a file per iteration (one file, one
// goroutine, no compression), so rows/s is the single-core generation speed including the
// writes.
func BenchmarkGenerate(b *testing.B) {
	for _, typ := range []batch.Source{batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance} {
		for _, codec := range []compress.Codec{compress.None, compress.Zstd} {
			b.Run(typ.String()+"/"+codec.String(), func(b *testing.B) {
				c := benchConfig(typ, 20000)
				c.Record.Codec = codec
				c.Parallel = 1
				dir := b.TempDir()
				var res Result
				b.ReportAllocs()
				for b.Loop() {
					var err error
					if res, err = Generate(context.Background(), c, dir); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(res.Bytes)
				b.ReportMetric(float64(c.Rows*int64(b.N))/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkGroup measures drawing and encoding one 256-row group without any I/O; it
// allocates nothing once the buffers have grown.
func BenchmarkGroup(b *testing.B) {
	for _, typ := range []batch.Source{batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance} {
		b.Run(typ.String(), func(b *testing.B) {
			c := benchConfig(typ, 1<<20)
			p, err := newPlan(c)
			if err != nil {
				b.Fatal(err)
			}
			g := newGen(p)
			g.feat, g.meta = newRNG(1, 0, streamFeatures), newRNG(1, 0, streamMeta)
			*g.labelSrc = *newRNG(1, 0, streamLabels)
			bytes := 0
			b.ReportAllocs()
			for b.Loop() {
				g.fill(0, c.BatchRows)
				bytes = 0
				if typ == batch.SourceExampleBatch {
					g.out = g.appendExampleBatch(g.out[:0])
					bytes = len(g.out)
				} else {
					for r := range g.rows {
						if typ == batch.SourceExample {
							g.out = g.appendExample(g.out[:0], r)
						} else {
							g.out = g.appendInstance(g.out[:0], r)
						}
						bytes += len(g.out)
					}
				}
			}
			b.SetBytes(int64(bytes))
			b.ReportMetric(float64(c.BatchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
