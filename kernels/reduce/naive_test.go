package reduce

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Naive reference implementations (plain loops, Go maps, linear searches) and the
// cross-checks of the kernels against them on sizes 0, 1, 63, 64, 65 and random.

var crossSizes = []int{0, 1, 63, 64, 65, -1} // -1: random

func newRNG(t testing.TB) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x5eed))
}

func sizeOf(rng *rand.Rand, n int) int {
	if n < 0 {
		return 2 + rng.IntN(1500)
	}
	return n
}

func randFloats(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

// randIDs draws n ids from a range small enough for duplicates, sometimes negative
// or with high bits set.
func randIDs(rng *rand.Rand, n int) []int64 {
	span := int64(1 + rng.IntN(2*n+2))
	mode := rng.IntN(3)
	out := make([]int64, n)
	for i := range out {
		v := rng.Int64N(span)
		switch mode {
		case 1:
			v = -v
		case 2:
			v |= int64(rng.IntN(4)) << 60
		}
		out[i] = v
	}
	return out
}

func naiveSplit[T any](indices []int64, x []T, dim, n int) [][]T {
	out := make([][]T, n)
	for s := 0; s < n; s++ {
		out[s] = []T{}
		for r, i := range indices {
			if int(i) == s {
				out[s] = append(out[s], x[r*dim:(r+1)*dim]...)
			}
		}
	}
	return out
}

func naiveRaggedSplit(indices []int64, num Ragged[int64], n int) (vals, pos [][][]int64) {
	vals = make([][][]int64, n)
	pos = make([][][]int64, n)
	for s := 0; s < n; s++ {
		for r := 0; r < num.Rows(); r++ {
			var vr, pr []int64
			for j := num.RowSplits[r]; j < num.RowSplits[r+1]; j++ {
				if int(indices[j]) == s {
					vr = append(vr, num.Values[j])
					pr = append(pr, j)
				}
			}
			vals[s] = append(vals[s], vr)
			pos[s] = append(pos[s], pr)
		}
	}
	return vals, pos
}

func raggedRows[T any](r Ragged[T]) [][]T {
	var out [][]T
	for i := 0; i < r.Rows(); i++ {
		out = append(out, r.Row(i))
	}
	return out
}

func naiveReorder(x []int64, shards []int32, n int) ([]int64, []int32) {
	seen := map[int64]bool{}
	per := make([][]int64, n)
	for i, v := range x {
		if !seen[v] {
			seen[v] = true
			per[shards[i]] = append(per[shards[i]], v)
		}
	}
	var out []int64
	sizes := make([]int32, n)
	for s, p := range per {
		slices.Reverse(p)
		out = append(out, p...)
		sizes[s] = int32(len(p))
	}
	return out, sizes
}

type fusedOut struct {
	output                              []int64
	sizes, slotSizes, offSz, fusedEmbOf []int32
}

func naiveFused(inputs [][]int64, S int, dims []int, rank0 bool) fusedOut {
	M := len(inputs)
	r := 0
	if rank0 {
		r = 1
	}
	shard := func(v int64) int { return int(uint64(v)%uint64(S-r)) + r }
	bucket := make([][][]int64, S) // [n][m]
	for n := range bucket {
		bucket[n] = make([][]int64, M)
	}
	for m, in := range inputs {
		seen := map[int64]bool{}
		for _, v := range in {
			if !seen[v] {
				seen[v] = true
				bucket[shard(v)][m] = append(bucket[shard(v)][m], v)
			}
		}
	}
	var o fusedOut
	o.output = []int64{}
	o.sizes = make([]int32, S)
	base := make([][]int, S)
	acc := 0
	for n := 0; n < S; n++ {
		base[n] = make([]int, M)
		for m := 0; m < M; m++ {
			o.output = append(o.output, bucket[n][m]...)
			o.sizes[n] += int32(len(bucket[n][m]))
			o.slotSizes = append(o.slotSizes, int32(len(bucket[n][m])))
			base[n][m] = acc
			acc += len(bucket[n][m]) * dims[m]
		}
	}
	for m, in := range inputs {
		o.offSz = append(o.offSz, int32(len(in)))
		for _, v := range in {
			n := shard(v)
			p := slices.Index(bucket[n][m], v)
			o.fusedEmbOf = append(o.fusedEmbOf, int32(base[n][m]+p*dims[m]))
		}
	}
	return o
}

// naiveFirst finds the first (list, position) of id by linear search.
func naiveFirst(lists [][]int64, id int64) (flat int, list, pos int, ok bool) {
	for l, ids := range lists {
		for p, v := range ids {
			if v == id {
				return flat + p, l, p, true
			}
		}
		flat += len(ids)
	}
	return 0, 0, 0, false
}

func naiveUnique(key Ragged[int64], dims []int) (uniq [][]int64, offs [][][]int64, bufLen int) {
	off := 0
	for r := 0; r < key.Rows(); r++ {
		var ur []int64
		var or [][]int64
		for _, v := range key.Row(r) {
			i := slices.Index(ur, v)
			if i < 0 {
				ur = append(ur, v)
				or = append(or, nil)
				i = len(ur) - 1
			}
			or[i] = append(or[i], int64(off))
			off += dims[r]
		}
		uniq = append(uniq, ur)
		offs = append(offs, or)
	}
	return uniq, offs, off
}

func naiveAggregate(ids []int64, grads []float32, dims []int) (uids []int64, rows [][]float32, counts []int32) {
	at := map[int64]int{}
	r := 0
	for i, id := range ids {
		g := grads[r : r+dims[i]]
		r += dims[i]
		u, ok := at[id]
		if !ok {
			at[id] = len(uids)
			uids = append(uids, id)
			rows = append(rows, slices.Clone(g))
			counts = append(counts, 1)
			continue
		}
		counts[u]++
		for j := range g {
			rows[u][j] += g[j]
		}
	}
	return uids, rows, counts
}

// naiveReduce computes sum, mean or sqrtn row by row, scanning all values per row.
func naiveReduce(kind string, rowIDs []int64, values []float32, rows, dim int) []float32 {
	out := make([]float32, rows*dim)
	for r := 0; r < rows; r++ {
		for j := 0; j < dim; j++ {
			var s float32
			c := 0
			for i, ri := range rowIDs {
				if int(ri) != r {
					continue
				}
				x := values[i*dim+j]
				if kind == "sqrtn" {
					s += x * x
				} else {
					s += x
				}
				c++
			}
			switch kind {
			case "mean":
				if c > 1 {
					s *= float32(1 / float64(c))
				}
			case "sqrtn":
				s = sqrt32(s)
			}
			out[r*dim+j] = s
		}
	}
	return out
}

func TestCrossSplitAndReorder(t *testing.T) {
	rng := newRNG(t)
	for _, sz := range crossSizes {
		for rep := 0; rep < 4; rep++ {
			n := sizeOf(rng, sz)
			dim := 1 + rng.IntN(4)
			ns := 1 + rng.IntN(7)
			idx := make([]int64, n)
			for i := range idx {
				idx[i] = rng.Int64N(int64(ns))
			}
			x := randFloats(rng, n*dim)
			got, err := SplitByIndices(idx, x, dim, ns)
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "split", got, naiveSplit(idx, x, dim, ns))
			back := make([]float32, len(x))
			if err := SplitByIndicesGrad(back, idx, got, dim); err != nil {
				t.Fatal(err)
			}
			eq(t, "grad∘split = id", back, x)

			// Ragged split over random rows.
			num := Ragged[int64]{Values: randIDs(rng, n), RowSplits: randSplits(rng, n)}
			sp, pos, err := RaggedSplitByIndices(idx, num, ns)
			if err != nil {
				t.Fatal(err)
			}
			wv, wp := naiveRaggedSplit(idx, num, ns)
			for s := 0; s < ns; s++ {
				eq(t, "ragged values", raggedRows(sp[s]), wv[s])
				eq(t, "ragged pos", raggedRows(pos[s]), wp[s])
			}

			ids := randIDs(rng, n)
			sh := make([]int32, n)
			if err := ShardIDs(sh, ids, ns); err != nil {
				t.Fatal(err)
			}
			out, sizes, err := ReorderByIndices(ids, 1, sh, ns)
			if err != nil {
				t.Fatal(err)
			}
			wo, ws := naiveReorder(ids, sh, ns)
			eq(t, "reorder", out, wo)
			eq(t, "reorder sizes", sizes, ws)
		}
	}
}

