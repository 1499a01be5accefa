package modelserver

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/monolith-go/monolith/io/synth"
)

// checkIndex checks x against fids (ascending, distinct) as a sorted []uint64 answers:
// every fid at its number, and slices.BinarySearch's answer for each fid, its neighbours
// and random probes.
func checkIndex(t *testing.T, x *fidIndex, fids []uint64, rng *rand.Rand) {
	t.Helper()
	if x.n != len(fids) {
		t.Fatalf("%d fids indexed, want %d", x.n, len(fids))
	}
	for i, f := range fids {
		if got := x.at(i); got != f {
			t.Fatalf("fid %d is %#x, want %#x (layout low %d top %d)", i, got, f, x.low, x.top)
		}
	}
	probe := func(f uint64) {
		t.Helper()
		wi, wok := slices.BinarySearch(fids, f)
		gi, gok := x.search(f)
		if gok != wok || wok && gi != wi {
			t.Fatalf("search %#x: %d %v, want %d %v (layout low %d top %d)", f, gi, gok, wi, wok, x.low, x.top)
		}
	}
	for _, f := range fids {
		probe(f)
		probe(f - 1)
		probe(f + 1)
		probe(f ^ 1<<(rng.IntN(64)))
	}
	for range 1000 {
		probe(rng.Uint64())
	}
	probe(0)
	probe(math.MaxUint64)
}

// sortedSet is fids sorted with duplicates dropped.
func sortedSet(fids []uint64) []uint64 {
	fids = slices.Clone(fids)
	slices.Sort(fids)
	return slices.Compact(fids)
}

// TestFidIndex: the index holds every set, numbering its fids in order and finding them
// (and no other) as a binary search over the sorted fids does; it takes fewer bytes than
// the fids where they share bits, and never more than them and a few bytes.
func TestFidIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func(n int, f func(i int) uint64) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = f(i)
		}
		return sortedSet(out)
	}
	for _, tc := range []struct {
		name     string
		fids     []uint64
		maxBytes float64 // per fid; 0: no bound but the plain one
		plain    bool    // want the plain layout
	}{
		{name: "empty"},
		{name: "zero", fids: []uint64{0}},
		{name: "max", fids: []uint64{math.MaxUint64}},
		{name: "zero and max", fids: []uint64{0, math.MaxUint64}},
		{name: "one high part", fids: gen(5000, func(int) uint64 { return 0xabcd<<48 | rng.Uint64N(1<<40) }), maxBytes: 5.5},
		{name: "dense", fids: gen(10000, func(i int) uint64 { return uint64(i) }), maxBytes: 1},
		{name: "random", fids: gen(20000, func(int) uint64 { return rng.Uint64() }), maxBytes: 8},
		{name: "few spread", fids: gen(5, func(int) uint64 { return rng.Uint64() }), plain: true},
		{name: "v1 slots", fids: gen(50000, func(int) uint64 { return synth.Fid(1, 1+rng.IntN(8), 1+rng.Uint64N(1<<20)) }), maxBytes: 6},
		{name: "v2 slots", fids: gen(50000, func(int) uint64 { return synth.Fid(2, 1+rng.IntN(8), 1+rng.Uint64N(1<<20)) }), maxBytes: 5.6},
		{name: "many high parts", fids: gen(30000, func(int) uint64 { return uint64(rng.IntN(3000))<<50 | rng.Uint64N(1<<20) }), maxBytes: 8},
		{name: "extremes", fids: gen(3000, func(i int) uint64 {
			if i%2 == 0 {
				return math.MaxUint64 - rng.Uint64N(1<<16)
			}
			return rng.Uint64N(1 << 16)
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := buildFidIndex(tc.fids)
			if err != nil {
				t.Fatal(err)
			}
			checkIndex(t, &x, tc.fids, rng)
			per := float64(x.bytes()) / float64(max(1, len(tc.fids)))
			if plain := 8*len(tc.fids) + 24; x.bytes() > plain {
				t.Errorf("%d bytes, more than the plain layout's %d", x.bytes(), plain)
			}
			if tc.maxBytes > 0 && per > tc.maxBytes {
				t.Errorf("%.2f bytes per fid (low %d top %d, %d blocks), want at most %.2f", per, x.low, x.top, len(x.blocks), tc.maxBytes)
			}
			if tc.plain && (x.low != 64 || x.top != 64) {
				t.Errorf("layout low %d top %d, want the plain 64 64", x.low, x.top)
			}
			t.Logf("%d fids: low %d top %d, %d blocks, %.2f bytes per fid", len(tc.fids), x.low, x.top, len(x.blocks), per)
		})
	}
}

