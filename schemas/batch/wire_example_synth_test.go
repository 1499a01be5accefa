package batch_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// TestDecodeExamplesSynth compares the Example wire decoder with proto.Unmarshal +
// FromExamples on io/synth's Example files (the generator the benchmarks and the CLI use):
// v1 and v2 fids, empty fid lists, repeated shared cells, a dense feature, labels, LineIds
// and data source keys. Every batch must be decoded by the wire path itself.
func TestDecodeExamplesSynth(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config func(c *synth.Config)
	}{
		{"v1", func(c *synth.Config) {}},
		{"v2 fc_slot", func(c *synth.Config) { c.FidVersion, c.Naming, c.FirstSlot = 2, synth.NamingFcSlot, 300 }},
		{"bare", func(c *synth.Config) { c.Dense, c.Tasks, c.Shared, c.FidsMin = 0, 0, 0, 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := synth.DefaultConfig()
			c.Type = batch.SourceExample
			c.Rows, c.BatchRows = 300, 64
			c.Features, c.Shared = 5, 2
			c.FidsMin, c.FidsMax = 0, 4
			c.Vocab, c.Dense, c.Tasks, c.PositiveRate, c.Users = 1000, 3, 2, 0.3, 50
			tc.config(&c)
			res, err := synth.Generate(context.Background(), c, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			records := readRecords(t, res.Files[0].Path, c)
			if len(records) != int(c.Rows) {
				t.Fatalf("%d records, want %d", len(records), c.Rows)
			}
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			for i, start := 0, 0; start < len(records); i, start = i+1, start+100 {
				chunk := records[start:min(start+100, len(records))]
				for _, keys := range [][]uint32{nil, make([]uint32, len(chunk))} {
					wire, ok := batch.DecodeExamplesWire(mem, chunk, keys)
					if !ok {
						t.Fatalf("chunk %d: the wire path did not decode the records", i)
					}
					exs := make([]*examplepb.Example, len(chunk))
					for r, b := range chunk {
						exs[r] = &examplepb.Example{}
						if err := proto.Unmarshal(b, exs[r]); err != nil {
							t.Fatal(err)
						}
						if keys != nil {
							exs[r].DataSourceKey = keys[r]
						}
					}
					msg, err := batch.FromExamples(mem, exs)
					if err != nil {
						t.Fatal(err)
					}
					batchtest.SameBatch(t, i, wire, msg)
					if !wire.Schema().Metadata().Equal(msg.Schema().Metadata()) {
						t.Fatalf("chunk %d: schema metadata differs", i)
					}
					wire.Release()
					msg.Release()
				}
			}
		})
	}
}

// readRecords returns the payloads of a generated file.
func readRecords(t *testing.T, path string, c synth.Config) [][]byte {
	t.Helper()
	r, err := recordio.Open(path, c.Record)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out [][]byte
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(rec.Payload))
	}
}
