package featcfg

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/schemas/examplepb"
)

func parse(t *testing.T, text string) *examplepb.FeatureConfigs {
	t.Helper()
	fc := &examplepb.FeatureConfigs{}
	if err := prototext.Unmarshal([]byte(text), fc); err != nil {
		t.Fatal(err)
	}
	return fc
}

const features = `
feature_configs { key: "b" value { table: "t1" slice_dims: 1 slice_dims: 4 } }
feature_configs { key: "a" value { table: "t1" pooling_type: MEAN slice_dims: 1 slice_dims: 4 } }
feature_configs { key: "c" value { table: "t0" slice_dims: 2 } }
feature_configs { key: "s" value { table: "t0" pooling_type: FIRSTN max_sequence_length: 3 slice_dims: 2 slice_dims: 2 } }
feature_configs { key: "fc_slot_12x" value { table: "t0" slice_dims: 2 } }
`

func TestOrderAndIndices(t *testing.T) {
	c, err := New(parse(t, features))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range c.Features {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c", "fc_slot_12x", "s"}) {
		t.Errorf("feature order %v", names)
	}
	if c.Tables[0].Name != "t0" || !slices.Equal(c.Tables[0].Features, []int{2, 3, 4}) || !slices.Equal(c.Tables[1].Features, []int{0, 1}) {
		t.Errorf("tables %+v", c.Tables)
	}
	if f := c.Features[4]; f.Dim != 4 || f.InTable != 2 || f.Pooling != FirstN || f.MaxSeqLen != 3 {
		t.Errorf("feature s = %+v", f)
	}
	if c.Features[3].Slot != 12 || c.Features[0].Slot != -1 {
		t.Errorf("slots %d %d", c.Features[3].Slot, c.Features[0].Slot)
	}
}

