package export

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/linkedin/goavro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/schemas/avsc"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

var formats = []Format{EntryDump, Avro, Parquet}

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

// special are float values whose bits must survive: NaNs with different payloads and
// signs (quiet and signalling), infinities, both zeros, the smallest denormal, the extremes.
var special = []float32{f32(0x7fc00000), f32(0x7f800001), f32(0xffc00001), f32(0x7fbfffff), f32(0xff800002),
	float32(math.Inf(1)), float32(math.Inf(-1)), f32(0x80000000), 0, f32(1), -f32(1), math.MaxFloat32, -math.MaxFloat32,
	math.SmallestNonzeroFloat32, 1, -1.5}

func single(t protoreflect.ProtoMessage) *hashtablepb.SingleOptimizerDump {
	d := &hashtablepb.SingleOptimizerDump{}
	switch x := t.(type) {
	case *hashtablepb.AdagradOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_Adagrad{Adagrad: x}
	case *hashtablepb.SgdOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_Sgd{Sgd: x}
	case *hashtablepb.FtrlOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_Ftrl{Ftrl: x}
	case *hashtablepb.DynamicWdAdagradOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_DynamicWdAdagrad{DynamicWdAdagrad: x}
	case *hashtablepb.AdadeltaOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_Adadelta{Adadelta: x}
	case *hashtablepb.AdamOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_Adam{Adam: x}
	case *hashtablepb.AmsgradOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_Amsgrad{Amsgrad: x}
	case *hashtablepb.MomentumOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_Momentum{Momentum: x}
	case *hashtablepb.RmspropOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_Rmsprop{Rmsprop: x}
	case *hashtablepb.RmspropV2OptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_Rmspropv2{Rmspropv2: x}
	case *hashtablepb.GroupFtrlOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_GroupFtrl{GroupFtrl: x}
	case *hashtablepb.BatchSoftmaxOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_BatchSoftmax{BatchSoftmax: x}
	case *hashtablepb.GroupAdaGradOptimizerDump:
		d.Type = &hashtablepb.SingleOptimizerDump_GroupAdagrad{GroupAdagrad: x}
	case nil:
	}
	return d
}

// allKinds is one SingleOptimizerDump of every kind, optional fields set and unset.
func allKinds() []*hashtablepb.SingleOptimizerDump {
	s := special
	return []*hashtablepb.SingleOptimizerDump{
		single(nil),
		single(&hashtablepb.AdagradOptimizerDump{Norm: s[:3]}),
		single(&hashtablepb.AdagradOptimizerDump{}),
		single(&hashtablepb.SgdOptimizerDump{}),
		single(&hashtablepb.FtrlOptimizerDump{Zero: s[1:4], Norm: s[4:6]}),
		single(&hashtablepb.DynamicWdAdagradOptimizerDump{Norm: s[:1], LastUpdateStep: proto.Int64(math.MinInt64)}),
		single(&hashtablepb.DynamicWdAdagradOptimizerDump{Norm: s[:1]}),
		single(&hashtablepb.AdadeltaOptimizerDump{Accum: s[5:8], AccumUpdate: s[8:9]}),
		single(&hashtablepb.AdamOptimizerDump{M: s[:2], V: s[2:4], Beta1Power: proto.Float32(f32(0x7f800001))}),
		single(&hashtablepb.AdamOptimizerDump{Beta2Power: proto.Float32(f32(0x80000000))}),
		single(&hashtablepb.AmsgradOptimizerDump{M: s[:1], V: s[1:2], Vhat: s[2:3], Beta1Power: proto.Float32(0.9), Beta2Power: proto.Float32(0.999)}),
		single(&hashtablepb.MomentumOptimizerDump{N: s[9:12]}),
		single(&hashtablepb.RmspropOptimizerDump{N: s[12:]}),
		single(&hashtablepb.RmspropV2OptimizerDump{N: s}),
		single(&hashtablepb.GroupFtrlOptimizerDump{Zero: s[:1]}),
		single(&hashtablepb.BatchSoftmaxOptimizerDump{GlobalStep: proto.Int64(-1)}),
		single(&hashtablepb.BatchSoftmaxOptimizerDump{}),
		single(&hashtablepb.GroupAdaGradOptimizerDump{GradSquareSum: proto.Float32(f32(0xffc00001))}),
		single(&hashtablepb.GroupAdaGradOptimizerDump{}),
	}
}

