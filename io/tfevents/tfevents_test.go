package tfevents_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/tfevents"
	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

const goldenFile = "testdata/scalars.tfevents.golden"

// t0 is the fixed wall time of the golden file: 2023-11-14T22:13:20.25Z.
var t0 = time.Unix(1700000000, 250_000_000)

// goldenSteps are the events of the golden file after its file_version record.
var goldenSteps = []struct {
	step    int64
	t       time.Time
	wall    float64 // t in seconds, exact in a double
	scalars []tfevents.Scalar
}{
	{100, t0.Add(time.Second), 1700000001.25, []tfevents.Scalar{{"loss", 0.693359375}, {"examples_per_sec", 12288}, {"global_step", 100}}},
	{200, t0.Add(2 * time.Second), 1700000002.25, []tfevents.Scalar{{"loss", 0.5}}},
	{200, t0.Add(2500 * time.Millisecond), 1700000002.75, []tfevents.Scalar{{"eval/auc", 0.75}, {"eval/logloss", 0.5625}, {"eval/bayes_auc", 0.8125}, {"eval/bayes_logloss", 0.4375}}},
}

// goldenPoints are the scalar points of the golden file.
func goldenPoints() []tfevents.Point {
	var pts []tfevents.Point
	for _, s := range goldenSteps {
		for _, sc := range s.scalars {
			pts = append(pts, tfevents.Point{Step: s.step, WallTime: s.wall, Tag: sc.Tag, Value: sc.Value})
		}
	}
	return pts
}

