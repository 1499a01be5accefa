package batch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := marshalDet.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fixtureBatch(t testing.TB) *examplepb.ExampleBatch {
	t.Helper()
	eb := &examplepb.ExampleBatch{}
	if err := prototext.Unmarshal(fixtures.Read(t, "example_batch.pbtxt"), eb); err != nil {
		t.Fatal(err)
	}
	return eb
}

// fixtureRows converts the golden ExampleBatch into rows of another message type, through a
// batch: to is ToExamples or ToInstances.
func fixtureRows[M any](t testing.TB, to func(arrow.RecordBatch) ([]M, error)) []M {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	var rows []M
	rec, err := FromExampleBatch(mem, fixtureBatch(t))
	if err == nil {
		rows, err = to(rec)
		rec.Release()
	}
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// ipcRoundTrip writes rec as an Arrow IPC stream and reads it back, as a Beam coder or a
// file would.
func ipcRoundTrip(t testing.TB, mem memory.Allocator, rec arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewReader(&buf, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatalf("ipc: no record: %v", r.Err())
	}
	out := r.RecordBatch()
	out.Retain()
	return out
}

// golden strips the spaces and "|" separators the spec uses in hex strings.
func golden(s string) string { return strings.NewReplacer(" ", "", "|", "").Replace(s) }

const fixtureSHA = "a575b4b061e32d96503a48e44a77a414328b7f603db672b2633f806138d8c204"

// TestFixtureRoundTrip: the golden ExampleBatch converts to a batch and back to the same
// 34292 bytes (io.md §6.1), also after an Arrow IPC round trip.
func TestFixtureRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	eb := fixtureBatch(t)
	rec, err := FromExampleBatch(mem, eb)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 51 {
		t.Fatalf("rows = %d, want 51", rec.NumRows())
	}
	for name, r := range map[string]arrow.RecordBatch{"direct": rec, "ipc": ipcRoundTrip(t, mem, rec)} {
		back, err := ToExampleBatch(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := mustMarshal(t, back)
		sum := sha256.Sum256(b)
		if len(b) != 34292 || hex.EncodeToString(sum[:]) != fixtureSHA {
			t.Errorf("%s: re-serialized %d bytes sha256 %x, want 34292 / %s", name, len(b), sum, fixtureSHA)
		}
		if name == "ipc" {
			r.Release()
		}
	}
}

// TestFixtureColumns pins the layout decisions on the fixture: canonical label and
// line_id columns, v2 fids with the dropped v1 bits kept, all-unset lists as null columns.
func TestFixtureColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec, err := FromExampleBatch(mem, fixtureBatch(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	s := rec.Schema()
	if got := len(Features(s)); got != 137 {
		t.Errorf("feature columns = %d, want 137", got)
	}
	if f, ok := s.FieldsByName(ColLabel); !ok || RoleOf(f[0]) != RoleLabel || f[0].Metadata.Values()[1] != ListLabel {
		t.Errorf("label column = %v", f)
	}
	// List positions: features and list-backed canonical columns, companions skipped.
	var lists []string
	for _, f := range s.Fields() {
		if _, fromList := f.Metadata.GetValue(MetaList); IsFeature(f) || fromList {
			lists = append(lists, f.Name)
		}
	}
	if len(lists) != 139 || lists[76] != ColLineID || lists[78] != ColLabel {
		t.Errorf("%d lists; list 76 = %q, list 78 = %q; want 139, line_id, label", len(lists), lists[76], lists[78])
	}
	uid, err := SparseColumn(rec, "f_user_id")
	if err != nil {
		t.Fatal(err)
	}
	if got := uid.Row(0); len(got) != 1 || got[0] != 0x000124080526e4a7 {
		t.Errorf("f_user_id row 0 = %x, want [124080526e4a7] (v2 of 0x007b24080526e4a7)", got)
	}
	gid, _ := SparseColumn(rec, "f_goods_id")
	if got := gid.Row(0); len(got) != 1 || got[0] != 0x00c8c56807a425fc {
		t.Errorf("f_goods_id row 0 = %x, want c8c56807a425fc", got)
	}
	if len(s.FieldIndices(v1hiPrefix+"f_user_id")) != 1 {
		t.Errorf("missing v1 signature companion for f_user_id")
	}
	age := s.Field(s.FieldIndices("f_user_age")[0])
	if age.Type.ID() != arrow.NULL {
		t.Errorf("f_user_age (all unset) has type %s, want null", age.Type)
	}
	if v, _ := age.Metadata.GetValue(MetaNull); v != "unset" {
		t.Errorf("f_user_age null meaning %q, want unset", v)
	}
	empty, err := SparseColumn(rec, "f_user_age")
	if err != nil || len(empty.Row(50)) != 0 {
		t.Errorf("empty sparse view: %v %v", empty, err)
	}
	total := 0
	for _, name := range Features(s) {
		if sp, err := SparseColumn(rec, name); err == nil {
			total += len(sp.Values)
		}
	}
	if total != 1094 {
		t.Errorf("total fids = %d, want 1094 (io.md §6.1)", total)
	}
	// Decoded LineId fields (row 0 bytes are given in io.md §6.1).
	rt := rec.Column(s.FieldIndices(LineIDColumn("req_time"))[0]).(*array.Int64)
	for r := 0; r < rt.Len(); r++ {
		if v := rt.Value(r); v < 1617120207 || v > 1617206384 {
			t.Fatalf("req_time row %d = %d outside the fixture's range", r, v)
		}
	}
	users := rec.Column(s.FieldIndices(LineIDColumn("user_id"))[0]).(*array.String)
	count := 0
	for r := 0; r < users.Len(); r++ {
		if users.Value(r) == "21bacb96ae78a72" {
			count++
		}
	}
	if count != 10 {
		t.Errorf("user 21bacb96ae78a72 appears %d times, want 10", count)
	}
	line := rec.Column(s.FieldIndices(ColLineID)[0]).(*array.Binary)
	const row0 = "18c5d991830621045c2ee7993d9b483201015a0161a001c5d99183068a030f3163383661313863626231303630669a0a1331242323243130303524232324312423232431"
	if got := hex.EncodeToString(line.Value(0)); got != row0 {
		t.Errorf("line_id row 0 = %s", got)
	}
	sr := rec.Column(s.FieldIndices(LineIDColumn("sample_rate"))[0]).(*array.Float32)
	if sr.Value(0) != 1 {
		t.Errorf("absent sample_rate reads %v, want the default 1.0", sr.Value(0))
	}
}

func TestRandomExampleBatchRoundTrip(t *testing.T) {
	seed := uint64(rand.Uint32())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, rows := range []int{1, 2, 7, 64} {
		eb := prototest.ExampleBatch(rng, rows)
		want := mustMarshal(t, eb)
		rec, err := FromExampleBatch(mem, eb)
		if err != nil {
			t.Fatalf("rows %d: %v", rows, err)
		}
		for _, r := range []arrow.RecordBatch{rec, ipcRoundTrip(t, mem, rec)} {
			back, err := ToExampleBatch(r)
			if err != nil {
				t.Fatalf("rows %d: %v", rows, err)
			}
			if got := mustMarshal(t, back); !bytes.Equal(got, want) {
				t.Fatalf("rows %d: round trip differs\n got %v\nwant %v", rows, prototext.Format(back), prototext.Format(eb))
			}
			r.Release()
		}
	}
}

func TestSharedColumnIsRunEndEncoded(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	v1 := uint64(5)<<54 | 0x3F<<48 | 42
	eb := &examplepb.ExampleBatch{BatchSize: 3, NamedFeatureList: []*examplepb.NamedFeatureList{{
		Name: "user", Type: examplepb.FeatureListType_SHARED,
		Feature: []*examplepb.Feature{{Type: &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: []uint64{v1}}}}},
	}}}
	rec, err := FromExampleBatch(mem, eb)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	col := rec.Column(0)
	if col.DataType().ID() != arrow.RUN_END_ENCODED || col.Len() != 3 {
		t.Fatalf("shared column: %s of length %d", col.DataType(), col.Len())
	}
	if n := col.(*array.RunEndEncoded).Values().Len(); n != 1 {
		t.Errorf("shared values stored %d times, want once", n)
	}
	sp, err := SparseColumn(rec, "user")
	if err != nil {
		t.Fatal(err)
	}
	if !sp.Shared || sp.Cells() != 1 || sp.Row(2)[0] != 5<<48|42 {
		t.Errorf("shared view = %+v", sp)
	}
	back, err := ToExampleBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, eb) {
		t.Errorf("round trip: %v", back)
	}
	exs, err := ToExamples(rec)
	if err != nil {
		t.Fatal(err)
	}
	for r, ex := range exs {
		if got := ex.NamedFeature[0].GetFeature().GetFidV1List().GetValue(); len(got) != 1 || got[0] != v1 {
			t.Errorf("row %d: shared fid %x, want %x", r, got, v1)
		}
	}
}