// randSplits returns random valid row splits over n values.
func randSplits(rng *rand.Rand, n int) []int64 {
	s := []int64{0}
	for v := 0; v < n; {
		step := rng.IntN(4)
		if v+step > n {
			step = n - v
		}
		v += step
		s = append(s, int64(v))
	}
	for rng.IntN(3) == 0 {
		s = append(s, int64(n)) // trailing empty rows
	}
	return s
}

func TestCrossFusedReorder(t *testing.T) {
	rng := newRNG(t)
	var dst FusedReorder[int64] // reused: stale scratch must not leak into results
	for _, sz := range crossSizes {
		for rep := 0; rep < 6; rep++ {
			M := rng.IntN(5)
			inputs := make([][]int64, M)
			dims := make([]int, M)
			for m := range inputs {
				inputs[m] = randIDs(rng, sizeOf(rng, sz))
				dims[m] = rng.IntN(6)
			}
			S := 1 + rng.IntN(9)
			rank0 := S >= 2 && rng.IntN(2) == 0
			if err := FusedReorderByIndices(&dst, inputs, S, dims, rank0); err != nil {
				t.Fatal(err)
			}
			w := naiveFused(inputs, S, dims, rank0)
			eq(t, "output", dst.Output, w.output)
			eq(t, "shard sizes", dst.ShardSizes, w.sizes)
			eq(t, "slot sizes", dst.ShardedSlotSizes, w.slotSizes)
			eq(t, "emb_offset_sz", dst.EmbOffsetSz, w.offSz)
			eq(t, "fused_emb_offset", dst.FusedEmbOffset, w.fusedEmbOf)
		}
	}
}