// edgeEntries are entries with every edge the formats must keep.
func edgeEntries() []*hashtablepb.EntryDump {
	u := func(v uint64) *int64 { x := int64(v); return &x }
	return []*hashtablepb.EntryDump{
		{Id: u(0)},
		{Id: u(math.MaxUint64), Num: special, LastUpdateTsSec: proto.Int64(math.MaxInt64)},
		{Id: u(1 << 63), Num: []float32{f32(0x80000000)}, LastUpdateTsSec: proto.Int64(0), Opt: &hashtablepb.OptimizerDump{}},
		{Id: u(1<<63 - 1), Num: special[:4], LastUpdateTsSec: proto.Int64(math.MinInt64), Opt: &hashtablepb.OptimizerDump{Dump: allKinds()}},
		{Id: u(42), Num: []float32{1, 2, 3, 4}, LastUpdateTsSec: proto.Int64(-1), Opt: &hashtablepb.OptimizerDump{Dump: allKinds()[3:5]}},
		{Id: u(0x9e3779b97f4a7c15), Opt: &hashtablepb.OptimizerDump{Dump: []*hashtablepb.SingleOptimizerDump{single(nil)}}},
	}
}

// writeEntries writes entries in format f to memory.
func writeEntries(t testing.TB, f Format, info TableInfo, entries []*hashtablepb.EntryDump, opts ...Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, f, info, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range entries {
		if err := w.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// newReader reads a file of format f from memory.
func newReader(f Format, data []byte, opts ...Option) (Reader, error) {
	switch f {
	case EntryDump:
		return NewEntryDumpReader(bytes.NewReader(data), opts...), nil
	case Avro:
		return NewAvroReader(bytes.NewReader(data), opts...)
	case Parquet:
		return NewParquetReader(bytes.NewReader(data), opts...)
	}
	return nil, errors.New("bad format")
}

// readEntries reads every entry (cloned).
func readEntries(f Format, data []byte, opts ...Option) (string, []*hashtablepb.EntryDump, error) {
	r, err := newReader(f, data, opts...)
	if err != nil {
		return "", nil, err
	}
	defer r.Close()
	var out []*hashtablepb.EntryDump
	for {
		d, err := r.Next()
		if err == io.EOF {
			return r.Table(), out, nil
		}
		if err != nil {
			return r.Table(), out, err
		}
		out = append(out, proto.Clone(d).(*hashtablepb.EntryDump))
	}
}

// sameEntries compares entries by diffEntry and, independently, by their deterministic
// wire bytes (which hold the exact float bits and field presence).
func sameEntries(t testing.TB, got, want []*hashtablepb.EntryDump) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d entries, want %d", len(got), len(want))
	}
	m := proto.MarshalOptions{Deterministic: true}
	for i := range want {
		if d, ok := diffEntry(got[i], want[i]); ok {
			t.Fatalf("entry %d: %s: got %s, want %s", i, d.field, d.got, d.want)
		}
		gb, err1 := m.Marshal(got[i])
		wb, err2 := m.Marshal(want[i])
		if err1 != nil || err2 != nil || !bytes.Equal(gb, wb) {
			t.Fatalf("entry %d: wire bytes differ (%v %v):\n got %x\nwant %x", i, err1, err2, gb, wb)
		}
	}
}

