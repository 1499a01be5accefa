package reduce

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

// Fuzz targets: random shapes, ids and (often invalid) indices. Every op must return
// either an error from the package's sentinels or outputs that agree with the naive
// references; none may panic.

// fz decodes fuzz bytes into small numbers; it yields zeros once exhausted.
type fz struct{ b []byte }

func (f *fz) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

// intn returns a value in [0, n).
func (f *fz) intn(n int) int {
	if n <= 0 {
		return 0
	}
	return int(binary.LittleEndian.Uint16([]byte{f.byte(), f.byte()})) % n
}

// id returns an id from a small range, occasionally negative or with high bits.
func (f *fz) id() int64 {
	v := int64(f.byte() % 16)
	switch f.byte() % 8 {
	case 0:
		v = -v
	case 1:
		v |= math.MinInt64
	}
	return v
}

// index returns an index meant for [0, n) that is sometimes out of range.
func (f *fz) index(n int) int64 {
	if f.byte()%32 == 0 {
		return int64(f.intn(3*n+3)) - int64(n+1)
	}
	return int64(f.intn(n))
}

func (f *fz) ids(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = f.id()
	}
	return out
}

func (f *fz) floats(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(int8(f.byte())) / 8
	}
	return out
}

// splits returns row splits over n values, sometimes malformed.
func (f *fz) splits(n int) []int64 {
	s := []int64{0}
	for v := 0; v < n; {
		v = min(v+f.intn(4), n)
		s = append(s, int64(v))
		if len(s) > n+8 {
			break
		}
	}
	if f.byte()%16 == 0 && len(s) > 0 {
		s[f.intn(len(s))] += int64(f.intn(5)) - 2
	}
	return s
}

func knownErr(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrShape) && !errors.Is(err, ErrRange) && !errors.Is(err, ErrUnmappedID) && !errors.Is(err, ErrOverflow) {
		t.Fatalf("unexpected error kind: %v", err)
	}
}

var fuzzSeeds = [][]byte{
	{},
	{3, 0, 2, 0, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
	[]byte("split_by_indices reorder fused gather unique fill reduce"),
	{255, 255, 255, 255, 0, 0, 0, 0, 32, 64, 128, 1, 2, 3},
}

func FuzzSplit(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		z := &fz{data}
		n, dim, ns := z.intn(200), z.intn(4), z.intn(6)
		idx := make([]int64, n)
		for i := range idx {
			idx[i] = z.index(ns)
		}
		x := z.floats(n*dim + z.intn(2) - z.intn(2)*min(n*dim, 1))
		sp, err := SplitByIndices(idx, x, dim, ns)
		knownErr(t, err)
		if err == nil {
			eq(t, "split", sp, naiveSplit(idx, x, dim, ns))
			back := make([]float32, len(x))
			if err := SplitByIndicesGrad(back, idx, sp, dim); err != nil {
				t.Fatal(err)
			}
			eq(t, "grad∘split", back, x)
		}
		num := Ragged[int64]{Values: z.ids(n), RowSplits: z.splits(n)}
		rs, pos, err := RaggedSplitByIndices(idx, num, ns)
		knownErr(t, err)
		if err == nil {
			wv, wp := naiveRaggedSplit(idx, num, ns)
			for s := range rs {
				eq(t, "ragged values", raggedRows(rs[s]), wv[s])
				eq(t, "ragged pos", raggedRows(pos[s]), wp[s])
			}
		}
		sh := make([]int32, n)
		for i := range sh {
			sh[i] = int32(z.index(ns))
		}
		ids := z.ids(n)
		out, sizes, err := ReorderByIndices(ids, 1, sh, ns)
		knownErr(t, err)
		if err == nil {
			wo, ws := naiveReorder(ids, sh, ns)
			eq(t, "reorder", out, wo)
			eq(t, "reorder sizes", sizes, ws)
		}
	})
}