func TestCrossGather(t *testing.T) {
	rng := newRNG(t)
	var idx Index[int64]
	for _, sz := range crossSizes {
		for rep := 0; rep < 4; rep++ {
			L := 1 + rng.IntN(4)
			dim := rng.IntN(5)
			lists := make([][]int64, L)
			embs := make([][]float32, L)
			var all []int64
			for l := range lists {
				lists[l] = randIDs(rng, sizeOf(rng, sz)/L)
				embs[l] = randFloats(rng, len(lists[l])*dim)
				all = append(all, lists[l]...)
			}
			if err := idx.Build(lists...); err != nil {
				t.Fatal(err)
			}
			if idx.Len() != len(all) {
				t.Fatalf("Len %d want %d", idx.Len(), len(all))
			}
			var input []int64
			if len(all) > 0 {
				input = make([]int64, sizeOf(rng, sz))
				for i := range input {
					input[i] = all[rng.IntN(len(all))]
				}
			}
			out := make([]float32, len(input)*dim)
			if err := MapIDToEmbedding(out, &idx, embs, dim, input); err != nil {
				t.Fatal(err)
			}
			grads := randFloats(rng, len(input)*dim)
			eg := make([][]float32, L)
			want := make([][]float32, L)
			for l := range eg {
				eg[l] = make([]float32, len(embs[l]))
				want[l] = make([]float32, len(embs[l]))
			}
			if err := MapIDToEmbeddingGrad(eg, &idx, input, grads, dim); err != nil {
				t.Fatal(err)
			}
			for k, id := range input {
				_, l, p, ok := naiveFirst(lists, id)
				if !ok {
					t.Fatal("naiveFirst")
				}
				eq(t, "map row", out[k*dim:(k+1)*dim], embs[l][p*dim:(p+1)*dim])
				for j := 0; j < dim; j++ {
					want[l][p*dim+j] += grads[k*dim+j]
				}
			}
			eq(t, "map grad", eg, want)

			// Gather over the concatenated lists.
			flatEmb := slices.Concat(embs...)
			mapping := make([]int64, len(input))
			if err := GatherEmbeddingsByInput(out, mapping, &idx, flatEmb, dim, input); err != nil {
				t.Fatal(err)
			}
			wg := make([]float32, len(flatEmb))
			for k, id := range input {
				f, _, _, _ := naiveFirst(lists, id)
				if mapping[k] != int64(f) {
					t.Fatalf("mapping[%d] = %d, want %d", k, mapping[k], f)
				}
				eq(t, "gather row", out[k*dim:(k+1)*dim], flatEmb[f*dim:(f+1)*dim])
				for j := 0; j < dim; j++ {
					wg[f*dim+j] += grads[k*dim+j]
				}
			}
			g := make([]float32, len(flatEmb))
			if err := GatherEmbeddingsByInputGrad(g, grads, mapping, len(all), dim); err != nil {
				t.Fatal(err)
			}
			eq(t, "gather grad", g, wg)
		}
	}
}