// TestRoundTrip writes the edge entries in every format and option set and reads them
// back exactly.
func TestRoundTrip(t *testing.T) {
	entries := edgeEntries()
	for _, tc := range []struct {
		name string
		f    Format
		opts []Option
	}{
		{"entrydump", EntryDump, nil},
		{"avro deflate", Avro, nil},
		{"avro null, one entry a block", Avro, []Option{WithAvroCodec("null"), WithAvroBlockSize(1)}},
		{"avro snappy, small blocks", Avro, []Option{WithAvroCodec("snappy"), WithAvroBlockSize(200)}},
		{"parquet zstd", Parquet, nil},
		{"parquet snappy, one row a group", Parquet, []Option{WithParquetCompression(compress.Codecs.Snappy), WithRowGroupSize(1, 0)}},
		{"parquet uncompressed, small groups by bytes", Parquet, []Option{WithParquetCompression(compress.Codecs.Uncompressed), WithRowGroupSize(0, 100)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			opts := append([]Option{WithAllocator(mem)}, tc.opts...)
			data := writeEntries(t, tc.f, TableInfo{Name: "user/v2", Dim: 4}, entries, opts...)
			table, got, err := readEntries(tc.f, data, WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			if want := "user/v2"; tc.f != EntryDump && table != want {
				t.Errorf("Table() = %q, want %q", table, want)
			}
			sameEntries(t, got, entries)
		})
	}
}

// TestEmptyFile: a table without entries round-trips in every format.
func TestEmptyFile(t *testing.T) {
	for _, f := range formats {
		data := writeEntries(t, f, TableInfo{Name: "empty"}, nil)
		_, got, err := readEntries(f, data)
		if err != nil || len(got) != 0 {
			t.Errorf("%v: %d entries, %v", f, len(got), err)
		}
	}
}

// TestUnsupported: Avro and Parquet refuse entries they cannot hold exactly, without
// breaking the writer; EntryDump keeps unknown fields.
func TestUnsupported(t *testing.T) {
	withUnknown := &hashtablepb.EntryDump{Id: proto.Int64(5), Num: []float32{1}}
	withUnknown.ProtoReflect().SetUnknown(protoreflect.RawFields{0xa8, 0x01, 0x07}) // field 21, varint 7
	nestedUnknown := &hashtablepb.EntryDump{Id: proto.Int64(6), Opt: &hashtablepb.OptimizerDump{Dump: allKinds()[1:2]}}
	nestedUnknown.Opt.Dump[0] = proto.Clone(nestedUnknown.Opt.Dump[0]).(*hashtablepb.SingleOptimizerDump)
	nestedUnknown.Opt.Dump[0].GetAdagrad().ProtoReflect().SetUnknown(protoreflect.RawFields{0x10, 0x01})
	good := &hashtablepb.EntryDump{Id: proto.Int64(7), Num: []float32{2}}
	for _, f := range []Format{Avro, Parquet} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, f, TableInfo{Name: "t"})
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []*hashtablepb.EntryDump{{Num: []float32{1}}, withUnknown, nestedUnknown} {
			if err := w.Write(bad); !errors.Is(err, ErrUnsupported) {
				t.Errorf("%v: Write(%v) = %v, want ErrUnsupported", f, bad, err)
			}
		}
		if err := w.Write(good); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		_, got, err := readEntries(f, buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		sameEntries(t, got, []*hashtablepb.EntryDump{good})
	}
	data := writeEntries(t, EntryDump, TableInfo{}, []*hashtablepb.EntryDump{withUnknown, nestedUnknown})
	_, got, err := readEntries(EntryDump, data)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, []*hashtablepb.EntryDump{withUnknown, nestedUnknown})
}