// TestFidIndexLayouts: every layout, not only the smallest, indexes a set correctly.
func TestFidIndexLayouts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fids := make([]uint64, 300)
	for i := range fids {
		fids[i] = uint64(rng.IntN(4))<<62 | uint64(rng.IntN(3))<<40 | rng.Uint64N(1<<12)
	}
	fids = append(fids, 0, math.MaxUint64)
	fids = sortedSet(fids)
	var s fidStats
	for _, f := range fids {
		if err := s.add(f); err != nil {
			t.Fatal(err)
		}
	}
	for low := range uint(65) {
		if low > maxRestBits && low != 64 {
			continue
		}
		for top := low; top <= 64 && top-low <= 12; top++ {
			b, err := newFidIndexBuilder(len(fids), fidLayout{low, top}, s.blocks(top))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fids {
				if err := b.add(f); err != nil {
					t.Fatalf("low %d top %d: %v", low, top, err)
				}
			}
			x, err := b.finish(len(fids))
			if err != nil {
				t.Fatalf("low %d top %d: %v", low, top, err)
			}
			checkIndex(t, &x, fids, rng)
		}
	}
}

// TestFidIndexOrder: fids out of order or repeated are refused, a repeat naming its fid.
func TestFidIndexOrder(t *testing.T) {
	if _, err := buildFidIndex([]uint64{1, 5, 3}); !errors.Is(err, errUnsorted) {
		t.Errorf("unsorted: %v, want errUnsorted", err)
	}
	_, err := buildFidIndex([]uint64{1, 5, 5, 7})
	if d, ok := errors.AsType[duplicateFidError](err); !ok || d.fid != 5 {
		t.Errorf("repeated: %v, want a duplicate of fid 5", err)
	}
	b, err := newFidIndexBuilder(3, fidLayout{64, 64}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.add(4); err != nil {
		t.Fatal(err)
	}
	if err := b.add(4); err == nil {
		t.Error("the builder took fid 4 twice")
	}
	if _, err := b.finish(3); err == nil {
		t.Error("finish took 1 fid for 3")
	}
}

// TestFidIndexDifferential: random sets of many shapes answer every lookup as a binary
// search over the sorted fids.
func TestFidIndexDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for k := range 200 {
		n := rng.IntN(2000)
		shift := uint(rng.IntN(64))   // fids share the bits above some position
		groups := 1 + rng.IntN(50)    // in this many high parts
		spread := uint(rng.IntN(65))  // with this many low bits spread
		base := rng.Uint64() << shift // within one wide region
		fids := make([]uint64, n)
		for i := range fids {
			f := base + uint64(rng.IntN(groups))<<shift
			if spread > 0 {
				f += rng.Uint64() >> (64 - spread)
			}
			fids[i] = f
		}
		fids = sortedSet(fids)
		x, err := buildFidIndex(fids)
		if err != nil {
			t.Fatalf("set %d: %v", k, err)
		}
		checkIndex(t, &x, fids, rng)
	}
}

// FuzzFidIndex: any set of fids is indexed and looked up as a sorted []uint64 is. The
// input is a byte s, then 8-byte words: fid = the first word's top s bits, then the top
// 64-s bits of the word (s = 0: the words themselves).
func FuzzFidIndex(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64([]byte{40}, 0), math.MaxUint64))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			data = []byte{0}
		}
		shift := uint(data[0] & 63)
		var fids []uint64
		var high uint64
		for i, b := 0, data[1:]; len(b) >= 8; i, b = i+1, b[8:] {
			v := binary.LittleEndian.Uint64(b)
			if i == 0 {
				high = v &^ (math.MaxUint64 >> shift)
			}
			fids = append(fids, high|v>>shift)
		}
		fids = sortedSet(fids)
		x, err := buildFidIndex(fids)
		if err != nil {
			t.Fatal(err)
		}
		checkIndex(t, &x, fids, rand.New(rand.NewPCG(uint64(len(data)), 1)))
		if plain := 8*len(fids) + 24; x.bytes() > plain {
			t.Errorf("%d bytes, more than the plain layout's %d", x.bytes(), plain)
		}
	})
}
