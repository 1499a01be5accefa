package featstats

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

// naive recomputes the statistics with maps and plain loops.
func naive(s batch.Sparse) (fids, withFids int64, slots []int, hist [HistBuckets]int64) {
	set := map[int]bool{}
	for r := 0; r < s.Rows; r++ {
		row := s.Row(r)
		if len(row) > 0 {
			withFids++
		}
		hist[Bucket(len(row))]++
		for _, v := range row {
			set[int(v>>48&0x7FFF)] = true
		}
	}
	fids = int64(len(s.Values))
	for k := range set {
		slots = append(slots, k)
	}
	slices.Sort(slots)
	return
}

func TestAddMatchesNaive(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, rows := range []int{0, 1, 63, 64, 65, 1000} {
		for _, shared := range []bool{false, true} {
			cells := rows
			if shared {
				cells = 1
			}
			s := batch.Sparse{Rows: rows, Shared: shared, Offsets: []int32{0}}
			for c := 0; c < cells; c++ {
				for range rng.IntN(40) {
					s.Values = append(s.Values, uint64(rng.IntN(32768))<<48|rng.Uint64()&(1<<48-1))
				}
				s.Offsets = append(s.Offsets, int32(len(s.Values)))
			}
			if shared && rows == 0 {
				continue
			}
			var f Feature
			f.Add(s)
			fids, with, slots, hist := naive(s)
			if f.Fids != fids || f.RowsWithFids != with || !reflect.DeepEqual(f.Slots(), slots) || f.Hist != hist || f.Rows != int64(rows) {
				t.Fatalf("rows %d shared %v: got fids %d rows %d slots %d hist %v; want %d %d %d %v",
					rows, shared, f.Fids, f.RowsWithFids, len(f.Slots()), f.Hist, fids, with, len(slots), hist)
			}
			var m Feature
			m.Merge(&f)
			m.Merge(&f)
			if m.Fids != 2*fids || !reflect.DeepEqual(m.Slots(), slots) {
				t.Fatalf("merge: %d fids, %d slots", m.Fids, len(m.Slots()))
			}
		}
	}
}

func TestBucket(t *testing.T) {
	for _, tc := range []struct{ n, b int }{{0, 0}, {1, 1}, {2, 2}, {3, 2}, {4, 3}, {1 << 20, HistBuckets - 1}} {
		if got := Bucket(tc.n); got != tc.b {
			t.Errorf("Bucket(%d) = %d, want %d", tc.n, got, tc.b)
		}
	}
}

func BenchmarkAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := batch.Sparse{Rows: 4096, Offsets: []int32{0}}
	for range 4096 {
		for range 1 + rng.IntN(10) {
			s.Values = append(s.Values, rng.Uint64()>>1)
		}
		s.Offsets = append(s.Offsets, int32(len(s.Values)))
	}
	b.SetBytes(int64(len(s.Values)*8 + len(s.Offsets)*4))
	b.ReportAllocs()
	var f Feature
	for b.Loop() {
		f.Add(s)
	}
}

// TestSlicedRecord: statistics of a zero-copy slice of a batch equal those of a copy of
// the same rows (the views of a slice share the parent's value arrays).
func TestSlicedRecord(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	n := rec.NumRows()
	rows := make([]int, 0, n)
	for r := n / 2; r < n; r++ {
		rows = append(rows, int(r))
	}
	sl := rec.NewSlice(n/2, n)
	defer sl.Release()
	cp, err := batch.Take(mem, rec, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Release()
	checked := 0
	for i, f := range rec.Schema().Fields() {
		if !batch.IsFeature(f) {
			continue
		}
		a, errA := batch.SparseAt(sl, i)
		b, errB := batch.SparseAt(cp, i)
		if errA != nil || errB != nil {
			continue // not a fid column
		}
		var fa, fb Feature
		fa.Add(a)
		fb.Add(b)
		if !reflect.DeepEqual(fa, fb) {
			t.Errorf("feature %q: slice stats %+v, copy stats %+v", f.Name, fa, fb)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no fid column checked")
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := batchtest.FixtureRecord(t, mem)
	defer rec.Release()
	var all Feature
	for i, f := range rec.Schema().Fields() {
		if !batch.IsFeature(f) {
			continue
		}
		if sp, err := batch.SparseAt(rec, i); err == nil {
			all.Add(sp)
		}
	}
	if len(all.Slots()) < 2 {
		t.Fatalf("fixture gives %d slots", len(all.Slots()))
	}
	for _, f := range []Feature{{}, all} {
		b, err := f.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Feature
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, f) {
			t.Fatalf("round trip: got %+v, want %+v", got, f)
		}
		for n := 0; n < len(b); n++ {
			if err := got.UnmarshalBinary(b[:n]); err == nil {
				t.Fatalf("a %d-byte prefix decoded", n)
			}
		}
	}
}

func FuzzUnmarshalBinary(f *testing.F) {
	var x Feature
	x.AddRows(3)
	b, _ := x.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Feature
		if err := got.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := got.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back Feature
		if err := back.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	})
}