func TestCrossUniqueAndFill(t *testing.T) {
	rng := newRNG(t)
	var u UniqueKeys[int64]
	for _, sz := range crossSizes {
		for rep := 0; rep < 4; rep++ {
			n := sizeOf(rng, sz)
			key := Ragged[int64]{Values: randIDs(rng, n), RowSplits: randSplits(rng, n)}
			dims := make([]int, key.Rows())
			for i := range dims {
				dims[i] = rng.IntN(4)
			}
			if err := UniqueKeyWithValueAndOffset(&u, key, dims); err != nil {
				t.Fatal(err)
			}
			wu, wo, wl := naiveUnique(key, dims)
			eq(t, "unique", raggedRows(u.Keys), wu)
			var gotOffs [][][]int64
			k := 0
			for r := 0; r < u.Keys.Rows(); r++ {
				var row [][]int64
				for range u.Keys.Row(r) {
					row = append(row, u.ValueOffset.Offsets[u.ValueOffset.Splits[k]:u.ValueOffset.Splits[k+1]])
					k++
				}
				gotOffs = append(gotOffs, row)
			}
			eq(t, "offsets", gotOffs, wo)
			eq(t, "buffer len", u.BufferLen, wl)

			// Fill every unique key once (pos = each row's unique keys, shuffled within
			// the row), then every occurrence must hold its key's chunk.
			var pos []int64
			posSplits := []int64{0}
			for r := 0; r < u.Keys.Rows(); r++ {
				lo, hi := u.Keys.RowSplits[r], u.Keys.RowSplits[r+1]
				row := make([]int64, 0, hi-lo)
				for p := lo; p < hi; p++ {
					row = append(row, p)
				}
				rng.Shuffle(len(row), func(i, j int) { row[i], row[j] = row[j], row[i] })
				pos = append(pos, row...)
				posSplits = append(posSplits, int64(len(pos)))
			}
			pr := Ragged[int64]{Values: pos, RowSplits: posSplits}
			need := 0
			for r := range dims {
				need += int(posSplits[r+1]-posSplits[r]) * dims[r]
			}
			value := randFloats(rng, need)
			buf := make([]float32, u.BufferLen)
			if err := FillWithOffsetMap(buf, pr, value, u.ValueOffset, dims); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, u.BufferLen)
			v := 0
			for r := range dims {
				for _, p := range pos[posSplits[r]:posSplits[r+1]] {
					for _, o := range u.ValueOffset.Offsets[u.ValueOffset.Splits[p]:u.ValueOffset.Splits[p+1]] {
						copy(want[o:int(o)+dims[r]], value[v:v+dims[r]])
					}
					v += dims[r]
				}
			}
			eq(t, "fill", buf, want)
		}
	}
}