// TestDiffEntry: every kind of difference is found and named.
func TestDiffEntry(t *testing.T) {
	base := edgeEntries()[3]
	for _, tc := range []struct {
		field  string
		mutate func(d *hashtablepb.EntryDump)
	}{
		{"id", func(d *hashtablepb.EntryDump) { *d.Id ^= 1 }},
		{"id", func(d *hashtablepb.EntryDump) { d.Id = nil }},
		{"embedding[0]", func(d *hashtablepb.EntryDump) { d.Num[0] = f32(0x7fc00001) }}, // another NaN
		{"embedding length", func(d *hashtablepb.EntryDump) { d.Num = d.Num[:3] }},
		{"last_update_ts_sec", func(d *hashtablepb.EntryDump) { d.LastUpdateTsSec = nil }},
		{"opt", func(d *hashtablepb.EntryDump) { d.Opt = nil }},
		{"opt length", func(d *hashtablepb.EntryDump) { d.Opt.Dump = d.Opt.Dump[1:] }},
		{"opt[0].kind", func(d *hashtablepb.EntryDump) { d.Opt.Dump[0] = single(&hashtablepb.SgdOptimizerDump{}) }},
		{"opt[1].adagrad.norm[2]", func(d *hashtablepb.EntryDump) { d.Opt.Dump[1].GetAdagrad().Norm[2] = f32(0xffc00002) }},
		{"opt[8].adam.beta1_power", func(d *hashtablepb.EntryDump) { d.Opt.Dump[8].GetAdam().Beta1Power = nil }},
		{"opt[9].adam.beta2_power", func(d *hashtablepb.EntryDump) { *d.Opt.Dump[9].GetAdam().Beta2Power = 0 }}, // -0 vs +0
		{"opt[15].batch_softmax.global_step", func(d *hashtablepb.EntryDump) { *d.Opt.Dump[15].GetBatchSoftmax().GlobalStep = 1 }},
		{"entry unknown fields", func(d *hashtablepb.EntryDump) { d.ProtoReflect().SetUnknown(protoreflect.RawFields{0xa8, 0x01, 0x07}) }},
	} {
		d := proto.Clone(base).(*hashtablepb.EntryDump)
		tc.mutate(d)
		diff, ok := diffEntry(d, base)
		if !ok || diff.field != tc.field {
			t.Errorf("mutation of %s: diff %+v (found %v)", tc.field, diff, ok)
		}
	}
	if d, ok := diffEntry(proto.Clone(base).(*hashtablepb.EntryDump), base); ok {
		t.Errorf("a clone differs: %+v", d)
	}
}

// TestGoavroReadsOurFiles: an independent Avro implementation reads our files, with the
// same values; and our reader reads a file goavro wrote.
func TestGoavroReadsOurFiles(t *testing.T) {
	entries := edgeEntries()
	for _, codec := range []string{"null", "deflate", "snappy"} {
		data := writeEntries(t, Avro, TableInfo{Name: "t", Dim: 4}, entries, WithAvroCodec(codec), WithAvroBlockSize(300))
		r, err := goavro.NewOCFReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for r.Scan() {
			v, err := r.Read()
			if err != nil {
				t.Fatal(err)
			}
			m := v.(map[string]any)
			if m["id"] != entries[i].GetId() || m["table"] != "t" {
				t.Fatalf("%s: entry %d: goavro read id %v table %v", codec, i, m["id"], m["table"])
			}
			emb := m["embedding"].([]any)
			for j, x := range emb {
				if math.Float32bits(x.(float32)) != math.Float32bits(entries[i].Num[j]) {
					t.Fatalf("%s: entry %d embedding[%d]: goavro read %x", codec, i, j, math.Float32bits(x.(float32)))
				}
			}
			i++
		}
		if r.Err() != nil || i != len(entries) {
			t.Fatalf("%s: goavro read %d entries: %v", codec, i, r.Err())
		}
		if md := r.MetaData(); string(md[MetaTable]) != "t" || string(md[MetaDim]) != "4" {
			t.Errorf("metadata %q", md)
		}
	}

	// goavro writes a file our reader accepts (schema by canonical form, no MetaTable).
	var buf bytes.Buffer
	codec, err := goavro.NewCodec(strings.ReplaceAll(avsc.EntryDump, `"doc"`, `"x-doc"`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := goavro.NewOCFWriter(goavro.OCFConfig{W: &buf, Codec: codec, CompressionName: "deflate"})
	if err != nil {
		t.Fatal(err)
	}
	rec := map[string]any{"table": "g", "id": int64(-2), "embedding": []any{f32(0x7f800001)},
		"last_update_ts_sec": goavro.Union("long", int64(3)), "opt": nil}
	if err := w.Append([]any{rec}); err != nil {
		t.Fatal(err)
	}
	table, got, err := readEntries(Avro, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := &hashtablepb.EntryDump{Id: proto.Int64(-2), Num: []float32{f32(0x7f800001)}, LastUpdateTsSec: proto.Int64(3)}
	if table != "g" {
		t.Errorf("table %q", table)
	}
	sameEntries(t, got, []*hashtablepb.EntryDump{want})
}
