package filter

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// v1 fids whose signature bits 48..53 are set, so that the v1→v2 conversion loses them
// and the filter must rebuild them from the "__v1hi__" companion.
var (
	a1 = fid.MakeV1(5, 0x3F<<48|1)   // slot 5
	a2 = fid.MakeV1(5, 0x15<<48|2)   // slot 5
	b1 = fid.MakeV1(7, 3)            // slot 7, no high bits
	c2 = fid.MakeV2(300, 0xABCDEF)   // v2 slot 300
	d2 = fid.MakeV2(7, 0xABCDEF<<20) // v2 slot 7
)

func TestFilterByFidsExample(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	exs := []*examplepb.Example{
		0: ex(nil, lid(func(l *matrixpb.LineId) { l.ReqTime = new(int64(100)); l.Actions = []int32{1} }), fidV1("u", a1, b1), fidV2("v", c2)),
		1: ex(nil, lid(func(l *matrixpb.LineId) { l.ReqTime = new(int64(50)); l.Actions = []int32{2} }), fidV1("u", a2), fidV2("v", d2)),
		2: ex(nil, nil, fidV2("v", c2, d2)),
		3: ex(nil, withActions(3, 1)),
	}
	tests := []struct {
		name string
		o    FidsOptions
		want []int
	}{
		{"none", FidsOptions{}, []int{0, 1, 2, 3}},
		{"req_time_min", FidsOptions{ReqTimeMin: 60}, []int{0}},
		{"negative req_time_min keeps defaults", FidsOptions{ReqTimeMin: -1}, []int{0, 1, 2, 3}},
		{"filter_fids v1 original value", FidsOptions{FilterFids: []uint64{a1}}, []int{1, 2, 3}},
		{"filter_fids v1 converted value does not match", FidsOptions{FilterFids: []uint64{fid.V1ToV2(a1)}}, []int{0, 1, 2, 3}},
		{"filter_fids v2", FidsOptions{FilterFids: []uint64{d2}}, []int{0, 3}},
		{"has_fids", FidsOptions{HasFids: []uint64{a2, c2}}, []int{0, 1, 2}},
		{"select_fids", FidsOptions{SelectFids: []uint64{c2, d2}}, []int{2}},
		{"select_fids with duplicates", FidsOptions{SelectFids: []uint64{a1, a1, b1}}, []int{0}},
		{"select_slots v1 and v2", FidsOptions{SelectSlots: []int32{5, 300}}, []int{0}},
		{"select_slots v2 slot 7 also matches v1 slot 7", FidsOptions{SelectSlots: []int32{7}}, []int{0, 1, 2}},
		{"has_actions", FidsOptions{HasActions: []int32{1}}, []int{0, 3}},
		{"combined", FidsOptions{HasFids: []uint64{c2}, HasActions: []int32{1, 2}}, []int{0}},
	}
	for _, v := range lineIDVariants {
		rec := examples(t, mem, exs, v.opts...)
		for _, tc := range tests {
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				f, err := NewFilterByFids(tc.o)
				if err != nil {
					t.Fatal(err)
				}
				if got := keep(t, f, rec); !slices.Equal(got, tc.want) {
					t.Errorf("kept %v, want %v", got, tc.want)
				}
			})
		}
		rec.Release()
	}
}

