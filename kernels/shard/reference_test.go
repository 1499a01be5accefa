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

// refResult is what the naive reference computes.
type refResult struct {
	lists     [][]uint64 // by k = t*P+p
	splits    [][]int64
	fidOffset []uint64
	featOff   []int32
	nflOff    []uint32
	embSize   []int32
	v4        struct {
		fids                       []uint64
		splits                     []int64
		tableLen, shardLen, embLen []int32
	}
}

// reference implements data-path.md §3.4–3.6 as literally as possible, with maps.
func reference(cfg *featcfg.Config, in *Input, P, version int, unique bool) refResult {
	F, T := len(cfg.Features), len(cfg.Tables)
	var out refResult
	type fp struct{ f, p int }
	perFP := map[fp][]uint64{}       // (feature, shard) list
	posOf := map[fp]map[uint64]int{} // unique positions
	type occ struct{ f, p, pos int }
	var occs []occ
	e := 0
	for f := 0; f < F; f++ {
		fi := &in.Features[f]
		flag := uint32(0)
		if fi.Shared {
			flag = SharedBit
		}
		out.nflOff = append(out.nflOff, uint32(e)|flag)
		for en := 0; en < fi.Entries(in.Rows); en++ {
			out.featOff = append(out.featOff, int32(len(occs)))
			e++
			for _, v := range fi.Entry(en) {
				p := int(v % uint64(P))
				key := fp{f, p}
				if unique && v != ^uint64(0) {
					if posOf[key] == nil {
						posOf[key] = map[uint64]int{}
					}
					if pos, ok := posOf[key][v]; ok {
						occs = append(occs, occ{f, p, pos})
						continue
					}
					posOf[key][v] = len(perFP[key])
				}
				occs = append(occs, occ{f, p, len(perFP[key])})
				perFP[key] = append(perFP[key], v)
			}
		}
	}
	out.featOff = append(out.featOff, int32(len(occs)))
	out.nflOff = append(out.nflOff, uint32(e+1))
	// Lists, splits, bases.
	baseRow, baseEmb := map[fp]int{}, map[fp]int{}
	for t := 0; t < T; t++ {
		for p := 0; p < P; p++ {
			var list []uint64
			split := []int64{0}
			emb := 0
			for _, f := range cfg.Tables[t].Features {
				baseRow[fp{f, p}], baseEmb[fp{f, p}] = len(list), emb
				list = append(list, perFP[fp{f, p}]...)
				split = append(split, int64(len(list)))
				emb += len(perFP[fp{f, p}]) * cfg.Features[f].Dim
			}
			if list == nil {
				list = []uint64{}
			}
			out.lists = append(out.lists, list)
			out.splits = append(out.splits, split)
			out.embSize = append(out.embSize, int32(emb))
		}
	}
	v2base := make([]int, T)
	for t := 1; t < T; t++ {
		v2base[t] = v2base[t-1] + len(cfg.Tables[t-1].Features)*P
	}
	for _, o := range occs {
		ft := cfg.Features[o.f]
		var i1, i2 int
		switch version {
		case 1:
			i1, i2 = ft.Table*P+o.p, o.pos+baseRow[fp{o.f, o.p}]
		case 2:
			i1, i2 = v2base[ft.Table]+o.p*len(cfg.Tables[ft.Table].Features)+ft.InTable, o.pos
		default:
			i1, i2 = ft.Table*P+o.p, o.pos*ft.Dim+baseEmb[fp{o.f, o.p}]
		}
		out.fidOffset = append(out.fidOffset, uint64(i1)<<32|uint64(uint32(i2)))
	}
	out.v4.shardLen = make([]int32, P)
	for p := 0; p < P; p++ {
		for t := 0; t < T; t++ {
			k := t*P + p
			out.v4.fids = append(out.v4.fids, out.lists[k]...)
			out.v4.splits = append(out.v4.splits, out.splits[k]...)
			out.v4.tableLen = append(out.v4.tableLen, int32(len(out.lists[k])))
			out.v4.embLen = append(out.v4.embLen, out.embSize[k])
			out.v4.shardLen[p] += int32(len(out.lists[k]))
		}
	}
	return out
}

