package synth

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/schemas/batch"
)

func TestPerf1M(t *testing.T) {
	if os.Getenv("SYNTH_PERF") == "" {
		t.Skip()
	}
	for _, typ := range []batch.Source{batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance} {
		c := DefaultConfig()
		c.Type, c.Rows, c.Features, c.Shared, c.Vocab, c.Files = typ, 1_000_000, 100, 0, 1_000_000, 4
		c.Record.Codec = compress.None
		if os.Getenv("SYNTH_CODEC") == "zstd" {
			c.Record.Codec = compress.Zstd
		}
		dir := t.TempDir()
		start := time.Now()
		res, err := Generate(context.Background(), c, dir)
		if err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		t.Logf("%v: %d rows, %d records, %.1f MB in %v: %.0f rows/s", typ, res.Rows, res.Records, float64(res.Bytes)/1e6, el, float64(res.Rows)/el.Seconds())
		for _, f := range res.Files {
			os.Remove(f.Path)
		}
	}
}
