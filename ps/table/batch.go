package table

import (
	"iter"
	"math"
)

// blk is the number of fids whose index and row loads are issued together.
const blk = 32

// grouping holds a batch's fids sorted by shard: order[start[s]:start[s+1]] are the
// positions of shard s, in input order. Reused through Table.groupPool.
type grouping struct {
	hs    []uint64
	order []int32
	start [numShards + 1]int32
	hit   []bool             // LookupOrCreate's presence flags when the caller passes none
	made  map[int64]struct{} // fids LookupOrCreate created in this call; cleared per call
	sink  uint64             // keeps the touching loads alive
}

func (g *grouping) build(fids []int64) {
	n := len(fids)
	if cap(g.hs) < n {
		g.hs, g.order = make([]uint64, n), make([]int32, n)
	}
	g.hs, g.order = g.hs[:n], g.order[:n]
	var cnt [numShards]int32
	for i, f := range fids {
		h := hash(f)
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

// blocks yields, shard by shard, the positions of each shard in blocks of at most blk,
// with the index of the shard. The shard's lock (the write lock when write) is held across
// all its blocks, and the home cells of a block are loaded before it is yielded so that
// their cache misses overlap. Leaving the loop early releases the lock.
func (g *grouping) blocks(t *Table, write bool) iter.Seq2[int, []int32] {
	return func(yield func(int, []int32) bool) {
		for si := range numShards {
			lo, hi := g.start[si], g.start[si+1]
			if lo == hi {
				continue
			}
			sh := &t.shards[si]
			if write {
				sh.mu.Lock()
			} else {
				sh.mu.RLock()
			}
			more := true
			for b := lo; more && b < hi; b += blk {
				e := min(b+blk, hi)
				g.touchKeys(sh, b, e)
				more = yield(si, g.order[b:e])
			}
			if write {
				sh.mu.Unlock()
			} else {
				sh.mu.RUnlock()
			}
			if !more {
				return
			}
		}
	}
}

// probeCells is how far past its home cell touchKeys loads a key's probe sequence. The
// index probes linearly at a load of 0.53–0.8, where an absent key reads up to 13 cells on
// average, and a 64-byte line holds about five 12-byte cells.
const probeCells = 10

// touchKeys loads the first lines of the probe sequence of every fid of order[lo:hi] in
// shard sh: its home cell and the cells probeCells/2 and probeCells after it. Loading the
// home cell alone left the later probes to miss one after another: with the next two
// lines, find went from 6.5–7.0 to 7.5–8.6 M/s and Adagrad apply from 4.1–4.3 to 4.9–5.4
// M/s at 10^7 entries (BenchmarkFind, BenchmarkApplyAdagrad, old and new interleaved).
func (g *grouping) touchKeys(sh *shard, lo, hi int32) {
	cells := sh.idx.cells
	if cells == nil {
		return
	}
	last := uint64(len(cells) - 1)
	acc := g.sink
	for _, i := range g.order[lo:hi] {
		h := sh.idx.home(g.hs[i])
		acc ^= uint64(cells[h].lo) ^ uint64(cells[min(h+probeCells/2, last)].lo) ^ uint64(cells[min(h+probeCells, last)].lo)
	}
	g.sink = acc
}

// lineFloats is the floats in a 64-byte cache line.
const lineFloats = 16

// touchRows loads one word of every cache line of the located rows (nil for absent), in a
// tight loop so that all their misses overlap. A dim-32 Adagrad row spans five lines, and
// with only its first and last word loaded here the optimizer's step missed on the middle
// ones one after another: touching every line made Apply 1.4× faster
// (BenchmarkApplyAdagrad, old and new interleaved) and left Find unchanged.
func (g *grouping) touchRows(rows [][]float32) {
	acc := g.sink
	for _, r := range rows {
		if len(r) == 0 {
			continue
		}
		for i := 0; i < len(r); i += lineFloats {
			acc ^= uint64(math.Float32bits(r[i]))
		}
		acc ^= uint64(math.Float32bits(r[len(r)-1]))
	}
	g.sink = acc
}