func TestExamplesRoundTrip(t *testing.T) {
	seed := uint64(rand.Uint32())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	exs := prototest.Examples(rng, 9)
	// Two rows that make f0 mix "no Feature" and "absent" cells.
	exs = append(exs, &examplepb.Example{NamedFeature: []*examplepb.NamedFeature{{Name: "f0"}}}, &examplepb.Example{})
	rec, err := FromExamples(mem, exs)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	// Rows mix absent and unset cells, so some columns carry per-cell kinds.
	if len(rec.Schema().FieldIndices(cellPrefix+"f0")) != 1 {
		t.Errorf("expected a cell-kind companion for f0: %v", rec.Schema())
	}
	for _, r := range []arrow.RecordBatch{rec, ipcRoundTrip(t, mem, rec)} {
		back, err := ToExamples(r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range exs {
			if !bytes.Equal(mustMarshal(t, back[i]), mustMarshal(t, exs[i])) {
				t.Fatalf("example %d differs:\n got %v\nwant %v", i, prototext.Format(back[i]), prototext.Format(exs[i]))
			}
		}
		if r != rec {
			r.Release()
		}
	}
}

func TestInstancesRoundTrip(t *testing.T) {
	seed := uint64(rand.Uint32())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ins := prototest.Instances(rng, 12)
	rec, err := FromInstances(mem, ins)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	for _, r := range []arrow.RecordBatch{rec, ipcRoundTrip(t, mem, rec)} {
		back, err := ToInstances(r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ins {
			if !bytes.Equal(mustMarshal(t, back[i]), mustMarshal(t, ins[i])) {
				t.Fatalf("instance %d differs:\n got %v\nwant %v", i, prototext.Format(back[i]), prototext.Format(ins[i]))
			}
		}
		if r != rec {
			r.Release()
		}
	}
}

// TestInstanceFidOrder: interleaved slots and rows that disagree on slot order come back in
// their original order; Instance→Example groups by first appearance, as Monolith does.
func TestInstanceFidOrder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	a1, b1, a2 := uint64(1)<<54|1, uint64(2)<<54|1, uint64(1)<<54|2
	c1 := uint64(3)<<54 | 7
	ins := []*parserpb.Instance{{Fid: []uint64{c1}}, {Fid: []uint64{a1, b1, a2}}, {Fid: []uint64{b1, a1}}, {Fid: []uint64{c1, b1}}}
	rec, err := FromInstances(mem, ins)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if len(rec.Schema().FieldIndices(ColFidOrder)) != 1 {
		t.Fatalf("no %s column", ColFidOrder)
	}
	back, err := ToInstances(rec)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ins {
		if !proto.Equal(back[i], ins[i]) {
			t.Errorf("instance %d: fids %x, want %x", i, back[i].GetFid(), ins[i].GetFid())
		}
	}
	exs, err := ToExamples(rec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nf := range exs[2].NamedFeature {
		names = append(names, nf.Name)
	}
	if strings.Join(names, ",") != "fc_slot_2,fc_slot_1" {
		t.Errorf("row 2 as Example: features %v, want slot 2 then slot 1 (first appearance)", names)
	}
	// Rows grouped in column order need no order column.
	rec2, err := FromInstances(mem, []*parserpb.Instance{{Fid: []uint64{a1, a2, b1}}, {Fid: []uint64{b1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Release()
	if len(rec2.Schema().FieldIndices(ColFidOrder)) != 0 {
		t.Errorf("unexpected %s column", ColFidOrder)
	}
}

// TestInstanceGoldens: inst.pbtext and inst.json (io.md §6.2, §6.3, §2.10.4).
func TestInstanceGoldens(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	txt := &parserpb.Instance{}
	if err := prototext.Unmarshal(fixtures.Read(t, "inst.pbtext"), txt); err != nil {
		t.Fatal(err)
	}
	js := &parserpb.Instance{}
	if err := protojson.Unmarshal(fixtures.Read(t, "inst.json"), js); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      *parserpb.Instance
		wire    string
		example string // Instance→Example golden, "" to skip
	}{
		{"inst.pbtext", txt, "0a10 0100000000000000 0200000000000000 1a08 00000000 0000803f 2a03 320101 4a0d 0a0161 1208 0300000000000000",
			"0a21 0a09 66635f736c6f745f30 1214 0a12 0a10 0100000000000000 0200000000000000 | 0a13 0a01 61 120c 120a 0a08 0300000000000000 1801 | " +
				"a206 03 320101 | aa06 08 00000000 0000803f | b506 0000803f"},
		{"inst.json", js, "0a08 3930000000000000 1a08 00000000 0000803f 2a03 320101", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := hex.EncodeToString(mustMarshal(t, tc.in)), golden(tc.wire); got != want {
				t.Fatalf("wire = %s, want %s", got, want)
			}
			rec, err := FromInstances(mem, []*parserpb.Instance{tc.in})
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			back, err := ToInstances(rec)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back[0], tc.in) {
				t.Errorf("round trip = %v", back[0])
			}
			if tc.example == "" {
				return
			}
			exs, err := ToExamples(rec)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := hex.EncodeToString(mustMarshal(t, exs[0])), golden(tc.example); got != want {
				t.Errorf("Instance→Example = %s\nwant               %s", got, want)
			}
		})
	}
}

// TestExampleBatchToExampleFollowsMonolith checks ExampleBatchToExample (io.md §2.10.1) on
// the fixture: reserved lists move to the top-level fields, unset cells stay as named
// features with the list id.
func TestExampleBatchToExampleFollowsMonolith(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	eb := fixtureBatch(t)
	rec, err := FromExampleBatch(mem, eb)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	exs, err := ToExamples(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 51 {
		t.Fatalf("examples = %d", len(exs))
	}
	for r, ex := range exs {
		if len(ex.NamedFeature) != 137 {
			t.Fatalf("row %d: %d named features, want 137", r, len(ex.NamedFeature))
		}
		if len(ex.Label) != 1 || ex.Label[0] != 0 || ex.LineId == nil || ex.LineId.GetReqTime() == 0 {
			t.Fatalf("row %d: label %v line_id %v", r, ex.Label, ex.LineId)
		}
		if len(ex.LineId.ProtoReflect().GetUnknown()) == 0 {
			t.Fatalf("row %d: LineId lost its unknown fields (I3)", r)
		}
	}
	// Row 0, list 0 against the source cell.
	if !proto.Equal(exs[0].NamedFeature[0].GetFeature(), eb.NamedFeatureList[0].Feature[0]) {
		t.Errorf("row 0 feature 0 differs")
	}
	// Example → batch → ExampleBatch → Example is stable.
	rec2, err := FromExamples(mem, exs)
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Release()
	exs2, err := ToExamples(rec2)
	if err != nil {
		t.Fatal(err)
	}
	for r := range exs {
		if !proto.Equal(exs[r], exs2[r]) {
			t.Fatalf("row %d: Example round trip differs", r)
		}
	}
}

func TestExampleBatchToInstance(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ins := fixtureRows(t, ToInstances)
	total := 0
	for _, in := range ins {
		total += len(in.Fid)
		if len(in.Feature) != 0 || in.LineId == nil || in.DataSourceKey == nil {
			t.Fatalf("instance %v", in)
		}
	}
	if total != 1094 {
		t.Errorf("top-level fids = %d, want 1094", total)
	}
	// And back: Instance batches regroup fids by slot into fc_slot_<n> columns.
	rec2, err := FromInstances(mem, ins)
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Release()
	if _, err := SparseColumn(rec2, "fc_slot_209"); err != nil {
		t.Errorf("fc_slot_209: %v", err)
	}
}

func TestErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fid := func(v ...uint64) *examplepb.Feature {
		return &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: v}}}
	}
	flt := &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{1}}}}
	ebs := []struct {
		name string
		eb   *examplepb.ExampleBatch
		want string
	}{
		{"D6 individual length", &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "a", Feature: []*examplepb.Feature{fid(1)}}}}, `list 0 "a"`},
		{"shared two cells", &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "s", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{fid(1), fid(2)}}}}, "SHARED list has 2 cells"},
		{"shared no cell", &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "s", Type: examplepb.FeatureListType_SHARED}}}, "SHARED list has 0 cells"},
		{"duplicate", &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "a", Feature: []*examplepb.Feature{fid(1)}}, {Name: "a", Feature: []*examplepb.Feature{fid(1)}}}}, `both named "a"`},
		{"kinds", &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "a", Feature: []*examplepb.Feature{fid(1), flt}}}}, "float_list cannot share a column with earlier fid_v2_list"},
		{"negative", &examplepb.ExampleBatch{BatchSize: -1}, "batch_size -1 is outside"},
		{"huge", &examplepb.ExampleBatch{BatchSize: 1 << 30}, "is outside"},
	}
	for _, tc := range ebs {
		rec, err := FromExampleBatch(mem, tc.eb)
		if err == nil {
			rec.Release()
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !errors.Is(err, ErrUnrepresentable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want ErrUnrepresentable containing %q", tc.name, err, tc.want)
		}
	}
	ins := []struct {
		name string
		in   []*parserpb.Instance
		want string
	}{
		{"D5 slot vs name", []*parserpb.Instance{{Fid: []uint64{3 << 54}, Feature: []*matrixpb.Feature{{Name: proto.String("fc_slot_3"), Fid: []uint64{1}}}}}, "fc_slot_3"},
		{"D5 across rows", []*parserpb.Instance{{Feature: []*matrixpb.Feature{{Name: proto.String("fc_slot_3"), Fid: []uint64{1}}}}, {Fid: []uint64{3 << 54}}}, "fc_slot_3"},
		{"two value fields", []*parserpb.Instance{{Feature: []*matrixpb.Feature{{Name: proto.String("x"), Fid: []uint64{1}, FloatValue: []float32{1}}}}}, "sets 2 value fields"},
		{"duplicate name", []*parserpb.Instance{{Feature: []*matrixpb.Feature{{Name: proto.String("x")}, {Name: proto.String("x")}}}}, `"x"`},
		{"value collision", []*parserpb.Instance{{Value: []float32{1}, Feature: []*matrixpb.Feature{{Name: proto.String("value")}}}}, `"value"`},
	}
	for _, tc := range ins {
		rec, err := FromInstances(mem, tc.in)
		if err == nil {
			rec.Release()
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !errors.Is(err, ErrUnrepresentable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want ErrUnrepresentable containing %q", tc.name, err, tc.want)
		}
	}
	// Examples: duplicate feature in one row; ids that change between rows.
	for _, exs := range [][]*examplepb.Example{
		{{NamedFeature: []*examplepb.NamedFeature{{Name: "a"}, {Name: "a"}}}},
		{{NamedFeature: []*examplepb.NamedFeature{{Name: "a", Id: 1}}}, {NamedFeature: []*examplepb.NamedFeature{{Name: "a", Id: 2}}}},
	} {
		rec, err := FromExamples(mem, exs)
		if err == nil {
			rec.Release()
			t.Errorf("examples %v: no error", exs)
		} else if !errors.Is(err, ErrUnrepresentable) || !strings.Contains(err.Error(), `"a"`) {
			t.Errorf("error %q does not name feature a", err)
		}
	}
	// Conversions that would drop data.
	rec, err := FromExampleBatch(mem, &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{{
		Name: "d", Feature: []*examplepb.Feature{{Type: &examplepb.Feature_DoubleList{DoubleList: &examplepb.DoubleList{Value: []float64{1}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if _, err := ToInstances(rec); !errors.Is(err, ErrUnrepresentable) || !strings.Contains(err.Error(), `"d"`) {
		t.Errorf("double_list to Instance: %v", err)
	}
	rec2, err := FromExamples(mem, []*examplepb.Example{{DataSourceKey: 1}, {DataSourceKey: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Release()
	if _, err := ToExampleBatch(rec2); !errors.Is(err, ErrUnrepresentable) {
		t.Errorf("mixed data_source_key to ExampleBatch: %v", err)
	}
}

// TestBadLineID: LineId bytes that do not parse are an error naming the row.
func TestBadLineID(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	eb := &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: ListLineID, Feature: []*examplepb.Feature{
		{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{{0x18, 0x01}}}}},
		{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{{0x18}}}}},
	}}}}
	rec, err := FromExampleBatch(mem, eb)
	if err == nil {
		rec.Release()
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "row 1") {
		t.Errorf("error %q does not name row 1", err)
	}
	// Without decoded fields the bytes are kept as they are.
	rec, err = FromExampleBatch(mem, eb, WithoutLineIDFields())
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
}

func TestZeroRowBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	eb := &examplepb.ExampleBatch{DataSourceKey: 9, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "s", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{{}}}}}
	rec, err := FromExampleBatch(mem, eb)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	back, err := ToExampleBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, eb) {
		t.Errorf("zero-row batch round trip = %v", back)
	}
}

