package shard

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// workedConfig is the config of data-path.md §3.7: fa→t1 [2], fb→t0 [1,2], fc→t1 [2].
func workedConfig(t testing.TB) *featcfg.Config {
	t.Helper()
	cfg, err := featcfg.New(&examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{
		"fa": {Table: "t1", SliceDims: []int32{2}},
		"fb": {Table: "t0", SliceDims: []int32{1, 2}},
		"fc": {Table: "t1", SliceDims: []int32{2}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// workedInput: ex0: fa=[4,5,4], fb=[7]; ex1: fa=[5], fc=[6,9].
func workedInput(sharedFB bool) *Input {
	in := &Input{Rows: 2, Features: []FeatureInput{
		{Offsets: []int32{0, 3, 4}, Values: []uint64{4, 5, 4, 5}},
		{Offsets: []int32{0, 1, 1}, Values: []uint64{7}},
		{Offsets: []int32{0, 0, 2}, Values: []uint64{6, 9}},
	}}
	if sharedFB {
		in.Features[1] = FeatureInput{Shared: true, Offsets: []int32{0, 1}, Values: []uint64{7}}
	}
	return in
}

type pair [2]uint32

func pairs(fo []uint64) []pair {
	out := make([]pair, len(fo))
	for i, v := range fo {
		out[i] = pair{Index1(v), Index2(v)}
	}
	return out
}

func lists(r *Result) [][]uint64 {
	var out [][]uint64
	for t := 0; t < r.Tables; t++ {
		for p := 0; p < r.PS; p++ {
			out = append(out, append([]uint64{}, r.List(t, p)...))
		}
	}
	return out
}

func splits(r *Result) [][]int64 {
	var out [][]int64
	for t := 0; t < r.Tables; t++ {
		for p := 0; p < r.PS; p++ {
			out = append(out, slices.Clone(r.Splits(t, p)))
		}
	}
	return out
}

// TestWorkedExample reproduces data-path.md §3.7 exactly for versions 1–5, serial and
// parallel.
func TestWorkedExample(t *testing.T) {
	cfg := workedConfig(t)
	nonUniqueLists := [][]uint64{{}, {7}, {4, 4, 6}, {5, 5, 9}}
	tests := []struct {
		version int
		unique  bool
		lists   [][]uint64
		offsets []pair
	}{
		{1, false, nonUniqueLists, []pair{{2, 0}, {3, 0}, {2, 1}, {3, 1}, {1, 0}, {2, 2}, {3, 2}}},
		{1, true, [][]uint64{{}, {7}, {4, 6}, {5, 9}}, []pair{{2, 0}, {3, 0}, {2, 0}, {3, 0}, {1, 0}, {2, 1}, {3, 1}}},
		{2, false, nonUniqueLists, []pair{{2, 0}, {4, 0}, {2, 1}, {4, 1}, {1, 0}, {3, 0}, {5, 0}}},
		{3, false, nonUniqueLists, []pair{{2, 0}, {3, 0}, {2, 2}, {3, 2}, {1, 0}, {2, 4}, {3, 4}}},
		{4, false, nonUniqueLists, []pair{{2, 0}, {3, 0}, {2, 2}, {3, 2}, {1, 0}, {2, 4}, {3, 4}}},
		{5, false, nonUniqueLists, []pair{{2, 0}, {3, 0}, {2, 2}, {3, 2}, {1, 0}, {2, 4}, {3, 4}}},
	}
	for _, tc := range tests {
		for _, par := range []int{0, 2, 3} {
			t.Run(fmt.Sprintf("v%d/unique=%v/parallel=%d", tc.version, tc.unique, par), func(t *testing.T) {
				s, err := New(cfg, Options{PS: 2, Version: tc.version, Unique: tc.unique, Parallel: par})
				if err != nil {
					t.Fatal(err)
				}
				r, err := s.Shard(workedInput(false))
				if err != nil {
					t.Fatal(err)
				}
				if got := r.NflOffset; !slices.Equal(got, []uint32{0, 2, 4, 7}) {
					t.Errorf("nfl_offset = %v", got)
				}
				if got := r.FeatureOffset; !slices.Equal(got, []int32{0, 3, 4, 5, 5, 5, 7}) {
					t.Errorf("feature_offset = %v", got)
				}
				if got := lists(r); !reflect.DeepEqual(got, tc.lists) {
					t.Errorf("fid lists = %v, want %v", got, tc.lists)
				}
				if got := pairs(r.FidOffset); !slices.Equal(got, tc.offsets) {
					t.Errorf("fid_offset = %v, want %v", got, tc.offsets)
				}
				if !tc.unique {
					if got := splits(r); !reflect.DeepEqual(got, [][]int64{{0, 0}, {0, 1}, {0, 2, 3}, {0, 2, 3}}) {
						t.Errorf("row splits = %v", got)
					}
				}
				if r.BatchSize != 2 {
					t.Errorf("batch_size = %d", r.BatchSize)
				}
				switch tc.version {
				case 5:
					if !slices.Equal(r.EmbSize, []int32{0, 3, 6, 6}) {
						t.Errorf("emb_size = %v, want [0 3 6 6]", r.EmbSize)
					}
				case 4:
					checks := []struct {
						name      string
						got, want any
					}{
						{"fid_list", slices.Clone(r.Fids), []uint64{4, 4, 6, 7, 5, 5, 9}},
						{"fid_list_table_row_length", slices.Clone(r.TableRowLength), []int32{0, 3, 1, 3}},
						{"fid_list_shard_row_lenth", slices.Clone(r.ShardRowLength), []int32{3, 4}},
						{"fid_list_emb_row_lenth", slices.Clone(r.EmbRowLength), []int32{0, 6, 3, 6}},
						{"fid_list_row_splits", slices.Clone(r.RowSplits), []int64{0, 0, 0, 2, 3, 0, 1, 0, 2, 3}},
					}
					for _, c := range checks {
						if !reflect.DeepEqual(c.got, c.want) {
							t.Errorf("v4 %s = %v, want %v", c.name, c.got, c.want)
						}
					}
				}
			})
		}
	}
}

// TestWorkedExampleShared: with fb SHARED, fb has one entry and the shared bit.
func TestWorkedExampleShared(t *testing.T) {
	s, err := New(workedConfig(t), Options{PS: 2, Version: 5})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Shard(workedInput(true))
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{0, 2 | SharedBit, 3, 6}; !slices.Equal(r.NflOffset, want) {
		t.Errorf("nfl_offset = %#x, want %#x", r.NflOffset, want)
	}
	if want := []int32{0, 3, 4, 5, 5, 7}; !slices.Equal(r.FeatureOffset, want) {
		t.Errorf("feature_offset = %v, want %v", r.FeatureOffset, want)
	}
}

func TestModulo(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, d := range []uint64{1, 2, 3, 5, 7, 10, 64, 1000, 1<<20 + 7, 1<<32 - 5, 1<<63 + 11, ^uint64(0)} {
		m := newModulo(d)
		vals := []uint64{0, 1, d - 1, d, d + 1, ^uint64(0), ^uint64(0) - 1, 1 << 63}
		for range 100000 {
			vals = append(vals, rng.Uint64())
		}
		if !m.pow2 { // the 128-bit reciprocal, for every divisor
			for _, n := range vals {
				if got := fastMod(n, m.d, m.mh, m.ml); got != n%d {
					t.Fatalf("fastMod: %d mod %d = %d, want %d", n, d, got, n%d)
				}
			}
		}
		if d > MaxPS {
			continue // modAll's shards are ps numbers: they fit 32 bits
		}
		out := make([]uint32, len(vals)+1)
		out[len(vals)] = 12345
		m.modAll(out, vals)
		for i, n := range vals {
			if uint64(out[i]) != n%d {
				t.Fatalf("modAll: %d mod %d = %d, want %d", n, d, out[i], n%d)
			}
		}
		if out[len(vals)] != 12345 {
			t.Fatalf("modAll wrote past len(vals)")
		}
	}
}

func TestSentinelNeverDeduplicated(t *testing.T) {
	cfg := workedConfig(t)
	s, err := New(cfg, Options{PS: 1, Version: 1, Unique: true})
	if err != nil {
		t.Fatal(err)
	}
	in := &Input{Rows: 1, Features: []FeatureInput{
		{Offsets: []int32{0, 4}, Values: []uint64{^uint64(0), 3, ^uint64(0), 3}}, {}, {},
	}}
	r, err := s.Shard(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.List(1, 0); !slices.Equal(got, []uint64{^uint64(0), 3, ^uint64(0)}) {
		t.Errorf("list = %x, want the sentinel twice and 3 once", got)
	}
}

func TestInputErrors(t *testing.T) {
	cfg := workedConfig(t)
	s, err := New(cfg, Options{PS: 2, Version: 3})
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]*Input{
		"too few features": {Rows: 1, Features: []FeatureInput{{}}},
		"offsets length":   {Rows: 2, Features: []FeatureInput{{Offsets: []int32{0, 1}, Values: []uint64{1}}, {}, {}}},
		"decreasing":       {Rows: 2, Features: []FeatureInput{{Offsets: []int32{0, 2, 1}, Values: []uint64{1, 2}}, {}, {}}},
		"past values":      {Rows: 1, Features: []FeatureInput{{Offsets: []int32{0, 3}, Values: []uint64{1}}, {}, {}}},
	} {
		if _, err := s.Shard(in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, o := range []Options{{PS: -1, Version: 1}, {PS: 1, Version: 0}, {PS: 1, Version: 6}} {
		if _, err := New(cfg, o); err == nil {
			t.Errorf("options %+v: no error", o)
		}
	}
}
