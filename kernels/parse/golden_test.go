package parse

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

// TestGoldenFixture parses the golden ExampleBatch (io.md §6.1) with
// parse_example_batch's rules and checks values the spec states.
func TestGoldenFixture(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()

	var sparse []SparseFeature
	for _, name := range batch.Features(rec.Schema()) {
		sparse = append(sparse, SparseFeature{Name: name})
	}
	sparse = append(sparse, SparseFeature{Name: "f_not_in_batch"})
	spec := mustSpec(t, sparse,
		[]DenseFeature{{Name: "label", Dim: 1}, {Name: "instance_weight", Dim: 1}, {Name: "f_absent_dense", Dim: 2}},
		[]ExtraFeature{{Name: "req_time", Dim: 1}, {Name: "uid", Dim: 1}, {Name: "user_id", Dim: 1},
			{Name: "actions", Dim: 2}, {Name: "sample_rate", Dim: 1}, {Name: "item_id", Dim: 1}, {Name: "chnid", Dim: 1}})
	res, err := parseResult(t, mem, rec, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.n != 51 {
		t.Fatalf("rows = %d, want 51", res.n)
	}
	// §2.1: row 0 of f_user_id and f_goods_id, v1 converted to v2.
	if got := res.sparse["f_user_id"][0]; len(got) != 1 || got[0] != 0x000124080526e4a7 {
		t.Errorf("f_user_id row 0 = %x, want [124080526e4a7]", got)
	}
	if got := res.sparse["f_goods_id"][0]; len(got) != 1 || got[0] != 0x00c8c56807a425fc {
		t.Errorf("f_goods_id row 0 = %x, want [c8c56807a425fc]", got)
	}
	// §6.1: f_goods_title_terms (slot 209) has 10 fids in row 2 and 9 in row 31.
	terms := res.sparse["f_goods_title_terms"]
	if len(terms[2]) != 10 || len(terms[31]) != 9 {
		t.Errorf("f_goods_title_terms rows 2/31 have %d/%d fids, want 10/9", len(terms[2]), len(terms[31]))
	}
	for _, f := range append(terms[2], terms[31]...) {
		if f>>48&0x7FFF != 209 {
			t.Errorf("f_goods_title_terms fid %x is not a v2 fid of slot 209", f)
		}
	}
	// Empty lists and absent features give empty rows.
	for _, name := range []string{"f_user_age", "f_not_in_batch"} {
		for r, row := range res.sparse[name] {
			if len(row) != 0 {
				t.Errorf("%s row %d = %x, want empty", name, r, row)
			}
		}
	}
	// §6.1: fids per row over all lists: 13 in most rows, 85 in row 2, 127 in row 31, 48 in
	// rows 27 and 32..37; 1094 in total.
	total := 0
	for r := range 51 {
		n := 0
		for _, f := range sparse {
			n += len(res.sparse[f.Name][r])
		}
		total += n
		want := 13
		switch {
		case r == 2:
			want = 85
		case r == 31:
			want = 127
		case r == 27 || r >= 32 && r <= 37:
			want = 48
		}
		if n != want {
			t.Errorf("row %d has %d fids, want %d", r, n, want)
		}
	}
	if total != 1094 {
		t.Errorf("%d fids in total, want 1094", total)
	}
	actions := map[int64]int{}
	users := map[string]int{}
	for r := range 51 {
		// __LABEL__ is 0 in every row; no instance_weight list: 0 (§4.5).
		if l, w := res.f32["label"][r], res.f32["instance_weight"][r]; l != 0 || w != 0 {
			t.Errorf("row %d: label %v weight %v, want 0 and 0", r, l, w)
		}
		rt := res.i64["req_time"][r]
		if rt < 1617120207 || rt > 1617206384 {
			t.Errorf("row %d: req_time %d outside the fixture's range", r, rt)
		}
		if res.i64["uid"][r] != 0 || res.i64["chnid"][r] != 0 {
			t.Errorf("row %d: uid/chnid absent from the LineId must read 0", r)
		}
		if res.i64["item_id"][r] == 0 {
			t.Errorf("row %d: item_id is 0", r)
		}
		if sr := res.f32["sample_rate"][r]; sr != 1 {
			t.Errorf("row %d: sample_rate %v, want the proto default 1", r, sr)
		}
		a := res.i64["actions"][2*r : 2*r+2]
		if a[1] != 0 {
			t.Errorf("row %d: actions %v, want one action and a 0", r, a)
		}
		actions[a[0]]++
		users[res.str["user_id"][r]]++
		if d := res.f32["f_absent_dense"][2*r : 2*r+2]; d[0] != 0 || d[1] != 0 {
			t.Errorf("row %d: absent dense feature = %v, want 0", r, d)
		}
	}
	if res.i64["req_time"][0] != 1617194181 || res.str["user_id"][0] != "1c86a18cbb1060f" {
		t.Errorf("row 0: req_time %d user_id %q, want 1617194181 and 1c86a18cbb1060f", res.i64["req_time"][0], res.str["user_id"][0])
	}
	if actions[1] != 50 || actions[2] != 1 {
		t.Errorf("actions: %v, want [1] in 50 rows and [2] in 1", actions)
	}
	if len(users) != 22 || users["21bacb96ae78a72"] != 10 {
		t.Errorf("user_id: %d distinct, 21bacb96ae78a72 ×%d; want 22 and ×10", len(users), users["21bacb96ae78a72"])
	}
}
