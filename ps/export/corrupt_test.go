package export

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/avsc"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// randFloat returns a float with random bits: often NaN, infinity or zero.
func randFloat(rng *rand.Rand) float32 {
	if rng.IntN(4) == 0 {
		return special[rng.IntN(len(special))]
	}
	return f32(rng.Uint32())
}

func randFloats(rng *rand.Rand, max int) []float32 {
	n := rng.IntN(max + 1)
	if n == 0 {
		return nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = randFloat(rng)
	}
	return out
}

// randEntry returns an entry with random fields: every optimizer kind, optional fields
// set or not.
func randEntry(rng *rand.Rand) *hashtablepb.EntryDump {
	d := &hashtablepb.EntryDump{Id: proto.Int64(int64(rng.Uint64())), Num: randFloats(rng, 6)}
	if rng.IntN(3) > 0 {
		d.LastUpdateTsSec = proto.Int64(int64(rng.Uint64()) >> rng.IntN(64))
	}
	if rng.IntN(4) == 0 {
		return d
	}
	d.Opt = &hashtablepb.OptimizerDump{}
	for range rng.IntN(4) {
		var s optState
		s.kind = optKind(rng.IntN(int(numKinds)))
		m := kindFields[s.kind]
		for i := range numLists {
			if m.lists&(1<<i) != 0 {
				s.lists[i] = randFloats(rng, 3)
			}
		}
		for i := range numF32 {
			if m.f32&(1<<i) != 0 && rng.IntN(2) == 0 {
				s.f32[i], s.hasF[i] = randFloat(rng), true
			}
		}
		for i := range numI64 {
			if m.i64&(1<<i) != 0 && rng.IntN(2) == 0 {
				s.i64[i], s.hasI[i] = int64(rng.Uint64()), true
			}
		}
		od, err := s.proto()
		if err != nil {
			panic(err)
		}
		d.Opt.Dump = append(d.Opt.Dump, od)
	}
	return d
}

func randEntries(rng *rand.Rand, n int) []*hashtablepb.EntryDump {
	out := make([]*hashtablepb.EntryDump, n)
	for i := range out {
		out[i] = randEntry(rng)
	}
	return out
}

// readSweep reads damaged data: it must give entries or a *CorruptError, never panic, and
// with a checked allocator, return its memory when it succeeds.
func readSweep(t *testing.T, f Format, data []byte) ([]*hashtablepb.EntryDump, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	_, got, err := readEntries(f, data, WithAllocator(mem), WithFileName("x"))
	var ce *CorruptError
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("%v: %v is not a *CorruptError", f, err)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "ps/export: x: ") {
		t.Fatalf("%v: error %q does not name the file", f, err)
	}
	if err == nil {
		mem.AssertSize(t, 0)
	}
	return got, err
}

// TestTruncation cuts files at every length: the reader fails with a *CorruptError, or,
// where the cut falls between Avro blocks or TFRecord records, returns a prefix.
func TestTruncation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	entries := randEntries(rng, 12)
	for _, f := range formats {
		data := writeEntries(t, f, TableInfo{Name: "t"}, entries, WithAvroBlockSize(150), WithRowGroupSize(5, 0))
		for n := range len(data) {
			got, err := readSweep(t, f, data[:n])
			if err == nil && (f == Parquet || len(got) >= len(entries)) {
				t.Fatalf("%v cut at %d of %d bytes read %d entries without an error", f, n, len(data), len(got))
			}
			if err == nil {
				sameEntries(t, got, entries[:len(got)])
			}
		}
	}
	_, err := readSweep(t, EntryDump, writeEntries(t, EntryDump, TableInfo{}, entries)[:30])
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated entrydump: %v, want ErrTruncated", err)
	}
	_, err = readSweep(t, Avro, writeEntries(t, Avro, TableInfo{}, entries)[:300])
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated avro: %v, want ErrTruncated", err)
	}
}