func TestCrossReduce(t *testing.T) {
	rng := newRNG(t)
	for _, sz := range crossSizes {
		for rep := 0; rep < 4; rep++ {
			n := sizeOf(rng, sz)
			rows := 1 + rng.IntN(n/2+2)
			dim := rng.IntN(5)
			rowIDs := make([]int64, n)
			for i := range rowIDs {
				rowIDs[i] = rng.Int64N(int64(rows))
			}
			vals := randFloats(rng, n*dim)
			out := make([]float32, rows*dim)
			for _, kind := range []string{"sum", "mean", "sqrtn"} {
				var err error
				switch kind {
				case "sum":
					err = ReduceSum(out, rowIDs, vals, rows, dim)
				case "mean":
					err = ReduceMean(out, rowIDs, vals, rows, dim)
				case "sqrtn":
					err = ReduceSqrtn(out, rowIDs, vals, rows, dim)
				}
				if err != nil {
					t.Fatal(err)
				}
				eq(t, kind, out, naiveReduce(kind, rowIDs, vals, rows, dim))
			}
			// Segment sum over sorted row ids equals reduce_sum.
			sorted := slices.Clone(rowIDs)
			slices.Sort(sorted)
			splits := make([]int64, rows+1)
			for _, r := range sorted {
				splits[r+1]++
			}
			for r := 0; r < rows; r++ {
				splits[r+1] += splits[r]
			}
			if err := SegmentSum(out, splits, vals, dim); err != nil {
				t.Fatal(err)
			}
			eq(t, "segment sum", out, naiveReduce("sum", sorted, vals, rows, dim))
			rid, err := ValueRowIDs(nil, splits)
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "value rowids", rid, sorted)
			// Fused reduce and split equals reduce_sum sliced by columns.
			split := []int{rng.IntN(3), rng.IntN(3)}
			w := split[0] + split[1]
			v2 := randFloats(rng, n*w)
			outs := [][]float32{make([]float32, rows*split[0]), make([]float32, rows*split[1])}
			if err := FusedReduceSumAndSplit(outs, rowIDs, v2, rows, split); err != nil {
				t.Fatal(err)
			}
			full := naiveReduce("sum", rowIDs, v2, rows, w)
			for r := 0; r < rows; r++ {
				eq(t, "fused split 0", outs[0][r*split[0]:(r+1)*split[0]], full[r*w:r*w+split[0]])
				eq(t, "fused split 1", outs[1][r*split[1]:(r+1)*split[1]], full[r*w+split[0]:(r+1)*w])
			}
		}
	}
}

func TestCrossAggregate(t *testing.T) {
	rng := newRNG(t)
	var a Aggregated[int64]
	for _, sz := range crossSizes {
		for rep := 0; rep < 4; rep++ {
			n := sizeOf(rng, sz)
			ids := randIDs(rng, n)
			dim := rng.IntN(6)
			grads := randFloats(rng, n*dim)
			if err := AggregateGrads(&a, ids, grads, dim); err != nil {
				t.Fatal(err)
			}
			dims := make([]int, n)
			for i := range dims {
				dims[i] = dim
			}
			wu, wr, wc := naiveAggregate(ids, grads, dims)
			eq(t, "ids", a.IDs, wu)
			eq(t, "counts", a.Counts, wc)
			for u := range wu {
				eq(t, "row", a.Row(u), wr[u])
			}
			eq(t, "grads", a.Grads, slices.Concat(wr...))

			// Ragged: each id's width is a function of the id.
			total := 0
			for i, id := range ids {
				dims[i] = int(uint64(id) % 5)
				total += dims[i]
			}
			grads = randFloats(rng, total)
			if err := AggregateGradsRagged(&a, ids, grads, dims); err != nil {
				t.Fatal(err)
			}
			wu, wr, wc = naiveAggregate(ids, grads, dims)
			eq(t, "ragged ids", a.IDs, wu)
			eq(t, "ragged counts", a.Counts, wc)
			for u := range wu {
				eq(t, "ragged row", a.Row(u), wr[u])
			}
		}
	}
}

// naiveNormalize merges ragged row-split vectors by rebuilding the ragged tensors'
// row lengths and re-accumulating them.
func naiveNormalize(vecs [][]int64) []int64 {
	out := []int64{0}
	var total int64
	for _, v := range vecs {
		for i := 1; i < len(v); i++ {
			total += v[i] - v[i-1]
			out = append(out, total)
		}
	}
	return out
}

func TestCrossNormalizeMergedSplit(t *testing.T) {
	rng := newRNG(t)
	for _, sz := range crossSizes {
		for rep := 0; rep < 4; rep++ {
			R := sizeOf(rng, sz) % 40
			var vecs [][]int64
			var flat []int64
			var sizes []int32
			for range R {
				v := randSplits(rng, rng.IntN(30))
				vecs = append(vecs, v)
				flat = append(flat, v...)
				sizes = append(sizes, int32(len(v)))
			}
			got, err := NormalizeMergedSplit(nil, flat, sizes)
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "normalized", got, naiveNormalize(vecs))
		}
	}
}
