package batch_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

// TestDecodeExamplesSynth compares the Example wire decoder with proto.Unmarshal +
// FromExamples on io/synth's Example files (the generator the benchmarks and the CLI use):
// v1 and v2 fids, empty fid lists, repeated shared cells, a dense feature, labels, LineIds
// and data source keys. Every batch must be decoded by the wire path itself.
func TestDecodeExamplesSynth(t *testing.T) {
	testDecodeSynth(t, batch.SourceExample, batch.DecodeExamplesWire, batch.SlowExamples)
}

// TestDecodeInstancesSynth is TestDecodeExamplesSynth for the Instance wire decoder and
// io/synth's Instance files: v1 fids in the top-level fid field, v2 fids in named features.
func TestDecodeInstancesSynth(t *testing.T) {
	testDecodeSynth(t, batch.SourceInstance, batch.DecodeInstancesWire, batch.SlowInstances)
}

// testDecodeSynth generates files of type typ and compares, chunk by chunk, with and
// without key overrides, the batches of the wire path (which must decode every chunk
// itself) with those of the message path.
func testDecodeSynth(t *testing.T, typ batch.Source,
	wire func(memory.Allocator, [][]byte, []uint32) (arrow.RecordBatch, bool),
	message func(memory.Allocator, [][]byte, []uint32) (arrow.RecordBatch, error)) {
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
			c.Type = typ
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
					w, ok := wire(mem, chunk, keys)
					if !ok {
						t.Fatalf("chunk %d: the wire path did not decode the records", i)
					}
					msg, err := message(mem, chunk, keys)
					if err != nil {
						t.Fatal(err)
					}
					batchtest.SameBatch(t, i, w, msg)
					if !w.Schema().Metadata().Equal(msg.Schema().Metadata()) {
						t.Fatalf("chunk %d: schema metadata differs", i)
					}
					w.Release()
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
