package pbtext_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// io.md §6.2: inst.pbtext and its serialized form.
const instPBTextGolden = "0a10 0100000000000000 0200000000000000 1a08 00000000 0000803f 2a03 320101 " +
	"4a0d 0a0161 1208 0300000000000000"

// io.md §6.3: inst.json and its serialized form.
const instJSONGolden = "0a08 3930000000000000 1a08 00000000 0000803f 2a03 320101"

func TestInstanceGoldens(t *testing.T) {
	tests := []struct {
		fixture string
		golden  string
	}{
		{"inst.pbtext", instPBTextGolden},
		{"inst.json", instJSONGolden},
	}
	for _, tc := range tests {
		inst, err := pbtext.ReadInstanceFile(fixtures.Path(t, tc.fixture))
		if err != nil {
			t.Errorf("%s: %v", tc.fixture, err)
			continue
		}
		if got, want := marshal(t, inst), unhex(t, tc.golden); !bytes.Equal(got, want) {
			t.Errorf("%s serializes to\n%x\nwant\n%x", tc.fixture, got, want)
		}
	}
}

func TestInstanceTextVariants(t *testing.T) {
	want := unhex(t, instPBTextGolden)
	variants := []string{
		// io.md §6.2's one-line rendering with comma separators.
		`fid: 1, fid: 2, label: 0.0, label: 1.0, line_id { actions: 1 }, feature { name: "a" fid: 3 }`,
		// Semicolons, list syntax and angle brackets.
		`fid: [1, 2]; label: [0, 1]; line_id < actions: [1] >; feature: { name: 'a'; fid: 3 }`,
		// Trailing newline and comments.
		"# an Instance\nfid: 1\nfid: 2\nlabel: 0.0\nlabel: 1.0\nline_id {\n  actions: 1\n}\nfeature {\n  name: \"a\"\n  fid: 3\n}\n",
	}
	for _, v := range variants {
		inst := &parserpb.Instance{}
		if err := pbtext.ReadText([]byte(v), inst); err != nil {
			t.Errorf("ReadText(%q): %v", v, err)
			continue
		}
		if got := marshal(t, inst); !bytes.Equal(got, want) {
			t.Errorf("ReadText(%q) serializes to %x; want %x", v, got, want)
		}
	}
	// With and without the fixture's missing trailing newline.
	raw := fixtures.Read(t, "inst.pbtext")
	if bytes.HasSuffix(raw, []byte("\n")) {
		t.Errorf("inst.pbtext now ends with a newline; the fixture is expected not to")
	}
	for _, b := range [][]byte{raw, append(slices.Clone(raw), '\n')} {
		inst := &parserpb.Instance{}
		if err := pbtext.ReadText(b, inst); err != nil || !bytes.Equal(marshal(t, inst), want) {
			t.Errorf("ReadText(inst.pbtext, %d bytes) = %v", len(b), err)
		}
	}
}

func TestJSONForms(t *testing.T) {
	want := unhex(t, instJSONGolden)
	for _, j := range []string{
		`{"fid": [12345], "label": [0, 1], "line_id": {"actions": [1]}}`,
		`{"fid": ["12345"], "label": [0.0, 1e0], "lineId": {"actions": [1]}}`,
	} {
		inst := &parserpb.Instance{}
		if err := pbtext.ReadJSON([]byte(j), inst); err != nil || !bytes.Equal(marshal(t, inst), want) {
			t.Errorf("ReadJSON(%s) = %x, %v; want %x", j, marshal(t, inst), err, want)
		}
	}
	ex := &examplepb.Example{}
	if err := pbtext.ReadJSON([]byte(`{"named_feature": [{"name": "f_user_id", "feature": {"fid_v1_list": {"value": ["34661039000183975"]}}}], "label": [1]}`), ex); err != nil {
		t.Fatal(err)
	}
	if nf := ex.GetNamedFeature(); len(nf) != 1 || nf[0].GetFeature().GetFidV1List().GetValue()[0] != 0x007b24080526e4a7 {
		t.Errorf("Example from JSON = %v", ex)
	}
	eb := &examplepb.ExampleBatch{}
	if err := pbtext.ReadJSON([]byte(`{"named_feature_list": [{"name": "x", "feature": [{}, {"float_list": {"value": [0.5]}}]}], "batch_size": 2}`), eb); err != nil {
		t.Fatal(err)
	}
	if eb.GetBatchSize() != 2 || eb.GetNamedFeatureList()[0].GetFeature()[1].GetFloatList().GetValue()[0] != 0.5 {
		t.Errorf("ExampleBatch from JSON = %v", eb)
	}
}