// TestLayouts covers shape inference for every out type, D1 offsets, slice_idx and the
// output order.
func TestLayouts(t *testing.T) {
	text := features + `
out_configs { key: "z_cat" value { out_type: CONCAT slice_configs { feature_name: "a" start: 1 end: 5 } slice_configs { feature_name: "c" start: 0 end: 2 } } }
out_configs { key: "stack" value { out_type: STACK slice_configs { feature_name: "a" start: 0 end: 1 } slice_configs { feature_name: "b" start: 0 end: 1 } shape { dims: -1 dims: 2 dims: 1 } } }
out_configs { key: "addn" value { out_type: ADDN slice_configs { feature_name: "a" start: 1 end: 5 } slice_configs { feature_name: "b" start: 1 end: 5 } } }
out_configs { key: "none" value { out_type: NONE slice_configs { feature_name: "a" start: 0 end: 5 } slice_configs { feature_name: "s" start: 2 end: 4 } } }
out_configs { key: "seqcat" value { out_type: CONCAT slice_configs { feature_name: "s" start: 0 end: 2 } slice_configs { feature_name: "s" start: 2 end: 4 } } }
out_configs { key: "seqstack" value { out_type: STACK slice_configs { feature_name: "s" start: 0 end: 2 } slice_configs { feature_name: "s" start: 2 end: 4 } } }
`
	c, err := New(parse(t, text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][][]int{
		"addn": {{-1, 4}}, "none": {{-1, 5}, {-1, 3, 2}}, "seqcat": {{-1, 3, 4}}, "seqstack": {{-1, 2, 3, 2}},
		"stack": {{-1, 2, 1}}, "z_cat": {{-1, 6}},
	}
	var order []string
	for _, l := range c.Layouts {
		order = append(order, l.Name)
		if !slicesEqual(l.Shapes, want[l.Name]) {
			t.Errorf("%s shapes %v, want %v", l.Name, l.Shapes, want[l.Name])
		}
	}
	if !slices.Equal(order, []string{"addn", "none", "seqcat", "seqstack", "stack", "z_cat"}) {
		t.Errorf("layout order %v", order)
	}
	if c.NumOutputs() != 7 {
		t.Errorf("outputs %d, want 7", c.NumOutputs())
	}
	cat := c.Layouts[5]
	if cat.Slices[1].Offset != 4 || cat.RowSize[0] != 6 {
		t.Errorf("concat offsets %+v", cat)
	}
	ss := c.Layouts[3] // seqstack: slice i at i*L*w (D1)
	if ss.Slices[1].Offset != 6 || ss.FirstN != 3 || ss.RowSize[0] != 12 {
		t.Errorf("seqstack %+v", ss)
	}
	if c.Layouts[0].Slices[0].SliceIdx != 1 || c.Layouts[1].Slices[1].SliceIdx != 1 {
		t.Errorf("slice_idx: %d %d", c.Layouts[0].Slices[0].SliceIdx, c.Layouts[1].Slices[1].SliceIdx)
	}
	if got := cat.OutputShape(0, 7); !slices.Equal(got, []int{7, 6}) {
		t.Errorf("OutputShape = %v", got)
	}
}

func slicesEqual(a, b [][]int) bool {
	return slices.EqualFunc(a, b, func(x, y []int) bool { return slices.Equal(x, y) })
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"unknown feature", `out_configs { key: "l" value { slice_configs { feature_name: "nope" start: 0 end: 1 } } }`, `unknown feature "nope"`},
		{"bounds", `out_configs { key: "l" value { slice_configs { feature_name: "a" start: 3 end: 9 } } }`, "outside its embedding"},
		{"addn firstn", `out_configs { key: "l" value { out_type: ADDN slice_configs { feature_name: "s" start: 0 end: 2 } } }`, "ADDN cannot pool with FIRSTN"},
		{"stack widths", `out_configs { key: "l" value { out_type: STACK slice_configs { feature_name: "a" start: 0 end: 1 } slice_configs { feature_name: "b" start: 1 end: 5 } } }`, "equal slice widths"},
		{"none shapes", `out_configs { key: "l" value { out_type: NONE slice_configs { feature_name: "a" start: 0 end: 1 } shape { dims: -1 dims: 1 } shape { dims: -1 dims: 1 } } }`, "one shape per slice"},
		{"shape mismatch", `out_configs { key: "l" value { out_type: CONCAT slice_configs { feature_name: "a" start: 0 end: 2 } shape { dims: -1 dims: 3 } } }`, "the slices imply"},
		{"mixed firstn", `out_configs { key: "l" value { out_type: CONCAT slice_configs { feature_name: "s" start: 0 end: 2 } slice_configs { feature_name: "a" start: 0 end: 2 } } }`, "mixes FIRSTN"},
		{"empty layout", `out_configs { key: "l" value { } }`, "no slice_configs"},
		{"no dims", `feature_configs { key: "x" value { table: "t" } }`, "no slice_dims"},
		{"firstn without length", `feature_configs { key: "x" value { table: "t" pooling_type: FIRSTN slice_dims: 1 } }`, "max_sequence_length"},
	}
	for _, tc := range tests {
		fc := parse(t, features+tc.text)
		_, err := New(fc)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrConfig containing %q", tc.name, err, tc.want)
		}
		if probs := Check(fc); len(probs) == 0 || err == nil || probs[0].Error() != err.Error() {
			t.Errorf("%s: Check = %v, New = %v", tc.name, probs, err)
		}
	}
}

