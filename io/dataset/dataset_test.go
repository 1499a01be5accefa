package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

// readAllBatches reads every batch, failing the test on error.
func readAllBatches(t *testing.T, files []string, o Options) ([]arrow.RecordBatch, *Reader) {
	t.Helper()
	return readAllBatchesEach(t, files, o, nil)
}

// readAllBatchesEach is readAllBatches calling each, unless nil, after every batch with
// the number read so far.
func readAllBatchesEach(t *testing.T, files []string, o Options, each func(n int)) ([]arrow.RecordBatch, *Reader) {
	t.Helper()
	r, err := Open(files, o)
	if err != nil {
		t.Fatal(err)
	}
	var out []arrow.RecordBatch
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out, r
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
		if each != nil {
			each(len(out))
		}
	}
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

func fixtureEB(t *testing.T) *examplepb.ExampleBatch {
	t.Helper()
	eb, err := pbtext.ReadExampleBatchFile(fixtures.Path(t, "example_batch.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	return eb
}

// writeRecords writes messages as one framed file.
func writeRecords(t *testing.T, path string, o recordio.Options, keys []uint32, msgs ...proto.Message) {
	t.Helper()
	w, err := recordio.Create(path, o)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		rec := recordio.Record{Payload: b}
		if keys != nil {
			rec.DataSourceKey = keys[i]
		}
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTextFixtures(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	tests := []struct {
		file string
		src  batch.Source
		rows int64
	}{
		{"example_batch.pbtxt", batch.SourceExampleBatch, 51},
		{"inst.pbtext", batch.SourceInstance, 1},
		{"inst.json", batch.SourceInstance, 1},
		{"inst.dump", batch.SourceInstance, 1},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			recs, r := readAllBatches(t, []string{fixtures.Path(t, tc.file)}, Options{Mem: mem})
			defer release(recs)
			if len(recs) != 1 || recs[0].NumRows() != tc.rows {
				t.Fatalf("%d batches, want 1 of %d rows", len(recs), tc.rows)
			}
			if src, _ := batch.SourceOf(recs[0].Schema()); src != tc.src {
				t.Errorf("source %v, want %v", src, tc.src)
			}
			if st := r.Stats(); st.Records != 1 || st.Rows != tc.rows || st.Files != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestFramedExamples: Examples split from the fixture, written as a gzip PB stream with
// sort ids, come back in batches of BatchRows, with the type sniffed.
func TestFramedExamples(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ebRec, err := batch.FromExampleBatch(mem, fixtureEB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ebRec.Release()
	exs, err := batch.ToExamples(ebRec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "part-0.pb.gz")
	msgs := make([]proto.Message, len(exs))
	for i, ex := range exs {
		msgs[i] = ex
	}
	writeRecords(t, path, recordio.Options{Codec: compress.Auto, PB: pbstream.Options{HasSortID: true}}, nil, msgs...)
	o := Options{Mem: mem, BatchRows: 10}
	o.Record.PB.HasSortID = true
	recs, r := readAllBatches(t, []string{path}, o)
	defer release(recs)
	if len(recs) != 6 || recs[5].NumRows() != 1 {
		t.Fatalf("%d batches (last %d rows), want 6 with a last batch of 1", len(recs), recs[len(recs)-1].NumRows())
	}
	i := 0
	for _, rec := range recs {
		back, err := batch.ToExamples(rec)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range back {
			if !proto.Equal(ex, exs[i]) {
				t.Fatalf("example %d differs", i)
			}
			i++
		}
	}
	if st := r.Stats(); st.Records != 51 || st.Rows != 51 {
		t.Errorf("stats %+v", st)
	}
}

// TestFramingSniff: TFRecord is recognised from its length checksum whatever the name.
func TestFramingSniff(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	in := &parserpb.Instance{Fid: []uint64{1 << 54}, Label: []float32{1}}
	tf := filepath.Join(dir, "data.bin")
	writeRecords(t, tf, recordio.Options{Framing: recordio.TFRecord}, nil, in, in)
	pb := filepath.Join(dir, "data2.bin")
	writeRecords(t, pb, recordio.Options{PB: pbstream.Options{HasSortID: true}}, nil, in, in, in)
	o := Options{Mem: mem, Type: batch.SourceInstance}
	o.Record.PB.HasSortID = true
	recs, _ := readAllBatches(t, []string{tf, pb}, o)
	defer release(recs)
	if len(recs) != 2 || recs[0].NumRows() != 2 || recs[1].NumRows() != 3 {
		t.Fatalf("batches: %d", len(recs))
	}
}

func TestDataSourceKeyPolicies(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	key := pbstream.DataSourceKey("datasource_inst")
	in := &parserpb.Instance{Fid: []uint64{7}, DataSourceKey: proto.Uint32(5)}
	lx := filepath.Join(dir, "lx.pb")
	writeRecords(t, lx, recordio.Options{PB: pbstream.Options{LagrangeX: true}}, []uint32{key}, in)
	plain := filepath.Join(dir, "plain.pb")
	writeRecords(t, plain, recordio.Options{PB: pbstream.Options{HasSortID: true}}, nil, in)
	tests := []struct {
		file   string
		lx     bool
		policy DSKPolicy
		want   uint32
	}{
		{lx, true, DSKAuto, key},
		{lx, true, DSKHeader, key},
		{lx, true, DSKMessage, 5},
		{plain, false, DSKAuto, 5},
		{plain, false, DSKHeader, 0}, // Monolith: no LagrangeX header means key 0
		{plain, false, DSKMessage, 5},
	}
	for _, tc := range tests {
		o := Options{Mem: mem, Type: batch.SourceInstance, DataSourceKey: tc.policy}
		o.Record.PB.LagrangeX, o.Record.PB.HasSortID = tc.lx, !tc.lx
		recs, _ := readAllBatches(t, []string{tc.file}, o)
		ins, err := batch.ToInstances(recs[0])
		release(recs)
		if err != nil {
			t.Fatal(err)
		}
		if got := ins[0].GetDataSourceKey(); got != tc.want {
			t.Errorf("%s policy %d: key %#x, want %#x", filepath.Base(tc.file), tc.policy, got, tc.want)
		}
	}
}

// TestErrors: every failure names the file and, for records, their index and offset;
// batches before the failure are delivered.
func TestErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	good := &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "a", Feature: []*examplepb.Feature{{}}}}}
	bad := &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "short", Feature: []*examplepb.Feature{{}}}}}
	d6 := filepath.Join(dir, "d6.tfrecord")
	writeRecords(t, d6, recordio.Options{Framing: recordio.TFRecord}, nil, good, bad)

	garbage := filepath.Join(dir, "garbage.tfrecord")
	w, _ := recordio.Create(garbage, recordio.Options{Framing: recordio.TFRecord})
	_ = w.Write([]byte{0xff, 0xff, 0xff})
	_ = w.Close()

	trunc := filepath.Join(dir, "trunc.tfrecord")
	writeRecords(t, trunc, recordio.Options{Framing: recordio.TFRecord}, nil, good, good)
	b, _ := os.ReadFile(trunc)
	_ = os.WriteFile(trunc, b[:len(b)-3], 0o644)

	ambiguous := filepath.Join(dir, "empty.pb")
	writeRecords(t, ambiguous, recordio.Options{}, nil, &parserpb.Instance{})

	// Instances: record 12 is not one; two rows naming one feature twice.
	inst := filepath.Join(dir, "inst.tfrecord")
	w, _ = recordio.Create(inst, recordio.Options{Framing: recordio.TFRecord})
	for i, in := range prototest.Instances(rand.New(rand.NewPCG(1, 2)), 15) {
		b, _ := proto.Marshal(in)
		if i == 12 {
			b = b[:len(b)-1]
		}
		_ = w.Write(b)
	}
	_ = w.Close()
	twice := filepath.Join(dir, "twice.tfrecord")
	writeRecords(t, twice, recordio.Options{Framing: recordio.TFRecord}, nil, &parserpb.Instance{},
		&parserpb.Instance{Feature: []*matrixpb.Feature{{Name: proto.String("a")}, {Name: proto.String("a")}}})

	tests := []struct {
		name      string
		file      string
		typ       batch.Source
		delivered int
		want      []string
	}{
		{"D6", d6, batch.SourceExampleBatch, 1, []string{"d6.tfrecord", "record 1", "offset", `"short"`, "batch_size is 2"}},
		{"not a protobuf", garbage, batch.SourceExampleBatch, 0, []string{"garbage.tfrecord", "record 0", "parse ExampleBatch"}},
		{"truncated", trunc, batch.SourceExampleBatch, 1, []string{"trunc.tfrecord", "record 1", "truncated"}},
		{"ambiguous", ambiguous, 0, 0, []string{"empty.pb", "record 0", "cannot tell the message type"}},
		{"Instance not a protobuf", inst, batch.SourceInstance, 0, []string{"inst.tfrecord: record 12 at offset ", ": parse Instance: "}},
		{"Instance layout", twice, batch.SourceInstance, 0, []string{"twice.tfrecord: record 0: records 0 and on: instance 1: ", `feature "a" appears twice`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Open([]string{tc.file}, Options{Mem: mem, Type: tc.typ})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			n := 0
			for {
				rec, err := r.Next(context.Background())
				if err == nil {
					n++
					rec.Release()
					continue
				}
				if errors.Is(err, io.EOF) {
					t.Fatal("no error")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				break
			}
			if n != tc.delivered {
				t.Errorf("%d batches before the error, want %d", n, tc.delivered)
			}
		})
	}
	// With AllowTruncatedTail the partial last record ends the file cleanly.
	o := Options{Mem: mem, Type: batch.SourceExampleBatch}
	o.Record.AllowTruncatedTail = true
	recs, _ := readAllBatches(t, []string{trunc}, o)
	release(recs)
	if len(recs) != 1 {
		t.Errorf("AllowTruncatedTail: %d batches, want 1", len(recs))
	}
}

func TestContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Open([]string{fixtures.Path(t, "inst.json")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel = %v", err)
	}
}

func TestFormatOf(t *testing.T) {
	for name, want := range map[string]Format{
		"a.pbtxt": Text, "a.JSON": JSON, "inst.dump": TreeDump, "x.parquet": Parquet, "x.avro": Avro,
		"x.jsonl": JSONL, "x.tfrecord.gz": TFRecord, "part-0000": Auto, "x.pb.zst": Auto, "x.pbtxt.gz": Text,
	} {
		if got := FormatOf(name); got != want {
			t.Errorf("FormatOf(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestFramedInstances: Instance records (the golden one and generated ones) read from
// framed files give, batch by batch, what FromInstances gives for the same messages, with
// the header keys replacing the messages' under LagrangeX. (TestErrors has the errors.)
func TestFramedInstances(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	golden := &parserpb.Instance{}
	if err := pbtext.Unmarshal("inst.pbtext", fixtures.Read(t, "inst.pbtext"), pbtext.Text, golden); err != nil {
		t.Fatal(err)
	}
	ins := append([]*parserpb.Instance{golden}, prototest.Instances(rand.New(rand.NewPCG(1, 2)), 24)...)
	msgs := make([]proto.Message, len(ins))
	keys := make([]uint32, len(ins))
	for i, in := range ins {
		msgs[i], keys[i] = in, uint32(i+1)<<8
	}
	for _, lx := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprintf("inst-%v.pb.zst", lx))
		var hk []uint32
		if lx {
			hk = keys
		}
		writeRecords(t, path, recordio.Options{Codec: compress.Auto, PB: pbstream.Options{LagrangeX: lx, HasSortID: !lx}}, hk, msgs...)
		o := Options{Mem: mem, BatchRows: 10, Type: batch.SourceInstance}
		o.Record.PB.LagrangeX, o.Record.PB.HasSortID = lx, !lx
		recs, r := readAllBatches(t, []string{path}, o)
		if len(recs) != 3 {
			t.Fatalf("LagrangeX %v: %d batches, want 3", lx, len(recs))
		}
		for i, rec := range recs {
			want := make([]*parserpb.Instance, rec.NumRows())
			for j := range want {
				want[j] = proto.Clone(ins[10*i+j]).(*parserpb.Instance)
				if lx {
					want[j].DataSourceKey = proto.Uint32(keys[10*i+j])
				}
			}
			msg, err := batch.FromInstances(mem, want)
			if err != nil {
				t.Fatal(err)
			}
			batchtest.SameBatch(t, i, rec, msg)
			msg.Release()
		}
		release(recs)
		if st := r.Stats(); st.Records != 25 || st.Rows != 25 {
			t.Errorf("stats %+v", st)
		}
	}
}

// TestSniff: each record type is told apart by its wire, a LineId's unknown fields do not
// count (I3), and a payload no type or several types take is ErrAmbiguousType.
func TestSniff(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ex := marshal(prototest.Examples(rng, 1)[0])
	// Field 100 is Example.line_id; 999 is unknown to LineId.
	lineIDUnknown := append(slices.Clone(ex), 0xa2, 0x06, 3, 0xb8, 0x3e, 1)
	for _, tc := range []struct {
		name    string
		payload []byte
		want    batch.Source
		err     bool
	}{
		{"example batch", marshal(prototest.ExampleBatch(rng, 8)), batch.SourceExampleBatch, false},
		{"example", ex, batch.SourceExample, false},
		{"example, LineId with an unknown field", lineIDUnknown, batch.SourceExample, false},
		{"instance", marshal(prototest.Instances(rng, 1)[0]), batch.SourceInstance, false},
		{"unknown top-level field", append(slices.Clone(ex), 0xb8, 0x3e, 1), 0, true},
		{"garbage", []byte{0xff, 0xff, 0xff}, 0, true},
	} {
		got, err := sniff(tc.payload)
		if tc.err {
			if !errors.Is(err, ErrAmbiguousType) {
				t.Errorf("%s: %v, %v; want ErrAmbiguousType", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestChunkBufferReuse: every chunk's payload buffer goes back to the reader after Decode
// and frames the next chunks; the batches decoded before keep their values (they hold
// copies), for each record type. The reference frames every chunk before decoding any, so
// that no buffer is reused under it.
func TestChunkBufferReuse(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []batch.Source{batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance} {
		t.Run(typ.String(), func(t *testing.T) {
			var msgs []proto.Message
			for i := range 5 {
				switch rows := 3 + i; typ {
				case batch.SourceExampleBatch:
					msgs = append(msgs, prototest.ExampleBatch(rng, rows))
				case batch.SourceExample:
					for _, ex := range prototest.Examples(rng, rows) {
						msgs = append(msgs, ex)
					}
				default:
					for _, in := range prototest.Instances(rng, rows) {
						msgs = append(msgs, in)
					}
				}
			}
			path := filepath.Join(t.TempDir(), "part-0.pb")
			writeRecords(t, path, recordio.Options{}, nil, msgs...)
			o := Options{Mem: mem, Type: typ, BatchRows: 3}
			got, r := readAllBatches(t, []string{path}, o)
			defer release(got)
			if len(r.bufs.bufs) == 0 || len(r.bufs.recs) == 0 {
				t.Error("no chunk buffer came back to the reader")
			}
			ref, err := Open([]string{path}, o)
			if err != nil {
				t.Fatal(err)
			}
			var chunks []*Chunk
			for {
				c, err := ref.NextChunk(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				chunks = append(chunks, c)
			}
			if len(chunks) != len(got) {
				t.Fatalf("%d batches, the reference has %d", len(got), len(chunks))
			}
			for i, c := range chunks {
				want, err := c.Decode()
				if err != nil {
					t.Fatal(err)
				}
				batchtest.SameBatch(t, i, got[i], want)
				want.Release()
			}
		})
	}
}

// TestSharedBuffers: Readers opened one after another with one Buffers (Options.Buffers)
// read the same batches as Readers with buffers of their own, in both framings, with the
// records of the later files larger and then smaller than the earlier ones'; a closed
// file's record buffer goes back to the Buffers and the next file's reader takes it.
func TestSharedBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, framing := range []recordio.Framing{recordio.PBStream, recordio.TFRecord} {
		t.Run(framing.String(), func(t *testing.T) {
			dir := t.TempDir()
			var paths []string
			for i, rows := range []int{4, 40, 2} {
				path := filepath.Join(dir, fmt.Sprintf("part-%d", i))
				writeRecords(t, path, recordio.Options{Framing: framing}, nil,
					prototest.ExampleBatch(rng, rows), prototest.ExampleBatch(rng, rows+1))
				paths = append(paths, path)
			}
			shared := NewBuffers()
			for i, path := range paths {
				o := Options{Type: batch.SourceExampleBatch}
				want, own := readAllBatches(t, []string{path}, o)
				own.Close()
				o.Buffers = shared
				got, r := readAllBatchesEach(t, []string{path}, o, func(n int) {
					if n == 1 && i > 0 && (len(shared.payloads) != 0 || len(shared.readers) != 0) {
						t.Errorf("file %d: the reader did not take the record buffer and buffered reader of the file before", i)
					}
				})
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				if len(shared.payloads) != 1 || len(shared.readers) != 1 || len(shared.bufs) == 0 {
					t.Errorf("file %d: %d record buffers, %d buffered readers and %d chunk buffers came back, want 1, 1 and some",
						i, len(shared.payloads), len(shared.readers), len(shared.bufs))
				}
				if len(got) != len(want) {
					t.Fatalf("file %d: %d batches, want %d", i, len(got), len(want))
				}
				for j := range got {
					batchtest.SameBatch(t, j, got[j], want[j])
				}
				release(got)
				release(want)
			}
		})
	}
}

// TestSharedBuffersConcurrent: Readers on several goroutines share one Buffers, decoding
// their chunks on other goroutines as beamio does, and read what Readers with buffers of
// their own read (run under -race in CI).
func TestSharedBuffersConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	dir := t.TempDir()
	var paths []string
	for i := range 4 {
		path := filepath.Join(dir, fmt.Sprintf("part-%d", i))
		var msgs []proto.Message
		for j := range 6 {
			msgs = append(msgs, prototest.ExampleBatch(rng, 2+(i*7+j*3)%11))
		}
		writeRecords(t, path, recordio.Options{}, nil, msgs...)
		paths = append(paths, path)
	}
	o := Options{Type: batch.SourceExampleBatch}
	var want [][]arrow.RecordBatch
	for _, path := range paths {
		recs, r := readAllBatches(t, []string{path}, o)
		r.Close()
		want = append(want, recs)
		defer release(recs)
	}
	o.Buffers = NewBuffers()
	got := make([][]arrow.RecordBatch, len(paths))
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for rep := range 3 {
				for i := g; i < len(paths); i += 2 {
					recs, err := readDecodingElsewhere(paths[i], o)
					if rep < 2 || err != nil {
						release(recs)
					} else {
						got[i] = recs
					}
					if err != nil {
						errs[i] = err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil {
			t.Fatalf("%s: %v", paths[i], errs[i])
		}
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s: %d batches, want %d", paths[i], len(got[i]), len(want[i]))
		}
		for j := range got[i] {
			batchtest.SameBatch(t, j, got[i][j], want[i][j])
		}
		release(got[i])
	}
}

// readDecodingElsewhere reads a file with its chunks decoded on another goroutine.
func readDecodingElsewhere(path string, o Options) ([]arrow.RecordBatch, error) {
	r, err := Open([]string{path}, o)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []arrow.RecordBatch
	for {
		c, err := r.NextChunk(context.Background())
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		done := make(chan error, 1)
		var rec arrow.RecordBatch
		go func() {
			var err error
			rec, err = c.Decode()
			done <- err
		}()
		if err := <-done; err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}
