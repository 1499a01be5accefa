package shard

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/parse"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

// TestFromParsed: the parser's output of the fixture gives every row the fids the raw
// batch gives it (a SHARED list's one entry, repeated), feature by feature.
func TestFromParsed(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fc, err := pbtext.ReadFeatureConfigsFile(batchtest.ConfigPath(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := featcfg.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	var sparse []parse.SparseFeature
	// Leave the last feature out: the parser does not output it, so it reads as empty.
	for _, f := range cfg.Features[:len(cfg.Features)-1] {
		sparse = append(sparse, parse.SparseFeature{Name: f.Name})
	}
	spec, err := parse.NewSpec(sparse, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := parse.Parse(mem, rec, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer parsed.Release()
	var raw, got Input
	if err := raw.FromBatch(rec, cfg); err != nil {
		t.Fatal(err)
	}
	if err := got.FromBatch(parsed, cfg); err != nil {
		t.Fatal(err)
	}
	rows := int(rec.NumRows())
	shared, nonEmpty := 0, 0
	for f := range cfg.Features {
		rf, gf := &raw.Features[f], &got.Features[f]
		if gf.Shared {
			t.Fatalf("feature %s: a parsed feature is shared", cfg.Features[f].Name)
		}
		if rf.Shared {
			shared++
		}
		for r := 0; r < rows; r++ {
			want := rf.Entry(min(r, rf.Entries(rows)-1))
			if f == len(cfg.Features)-1 {
				want = nil
			}
			if g := gf.Entry(r); !slices.Equal(g, want) {
				t.Fatalf("feature %s row %d: parsed %v, raw %v", cfg.Features[f].Name, r, g, want)
			}
			if len(want) > 0 {
				nonEmpty++
			}
		}
	}
	if nonEmpty == 0 {
		t.Fatal("no non-empty entry compared")
	}
	t.Logf("%d shared features, %d non-empty entries compared", shared, nonEmpty)
	// Sharding the parsed batch works end to end.
	s, err := New(cfg, Options{PS: 2, Version: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Shard(&got); err != nil {
		t.Fatal(err)
	}
}