// TestFlipSweep flips a bit in every byte of small files: the reader returns entries or a
// *CorruptError and never panics. Every byte of EntryDump and Avro files; every few
// bytes of Parquet files, whose reads are slower (FuzzParquetReader covers the rest).
func TestFlipSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	entries := randEntries(rng, 6)
	for _, tc := range []struct {
		f      Format
		stride int
		opts   []Option
	}{
		{EntryDump, 1, nil},
		{Avro, 1, []Option{WithAvroCodec("null"), WithAvroBlockSize(100)}},
		{Avro, 1, []Option{WithAvroCodec("deflate")}},
		{Parquet, 7, []Option{WithParquetCompression(compress.Codecs.Uncompressed), WithRowGroupSize(3, 0)}},
		{Parquet, 11, []Option{WithParquetCompression(compress.Codecs.Snappy)}},
	} {
		data := writeEntries(t, tc.f, TableInfo{Name: "t"}, entries, tc.opts...)
		for i := 0; i < len(data); i += tc.stride {
			bad := bytes.Clone(data)
			bad[i] ^= []byte{0x01, 0x80, 0x10}[(i/tc.stride)%3] // low, high and middle bits in turn
			readSweep(t, tc.f, bad)
		}
	}
}

// avroFile writes a null-codec Avro file with the given header schema and raw block.
func avroFile(schema string, meta map[string]string, count int64, block []byte) []byte {
	h := append([]byte{}, avroMagic...)
	h = appendLong(h, int64(2+len(meta)))
	h = appendString(appendString(h, "avro.schema"), schema)
	h = appendString(appendString(h, "avro.codec"), "null")
	for k, v := range meta {
		h = appendString(appendString(h, k), v)
	}
	h = append(h, 0)
	sync := bytes.Repeat([]byte{7}, syncSize)
	h = append(h, sync...)
	h = appendLong(appendLong(h, count), int64(len(block)))
	h = append(h, block...)
	return append(h, sync...)
}

// TestAvroRejects: files that break the layout fail with ErrFormat and say why.
func TestAvroRejects(t *testing.T) {
	good := appendEntry(nil, "t", edgeEntries()[4])
	badState := func(s optState) []byte {
		b := appendString(nil, "t")
		b = appendLong(b, 1)
		b = append(b, 0, 0, 2, 2) // no embedding, no time, opt with one state
		b = appendState(b, &s)
		return append(b, 0)
	}
	var sgdWithNorm, adamWithStep optState
	sgdWithNorm.kind, sgdWithNorm.lists[listNorm] = kindSgd, []float32{1}
	adamWithStep.kind, adamWithStep.hasI[i64GlobalStep] = kindAdam, true
	kind99 := optState{kind: 99}
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"another schema", "not schemas/avsc.EntryDump", avroFile(avsc.Row, nil, 1, good)},
		{"not JSON", "avro.schema", avroFile("{", nil, 1, good)},
		{"no magic", "not an Avro object container file", []byte("PAR1xxxxxxxx")},
		{"kind out of range", "optimizer kind 99", avroFile(avsc.EntryDump, nil, 1, badState(kind99))},
		{"field of another kind", "kind sgd has 1 norm values", avroFile(avsc.EntryDump, nil, 1, badState(sgdWithNorm))},
		{"optional of another kind", "kind adam has global_step set", avroFile(avsc.EntryDump, nil, 1, badState(adamWithStep))},
		{"trailing bytes", "bytes after the last entry", avroFile(avsc.EntryDump, nil, 1, append(bytes.Clone(good), 0))},
		{"count beyond the data", "block claims", avroFile(avsc.EntryDump, nil, 1000, good)},
		{"other table", `of table "t", the file of table "u"`, avroFile(avsc.EntryDump, map[string]string{MetaTable: "u"}, 1, good)},
		{"two tables", `of table "u", the file of table "t"`, avroFile(avsc.EntryDump, nil, 2, append(bytes.Clone(good), appendEntry(nil, "u", edgeEntries()[0])...))},
		{"bad union", "union branch 2", avroFile(avsc.EntryDump, nil, 1, append(appendString(nil, "t"), 2, 0, 4))},
	} {
		_, _, err := readEntries(Avro, tc.data, WithFileName("f.avro"))
		var ce *CorruptError
		if !errors.Is(err, ErrFormat) || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || ce.File != "f.avro" {
			t.Errorf("%s: %v, want ErrFormat with %q", tc.name, err, tc.want)
		}
	}
	// The same blocks with the right fields read fine.
	if _, got, err := readEntries(Avro, avroFile(avsc.EntryDump, nil, 1, good)); err != nil || len(got) != 1 {
		t.Errorf("good file: %d entries, %v", len(got), err)
	}
}

