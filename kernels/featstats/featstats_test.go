package featstats

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/monolith-go/monolith/schemas/batch"
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