func TestV1Conversion(t *testing.T) {
	for _, v1 := range []uint64{0, 1, 0x007b24080526e4a7, 0x3219c56807a425fc, ^uint64(0), 1023 << 54} {
		v2 := V1ToV2(v1)
		if v2>>48 != v1>>54 || v2&fidV2Mask != v1&fidV2Mask {
			t.Errorf("V1ToV2(%x) = %x", v1, v2)
		}
		if back := fid.V2ToV1(v2, fid.V1Hi(v1)); back != v1 {
			t.Errorf("fid.V2ToV1(V1ToV2(%x)) = %x", v1, back)
		}
	}
}

// dirtyAllocator hands out memory full of 0xFF, as a pool that does not clear reused
// buffers would.
type dirtyAllocator struct{ memory.Allocator }

func (a dirtyAllocator) Allocate(n int) []byte {
	b := a.Allocator.Allocate(n)
	for i := range b {
		b[i] = 0xFF
	}
	return b
}

func (a dirtyAllocator) Reallocate(n int, old []byte) []byte {
	b := a.Allocate(n)
	copy(b, old)
	a.Free(old)
	return b
}

// TestWireV1SignatureBits: the wire decoder keeps a v1 column's signature bits in a
// companion only when one is non-zero (its memory from the batch's allocator, freed with
// the batch, and not assumed clear), in columns of v1 cells alone and mixed with v2 cells,
// and the batch converts back to the same ExampleBatch.
func TestWireV1SignatureBits(t *testing.T) {
	v1 := func(vals ...uint64) *examplepb.Feature {
		return &examplepb.Feature{Type: &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: vals}}}
	}
	v2 := &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{7 << 48, 9}}}}
	tests := []struct {
		name      string
		cells     []*examplepb.Feature
		companion bool
	}{
		{"no bits", []*examplepb.Feature{v1(1<<60, 3), v1(5)}, false},
		{"bits", []*examplepb.Feature{v1(1<<60|5<<48, 3), v1(5)}, true},
		{"bits after a v2 cell", []*examplepb.Feature{v2, v1(2, 1<<54|63<<48)}, true},
		{"no bits beside a v2 cell", []*examplepb.Feature{v1(2), v2}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(dirtyAllocator{memory.DefaultAllocator})
			defer mem.AssertSize(t, 0)
			eb := &examplepb.ExampleBatch{BatchSize: int32(len(tc.cells)), NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "a", Feature: tc.cells}}}
			rec, err := DecodeExampleBatch(mem, mustMarshal(t, eb))
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			if got := len(rec.Schema().FieldIndices(v1hiPrefix+"a")) == 1; got != tc.companion {
				t.Errorf("signature-bit companion %v, want %v", got, tc.companion)
			}
			ref, err := FromExampleBatch(memory.DefaultAllocator, eb) // the message path
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Release()
			if !array.RecordEqual(rec, ref) {
				t.Errorf("wire path %v, message path %v", rec, ref)
			}
			back, err := ToExampleBatch(rec)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back.NamedFeatureList[0], eb.NamedFeatureList[0]) {
				t.Errorf("round trip: %v, want %v", prototext.Format(back.NamedFeatureList[0]), prototext.Format(eb.NamedFeatureList[0]))
			}
		})
	}
}