func FuzzFusedReorder(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	var dst FusedReorder[int64]
	f.Fuzz(func(t *testing.T, data []byte) {
		z := &fz{data}
		M := z.intn(5)
		S := z.intn(10)
		rank0 := z.byte()%2 == 0
		inputs := make([][]int64, M)
		dims := make([]int, M+z.intn(2)-z.intn(2)*min(M, 1))
		for m := range inputs {
			inputs[m] = z.ids(z.intn(100))
		}
		for i := range dims {
			dims[i] = z.intn(5)
			if z.byte()%64 == 0 {
				dims[i] = -1
			}
		}
		err := FusedReorderByIndices(&dst, inputs, S, dims, rank0)
		knownErr(t, err)
		if err != nil {
			return
		}
		w := naiveFused(inputs, S, dims, rank0)
		eq(t, "output", dst.Output, w.output)
		eq(t, "shard sizes", dst.ShardSizes, w.sizes)
		eq(t, "slot sizes", dst.ShardedSlotSizes, w.slotSizes)
		eq(t, "fused_emb_offset", dst.FusedEmbOffset, w.fusedEmbOf)
		if rank0 && S >= 2 && dst.ShardSizes[0] != 0 {
			t.Fatalf("rank0Empty but shard 0 has %d ids", dst.ShardSizes[0])
		}
		// A fused buffer laid out like Output, where each id's row is filled with the
		// id, must gather back to every occurrence's own id.
		E := 0
		for b, c := range dst.ShardedSlotSizes {
			E += int(c) * dims[b%M]
		}
		fused := make([]float32, E)
		p, o := 0, 0
		for n := 0; n < S; n++ {
			for m := 0; m < M; m++ {
				for range dst.ShardedSlotSizes[n*M+m] {
					for j := 0; j < dims[m]; j++ {
						fused[o+j] = float32(dst.Output[p] % 1000)
					}
					p++
					o += dims[m]
				}
			}
		}
		offs := make([][]int32, M)
		outs := make([][]float32, M)
		off := 0
		for m, in := range inputs {
			offs[m] = dst.FusedEmbOffset[off : off+len(in)]
			outs[m] = make([]float32, len(in)*dims[m])
			off += len(in)
		}
		if err := FusedGatherEmbeddingsByInput(outs, fused, offs, dims); err != nil {
			t.Fatal(err)
		}
		for m, in := range inputs {
			for j, v := range in {
				for k := 0; k < dims[m]; k++ {
					if outs[m][j*dims[m]+k] != float32(v%1000) {
						t.Fatalf("list %d occurrence %d: gathered %v, want id %d", m, j, outs[m][j*dims[m]+k], v)
					}
				}
			}
		}
		g := make([]float32, E)
		knownErr(t, FusedGatherEmbeddingsByInputGrad(g, outs, offs, dims, 2))
	})
}