// TestExampleBatchGolden pins the re-serialization of example_batch.pbtxt (io.md §6.1).
func TestExampleBatchGolden(t *testing.T) {
	eb, err := pbtext.ReadExampleBatchFile(fixtures.Path(t, "example_batch.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	b := marshal(t, eb)
	if sum := fmt.Sprintf("%x", sha256.Sum256(b)); len(b) != 34292 ||
		sum != "a575b4b061e32d96503a48e44a77a414328b7f603db672b2633f806138d8c204" {
		t.Errorf("re-serialized ExampleBatch: %d bytes, sha256 %s; want 34292 bytes, sha256 a575b4b0…", len(b), sum)
	}
}

// TestExampleBatchFacts checks the io.md §6.1 description of example_batch.pbtxt.
func TestExampleBatchFacts(t *testing.T) {
	eb, err := pbtext.ReadExampleBatchFile(fixtures.Path(t, "example_batch.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	const rows = 51
	lists := eb.GetNamedFeatureList()
	if eb.GetBatchSize() != rows || len(lists) != 139 || len(eb.GetNamedRawFeatureList()) != 0 || eb.GetDataSourceKey() != 0 {
		t.Fatalf("batch_size %d, %d lists, %d raw lists, data_source_key %d; want 51, 139, 0, 0",
			eb.GetBatchSize(), len(lists), len(eb.GetNamedRawFeatureList()), eb.GetDataSourceKey())
	}
	if lists[76].GetName() != "__LINE_ID__" || lists[78].GetName() != "__LABEL__" {
		t.Fatalf("list 76 = %q, list 78 = %q; want __LINE_ID__, __LABEL__", lists[76].GetName(), lists[78].GetName())
	}

	byName := map[string]*examplepb.NamedFeatureList{}
	var (
		totalFIDs, nonEmpty, empty int
		slots                      []int
		perRow                     = make([]int, rows)
	)
	for i, l := range lists {
		byName[l.GetName()] = l
		if len(l.GetFeature()) != rows || l.GetType() != examplepb.FeatureListType_INDIVIDUAL || l.GetId() != 0 {
			t.Errorf("list %d (%s): %d cells, type %v, id %d; want 51 INDIVIDUAL cells, id 0",
				i, l.GetName(), len(l.GetFeature()), l.GetType(), l.GetId())
		}
		if i == 76 || i == 78 {
			continue
		}
		listSlots := map[int]bool{}
		n := 0
		for r, cell := range l.GetFeature() {
			if cell.GetType() == nil {
				continue
			}
			v1 := cell.GetFidV1List()
			if v1 == nil || len(v1.GetValue()) == 0 {
				t.Errorf("list %s row %d: %T set (want fid_v1_list with values or unset)", l.GetName(), r, cell.GetType())
				continue
			}
			if len(v1.GetValue()) > 10 {
				t.Errorf("list %s row %d: %d fids; want ≤ 10", l.GetName(), r, len(v1.GetValue()))
			}
			for _, fid := range v1.GetValue() {
				listSlots[int(fid>>54)] = true
			}
			n += len(v1.GetValue())
			perRow[r] += len(v1.GetValue())
		}
		totalFIDs += n
		if n == 0 {
			empty++
			continue
		}
		nonEmpty++
		if len(listSlots) != 1 {
			t.Errorf("list %s uses %d slots; want 1", l.GetName(), len(listSlots))
		}
		for s := range listSlots {
			slots = append(slots, s)
		}
	}
	if totalFIDs != 1094 || nonEmpty != 95 || empty != 42 {
		t.Errorf("%d fids in %d non-empty and %d empty lists; want 1094, 95, 42", totalFIDs, nonEmpty, empty)
	}
	slices.Sort(slots)
	var wantSlots []int
	for _, r := range [][2]int{{1, 1}, {4, 5}, {10, 10}, {52, 52}, {61, 61}, {200, 200}, {202, 219}, {223, 225},
		{232, 235}, {242, 242}, {300, 306}, {310, 310}, {502, 555}} {
		for s := r[0]; s <= r[1]; s++ {
			wantSlots = append(wantSlots, s)
		}
	}
	if !slices.Equal(slots, wantSlots) {
		t.Errorf("slots of the non-empty lists = %v; want %v", slots, wantSlots)
	}
	for r, n := range perRow {
		want := 13
		switch {
		case r == 2:
			want = 85
		case r == 31:
			want = 127
		case r == 27 || (r >= 32 && r <= 37):
			want = 48
		}
		if n != want {
			t.Errorf("row %d has %d fids; want %d", r, n, want)
		}
	}

	// Always-present lists and their slots.
	always := map[string]int{"f_user_id": 1, "f_goods_id": 200, "f_spm": 300, "f_spm_1": 301, "f_spm_2": 302,
		"f_spm_3": 303, "f_spm_4": 304, "f_page": 305, "f_scm": 306, "f_is_dup": 310,
		"f_user_ctx_platform": 52, "f_user_ctx_network": 61, "f_user_id-f_page": 504}
	for name, slot := range always {
		l := byName[name]
		for r, cell := range l.GetFeature() {
			v := cell.GetFidV1List().GetValue()
			if len(v) == 0 || int(v[0]>>54) != slot {
				t.Errorf("%s row %d = %v; want fids of slot %d", name, r, v, slot)
				break
			}
		}
	}
	for _, name := range []string{"f_user_age", "f_goods_shop_id", "f_user_os"} {
		for r, cell := range byName[name].GetFeature() {
			if cell.GetType() != nil {
				t.Errorf("%s row %d is set; want an entirely empty list", name, r)
			}
		}
	}
	terms := byName["f_goods_title_terms"].GetFeature()
	if len(terms[2].GetFidV1List().GetValue()) != 10 || len(terms[31].GetFidV1List().GetValue()) != 9 ||
		terms[2].GetFidV1List().GetValue()[0]>>54 != 209 {
		t.Errorf("f_goods_title_terms rows 2/31 = %d/%d fids; want 10/9 of slot 209",
			len(terms[2].GetFidV1List().GetValue()), len(terms[31].GetFidV1List().GetValue()))
	}
	if got := byName["f_user_id"].GetFeature()[0].GetFidV1List().GetValue(); got[0] != 0x007b24080526e4a7 {
		t.Errorf("f_user_id row 0 = %#x; want 0x007b24080526e4a7", got[0])
	}
	if got := byName["f_goods_id"].GetFeature()[0].GetFidV1List().GetValue(); got[0] != 0x3219c56807a425fc {
		t.Errorf("f_goods_id row 0 = %#x; want 0x3219c56807a425fc", got[0])
	}

	// __LABEL__: float_list { value: 0 } in every row.
	for r, cell := range lists[78].GetFeature() {
		if v := cell.GetFloatList().GetValue(); len(v) != 1 || v[0] != 0 {
			t.Errorf("__LABEL__ row %d = %v; want [0]", r, cell)
		}
	}
}

// TestLineIDs decodes the __LINE_ID__ cells and checks the known and unknown fields.
func TestLineIDs(t *testing.T) {
	eb, err := pbtext.ReadExampleBatchFile(fixtures.Path(t, "example_batch.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	cells := eb.GetNamedFeatureList()[76].GetFeature()
	const row0 = "18c5d991830621045c2ee7993d9b483201015a0161a001c5d99183068a030f3163383661313863626231303630669a0a1331242323243130303524232324312423232431"
	if got := cells[0].GetBytesList().GetValue(); len(got) != 1 || hex.EncodeToString(got[0]) != row0 {
		t.Fatalf("__LINE_ID__ row 0 = %x; want %s", got, row0)
	}
	var (
		minT, maxT   = int64(1 << 62), int64(0)
		actions      = map[string]int{}
		users        = map[string]int{}
		field11Seen  = map[string]bool{}
		unknownCount int
	)
	for r, cell := range cells {
		vals := cell.GetBytesList().GetValue()
		if len(vals) != 1 {
			t.Fatalf("__LINE_ID__ row %d holds %d values; want 1", r, len(vals))
		}
		lid := &matrixpb.LineId{}
		if err := proto.Unmarshal(vals[0], lid); err != nil {
			t.Fatalf("row %d: %v", r, err)
		}
		// Round trip: unknown fields survive re-marshalling.
		again := &matrixpb.LineId{}
		if err := proto.Unmarshal(marshal(t, lid), again); err != nil || !proto.Equal(lid, again) {
			t.Errorf("row %d: LineId does not survive a round trip (%v)", r, err)
		}
		minT, maxT = min(minT, lid.GetReqTime()), max(maxT, lid.GetReqTime())
		actions[fmt.Sprint(lid.GetActions())]++
		users[lid.GetUserId()]++
		if lid.GetItemId() == 0 {
			t.Errorf("row %d: item_id absent", r)
		}

		unknown := again.ProtoReflect().GetUnknown()
		var nums []protowire.Number
		for len(unknown) > 0 {
			num, typ, n := protowire.ConsumeTag(unknown)
			if n < 0 {
				t.Fatalf("row %d: bad unknown bytes: %v", r, protowire.ParseError(n))
			}
			m := protowire.ConsumeFieldValue(num, typ, unknown[n:])
			if m < 0 {
				t.Fatalf("row %d: bad unknown field %d: %v", r, num, protowire.ParseError(m))
			}
			val := unknown[n : n+m]
			switch num {
			case 11:
				s, _ := protowire.ConsumeBytes(val)
				field11Seen[string(s)] = true
			case 20:
				v, _ := protowire.ConsumeVarint(val)
				if typ != protowire.VarintType || int64(v) != lid.GetReqTime() {
					t.Errorf("row %d: field 20 = %d; want req_time %d", r, v, lid.GetReqTime())
				}
			case 163:
				s, _ := protowire.ConsumeBytes(val)
				if typ != protowire.BytesType || !strings.Contains(string(s), "$##$") {
					t.Errorf("row %d: field 163 = %q; want a $##$-separated string", r, s)
				}
			}
			nums = append(nums, num)
			unknown = unknown[n+m:]
		}
		if !slices.Equal(nums, []protowire.Number{11, 20, 163}) {
			t.Errorf("row %d: unknown LineId fields %v; want [11 20 163]", r, nums)
		} else {
			unknownCount++
		}
	}
	if minT != 1617120207 || maxT != 1617206384 {
		t.Errorf("req_time range %d..%d; want 1617120207..1617206384", minT, maxT)
	}
	if actions["[1]"] != 50 || actions["[2]"] != 1 {
		t.Errorf("actions = %v; want [1]×50, [2]×1", actions)
	}
	if len(users) != 22 || users["21bacb96ae78a72"] != 10 {
		t.Errorf("%d distinct user_ids, 21bacb96ae78a72×%d; want 22 and 10", len(users), users["21bacb96ae78a72"])
	}
	for u := range users {
		if len(u) != 15 {
			t.Errorf("user_id %q has %d characters; want 15", u, len(u))
		}
	}
	if len(field11Seen) != 2 || !field11Seen["a"] || !field11Seen["b"] {
		t.Errorf("field 11 values = %v; want a and b", field11Seen)
	}
	if unknownCount != len(cells) {
		t.Errorf("%d of %d rows keep fields 11, 20, 163", unknownCount, len(cells))
	}
}