// TestFlatRoundTrip: Flatten → Widen to a wider file schema → Conform restores the batch
// exactly, which is how Parquet and the other flat formats store batches.
func TestFlatRoundTrip(t *testing.T) {
	seed := uint64(rand.Uint32())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	eb := prototest.ExampleBatch(rng, 5)
	rec, err := FromExampleBatch(mem, eb)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	other, err := FromInstances(mem, prototest.Instances(rng, 3))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	flat, err := Flatten(mem, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer flat.Release()
	for i, f := range flat.Schema().Fields() {
		if f.Type.ID() == arrow.RUN_END_ENCODED || flat.Column(i).Len() != 5 {
			t.Fatalf("column %q not flattened", f.Name)
		}
	}
	file, err := UnionSchema(rec.Schema(), other.Schema())
	if err != nil {
		t.Fatal(err)
	}
	wide, err := Widen(mem, flat, file)
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Release()
	enc, err := EncodeSchema(rec.Schema())
	if err != nil {
		t.Fatal(err)
	}
	target, err := DecodeSchema(enc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Conform(mem, wide, target)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Release()
	got, err := ToExampleBatch(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustMarshal(t, got), mustMarshal(t, eb)) {
		t.Fatalf("flat round trip differs")
	}
	// A "shared" column whose rows differ is rejected.
	if _, err := Conform(mem, wide, arrow.NewSchema([]arrow.Field{{Name: ColLineID, Type: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.Binary)}}, nil)); err == nil || !strings.Contains(err.Error(), "differs between rows") {
		t.Errorf("non-constant shared column: %v", err)
	}
}

// TestRowsRoundTrip: batch → rows → JSON → rows → batch is exact for every source, the
// fixture included; NaN and infinities survive the JSON form.
func TestRowsRoundTrip(t *testing.T) {
	seed := uint64(rand.Uint32())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	nanEB := &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "x", Feature: []*examplepb.Feature{
		{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{float32(math.NaN()), float32(math.Inf(-1)), 1.5}}}}}}}}
	build := map[string]func() (arrow.RecordBatch, error){
		"fixture":      func() (arrow.RecordBatch, error) { return FromExampleBatch(mem, fixtureBatch(t)) },
		"examplebatch": func() (arrow.RecordBatch, error) { return FromExampleBatch(mem, prototest.ExampleBatch(rng, 4)) },
		"examples":     func() (arrow.RecordBatch, error) { return FromExamples(mem, prototest.Examples(rng, 6)) },
		"instances":    func() (arrow.RecordBatch, error) { return FromInstances(mem, prototest.Instances(rng, 6)) },
		"nan":          func() (arrow.RecordBatch, error) { return FromExampleBatch(mem, nanEB) },
		// Rows 0..19 of the fixture leave some typed feature columns (and their v1hi
		// companions) all null: the row form must still rebuild them.
		"fixture slice": func() (arrow.RecordBatch, error) {
			full, err := FromExampleBatch(mem, fixtureBatch(t))
			if err != nil {
				return nil, err
			}
			defer full.Release()
			return full.NewSlice(0, 20), nil
		},
		"fixture take": func() (arrow.RecordBatch, error) {
			full, err := FromExampleBatch(mem, fixtureBatch(t))
			if err != nil {
				return nil, err
			}
			defer full.Release()
			return Take(mem, full, []int{3, 1, 4, 1, 5, 9, 2, 6})
		},
		"empty": func() (arrow.RecordBatch, error) {
			return FromExampleBatch(mem, &examplepb.ExampleBatch{DataSourceKey: 3})
		},
	}
	for name, mk := range build {
		t.Run(name, func(t *testing.T) {
			rec, err := mk()
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			rows, err := Rows(rec)
			if err != nil {
				t.Fatal(err)
			}
			js, err := json.Marshal(rows)
			if err != nil {
				t.Fatal(err)
			}
			var back []Row
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatal(err)
			}
			got, err := FromRows(mem, back)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if !array.RecordApproxEqual(got, rec, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) || !got.Schema().Equal(rec.Schema()) {
				t.Fatalf("rows round trip differs:\n got %v\nwant %v", got, rec)
			}
		})
	}
}

// TestAllNullColumns: a column whose cells are all "no Feature" or all absent keeps that
// meaning (a null-typed Arrow array has no validity bitmap).
func TestAllNullColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	exs := []*examplepb.Example{
		{NamedFeature: []*examplepb.NamedFeature{{Name: "nofeat"}, {Name: "unset", Feature: &examplepb.Feature{}}, {Name: "half"}}},
		{NamedFeature: []*examplepb.NamedFeature{{Name: "nofeat"}, {Name: "unset", Feature: &examplepb.Feature{}}}},
	}
	rec, err := FromExamples(mem, exs)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	back, err := ToExamples(rec)
	if err != nil {
		t.Fatal(err)
	}
	for i := range exs {
		if !proto.Equal(back[i], exs[i]) {
			t.Errorf("example %d: got %v, want %v", i, prototext.Format(back[i]), prototext.Format(exs[i]))
		}
	}
}