func FuzzGather(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	var idx Index[int64]
	f.Fuzz(func(t *testing.T, data []byte) {
		z := &fz{data}
		L, dim := z.intn(4), z.intn(4)
		lists := make([][]int64, L)
		embs := make([][]float32, L+z.intn(2)-z.intn(2)*min(L, 1))
		for l := range lists {
			lists[l] = z.ids(z.intn(50))
		}
		for l := range embs {
			n := 0
			if l < L {
				n = len(lists[l])
			}
			embs[l] = z.floats(n*dim + z.intn(2) - z.intn(2)*min(n*dim, 1))
		}
		if err := idx.Build(lists...); err != nil {
			t.Fatal(err)
		}
		input := z.ids(z.intn(60)) // ids drawn independently: some are unmapped
		out := make([]float32, len(input)*dim)
		err := MapIDToEmbedding(out, &idx, embs, dim, input)
		knownErr(t, err)
		if err == nil {
			for k, id := range input {
				_, l, p, ok := naiveFirst(lists, id)
				if !ok {
					t.Fatalf("id %d mapped but absent", id)
				}
				eq(t, "map row", out[k*dim:(k+1)*dim], embs[l][p*dim:(p+1)*dim])
			}
		} else if errors.Is(err, ErrUnmappedID) {
			missing := false
			for _, id := range input {
				if _, _, _, ok := naiveFirst(lists, id); !ok {
					missing = true
				}
			}
			if !missing {
				t.Fatalf("reported unmapped but every id is present: %v", err)
			}
		}
		grads := z.floats(len(out))
		eg := make([][]float32, len(embs))
		for l := range eg {
			eg[l] = make([]float32, len(embs[l]))
		}
		knownErr(t, MapIDToEmbeddingGrad(eg, &idx, input, grads, dim))

		flatEmb := slices.Concat(embs...)
		mapping := make([]int64, len(input))
		err = GatherEmbeddingsByInput(out, mapping, &idx, flatEmb, dim, input)
		knownErr(t, err)
		if err == nil {
			for k, id := range input {
				fl, _, _, _ := naiveFirst(lists, id)
				if mapping[k] != int64(fl) {
					t.Fatalf("mapping[%d] = %d, want %d", k, mapping[k], fl)
				}
			}
		}
		for i := range mapping {
			if z.byte()%16 == 0 {
				mapping[i] = z.index(idx.Len())
			}
		}
		g := make([]float32, idx.Len()*dim)
		knownErr(t, GatherEmbeddingsByInputGrad(g, grads, mapping, idx.Len(), dim))
	})
}

func FuzzUniqueFill(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	var u UniqueKeys[int64]
	f.Fuzz(func(t *testing.T, data []byte) {
		z := &fz{data}
		n := z.intn(100)
		key := Ragged[int64]{Values: z.ids(n), RowSplits: z.splits(n)}
		dims := make([]int, max(len(key.RowSplits)-1+z.intn(2)-z.intn(2), 0))
		for i := range dims {
			dims[i] = z.intn(4)
		}
		err := UniqueKeyWithValueAndOffset(&u, key, dims)
		knownErr(t, err)
		if err != nil {
			return
		}
		wu, _, wl := naiveUnique(key, dims)
		eq(t, "unique", raggedRows(u.Keys), wu)
		eq(t, "buffer len", u.BufferLen, wl)
		// pos: the unique keys per row, some replaced by junk; buffer sometimes short.
		pos := Ragged[int64]{Values: slices.Clone(u.Keys.Values), RowSplits: u.Keys.RowSplits}
		for i := range pos.Values {
			pos.Values[i] = int64(i)
			if z.byte()%32 == 0 {
				pos.Values[i] = z.index(len(pos.Values))
			}
		}
		need := 0
		for r := range dims {
			need += int(pos.RowSplits[r+1]-pos.RowSplits[r]) * dims[r]
		}
		value := z.floats(need + z.intn(2) - z.intn(2)*min(need, 1))
		buf := make([]float32, max(u.BufferLen-z.intn(2), 0))
		before := slices.Clone(buf)
		err = FillWithOffsetMap(buf, pos, value, u.ValueOffset, dims)
		knownErr(t, err)
		if err != nil {
			eq(t, "buffer untouched on error", buf, before)
		}
		g := make([]float32, len(value))
		knownErr(t, FillWithOffsetMapGrad(g, pos, z.floats(len(buf)), u.ValueOffset, dims))
		// An arbitrary offset map must not crash either.
		m := OffsetMap{Offsets: z.ids(z.intn(10)), Splits: z.splits(z.intn(10))}
		knownErr(t, FillWithOffsetMap(buf, pos, value, m, dims))
	})
}