// TestCheckAll plants one problem of every kind and expects Check to report each of them,
// with its structured fields, in order; New must return the first.
func TestCheckAll(t *testing.T) {
	text := features + `
feature_configs { key: "p_pool" value { table: "t2" pooling_type: 7 slice_dims: 1 } }
feature_configs { key: "p_dims" value { table: "t2" slice_dims: 2 slice_dims: 0 } }
feature_configs { key: "p_nodims" value { table: "t2" } }
feature_configs { key: "p_seq" value { table: "t2" pooling_type: FIRSTN slice_dims: 1 } }
out_configs { key: "l01_type" value { out_type: 9 slice_configs { feature_name: "a" start: 0 end: 1 } } }
out_configs { key: "l02_empty" value { out_type: CONCAT } }
out_configs { key: "l03_unknown" value { out_type: CONCAT slice_configs { feature_name: "a" start: 0 end: 1 } slice_configs { feature_name: "nope" start: 0 end: 1 } } }
out_configs { key: "l04_invalid" value { out_type: CONCAT slice_configs { feature_name: "p_dims" start: 0 end: 1 } } }
out_configs { key: "l05_bounds" value { out_type: CONCAT slice_configs { feature_name: "a" start: 4 end: 6 } slice_configs { feature_name: "b" start: -1 end: 1 } } }
out_configs { key: "l06_addn" value { out_type: ADDN slice_configs { feature_name: "s" start: 0 end: 2 } } }
out_configs { key: "l07_widths" value { out_type: STACK slice_configs { feature_name: "nope" start: 0 end: 1 } slice_configs { feature_name: "a" start: 0 end: 1 } slice_configs { feature_name: "b" start: 1 end: 5 } slice_configs { feature_name: "c" start: 0 end: 2 } } }
out_configs { key: "l08_count" value { out_type: NONE slice_configs { feature_name: "a" start: 0 end: 1 } shape { dims: -1 dims: 1 } shape { dims: -1 dims: 1 } } }
out_configs { key: "l09_shape" value { out_type: NONE slice_configs { feature_name: "a" start: 0 end: 1 } slice_configs { feature_name: "c" start: 0 end: 2 } shape { dims: -1 dims: 2 } shape { dims: 0 dims: 2 } } }
out_configs { key: "l10_mixed" value { out_type: CONCAT slice_configs { feature_name: "s" start: 0 end: 2 } slice_configs { feature_name: "a" start: 0 end: 2 } } }
out_configs { key: "l11_ok" value { out_type: CONCAT slice_configs { feature_name: "a" start: 0 end: 2 } shape { dims: -1 dims: 2 } } }
`
	type want struct {
		code          Code
		feature       string
		table, layout string
		slice, shape  int
		text          string
	}
	wants := []want{
		{CodeSliceDims, "p_dims", "t2", "", -1, -1, `feature "p_dims": slice_dims[1] = 0 must be positive`},
		{CodeNoSliceDims, "p_nodims", "t2", "", -1, -1, `feature "p_nodims" has no slice_dims`},
		{CodeUnknownPooling, "p_pool", "t2", "", -1, -1, `feature "p_pool": unknown pooling type 7`},
		{CodeMaxSeqLen, "p_seq", "t2", "", -1, -1, `feature "p_seq" pools with FIRSTN but max_sequence_length is 0`},
		{CodeUnknownOutType, "", "", "l01_type", -1, -1, `layout "l01_type": unknown out_type 9`},
		{CodeNoSlices, "", "", "l02_empty", -1, -1, `layout "l02_empty": has no slice_configs`},
		{CodeUnknownFeature, "nope", "", "l03_unknown", 1, -1, `layout "l03_unknown": slice 1 names unknown feature "nope"`},
		{CodeInvalidFeature, "p_dims", "t2", "l04_invalid", 0, -1, `layout "l04_invalid": slice 0 names feature "p_dims", which is invalid`},
		{CodeSliceBounds, "a", "t1", "l05_bounds", 0, -1, `layout "l05_bounds": slice 0 of feature "a" is [4, 6), outside its embedding [0, 5)`},
		{CodeSliceBounds, "b", "t1", "l05_bounds", 1, -1, `layout "l05_bounds": slice 1 of feature "b" is [-1, 1), outside its embedding [0, 5)`},
		{CodeAddNFirstN, "", "", "l06_addn", -1, -1, `layout "l06_addn": ADDN cannot pool with FIRSTN`},
		{CodeUnknownFeature, "nope", "", "l07_widths", 0, -1, `layout "l07_widths": slice 0 names unknown feature "nope"`},
		{CodeUnequalWidths, "b", "t1", "l07_widths", 2, -1, `layout "l07_widths": STACK needs equal slice widths; slice 2 is 4 wide, slice 1 is 1`},
		{CodeUnequalWidths, "c", "t0", "l07_widths", 3, -1, `layout "l07_widths": STACK needs equal slice widths; slice 3 is 2 wide, slice 1 is 1`},
		{CodeShapeCount, "", "", "l08_count", -1, -1, `layout "l08_count": NONE needs one shape per slice: 2 shapes for 1 slices`},
		{CodeShapeMismatch, "", "", "l09_shape", -1, 0, `layout "l09_shape": shape 0 is [-1 2], the slices imply [-1 1]`},
		{CodeShapeBatch, "", "", "l09_shape", -1, 1, `layout "l09_shape": shape 1 [0 2]: dims[0] must be -1 (the batch) or the batch size`},
		{CodeMixedFirstN, "", "", "l10_mixed", -1, -1, `layout "l10_mixed": mixes FIRSTN and non-FIRSTN slices in one CONCAT output`},
	}
	fc := parse(t, text)
	probs := Check(fc)
	for i := range max(len(probs), len(wants)) {
		if i >= len(probs) || i >= len(wants) {
			t.Errorf("problem %d: got %d problems, want %d: %v", i, len(probs), len(wants), probs)
			break
		}
		p, w := probs[i], wants[i]
		if p.Code != w.code || p.Feature != w.feature || p.Table != w.table || p.Layout != w.layout || p.Slice != w.slice || p.Shape != w.shape || p.Message != w.text {
			t.Errorf("problem %d = %+v\nwant %+v", i, p, w)
		}
		if !errors.Is(p, ErrConfig) || p.Error() != ErrConfig.Error()+": "+w.text {
			t.Errorf("problem %d: Error() = %q", i, p.Error())
		}
	}
	_, err := New(fc)
	var first Problem
	if !errors.As(err, &first) || len(probs) == 0 || first != probs[0] {
		t.Errorf("New = %v, want the first problem %v", err, probs[0])
	}
	if Check(parse(t, features)) != nil {
		t.Error("Check reports problems on a valid config")
	}
}

