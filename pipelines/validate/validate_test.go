package validate

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/io/featurelist"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/kernels/featstats"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

const (
	goodPath   = "../../testdata/example_batch.feature_configs.pbtxt"
	brokenPath = "../../testdata/example_batch.broken.feature_configs.pbtxt"
	listPath   = "../../testdata/example_batch.feature_list.conf"
)

func load(t testing.TB, path string) *examplepb.FeatureConfigs {
	t.Helper()
	fc, err := pbtext.ReadFeatureConfigsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fc
}

func list(t testing.TB) *featurelist.List {
	t.Helper()
	l, err := featurelist.ParseFile(listPath)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func parse(t testing.TB, text string) *examplepb.FeatureConfigs {
	t.Helper()
	fc := &examplepb.FeatureConfigs{}
	if err := prototext.Unmarshal([]byte(text), fc); err != nil {
		t.Fatal(err)
	}
	return fc
}

// accumulate runs a fresh Accumulator over recs.
func accumulate(t testing.TB, fc *examplepb.FeatureConfigs, opts Options, recs ...arrow.RecordBatch) *Accumulator {
	t.Helper()
	acc, err := NewAccumulator(fc, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := acc.Add(rec); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

func build(t testing.TB, fc *examplepb.FeatureConfigs, opts Options, acc *Accumulator) *Report {
	t.Helper()
	r, err := Build(Inputs{Pattern: "example_batch.pbtxt", Files: []string{"example_batch.pbtxt"}, FeatureConfigs: "configs.pbtxt"}, fc, opts, acc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func check(t testing.TB, r *Report, id string) CheckResult {
	t.Helper()
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no check %q", id)
	return CheckResult{}
}

// planted lists the problems planted in the broken config (see its header), as check id and
// a text every matching message contains.
var planted = []struct{ check, text string }{
	{CheckUnknownFeature, `layout "broken_unknown": slice 0 names unknown feature "f_user_agee"`},
	{CheckTable, `feature "f_goods_cate_1" has no table`},
	{CheckSliceBounds, `layout "broken_bounds": slice 0 of feature "f_user_city" is [5, 12), outside its embedding [0, 9)`},
	{CheckAddNFirstN, `layout "broken_addn_firstn": ADDN cannot pool with FIRSTN`},
	{CheckEqualWidths, `layout "broken_stack": STACK needs equal slice widths; slice 1 is 9 wide, slice 0 is 8`},
	{CheckShape, `layout "broken_shape": shape 0 is [-1 10], the slices imply [-1 8]`},
	{CheckFeatureConfig, `feature "f_goods_tags" pools with FIRSTN but max_sequence_length is 0`},
	{CheckFeatureList, `feature "f_not_in_data" is not in the feature list`},
	{CheckSlotName, `feature "fc_slot_7": its name says slot 7, the feature list`},
	{CheckSlotConflict, `features "f_user_region" and "f_user_register_time_year" share slot 4 (feature_version 1)`},
}

// plantedData lists the data problems planted in the broken config, over the fixture.
var plantedData = []struct{ check, text string }{
	{CheckOccurrence, `feature "f_not_in_data" never occurs: none of the 1 batches (51 rows) has its column`},
	{CheckOccurrence, `feature "fc_slot_7" never occurs`},
	{CheckOccurrence, `feature "f_user_region" never occurs`},
	{CheckSlotMismatch, `feature "f_goods_brand": 2 of 2 fids carry slot 207, but its feature list says slot 227`},
}

func TestStaticBroken(t *testing.T) {
	got := Static(load(t, brokenPath), Options{FeatureList: list(t)})
	used := make([]bool, len(got))
	for _, p := range planted {
		found := false
		for i, f := range got {
			if f.Check == p.check && strings.Contains(f.Message, p.text) && f.Status == Fail {
				found, used[i] = true, true
			}
		}
		if !found {
			t.Errorf("no %s finding containing %q", p.check, p.text)
		}
	}
	for i, f := range got {
		if !used[i] {
			t.Errorf("unexpected finding %+v", f)
		}
	}
	// The structured fields name the subject.
	for _, f := range got {
		if f.Check == CheckSliceBounds && (f.Layout != "broken_bounds" || f.Feature != "f_user_city" || f.Table != "user" || f.Slice == nil || *f.Slice != 0) {
			t.Errorf("slice-bounds finding %+v", f)
		}
	}
}

func TestStaticGood(t *testing.T) {
	fc := load(t, goodPath)
	for _, opts := range []Options{{}, {FeatureList: list(t)}, {Version: 1, PS: 3, FeatureList: list(t)}} {
		if got := Static(fc, opts); len(got) != 0 {
			t.Errorf("%+v: findings on the good config: %+v", opts, got)
		}
	}
}

func TestStaticTableWidthsV1(t *testing.T) {
	fc := parse(t, `
feature_configs { key: "a" value { table: "t" slice_dims: 4 } }
feature_configs { key: "b" value { table: "t" slice_dims: 2 } }
out_configs { key: "l" value { out_type: CONCAT slice_configs { feature_name: "a" start: 0 end: 4 } } }`)
	if got := Static(fc, Options{Version: 5}); len(got) != 0 {
		t.Errorf("version 5: %+v", got)
	}
	got := Static(fc, Options{Version: 1})
	if len(got) != 1 || got[0].Check != CheckTable || !strings.Contains(got[0].Message, `table "t" mixes embedding widths 4 (feature "a") and 2 (feature "b")`) {
		t.Errorf("version 1: %+v", got)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	r := build(t, fc, Options{Version: 1}, accumulate(t, fc, Options{Version: 1}, rec))
	if c := check(t, r, CheckLayout); c.Status != Skip || !strings.Contains(c.Summary, `table "t"`) {
		t.Errorf("layout check %+v", c)
	}
}

func TestStaticListRanges(t *testing.T) {
	l, err := featurelist.Parse(strings.NewReader(`feature_name=f_a; slot=1024
feature_name=f_b; slot=40000; feature_version=2
feature_name=f_c; slot=3; feature_version=3
feature_name=f_d; method=x
feature_name=slot_5; slot=5
`), "list.conf")
	if err != nil {
		t.Fatal(err)
	}
	fc := parse(t, `
feature_configs { key: "f_a" value { table: "t" slice_dims: 1 } }
feature_configs { key: "f_b" value { table: "t" slice_dims: 1 } }
feature_configs { key: "f_c" value { table: "t" slice_dims: 1 } }
feature_configs { key: "f_d" value { table: "t" slice_dims: 1 } }
feature_configs { key: "slot_5" value { table: "t" slice_dims: 1 } }`)
	want := []struct {
		status      Status
		check, text string
	}{
		{Fail, CheckFeatureList, `feature "f_a" has slot 1024 in the feature list list.conf (line 1); a v1 fid holds slots 0..1023`},
		{Fail, CheckFeatureList, `feature "f_b" has slot 40000 in the feature list list.conf (line 2); a v2 fid holds slots 0..32767`},
		{Fail, CheckFeatureList, `feature "f_c" has feature_version 3`},
		{Warn, CheckFeatureList, `feature "f_d" has no slot in the feature list list.conf (line 4)`},
	}
	got := Static(fc, Options{FeatureList: l})
	if len(got) != len(want) {
		t.Fatalf("findings %+v", got)
	}
	for i, w := range want {
		if got[i].Status != w.status || got[i].Check != w.check || !strings.Contains(got[i].Message, w.text) {
			t.Errorf("finding %d = %+v, want %s %s %q", i, got[i], w.status, w.check, w.text)
		}
	}
}

// TestGoodFixture: over the fixture with the good config every check passes, and the
// per-feature data agree with featstats computed directly on the columns.
func TestGoodFixture(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	fc := load(t, goodPath)
	for _, opts := range []Options{{FeatureList: list(t)}, {PS: 3, Version: 2, Unique: true}, {PS: 2, Version: 4}, {Version: 1}, {Version: 3, PS: 5}} {
		r := build(t, fc, opts, accumulate(t, fc, opts, rec))
		if r.Failed() || r.Status != Pass {
			var b strings.Builder
			r.WriteText(&b)
			t.Fatalf("%+v: the good config fails:\n%s", opts, b.String())
		}
		for _, c := range r.Checks {
			want := Pass
			if opts.FeatureList == nil && (c.ID == CheckFeatureList || c.ID == CheckSlotConflict || c.ID == CheckSlotName) {
				want = Skip
			}
			if c.Status != want {
				t.Errorf("%+v: check %s is %s, want %s", opts, c.ID, c.Status, want)
			}
		}
		if c := check(t, r, CheckLayout); c.Summary != "ran 6 layouts on 1 batches" {
			t.Errorf("layout summary %q", c.Summary)
		}
		for _, l := range r.Layouts {
			if l.Status != Pass || l.Runs != 1 || l.Failures != 0 {
				t.Errorf("%+v: layout %+v", opts, l)
			}
		}
		if len(r.Features) != 16 {
			t.Fatalf("%d features", len(r.Features))
		}
		for _, f := range r.Features {
			col, err := batch.SparseColumn(rec, f.Name)
			if err != nil {
				t.Fatal(err)
			}
			var want featstats.Feature
			want.Add(col)
			if f.Rows != 51 || f.Fids != want.Fids || f.RowsWithFids != want.RowsWithFids || !slices.Equal(f.FidsPerRow, want.Hist[:]) {
				t.Errorf("feature %s: %+v, featstats %+v", f.Name, f, want)
			}
			if f.Fids == 0 || len(f.Slots) != 1 || f.Slots[0].Slot != want.Slots()[0] || f.Slots[0].Fids != f.Fids || f.SlotMismatches != 0 {
				t.Errorf("feature %s: slots %+v mismatches %d", f.Name, f.Slots, f.SlotMismatches)
			}
			if f.IndividualRows != 51 || f.Coverage != float64(f.RowsWithFids)/51 || f.Status != Pass {
				t.Errorf("feature %s: %+v", f.Name, f)
			}
			if opts.FeatureList != nil && (f.ExpectedSlot != f.Slots[0].Slot || f.SlotSource != "feature list") {
				t.Errorf("feature %s: expected slot %d from %q", f.Name, f.ExpectedSlot, f.SlotSource)
			}
		}
	}
}

// TestBrokenFixture: the broken config over the fixture reports every planted problem, data
// ones included, while the layout check still runs the valid layouts.
func TestBrokenFixture(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	fc := load(t, brokenPath)
	opts := Options{FeatureList: list(t)}
	r := build(t, fc, opts, accumulate(t, fc, opts, rec))
	if !r.Failed() {
		t.Fatal("the broken config passes")
	}
	for _, p := range append(slices.Clone(planted), plantedData...) {
		c := check(t, r, p.check)
		found := false
		for _, f := range c.Findings {
			found = found || f.Status == Fail && strings.Contains(f.Message, p.text)
		}
		if !found || c.Status != Fail {
			t.Errorf("check %s (%s) lacks %q: %+v", p.check, c.Status, p.text, c.Findings)
		}
	}
	if c := check(t, r, CheckOccurrence); len(c.Findings) != 3 {
		t.Errorf("occurrence findings %+v", c.Findings)
	}
	if c := check(t, r, CheckSlotMismatch); len(c.Findings) != 1 || !strings.Contains(c.Findings[0].Message, "0x") {
		t.Errorf("slot-mismatch findings %+v", c.Findings)
	}
	c := check(t, r, CheckLayout)
	if c.Status != Pass || c.Summary != "ran 6 layouts on 1 batches; skipped 5 invalid layouts: broken_addn_firstn, broken_bounds, broken_shape, broken_stack, broken_unknown" {
		t.Errorf("layout check %+v", c)
	}
	for _, id := range []string{CheckColumnType, CheckSharedUse, CheckLayoutStructure} {
		if c := check(t, r, id); c.Status != Pass {
			t.Errorf("check %s: %+v", id, c)
		}
	}
	for _, f := range r.Features {
		bad := map[string]bool{"f_goods_cate_1": true, "f_goods_tags": true, "f_not_in_data": true, "f_goods_brand": true, "fc_slot_7": true,
			"f_user_region": true, "f_user_register_time_year": true, "f_user_city": true, "f_user_agee": true, "f_goods_title": true}
		if (f.Status == Fail) != bad[f.Name] {
			t.Errorf("feature %s has status %s", f.Name, f.Status)
		}
		if f.Name == "f_goods_brand" && (f.SlotMismatches != 2 || len(f.MismatchExamples) != 2 || f.ExpectedSlot != 227) {
			t.Errorf("f_goods_brand %+v", f)
		}
	}
	var skipped int
	for _, l := range r.Layouts {
		if l.Status == Skip {
			skipped++
			if !strings.HasPrefix(l.Name, "broken_") || l.Skipped == "" {
				t.Errorf("layout %+v", l)
			}
		}
	}
	if skipped != 5 {
		t.Errorf("%d layouts skipped", skipped)
	}
}

// halves splits the fixture into rows [0, 26) and [26, 51), copied with batch.Take.
func halves(t testing.TB, mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, arrow.RecordBatch) {
	t.Helper()
	var a, b []int
	for i := range int(rec.NumRows()) {
		if i < 26 {
			a = append(a, i)
		} else {
			b = append(b, i)
		}
	}
	h1, err := batch.Take(mem, rec, a)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := batch.Take(mem, rec, b)
	if err != nil {
		t.Fatal(err)
	}
	return h1, h2
}

func marshal(t testing.TB, a *Accumulator) []byte {
	t.Helper()
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMergeHalves(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	h1, h2 := halves(t, mem, rec)
	defer h1.Release()
	defer h2.Release()
	for _, path := range []string{goodPath, brokenPath} {
		fc := load(t, path)
		opts := Options{FeatureList: list(t), PS: 2}
		one := accumulate(t, fc, opts, h1, h2)
		a, b := accumulate(t, fc, opts, h1), accumulate(t, fc, opts, h2)
		if err := a.Merge(b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(marshal(t, a), marshal(t, one)) {
			t.Errorf("%s: merged halves differ from one pass:\n%s\n%s", path, marshal(t, a), marshal(t, one))
		}
		b2, a2 := accumulate(t, fc, opts, h2), accumulate(t, fc, opts, h1)
		if err := b2.Merge(a2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(marshal(t, b2), marshal(t, one)) {
			t.Errorf("%s: merge order matters", path)
		}
		// The per-feature data equal a pass over the whole batch.
		whole := build(t, fc, opts, accumulate(t, fc, opts, rec))
		split := build(t, fc, opts, a)
		for i := range whole.Features {
			w, s := whole.Features[i], split.Features[i]
			if w.Fids != s.Fids || w.Rows != s.Rows || w.RowsWithFids != s.RowsWithFids || !slices.Equal(w.FidsPerRow, s.FidsPerRow) ||
				!slices.Equal(w.Slots, s.Slots) || w.SlotMismatches != s.SlotMismatches || !slices.Equal(w.MismatchExamples, s.MismatchExamples) {
				t.Errorf("%s: feature %s: whole %+v, halves %+v", path, w.Name, w, s)
			}
		}
		if whole.Status != split.Status || len(whole.Failing()) != len(split.Failing()) {
			t.Errorf("%s: whole %s (%d failing), halves %s (%d failing)", path, whole.Status, len(whole.Failing()), split.Status, len(split.Failing()))
		}
	}
}

// TestSliced: a sliced record (whose columns' values extend beyond its rows) counts only
// its own rows' fids.
func TestSliced(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	h1, h2 := halves(t, mem, rec)
	defer h1.Release()
	defer h2.Release()
	sl := rec.NewSlice(26, 51)
	defer sl.Release()
	fc := load(t, goodPath)
	opts := Options{FeatureList: list(t)}
	a, b := accumulate(t, fc, opts, sl), accumulate(t, fc, opts, h2)
	if !bytes.Equal(marshal(t, a), marshal(t, b)) {
		t.Errorf("sliced record:\n%s\ncopied rows:\n%s", marshal(t, a), marshal(t, b))
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	h1, h2 := halves(t, mem, rec)
	defer h1.Release()
	defer h2.Release()
	fc := load(t, brokenPath)
	opts := Options{FeatureList: list(t), Version: 3}
	a := accumulate(t, fc, opts, h1)
	var c Accumulator
	if err := c.UnmarshalBinary(marshal(t, a)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(marshal(t, &c), marshal(t, a)) {
		t.Error("round trip changes the accumulator")
	}
	// A decoded accumulator takes more batches like the original.
	if err := c.Add(h2); err != nil {
		t.Fatal(err)
	}
	if err := a.Add(h2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(marshal(t, &c), marshal(t, a)) {
		t.Error("a decoded accumulator accumulates differently")
	}
	// The zero Accumulator is an identity for Merge on both sides.
	var z Accumulator
	if err := z.Merge(a); err != nil {
		t.Fatal(err)
	}
	if err := a.Merge(&Accumulator{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(marshal(t, &z), marshal(t, a)) {
		t.Error("merging into the zero accumulator changes the state")
	}
	if err := new(Accumulator).Add(h1); err == nil {
		t.Error("the zero accumulator takes a batch")
	}
	if err := c.UnmarshalBinary([]byte(`{"format":99}`)); err == nil {
		t.Error("unknown format accepted")
	}
	other := accumulate(t, load(t, goodPath), opts)
	if err := other.Merge(a); err == nil {
		t.Error("merging accumulators of different configs")
	}
	if _, err := Build(Inputs{}, load(t, goodPath), opts, a); err == nil {
		t.Error("Build with an accumulator of another config")
	}
}

// TestLayoutFailure: a declared dims[0] that is not the batch size fails the layout check
// (the static checks cannot know the batch size).
func TestLayoutFailure(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	fc := parse(t, `
feature_configs { key: "f_user_id" value { table: "u" slice_dims: 1 slice_dims: 4 } }
feature_configs { key: "f_page" value { table: "u" pooling_type: MEAN slice_dims: 1 slice_dims: 4 } }
out_configs { key: "fixed" value { out_type: CONCAT slice_configs { feature_name: "f_user_id" start: 0 end: 5 } shape { dims: 8 dims: 5 } } }
out_configs { key: "ok" value { out_type: ADDN slice_configs { feature_name: "f_user_id" start: 0 end: 1 } slice_configs { feature_name: "f_page" start: 0 end: 1 } } }`)
	r := build(t, fc, Options{}, accumulate(t, fc, Options{}, rec))
	c := check(t, r, CheckLayout)
	if c.Status != Fail || len(c.Findings) != 1 || c.Findings[0].Layout != "fixed" ||
		!strings.Contains(c.Findings[0].Message, `layout "fixed" failed on 1 of 1 batches: batch of 51 rows: shape 0 declares dims[0] = 8; output 0 has 255 floats, its shape [8 5] holds 40`) {
		t.Errorf("layout check %+v", c)
	}
	if !r.Failed() || r.Layouts[0].Status != Fail || r.Layouts[1].Status != Pass {
		t.Errorf("layouts %+v", r.Layouts)
	}
}

// TestColumnType: a configured feature whose column is not a fid column fails column-type,
// and the layout run on that batch fails as a whole.
func TestColumnType(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	fc := parse(t, `
feature_configs { key: "__label__" value { table: "u" slice_dims: 1 } }
feature_configs { key: "f_page" value { table: "u" slice_dims: 1 } }
out_configs { key: "l" value { out_type: CONCAT slice_configs { feature_name: "f_page" start: 0 end: 1 } } }`)
	r := build(t, fc, Options{}, accumulate(t, fc, Options{}, rec))
	c := check(t, r, CheckColumnType)
	if c.Status != Fail || len(c.Findings) != 1 || !strings.Contains(c.Findings[0].Message, `feature "__label__": its column could not be read as fids in 1 of 1 batches`) {
		t.Errorf("column-type %+v", c)
	}
	if c := check(t, r, CheckLayout); c.Status != Fail || !strings.Contains(c.Findings[0].Message, "the layouts could not run on 1 of 1 batches") {
		t.Errorf("layout %+v", c)
	}
	if c := check(t, r, CheckOccurrence); c.Status != Pass {
		t.Errorf("occurrence %+v", c)
	}
}

// exampleBatch builds a batch of an ExampleBatch with one feature whose cells hold the
// given v2 fids; shared makes it a SHARED list (one cell).
func exampleBatch(t testing.TB, mem memory.Allocator, name string, rows int, shared bool, cells ...[]uint64) arrow.RecordBatch {
	t.Helper()
	nfl := &examplepb.NamedFeatureList{Name: name}
	if shared {
		nfl.Type = examplepb.FeatureListType_SHARED
	}
	for _, c := range cells {
		nfl.Feature = append(nfl.Feature, &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: c}}})
	}
	rec, err := batch.FromExampleBatch(mem, &examplepb.ExampleBatch{BatchSize: int32(rows), NamedFeatureList: []*examplepb.NamedFeatureList{nfl}})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestWarnings: fids spanning several slots without an expected slot, and a feature SHARED
// in one batch and INDIVIDUAL in another, are warnings; with a slot name the spread is a
// failure.
func TestWarnings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := func(slot, sig uint64) uint64 { return slot<<48 | sig }
	b1 := exampleBatch(t, mem, "f", 2, false, []uint64{s(3, 1), s(4, 2)}, []uint64{s(3, 5)})
	defer b1.Release()
	b2 := exampleBatch(t, mem, "f", 3, true, []uint64{s(3, 9)})
	defer b2.Release()
	fc := parse(t, `feature_configs { key: "f" value { table: "t" slice_dims: 2 } }
out_configs { key: "l" value { out_type: CONCAT slice_configs { feature_name: "f" start: 0 end: 2 } } }`)
	r := build(t, fc, Options{}, accumulate(t, fc, Options{}, b1, b2))
	if r.Status != Warn || r.Failed() {
		t.Errorf("status %s", r.Status)
	}
	if c := check(t, r, CheckSlotMismatch); c.Status != Warn || !strings.Contains(c.Findings[0].Message, `feature "f": its fids span 2 slots, 3 (3 fids), 4 (1 fids)`) {
		t.Errorf("slot-mismatch %+v", c)
	}
	if c := check(t, r, CheckSharedUse); c.Status != Warn || !strings.Contains(c.Findings[0].Message, `feature "f" is SHARED in 3 rows and INDIVIDUAL in 2 rows`) {
		t.Errorf("shared-use %+v", c)
	}
	f := r.Features[0]
	if f.Rows != 5 || f.Fids != 4 || f.RowsWithFids != 5 || f.FidsPerRow[1] != 4 || f.FidsPerRow[2] != 1 {
		t.Errorf("feature %+v", f)
	}
	// Named fc_slot_3, the slot-4 fid is a mismatch (the column is read by name).
	fc = parse(t, `feature_configs { key: "fc_slot_3" value { table: "t" slice_dims: 2 } }`)
	b3 := exampleBatch(t, mem, "fc_slot_3", 2, false, []uint64{s(3, 1), s(4, 2)}, []uint64{s(4, 2)})
	defer b3.Release()
	r = build(t, fc, Options{}, accumulate(t, fc, Options{}, b3))
	c := check(t, r, CheckSlotMismatch)
	if c.Status != Fail || !strings.Contains(c.Findings[0].Message, `feature "fc_slot_3": 2 of 3 fids carry slot 4, but its name says slot 3 (e.g. fid 0x4000000000002 (slot 4))`) {
		t.Errorf("slot-mismatch %+v", c)
	}
	if c := check(t, r, CheckLayout); c.Status != Skip || c.Summary != "skipped: the feature configs have no layouts" {
		t.Errorf("layout %+v", c)
	}
}

// TestNoData: without an accumulator the data checks are skipped; with an empty input
// every configured feature never occurs.
func TestNoData(t *testing.T) {
	fc := load(t, goodPath)
	r := build(t, fc, Options{}, nil)
	for _, c := range r.Checks {
		if c.Kind == "data" && c.Status != Skip {
			t.Errorf("check %s: %s", c.ID, c.Status)
		}
	}
	if r.Failed() || r.Status != Pass {
		t.Errorf("status %s", r.Status)
	}
	r = build(t, fc, Options{}, accumulate(t, fc, Options{}))
	if c := check(t, r, CheckOccurrence); c.Status != Fail || len(c.Findings) != 16 || !strings.Contains(c.Findings[0].Message, "the input has no rows") {
		t.Errorf("occurrence %+v", c)
	}
}

func TestOptions(t *testing.T) {
	fc := load(t, goodPath)
	for _, o := range []Options{{PS: -1}, {Version: 6}, {Version: -1}} {
		if _, err := NewAccumulator(fc, o); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v", o, err)
		}
		if _, err := Build(Inputs{}, fc, o, nil); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// brokenReport is the report of the broken config over the fixture.
func brokenReport(t *testing.T) *Report {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	fc := load(t, brokenPath)
	opts := Options{FeatureList: list(t)}
	return build(t, fc, opts, accumulate(t, fc, opts, rec))
}

func TestWriteText(t *testing.T) {
	r := brokenReport(t)
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "monolith validate: FAIL: 12 of 16 checks failed") {
		t.Errorf("first line %q", lines[0])
	}
	failing := r.Failing()
	if len(failing) != len(planted)+len(plantedData) {
		t.Errorf("%d failing findings, want %d", len(failing), len(planted)+len(plantedData))
	}
	for _, f := range failing {
		want := "  FAIL " + f.Check + ": " + f.Message
		if !slices.Contains(lines, want) {
			t.Errorf("no line %q in\n%s", want, out)
		}
	}
	for _, f := range r.Features {
		if !strings.Contains(out, " "+f.Name+" ") {
			t.Errorf("feature %s missing from the text", f.Name)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	r := brokenReport(t)
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"status": "fail"`, `"id": "slot-mismatch"`, `"fids_per_row": [`, `"hist_buckets": [`, `"2-3"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// xmlText parses s strictly as XML and returns its character data and element names.
func xmlText(t *testing.T, s string) (text string, elems map[string]int) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = true
	var sb strings.Builder
	elems = map[string]int{}
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("HTML is not well-formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			depth++
			elems[tok.Name.Local]++
		case xml.EndElement:
			depth--
		case xml.CharData:
			sb.Write(tok)
			sb.WriteByte(' ')
		}
	}
	if depth != 0 {
		t.Fatalf("unbalanced elements: depth %d", depth)
	}
	return sb.String(), elems
}

func TestWriteHTML(t *testing.T) {
	r := brokenReport(t)
	var b strings.Builder
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	text, elems := xmlText(t, html)
	for _, f := range r.Features {
		if !strings.Contains(text, f.Name) {
			t.Errorf("feature %s missing from the HTML", f.Name)
		}
	}
	for _, f := range r.Failing() {
		if !strings.Contains(text, f.Message) {
			t.Errorf("problem %q missing from the HTML", f.Message)
		}
	}
	// Two charts per feature; no scripts, no external assets.
	if elems["svg"] != 2*len(r.Features) || elems["script"] != 0 || elems["link"] != 0 || elems["img"] != 0 {
		t.Errorf("elements %v", elems)
	}
	if strings.Contains(html, "http:") && strings.Count(html, "http://www.w3.org/2000/svg") != strings.Count(html, "http:") {
		t.Error("the HTML references an external resource")
	}
}

// TestHTMLEscaping: names are escaped, never markup.
func TestHTMLEscaping(t *testing.T) {
	name := `f_<b>&"x'`
	fc := &examplepb.FeatureConfigs{
		FeatureConfigs: map[string]*examplepb.FeatureConfig{name: {Table: "<t>", SliceDims: []int32{1}}},
		OutConfigs:     map[string]*examplepb.OutConfig{`<l>`: {SliceConfigs: []*examplepb.SliceConfig{{FeatureName: "</svg>", End: 1}}}},
	}
	r, err := Build(Inputs{Pattern: "<in>&", FeatureConfigs: `"c"`}, fc, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	text, elems := xmlText(t, b.String())
	for _, want := range []string{name, "<t>", "<l>", "</svg>", "<in>&"} {
		if !strings.Contains(text, want) {
			t.Errorf("%q missing from the text of the HTML", want)
		}
	}
	if elems["b"] != 0 || elems["l"] != 0 || elems["t"] != 0 {
		t.Errorf("a name became markup: %v", elems)
	}
}

func TestFiles(t *testing.T) {
	j, x, h := Files("out")
	if j != "out/validate.json" || x != "out/validate.txt" || h != "out/validate.html" {
		t.Errorf("Files = %s %s %s", j, x, h)
	}
}

func TestHistLabels(t *testing.T) {
	l := histLabels()
	if len(l) != featstats.HistBuckets || l[0] != "0" || l[1] != "1" || l[2] != "2-3" || l[3] != "4-7" || l[featstats.HistBuckets-1] != "65536+" {
		t.Errorf("labels %v", l)
	}
	for n, b := range map[int]int{0: 0, 1: 1, 2: 2, 3: 2, 4: 3, 7: 3, 8: 4} {
		if featstats.Bucket(n) != b {
			t.Errorf("bucket of %d is %d, label table assumes %d", n, featstats.Bucket(n), b)
		}
	}
}