func FuzzReduce(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		z := &fz{data}
		n, rows, dim := z.intn(100), z.intn(10), z.intn(4)
		rowIDs := make([]int64, n)
		for i := range rowIDs {
			rowIDs[i] = z.index(rows)
		}
		vals := z.floats(n*dim + z.intn(2) - z.intn(2)*min(n*dim, 1))
		out := make([]float32, rows*dim)
		gx := make([]float32, len(vals))
		g := z.floats(rows * dim)
		for _, kind := range []string{"sum", "mean", "sqrtn"} {
			var err error
			switch kind {
			case "sum":
				err = ReduceSum(out, rowIDs, vals, rows, dim)
				knownErr(t, ReduceSumGrad(gx, rowIDs, g, rows, dim))
			case "mean":
				err = ReduceMean(out, rowIDs, vals, rows, dim)
				knownErr(t, ReduceMeanGrad(gx, rowIDs, g, rows, dim))
			case "sqrtn":
				err = ReduceSqrtn(out, rowIDs, vals, rows, dim)
				knownErr(t, ReduceSqrtnGrad(gx, rowIDs, vals, g, rows, dim))
			}
			knownErr(t, err)
			if err == nil {
				eq(t, kind, out, naiveReduce(kind, rowIDs, vals, rows, dim))
				for _, v := range out {
					if math.IsNaN(float64(v)) {
						t.Fatalf("%s produced NaN", kind)
					}
				}
			}
		}
		split := []int{z.intn(3), z.intn(3)}
		outs := [][]float32{make([]float32, rows*split[0]), make([]float32, rows*split[1])}
		knownErr(t, FusedReduceSumAndSplit(outs, rowIDs, z.floats(n*(split[0]+split[1])), rows, split))
		knownErr(t, FusedReduceSumAndSplitGrad(make([]float32, n*(split[0]+split[1])), rowIDs, outs, rows, split))

		splits := z.splits(n)
		seg := make([]float32, max(len(splits)-1, 0)*dim)
		knownErr(t, SegmentSum(seg, splits, vals, dim))
		knownErr(t, SegmentSumGrad(gx, splits, seg, dim))
		rid, err := ValueRowIDs(nil, splits)
		knownErr(t, err)
		if err == nil && int64(len(rid)) != splits[len(splits)-1] {
			t.Fatalf("%d row ids for splits ending at %d", len(rid), splits[len(splits)-1])
		}
		sizes := make([]int32, z.intn(4))
		for i := range sizes {
			sizes[i] = int32(z.intn(5))
		}
		merged, err := NormalizeMergedSplit(nil, splits, sizes)
		knownErr(t, err)
		if err == nil && len(merged) != len(splits)-len(sizes)+1 {
			t.Fatalf("merged length %d, want %d", len(merged), len(splits)-len(sizes)+1)
		}
	})
}

func FuzzAggregate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	var a Aggregated[int64]
	f.Fuzz(func(t *testing.T, data []byte) {
		z := &fz{data}
		n, dim := z.intn(200), z.intn(5)
		ids := z.ids(n)
		grads := z.floats(n*dim + z.intn(2) - z.intn(2)*min(n*dim, 1))
		err := AggregateGrads(&a, ids, grads, dim)
		knownErr(t, err)
		if err == nil {
			dims := make([]int, n)
			for i := range dims {
				dims[i] = dim
			}
			wu, wr, wc := naiveAggregate(ids, grads, dims)
			eq(t, "ids", a.IDs, wu)
			eq(t, "counts", a.Counts, wc)
			eq(t, "grads", a.Grads, slices.Concat(wr...))
		}
		dims := make([]int, n+z.intn(2)-z.intn(2)*min(n, 1))
		total := 0
		for i := range dims {
			if n > 0 {
				dims[i] = int(uint64(ids[min(i, n-1)]) % 4)
			}
			if z.byte()%32 == 0 {
				dims[i] = z.intn(4) - 1
			}
			total += max(dims[i], 0)
		}
		rg := z.floats(total + z.intn(2) - z.intn(2)*min(total, 1))
		err = AggregateGradsRagged(&a, ids, rg, dims)
		knownErr(t, err)
		if err == nil {
			wu, wr, _ := naiveAggregate(ids, rg, dims)
			eq(t, "ragged ids", a.IDs, wu)
			for u := range wu {
				eq(t, "ragged row", a.Row(u), wr[u])
			}
		}
	})
}