func TestCheckBatch(t *testing.T) {
	c, err := New(parse(t, features+`out_configs { key: "l" value { out_type: CONCAT slice_configs { feature_name: "a" start: 0 end: 2 } shape { dims: 8 dims: 2 } } }`))
	if err != nil {
		t.Fatal(err)
	}
	if c.CheckBatch(8) != nil || c.CheckBatch(9) == nil {
		t.Error("CheckBatch does not compare dims[0] with the batch size")
	}
}

func TestSlotOfName(t *testing.T) {
	for name, want := range map[string]int{"fc_slot_12": 12, "slot_7": 7, "slot_12x": 12, "fc_slot_": -1, "slot_x": -1, "f_slot_3": -1, "fc_slot_0": 0} {
		if got := SlotOfName(name); got != want {
			t.Errorf("SlotOfName(%q) = %d, want %d", name, got, want)
		}
	}
}

// FuzzConfig: any FeatureConfigs is either accepted with consistent layouts or rejected
// with ErrConfig; never a panic.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(features))
	f.Add([]byte(features + `out_configs { key: "l" value { out_type: STACK slice_configs { feature_name: "s" start: 0 end: 2 } } }`))
	f.Fuzz(func(t *testing.T, text []byte) {
		fc := &examplepb.FeatureConfigs{}
		if prototext.Unmarshal(text, fc) != nil {
			return
		}
		c, err := New(fc)
		probs := Check(fc)
		if (err == nil) != (len(probs) == 0) || err != nil && err.Error() != probs[0].Error() {
			t.Fatalf("New = %v, Check = %v", err, probs)
		}
		for _, p := range probs {
			if p.Code == "" || p.Message == "" || p.Layout == "" && (p.Slice >= 0 || p.Shape >= 0) {
				t.Fatalf("incomplete problem %+v", p)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error without ErrConfig: %v", err)
			}
			return
		}
		for _, l := range c.Layouts {
			if len(l.RowSize) != len(l.Shapes) || len(l.Shapes) == 0 {
				t.Fatalf("layout %q: %d shapes, %d row sizes", l.Name, len(l.Shapes), len(l.RowSize))
			}
			for _, s := range l.Slices {
				if s.Start < 0 || s.End > c.Features[s.Feature].Dim || s.Width() <= 0 {
					t.Fatalf("layout %q: bad slice %+v", l.Name, s)
				}
				if s.Offset+s.Width() > l.RowSize[0] && l.OutType != None {
					t.Fatalf("layout %q: slice at %d+%d outside a row of %d", l.Name, s.Offset, s.Width(), l.RowSize[0])
				}
			}
		}
	})
}