func TestFilterByFidsInstance(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	name := "fc_named"
	ins := []*parserpb.Instance{
		0: {Fid: []uint64{b1, a1}, LineId: withActions(1)},
		1: {Fid: []uint64{a2}, Feature: []*matrixpb.Feature{{Name: &name, Fid: []uint64{c2}}}},
	}
	rec := instances(t, mem, ins)
	defer rec.Release()
	tests := []struct {
		name string
		o    FidsOptions
		want []int
	}{
		{"top-level v1 fids are the fid set", FidsOptions{HasFids: []uint64{a1}}, []int{0}},
		{"named feature fids are not in the fid set", FidsOptions{HasFids: []uint64{c2}}, []int{}},
		{"filter ignores named feature fids", FidsOptions{FilterFids: []uint64{c2}}, []int{0, 1}},
		{"named feature fids count for slots", FidsOptions{SelectSlots: []int32{300}}, []int{1}},
		{"v1 slots", FidsOptions{SelectSlots: []int32{5, 7}}, []int{0}},
		{"has_actions", FidsOptions{HasActions: []int32{1}}, []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFilterByFids(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := keep(t, f, rec); !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFilterByFidsExampleBatchShared(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cell := func(v ...uint64) *examplepb.Feature {
		return &examplepb.Feature{Type: &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: v}}}
	}
	eb := &examplepb.ExampleBatch{BatchSize: 3, NamedFeatureList: []*examplepb.NamedFeatureList{
		{Name: "shared", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{cell(a1)}},
		{Name: "own", Feature: []*examplepb.Feature{cell(b1), cell(), cell(a2)}},
	}}
	rec, err := batch.FromExampleBatch(mem, eb)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	f, err := NewFilterByFids(FidsOptions{SelectFids: []uint64{a1, a2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := keep(t, f, rec); !slices.Equal(got, []int{2}) {
		t.Errorf("kept %v, want [2]", got)
	}
	f, _ = NewFilterByFids(FidsOptions{FilterFids: []uint64{a1}})
	if got := keep(t, f, rec); len(got) != 0 {
		t.Errorf("kept %v, want none (the shared fid is in every row)", got)
	}
}

// TestFidColumnMatchesRawFids cross-checks the local fid reader with batch.RawFids on
// random Examples, including mixed v1/v2 columns and absent cells.
func TestFidColumnMatchesRawFids(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	sawMixed, sawHi := false, false
	for _, n := range []int{0, 1, 63, 64, 65, 1 + rng.IntN(200)} {
		exs := make([]*examplepb.Example, n)
		for r := range exs {
			e := &examplepb.Example{}
			for _, name := range []string{"f", "g", "h"} {
				k := rng.IntN(4)
				v := make([]uint64, rng.IntN(4))
				for i := range v {
					v[i] = rng.Uint64()
				}
				switch {
				case k == 0:
				case k == 1 || name == "h":
					e.NamedFeature = append(e.NamedFeature, fidV1(name, v...))
				default:
					for i := range v {
						v[i] &^= 1 << 63
					}
					e.NamedFeature = append(e.NamedFeature, fidV2(name, v...))
				}
			}
			exs[r] = e
		}
		rec := examples(t, mem, exs)
		cols, err := fidColumns("test", rec)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cols {
			sawMixed = sawMixed || c.cells != nil
			sawHi = sawHi || c.hi != nil
			idx := rec.Schema().FieldIndices(c.sp.Name)[0]
			for r := range n {
				want, err := batch.RawFids(rec, idx, r, nil)
				if err != nil {
					t.Fatal(err)
				}
				v1, vals, hi := c.row(r)
				got := slices.Clone(vals)
				if v1 {
					for i := range got {
						var h uint8
						if hi != nil {
							h = hi[i]
						}
						got[i] = fid.V2ToV1(got[i], h)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("n=%d %s row %d: got %x, want %x", n, c.sp.Name, r, got, want)
				}
			}
		}
		rec.Release()
	}
	if !sawMixed || !sawHi {
		t.Errorf("fixture did not exercise mixed columns (%v) and signature companions (%v)", sawMixed, sawHi)
	}
}

func TestFilterByFidsErrors(t *testing.T) {
	if _, err := NewFilterByFids(FidsOptions{SelectSlots: []int32{0}}); !errors.Is(err, ErrConfig) {
		t.Errorf("slot 0: got %v, want ErrConfig", err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	// A LineId that does not parse: a row error naming the column and the row.
	rec := badLineIDs(t, mem, []byte{0x18, 0x01}, []byte{0x1a, 0x05, 0x01})
	defer rec.Release()
	f, _ := NewFilterByFids(FidsOptions{})
	_, err := f.Keep(rec, nil)
	var re *RowError
	if !errors.As(err, &re) || re.Row != 1 || re.Column != batch.ColLineID || re.Op != "filter_by_fids" {
		t.Errorf("got %v, want a RowError for row 1 of %s", err, batch.ColLineID)
	}
	// A record without layout metadata cannot be read for fids.
	plain := array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, 0)
	defer plain.Release()
	f, _ = NewFilterByFids(FidsOptions{HasFids: []uint64{1}})
	if _, err := f.Keep(plain, nil); err == nil {
		t.Error("record without layout metadata: no error")
	}
}

// badLineIDs builds an Example batch without decoded LineId columns whose line_id column
// holds the given raw bytes (which WithLineIDs would refuse).
func badLineIDs(t testing.TB, mem memory.Allocator, raw ...[]byte) arrow.RecordBatch {
	t.Helper()
	return replaceLineIDBytes(t, mem, []batch.Option{batch.WithoutLineIDFields()}, raw...)
}

// replaceLineIDBytes builds an Example batch (with opts) of len(raw) rows, row i with
// req_time i, then swaps its line_id column for raw.
func replaceLineIDBytes(t testing.TB, mem memory.Allocator, opts []batch.Option, raw ...[]byte) arrow.RecordBatch {
	t.Helper()
	exs := make([]*examplepb.Example, len(raw))
	for i := range exs {
		exs[i] = ex([]float32{0}, lid(func(l *matrixpb.LineId) { l.ReqTime = new(int64(i)) }))
	}
	rec := examples(t, mem, exs, opts...)
	defer rec.Release()
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer b.Release()
	for _, r := range raw {
		b.Append(r)
	}
	col := b.NewArray()
	defer col.Release()
	cols := slices.Clone(rec.Columns())
	cols[rec.Schema().FieldIndices(batch.ColLineID)[0]] = col
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

// TestDecodedColumnsPreferred: when the decoded "__line_id__.<field>" columns exist, the
// filters read them and do not parse the bytes (here replaced by garbage).
func TestDecodedColumnsPreferred(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := replaceLineIDBytes(t, mem, nil, []byte{0x18}, []byte{0x18}, []byte{0xff})
	defer rec.Release()
	f, err := NewFilterByFids(FidsOptions{ReqTimeMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := keep(t, f, rec); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("filter_by_fids: kept %v, want [1 2]", got)
	}
	v, _ := NewFilterByValue(ValueOptions{Field: "req_time", Op: "eq", Operands: Operands{Ints: []int64{2}}})
	if got := keep(t, v, rec); !slices.Equal(got, []int{2}) {
		t.Errorf("filter_by_value: kept %v, want [2]", got)
	}
}