// randomCase builds a random config and input: several tables, shared and absent
// features, duplicates within and across features, fids of every bit pattern.
func randomCase(rng *rand.Rand) (*featcfg.Config, *Input) {
	nf := 1 + rng.IntN(12)
	nt := 1 + rng.IntN(4)
	fcs := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}}
	for f := 0; f < nf; f++ {
		dims := []int32{int32(1 + rng.IntN(4))}
		if rng.IntN(2) == 0 {
			dims = append(dims, int32(1+rng.IntN(8)))
		}
		fcs.FeatureConfigs[fmt.Sprintf("f%02d", rng.IntN(100))] = &examplepb.FeatureConfig{
			Table: fmt.Sprint("t", rng.IntN(nt)), SliceDims: dims}
	}
	cfg, err := featcfg.New(fcs)
	if err != nil {
		panic(err)
	}
	rows := rng.IntN(20)
	pool := make([]uint64, 1+rng.IntN(30))
	for i := range pool {
		pool[i] = rng.Uint64()
		if i == 0 && rng.IntN(4) == 0 {
			pool[i] = ^uint64(0)
		}
	}
	in := &Input{Rows: rows}
	for range cfg.Features {
		var fi FeatureInput
		switch rng.IntN(5) {
		case 0: // absent: no offsets
			fi.Shared = rng.IntN(2) == 0
		case 1:
			fi.Shared = true
		}
		if rng.IntN(5) > 0 || fi.Offsets != nil {
			n := fi.Entries(rows)
			fi.Offsets = []int32{int32(rng.IntN(3))}
			fi.Values = make([]uint64, fi.Offsets[0])
			for range n {
				for range rng.IntN(6) {
					fi.Values = append(fi.Values, pool[rng.IntN(len(pool))])
				}
				fi.Offsets = append(fi.Offsets, int32(len(fi.Values)))
			}
		}
		in.Features = append(in.Features, fi)
	}
	return cfg, in
}

// TestAgainstReference compares every output with the naive reference on random cases.
func TestAgainstReference(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range 400 {
		cfg, in := randomCase(rng)
		P := 1 + rng.IntN(7)
		for version := 1; version <= 5; version++ {
			for _, unique := range []bool{false, true} {
				want := reference(cfg, in, P, version, unique)
				for _, par := range []int{1, 2, 3} {
					s, err := New(cfg, Options{PS: P, Version: version, Unique: unique, Parallel: par})
					if err != nil {
						t.Fatal(err)
					}
					r, err := s.Shard(in)
					if err != nil {
						t.Fatal(err)
					}
					where := fmt.Sprintf("case %d v%d unique=%v P=%d parallel=%d", i, version, unique, P, par)
					check := func(name string, got, want any) {
						t.Helper()
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("%s: %s = %v, want %v", where, name, got, want)
						}
					}
					check("lists", lists(r), want.lists)
					check("row splits", splits(r), want.splits)
					check("fid_offset", append([]uint64{}, r.FidOffset...), append([]uint64{}, want.fidOffset...))
					check("feature_offset", slices.Clone(r.FeatureOffset), want.featOff)
					check("nfl_offset", slices.Clone(r.NflOffset), want.nflOff)
					check("emb_size", slices.Clone(r.EmbSize), want.embSize)
					if version == 4 {
						check("v4 fid_list", append([]uint64{}, r.Fids...), append([]uint64{}, want.v4.fids...))
						check("v4 row splits", append([]int64{}, r.RowSplits...), append([]int64{}, want.v4.splits...))
						check("v4 table lengths", slices.Clone(r.TableRowLength), want.v4.tableLen)
						check("v4 shard lengths", slices.Clone(r.ShardRowLength), want.v4.shardLen)
						check("v4 emb lengths", slices.Clone(r.EmbRowLength), want.v4.embLen)
					}
				}
			}
		}
	}
}