func writeGolden(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := tfevents.NewWriter(&buf, t0)
	if err != nil {
		t.Fatal(err)
	}
	if w.Path() != "" {
		t.Errorf("Path() = %q for NewWriter, want empty", w.Path())
	}
	for _, s := range goldenSteps {
		if err := w.WriteScalars(s.step, s.t, s.scalars...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestGolden(t *testing.T) {
	got := writeGolden(t)
	if *update {
		if err := os.WriteFile(goldenFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("written bytes differ from %s:\n got %x\nwant %x", goldenFile, got, want)
	}
	pts, err := tfevents.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pts, goldenPoints()) {
		t.Errorf("decoded points\n got %+v\nwant %+v", pts, goldenPoints())
	}
	// The first event is the file_version record.
	r := tfevents.NewReader(bytes.NewReader(want), goldenFile)
	e, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if e.GetFileVersion() != "brain.Event:2" || e.GetWallTime() != 1700000000.25 || e.GetStep() != 0 {
		t.Errorf("first event %v, want file_version brain.Event:2 at 1700000000.25", e)
	}
	n := 1
	for {
		_, err := r.Next()
		if err != nil {
			if !errors.Is(err, errEOF) {
				t.Fatal(err)
			}
			break
		}
		n++
	}
	if n != 1+len(goldenSteps) {
		t.Errorf("%d events, want %d", n, 1+len(goldenSteps))
	}
}

// record is one TFRecord frame split by hand.
type record struct {
	off     int
	payload []byte
}

// maskedCRC is the TFRecord checksum, written out here independently of io/tfrecord.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	return (c>>15 | c<<17) + 0xa282ead8
}

// splitRecords checks the framing of every record: u64 LE length, masked CRC of the 8
// length bytes, payload, masked CRC of the payload.
func splitRecords(t *testing.T, b []byte) []record {
	t.Helper()
	var out []record
	for off := 0; off < len(b); {
		if len(b)-off < 12 {
			t.Fatalf("offset %d: %d bytes left, less than a header", off, len(b)-off)
		}
		n := int(binary.LittleEndian.Uint64(b[off:]))
		if got, want := binary.LittleEndian.Uint32(b[off+8:]), maskedCRC(b[off:off+8]); got != want {
			t.Fatalf("offset %d: length crc %#x, want %#x", off, got, want)
		}
		end := off + 12 + n + 4
		if end > len(b) {
			t.Fatalf("offset %d: record of %d bytes overruns the file", off, n)
		}
		p := b[off+12 : off+12+n]
		if got, want := binary.LittleEndian.Uint32(b[off+12+n:]), maskedCRC(p); got != want {
			t.Fatalf("offset %d: payload crc %#x, want %#x", off, got, want)
		}
		out = append(out, record{off, p})
		off = end
	}
	return out
}

// field is one decoded protobuf field.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64 // varint, fixed32 and fixed64 values
	b   []byte // bytes values
}

func fields(t *testing.T, b []byte) []field {
	t.Helper()
	var out []field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.v = uint64(v)
		case protowire.Fixed64Type:
			f.v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			t.Fatalf("field %d: unexpected wire type %d", num, typ)
		}
		if n < 0 {
			t.Fatalf("field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
		out = append(out, f)
	}
	return out
}

// TestWireLayout decodes the bytes we write with protowire alone and checks them against
// TensorFlow's published layout: Event.wall_time = 1 fixed64, step = 2 varint,
// file_version = 3 bytes, summary = 5 bytes; Summary.value = 1 bytes; Value.tag = 1 bytes,
// simple_value = 2 fixed32.
func TestWireLayout(t *testing.T) {
	recs := splitRecords(t, writeGolden(t))
	if len(recs) != 1+len(goldenSteps) {
		t.Fatalf("%d records, want %d", len(recs), 1+len(goldenSteps))
	}
	if recs[0].off != 0 {
		t.Fatalf("first record at %d", recs[0].off)
	}
	first := fields(t, recs[0].payload)
	want0 := []field{
		{num: 1, typ: protowire.Fixed64Type, v: math.Float64bits(1700000000.25)},
		{num: 3, typ: protowire.BytesType, b: []byte("brain.Event:2")},
	}
	if !reflect.DeepEqual(first, want0) {
		t.Errorf("file_version record fields %+v, want %+v", first, want0)
	}
	for i, s := range goldenSteps {
		ev := fields(t, recs[i+1].payload)
		if len(ev) != 3 {
			t.Fatalf("event %d: %d fields, want wall_time, step, summary", i, len(ev))
		}
		wt := s.wall
		if ev[0].num != 1 || ev[0].typ != protowire.Fixed64Type || math.Float64frombits(ev[0].v) != wt {
			t.Errorf("event %d field 0 = %+v, want wall_time=1 fixed64 %v", i, ev[0], wt)
		}
		if ev[1].num != 2 || ev[1].typ != protowire.VarintType || int64(ev[1].v) != s.step {
			t.Errorf("event %d field 1 = %+v, want step=2 varint %d", i, ev[1], s.step)
		}
		if ev[2].num != 5 || ev[2].typ != protowire.BytesType {
			t.Fatalf("event %d field 2 = %+v, want summary=5 bytes", i, ev[2])
		}
		vals := fields(t, ev[2].b)
		if len(vals) != len(s.scalars) {
			t.Fatalf("event %d: %d summary fields, want %d", i, len(vals), len(s.scalars))
		}
		for j, v := range vals {
			if v.num != 1 || v.typ != protowire.BytesType {
				t.Fatalf("event %d summary field %d = %+v, want value=1 bytes", i, j, v)
			}
			vf := fields(t, v.b)
			want := []field{
				{num: 1, typ: protowire.BytesType, b: []byte(s.scalars[j].Tag)},
				{num: 2, typ: protowire.Fixed32Type, v: uint64(math.Float32bits(float32(s.scalars[j].Value)))},
			}
			if !reflect.DeepEqual(vf, want) {
				t.Errorf("event %d value %d = %+v, want %+v", i, j, vf, want)
			}
		}
	}
}

func TestFileName(t *testing.T) {
	for _, tc := range []struct {
		t            time.Time
		host, suffix string
		want         string
	}{
		{time.Unix(1700000000, 999_999_999), "worker-0", "", "events.out.tfevents.1700000000.worker-0"},
		{time.Unix(42, 0), "h", ".v2", "events.out.tfevents.0000000042.h.v2"},
		{time.Unix(0, 0), "", "", "events.out.tfevents.0000000000."},
	} {
		if got := tfevents.FileName(tc.t, tc.host, tc.suffix); got != tc.want {
			t.Errorf("FileName(%v, %q, %q) = %q, want %q", tc.t.Unix(), tc.host, tc.suffix, got, tc.want)
		}
	}
}

func TestCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	w, err := tfevents.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(w.Path()) != dir || !strings.HasPrefix(filepath.Base(w.Path()), "events.out.tfevents.") {
		t.Errorf("Path() = %q, want an event file in %s", w.Path(), dir)
	}
	// Create flushes the file_version record at once.
	if st, err := os.Stat(w.Path()); err != nil || st.Size() == 0 {
		t.Errorf("after Create: %v, size %d; want the file_version record on disk", err, st.Size())
	}
	w2, err := tfevents.Create(dir) // usually the same second: gets a suffix, never overwrites
	if err != nil {
		t.Fatal(err)
	}
	if w2.Path() == w.Path() {
		t.Fatalf("two writers share %s", w.Path())
	}
	now := time.Now()
	if err := w.WriteScalars(1, now, tfevents.Scalar{Tag: "loss", Value: 0.25}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteScalars(2, now, tfevents.Scalar{Tag: "loss", Value: 0.125}); err != nil {
		t.Fatal(err)
	}
	for _, wr := range []*tfevents.Writer{w, w2} {
		if err := wr.Close(); err != nil {
			t.Fatal(err)
		}
		if err := wr.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
	if err := w.WriteScalars(3, now); !errors.Is(err, tfevents.ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
	if err := w.Flush(); !errors.Is(err, tfevents.ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
	files, err := tfevents.Files(dir)
	if err != nil || len(files) != 2 || files[0] != w.Path() && files[1] != w.Path() {
		t.Fatalf("Files = %v, %v; want both writers' files", files, err)
	}
	pts, err := tfevents.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Value != 0.25 || pts[1].Step != 2 || pts[1].Tag != "loss" {
		t.Errorf("points %+v", pts)
	}
	if pts, err := tfevents.ReadFile(w2.Path()); err != nil || len(pts) != 0 {
		t.Errorf("empty writer's file: %v, %v", pts, err)
	}
}

func TestCreateUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "events")
	_, err := tfevents.Create(dir)
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Create under a file: %v, want an error naming %s", err, dir)
	}
}

func TestConcurrentWrites(t *testing.T) {
	var buf bytes.Buffer
	w, err := tfevents.NewWriter(&buf, t0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				if err := w.WriteScalars(int64(i), t0, tfevents.Scalar{Tag: fmt.Sprint("g", g), Value: float64(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := tfevents.NewReader(&buf, "concurrent")
	n := 0
	for {
		e, err := r.Next()
		if errors.Is(err, errEOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(tfevents.Scalars(e))
	}
	if n != 200 {
		t.Errorf("%d points, want 200", n)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"events.out.tfevents.0000000002.h", "events.out.tfevents.0000000001.h", "events.out.tfevents.0000000001.h.1", "checkpoint", "model.ckpt-1.index"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "eval", "events.out.tfevents.0000000003.h"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := tfevents.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(dir, "events.out.tfevents.0000000001.h"),
		filepath.Join(dir, "events.out.tfevents.0000000001.h.1"),
		filepath.Join(dir, "events.out.tfevents.0000000002.h"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Files(dir) = %v, want %v", got, want)
	}
	if got, err := tfevents.Files(want[1]); err != nil || !reflect.DeepEqual(got, want[1:2]) {
		t.Errorf("Files(file) = %v, %v", got, err)
	}
	if got, err := tfevents.Files(filepath.Join(dir, "checkpoint")); err != nil || len(got) != 1 {
		t.Errorf("Files(any file) = %v, %v; want the file itself", got, err)
	}
	if got, err := tfevents.Files(filepath.Join(dir, "eval")); err != nil || len(got) != 0 {
		t.Errorf("Files(dir with only a directory) = %v, %v; want none", got, err)
	}
	if _, err := tfevents.Files(filepath.Join(dir, "missing")); err == nil {
		t.Error("Files(missing) succeeded")
	}
	if !tfevents.IsEventFile(want[0]) || tfevents.IsEventFile(filepath.Join(dir, "checkpoint")) {
		t.Error("IsEventFile")
	}
}

// writeFile writes the golden events to a file named like an event file.
func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.out.tfevents.1700000000.test")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadErrors(t *testing.T) {
	good := writeGolden(t)
	recs := splitRecords(t, good)
	last := recs[len(recs)-1].off
	second := recs[1].off

	// A valid frame around a payload that is not an Event (field 1 with wire type 7).
	bad := bytes.Clone(good[:second])
	var frame bytes.Buffer
	tw := tfrecord.NewWriter(&frame)
	if err := tw.Write([]byte{0x0f, 0x01}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	bad = append(bad, frame.Bytes()...)

	flipped := bytes.Clone(good)
	flipped[second+14] ^= 0x40 // inside the payload of record 1

	for _, tc := range []struct {
		name   string
		data   []byte
		offset int
		is     error
	}{
		{"truncated in the payload", good[:len(good)-7], last, tfrecord.ErrTruncated},
		{"truncated in the header", good[:last+5], last, tfrecord.ErrTruncated},
		{"corrupted byte", flipped, second, tfrecord.ErrChecksum},
		{"undecodable payload", bad, second, tfevents.ErrDecode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.data)
			_, err := tfevents.ReadFile(path)
			if err == nil {
				t.Fatal("ReadFile succeeded")
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %v, want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", tc.offset)) {
				t.Errorf("error %q does not name %s and offset %d", err, path, tc.offset)
			}
			var ce *tfrecord.CorruptError
			if !errors.As(err, &ce) || ce.Offset != int64(tc.offset) || ce.File != path {
				t.Errorf("error %#v, want a CorruptError at %d in %s", err, tc.offset, path)
			}
		})
	}
	if _, err := tfevents.ReadFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ReadFile of a missing file succeeded")
	}
}

// TestCorruptionSweep flips each byte of the golden file: every flip is an error (the
// CRCs cover every byte), never a panic.
func TestCorruptionSweep(t *testing.T) {
	good := writeGolden(t)
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		r := tfevents.NewReader(bytes.NewReader(b), "sweep")
		var err error
		for err == nil {
			var e *tfcorepb.Event
			e, err = r.Next()
			tfevents.Scalars(e)
		}
		if errors.Is(err, errEOF) {
			t.Errorf("flip at %d: read to the end without an error", i)
		}
	}
}

func TestScalars(t *testing.T) {
	f32 := func(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }
	f64 := func(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }
	i32 := func(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
	i64 := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	scalars := &tfcorepb.SummaryMetadata{PluginData: &tfcorepb.SummaryMetadata_PluginData{PluginName: "scalars"}, DataClass: tfcorepb.DataClass_DATA_CLASS_SCALAR}
	hist := &tfcorepb.SummaryMetadata{PluginData: &tfcorepb.SummaryMetadata_PluginData{PluginName: "histograms"}}
	tensor := func(tag string, md *tfcorepb.SummaryMetadata, tp *tfcorepb.TensorProto) *tfcorepb.Summary_Value {
		return &tfcorepb.Summary_Value{Tag: tag, Metadata: md, Value: &tfcorepb.Summary_Value_Tensor{Tensor: tp}}
	}
	for _, tc := range []struct {
		name string
		vals []*tfcorepb.Summary_Value
		want map[string]float64 // nil: no points
	}{
		{"simple_value", []*tfcorepb.Summary_Value{{Tag: "a", Value: &tfcorepb.Summary_Value_SimpleValue{SimpleValue: 1.5}}}, map[string]float64{"a": 1.5}},
		{"float_val", []*tfcorepb.Summary_Value{tensor("a", scalars, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_FLOAT, TensorShape: &tfcorepb.TensorShapeProto{}, FloatVal: []float32{0.25}})}, map[string]float64{"a": 0.25}},
		{"double_val", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_DOUBLE, DoubleVal: []float64{0.1}})}, map[string]float64{"a": 0.1}},
		{"int_val", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_INT32, IntVal: []int32{-3}})}, map[string]float64{"a": -3}},
		{"int64_val", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_INT64, Int64Val: []int64{1 << 40}})}, map[string]float64{"a": 1 << 40}},
		{"content float", []*tfcorepb.Summary_Value{tensor("a", scalars, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_FLOAT, TensorContent: f32(-0.5)})}, map[string]float64{"a": -0.5}},
		{"content double", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_DOUBLE, TensorContent: f64(0.1)})}, map[string]float64{"a": 0.1}},
		{"content int32", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_INT32, TensorContent: i32(-7)})}, map[string]float64{"a": -7}},
		{"content int64", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_INT64, TensorContent: i64(-9)})}, map[string]float64{"a": -9}},
		{"empty tensor is zero", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_FLOAT})}, map[string]float64{"a": 0}},
		{"short content", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_DOUBLE, TensorContent: f32(1)})}, nil},
		{"rank 1", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_FLOAT, TensorShape: &tfcorepb.TensorShapeProto{Dim: []*tfcorepb.TensorShapeProto_Dim{{Size: 1}}}, FloatVal: []float32{1}})}, nil},
		{"unknown rank", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_FLOAT, TensorShape: &tfcorepb.TensorShapeProto{UnknownRank: true}, FloatVal: []float32{1}})}, nil},
		{"string tensor", []*tfcorepb.Summary_Value{tensor("a", nil, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_STRING, StringVal: [][]byte{[]byte("x")}})}, nil},
		{"other plugin", []*tfcorepb.Summary_Value{tensor("a", hist, &tfcorepb.TensorProto{Dtype: tfcorepb.DataType_DT_FLOAT, FloatVal: []float32{1}})}, nil},
		{"nil tensor", []*tfcorepb.Summary_Value{tensor("a", nil, nil)}, nil},
		{"histogram", []*tfcorepb.Summary_Value{{Tag: "h", Value: &tfcorepb.Summary_Value_Histo{Histo: &tfcorepb.HistogramProto{Num: 1}}}}, nil},
		{"no value", []*tfcorepb.Summary_Value{{Tag: "n"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &tfcorepb.Event{WallTime: 3.5, Step: 9, What: &tfcorepb.Event_Summary{Summary: &tfcorepb.Summary{Value: tc.vals}}}
			// Through the wire, as a reader sees it.
			b, err := proto.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			var back tfcorepb.Event
			if err := proto.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			pts := tfevents.Scalars(&back)
			if len(pts) != len(tc.want) {
				t.Fatalf("points %+v, want %v", pts, tc.want)
			}
			for _, p := range pts {
				if w, ok := tc.want[p.Tag]; !ok || p.Value != w || p.Step != 9 || p.WallTime != 3.5 {
					t.Errorf("point %+v, want %s=%v at step 9, wall time 3.5", p, p.Tag, w)
				}
			}
		})
	}
	if pts := tfevents.Scalars(&tfcorepb.Event{What: &tfcorepb.Event_FileVersion{FileVersion: "brain.Event:2"}}); pts != nil {
		t.Errorf("file_version event has points %v", pts)
	}
	if pts := tfevents.Scalars(nil); pts != nil {
		t.Errorf("nil event has points %v", pts)
	}
}
