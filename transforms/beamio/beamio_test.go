package beamio_test

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/io/sink"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/schemas/prototest"
	"github.com/monolith-go/monolith/transforms/beamio"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

func init() {
	register.Function1x2[arrow.RecordBatch, string, error](rowDigests)
	register.Function1x1[arrow.RecordBatch, int](numRows)
	register.Function1x1[string, string](baseName)
}

func numRows(rec arrow.RecordBatch) int { return int(rec.NumRows()) }

func baseName(p string) string { return filepath.Base(p) }

// rowDigests identifies the rows of a batch, one line per row, as Examples (any source
// converts), so batches cut differently compare equal row by row.
func rowDigests(rec arrow.RecordBatch) (string, error) {
	src, err := batch.SourceOf(rec.Schema())
	if err != nil {
		return "", err
	}
	var msgs []proto.Message
	if src == batch.SourceInstance {
		ins, err := batch.ToInstances(rec)
		if err != nil {
			return "", err
		}
		for _, in := range ins {
			in.DataSourceKey = nil
			msgs = append(msgs, in)
		}
	} else {
		exs, err := batch.ToExamples(rec)
		if err != nil {
			return "", err
		}
		for _, e := range exs {
			e.DataSourceKey = 0
			msgs = append(msgs, e)
		}
	}
	var lines []string
	opts := proto.MarshalOptions{Deterministic: true}
	for _, m := range msgs {
		b, err := opts.Marshal(m)
		if err != nil {
			return "", err
		}
		h := sha256.Sum256(b)
		lines = append(lines, hex.EncodeToString(h[:8]))
	}
	sort.Strings(lines)
	return strings.Join(lines, ","), nil
}

// writeInstances writes n random Instances as a PB stream with sort ids and returns them.
func writeInstances(t *testing.T, path string, seed uint64, n int) arrow.RecordBatch {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	ins := prototest.Instances(rng, n)
	w, err := recordio.Create(path, recordio.Options{Framing: recordio.PBStream, Codec: compress.Auto, PB: pbstream.Options{HasSortID: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		b, err := proto.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteRecord(recordio.Record{Payload: b}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := batch.FromInstances(memory.DefaultAllocator, ins)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func sortedDigests(t *testing.T, recs ...arrow.RecordBatch) []any {
	t.Helper()
	var all []string
	for _, r := range recs {
		d, err := rowDigests(r)
		if err != nil {
			t.Fatal(err)
		}
		if d != "" {
			all = append(all, strings.Split(d, ",")...)
		}
	}
	sort.Strings(all)
	out := make([]any, len(all))
	for i, s := range all {
		out[i] = s
	}
	return out
}

// rowsOf flattens digests of batches into one element per row.
func rowsOf(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.ParDo(s, splitRows, beam.ParDo(s, rowDigests, col))
}

func splitRows(d string, emit func(string)) {
	if d == "" {
		return
	}
	for _, r := range strings.Split(d, ",") {
		emit(r)
	}
}

func init() {
	register.Function2x0[string, func(string)](splitRows)
	register.Emitter1[string]()
}

// TestReadInstances reads three Instance files (one gzip-compressed) with a glob: every
// row arrives once and batches hold at most RowsPerBatch rows.
func TestReadInstances(t *testing.T) {
	dir := t.TempDir()
	a := writeInstances(t, filepath.Join(dir, "part-0.pb"), 1, 25)
	b := writeInstances(t, filepath.Join(dir, "part-1.pb.gz"), 2, 7)
	c := writeInstances(t, filepath.Join(dir, "part-2.pb"), 3, 0)
	p, s := beam.NewPipelineWithRoot()
	recs := beamio.Read(s, filepath.Join(dir, "part-*"), beamio.WithType(batch.SourceInstance), beamio.WithRowsPerBatch(10))
	passert.Equals(s, rowsOf(s, recs), sortedDigests(t, a, b, c)...)
	// 25 rows → 10, 10, 5; 7 rows → 7; the empty file gives no batch.
	passert.Equals(s, beam.ParDo(s, numRows, recs), 10, 10, 5, 7)
	ptest.RunAndValidate(t, p)
}

// TestReadExampleBatchSlices cuts the 51-row fixture into slices of 20 rows.
func TestReadExampleBatchSlices(t *testing.T) {
	fix := batchtest.FixtureRecord(t, memory.DefaultAllocator)
	p, s := beam.NewPipelineWithRoot()
	recs := beamio.Read(s, fixtures.Path(t, "example_batch.pbtxt"), beamio.WithRowsPerBatch(20))
	passert.Equals(s, beam.ParDo(s, numRows, recs), 20, 20, 11)
	passert.Equals(s, rowsOf(s, recs), sortedDigests(t, fix)...)
	ptest.RunAndValidate(t, p)
}

func TestReadNoFiles(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	beamio.Read(s, filepath.Join(t.TempDir(), "nothing-*"))
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), "nothing-*") {
		t.Fatalf("error %v does not name the pattern", err)
	}
}

func TestReadCorruptFile(t *testing.T) {
	dir := t.TempDir()
	writeInstances(t, filepath.Join(dir, "x.pb"), 9, 5)
	b, _ := os.ReadFile(filepath.Join(dir, "x.pb"))
	if err := os.WriteFile(filepath.Join(dir, "x.pb"), b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	beamio.Read(s, filepath.Join(dir, "x.pb"), beamio.WithType(batch.SourceInstance))
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), "x.pb") || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("error %v does not name the file and offset", err)
	}
}

// TestWriteEveryFormat writes the fixture rows in each sink format and reads them back.
func TestWriteEveryFormat(t *testing.T) {
	fix := batchtest.FixtureRecord(t, memory.DefaultAllocator)
	want := sortedDigests(t, fix)
	for _, c := range []struct {
		format sink.Format
		opts   []beamio.WriteOption
		typ    batch.Source
	}{
		{sink.TFRecord, nil, batch.SourceExampleBatch},
		{sink.PBStream, []beamio.WriteOption{beamio.WithMessageType(batch.SourceExample), beamio.WithCodec(compress.Zstd)}, batch.SourceExample},
		{sink.Parquet, nil, 0},
		{sink.Avro, []beamio.WriteOption{beamio.WithMaxRowsPerFile(20)}, 0},
		{sink.JSONL, []beamio.WriteOption{beamio.WithCodec(compress.Gzip)}, 0},
	} {
		t.Run(c.format.String(), func(t *testing.T) {
			dir := t.TempDir()
			prefix := filepath.Join(dir, "out")
			p, s := beam.NewPipelineWithRoot()
			recs := beamio.Read(s, fixtures.Path(t, "example_batch.pbtxt"), beamio.WithRowsPerBatch(20))
			files := beamio.Write(s, prefix, c.format, recs, c.opts...)
			passert.NonEmpty(s, files)
			ptest.RunAndValidate(t, p)

			p, s = beam.NewPipelineWithRoot()
			back := beamio.Read(s, prefix+"-*", beamio.WithType(c.typ))
			passert.Equals(s, rowsOf(s, back), want...)
			passert.Equals(s, stats.Sum(s, beam.ParDo(s, numRows, back)), 51)
			ptest.RunAndValidate(t, p)
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".") || strings.Contains(e.Name(), "tmp") {
					t.Errorf("left-over file %s", e.Name())
				}
			}
		})
	}
}