// parquetOf writes one record with schema sc through pqarrow.
func parquetOf(t *testing.T, rec arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestParquetRejects: files that break the layout fail with ErrFormat and say why.
func TestParquetRejects(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	// One row with a state of the given kind and a norm value.
	row := func(kind string) arrow.RecordBatch {
		rb := array.NewRecordBuilder(mem, ParquetSchema)
		defer rb.Release()
		rb.Field(colTable).(*array.StringBuilder).Append("t")
		rb.Field(colID).(*array.Uint64Builder).Append(1)
		rb.Field(colEmbedding).(*array.ListBuilder).Append(true)
		rb.Field(colLastUpdate).(*array.Int64Builder).AppendNull()
		kb := rb.Field(colKind).(*array.ListBuilder)
		kb.Append(true)
		kb.ValueBuilder().(*array.StringBuilder).Append(kind)
		for i := range numLists {
			lb := rb.Field(colList0 + i).(*array.ListBuilder)
			lb.Append(true)
			mid := lb.ValueBuilder().(*array.ListBuilder)
			mid.Append(true)
			if i == listNorm {
				mid.ValueBuilder().(*array.Float32Builder).Append(1)
			}
		}
		for i := range numF32 {
			lb := rb.Field(colF320 + i).(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Float32Builder).AppendNull()
		}
		for i := range numI64 {
			lb := rb.Field(colI640 + i).(*array.ListBuilder)
			lb.Append(true)
			if kind == "short" && i == 1 {
				continue // one element too few
			}
			lb.ValueBuilder().(*array.Int64Builder).AppendNull()
		}
		return rb.NewRecordBatch()
	}
	other := func() arrow.RecordBatch {
		sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
		rb := array.NewRecordBuilder(mem, sc)
		defer rb.Release()
		rb.Field(0).(*array.Int64Builder).Append(1)
		return rb.NewRecordBatch()
	}
	for _, tc := range []struct {
		name, want string
		rec        arrow.RecordBatch
	}{
		{"good", "", row("adagrad")},
		{"unknown kind", `unknown optimizer kind "bogus"`, row("bogus")},
		{"field of another kind", "kind sgd has 1 norm values", row("sgd")},
		{"parallel lists of different lengths", "opt_global_step has 0 elements, opt_kind 1", row("short")},
		{"another schema", "1 columns, an export file has 18", other()},
	} {
		data := parquetOf(t, tc.rec)
		tc.rec.Release()
		_, got, err := readEntries(Parquet, data, WithAllocator(mem), WithFileName("f.parquet"))
		if tc.want == "" {
			if err != nil || len(got) != 1 || got[0].Opt.Dump[0].GetAdagrad().GetNorm()[0] != 1 {
				t.Errorf("%s: %v %v", tc.name, got, err)
			}
			continue
		}
		var ce *CorruptError
		if !errors.Is(err, ErrFormat) || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || ce.File != "f.parquet" {
			t.Errorf("%s: %v, want ErrFormat with %q", tc.name, err, tc.want)
		}
	}
}

// TestReaderAfterEnd: io.EOF and errors are sticky; Close ends reading.
func TestReaderAfterEnd(t *testing.T) {
	for _, f := range formats {
		data := writeEntries(t, f, TableInfo{Name: "t"}, edgeEntries()[:2])
		r, err := newReader(f, data)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if _, err := r.Next(); err != io.EOF {
				t.Errorf("%v: Next after the end = %v", f, err)
			}
		}
		if err := r.Close(); err != nil {
			t.Errorf("%v: Close = %v", f, err)
		}
	}
}
