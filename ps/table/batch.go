package table

import "math"

// blk is the number of fids whose index and row loads are issued together.
const blk = 32

// grouping holds a batch's fids sorted by shard: order[start[s]:start[s+1]] are the
// positions of shard s, in input order. Reused through Table.groupPool.
type grouping struct {
	hs    []uint64
	order []int32
	start [numShards + 1]int32
	sink  uint64 // keeps the touching loads alive
}

func (g *grouping) build(fids []int64) {
	n := len(fids)
	if cap(g.hs) < n {
		g.hs, g.order = make([]uint64, n), make([]int32, n)
	}
	g.hs, g.order = g.hs[:n], g.order[:n]
	var cnt [numShards]int32
	for i, f := range fids {
		h := mix(uint64(f))
		g.hs[i] = h
		cnt[h>>(64-shardBits)]++
	}
	g.start[0] = 0
	for s := range numShards {
		g.start[s+1] = g.start[s] + cnt[s]
	}
	pos := [numShards]int32(g.start[:numShards])
	for i, h := range g.hs {
		s := h >> (64 - shardBits)
		g.order[pos[s]] = int32(i)
		pos[s]++
	}
}

// touchKeys loads the home cell of every fid of order[lo:hi] in shard sh.
func (g *grouping) touchKeys(sh *shard, lo, hi int32) {
	if sh.idx.keys == nil {
		return
	}
	acc := g.sink
	for _, i := range g.order[lo:hi] {
		acc ^= sh.idx.keys[sh.idx.home(g.hs[i])]
	}
	g.sink = acc
}

// touchRows loads the first and last word of the rows of the present slots, in a tight
// loop so that the cache misses overlap.
func (g *grouping) touchRows(sh *shard, slots []uint32, oks []bool, stride int) {
	acc := g.sink
	for j, s := range slots {
		if oks[j] {
			c := sh.chunks[s>>chunkShift]
			o := int(s&(chunkRows-1)) * stride
			acc ^= uint64(math.Float32bits(c[o])) ^ uint64(math.Float32bits(c[o+stride-1]))
		}
	}
	g.sink = acc
}

// touchRowSlices is touchRows for rows already located (nil for absent).
func (g *grouping) touchRowSlices(rows [][]float32) {
	acc := g.sink
	for _, r := range rows {
		if len(r) > 0 {
			acc ^= uint64(math.Float32bits(r[0])) ^ uint64(math.Float32bits(r[len(r)-1]))
		}
	}
	g.sink = acc
}
