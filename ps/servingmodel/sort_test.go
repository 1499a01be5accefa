package servingmodel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/ps/export"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// TestRecordSorter: records come back in ascending unsigned fid order with their payloads,
// in memory and through spilled runs alike, and the spill files are removed.
func TestRecordSorter(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const size = 8 + 3
	for _, n := range []int{0, 1, 2, 100, 1000} {
		var recs [][]byte
		for i := range n {
			rec := make([]byte, size)
			fid := rng.Uint64()
			if i%3 == 0 {
				fid >>= rng.IntN(64) // small ones too, and 0
			}
			binary.LittleEndian.PutUint64(rec, fid)
			rec[8], rec[9], rec[10] = byte(i), byte(i>>8), byte(fid)
			recs = append(recs, rec)
		}
		want := slices.Clone(recs)
		slices.SortFunc(want, bytes.Compare)
		for _, budget := range []int{1, size * 7, 1 << 20} {
			dir := t.TempDir()
			s := newRecordSorter(size, budget, uint64(n), dir, ".sort-*")
			for _, r := range recs {
				if err := s.add(r); err != nil {
					t.Fatal(err)
				}
			}
			var got [][]byte
			if err := s.each(func(rec []byte) error {
				got = append(got, bytes.Clone(rec))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			// Records of equal fids (the small ones repeat) come in any order.
			if !slices.IsSortedFunc(got, byFid) {
				t.Errorf("%d records, budget %d: out of order", n, budget)
			}
			slices.SortFunc(got, bytes.Compare)
			if !slices.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("%d records, budget %d: not the records added", n, budget)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("%d records, budget %d: %d spill files left", n, budget, len(left))
			}
		}
	}
}

func byFid(a, b []byte) int { return cmp.Compare(fidOf(a), fidOf(b)) }

// TestWriteSorted: every table file holds its rows in ascending unsigned fid order (a
// negative fid last), whether sorted in memory or through spilled runs, the two byte for
// byte the same; Verify passes either way, and no spill file is left.
func TestWriteSorted(t *testing.T) {
	ctx := context.Background()
	src := checkpointOf(t)
	var files [][]byte
	for _, budget := range []int{sortBudget, 1, 40} {
		base := t.TempDir()
		res, err := write(ctx, base, "m", 1, Spec{Model: "fm"}, src, budget)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(ctx, res.Dir, src, budget); err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		m, err := Open(res.Dir)
		if err != nil {
			t.Fatal(err)
		}
		var all []byte
		for _, tb := range m.Tables {
			var fids []uint64
			if err := tb.ScanEncoded(res.Dir, func(fid int64, _ []byte) error {
				fids = append(fids, uint64(fid))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.IsSorted(fids) || len(fids) != int(tb.Entries) {
				t.Errorf("budget %d, table %q: fids %v, not ascending", budget, tb.Name, fids)
			}
			b, err := os.ReadFile(filepath.Join(res.Dir, tb.File))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		if got, want := tableFids(t, res.Dir, m.Tables[0]), []int64{1, 7, -5}; !slices.Equal(got, want) {
			t.Errorf("budget %d: mixed fids %v, want %v", budget, got, want)
		}
		files = append(files, all)
		for _, d := range []string{res.Dir, filepath.Dir(res.Dir)} {
			ents, err := os.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".") {
					t.Errorf("budget %d: %s left in %s", budget, e.Name(), d)
				}
			}
		}
	}
	for i := 1; i < len(files); i++ {
		if !bytes.Equal(files[i], files[0]) {
			t.Errorf("the tables sorted through spilled runs (%d) differ from those sorted in memory", i)
		}
	}
}

func tableFids(t *testing.T, dir string, tb *Table) []int64 {
	t.Helper()
	var fids []int64
	if err := tb.ScanEncoded(dir, func(fid int64, _ []byte) error {
		fids = append(fids, fid)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return fids
}

// TestWriteDuplicateFid: a fid that two shards of the checkpoint both hold fails the
// export naming it, and leaves no version.
func TestWriteDuplicateFid(t *testing.T) {
	ctx := context.Background()
	var tc pspb.TablesConfig
	if err := prototext.Unmarshal([]byte(specs), &tc); err != nil {
		t.Fatal(err)
	}
	spec := tc.GetTables()[1] // plain
	root := t.TempDir()
	var folders []string
	for shard := range 2 {
		tb, err := table.FromSpec(spec, uint64(shard))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Assign([]int64{int64(10 + shard), 99}, []float32{1, 2, 3, 4, 5, 6}, 0); err != nil {
			t.Fatal(err)
		}
		res, err := checkpoint.Save(ctx, filepath.Join(root, "shard", string(rune('0'+shard))), checkpoint.Meta{Step: 1, Shard: shard, NumShards: 2}, []*table.Table{tb})
		if err != nil {
			t.Fatal(err)
		}
		folders = append(folders, res.Path)
	}
	src, err := export.ResolveShards(root, folders)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	if _, err := Write(ctx, base, "m", 1, Spec{Model: "fm"}, src); err == nil || !strings.Contains(err.Error(), "fid 99 twice") {
		t.Errorf("duplicate fid: %v, want an error naming fid 99", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(base, "m")); len(ents) != 0 {
		t.Errorf("%d entries left in the model folder", len(ents))
	}
}
