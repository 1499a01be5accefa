package reduce

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Gradient checks: for every linear op L with gradient G, the adjoint identity
// ⟨L(x), g⟩ = ⟨x, G(g)⟩ on random inputs; for the nonlinear reductions (sqrtn, and
// mean through its normalisation) central finite differences of ⟨op(x), g⟩.

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// dot returns Σ a·b in float64 and Σ |a·b| for the tolerance.
func dot(a, b []float32) (s, abs float64) {
	if len(a) != len(b) {
		panic("dot: length mismatch")
	}
	for i := range a {
		p := float64(a[i]) * float64(b[i])
		s += p
		abs += math.Abs(p)
	}
	return s, abs
}

func dots(a, b [][]float32) (s, abs float64) {
	for i := range a {
		x, y := dot(a[i], b[i])
		s += x
		abs += y
	}
	return s, abs
}

func adjoint(t *testing.T, what string, lhs, lhsAbs, rhs, rhsAbs float64) {
	t.Helper()
	if d := math.Abs(lhs - rhs); d > 1e-5*(lhsAbs+rhsAbs)+1e-9 {
		t.Errorf("%s: ⟨L(x),g⟩ = %g but ⟨x,G(g)⟩ = %g", what, lhs, rhs)
	}
}

func randLike(rng *rand.Rand, xs [][]float32) [][]float32 {
	out := make([][]float32, len(xs))
	for i, x := range xs {
		out[i] = randFloats(rng, len(x))
	}
	return out
}

func TestAdjointIdentities(t *testing.T) {
	rng := newRNG(t)
	for _, sz := range crossSizes {
		for rep := 0; rep < 3; rep++ {
			n := sizeOf(rng, sz)
			dim := 1 + rng.IntN(5)

			// split_by_indices.
			ns := 1 + rng.IntN(6)
			idx := make([]int64, n)
			for i := range idx {
				idx[i] = rng.Int64N(int64(ns))
			}
			x := randFloats(rng, n*dim)
			sp, err := SplitByIndices(idx, x, dim, ns)
			if err != nil {
				t.Fatal(err)
			}
			gs := randLike(rng, sp)
			gx := make([]float32, len(x))
			if err := SplitByIndicesGrad(gx, idx, gs, dim); err != nil {
				t.Fatal(err)
			}
			l, la := dots(sp, gs)
			r, ra := dot(x, gx)
			adjoint(t, "split_by_indices", l, la, r, ra)

			// map_id_to_embedding and gather_embeddings_by_input.
			lists := [][]int64{randIDs(rng, n), randIDs(rng, n/2)}
			all := slices.Concat(lists...)
			var index Index[int64]
			if err := index.Build(lists...); err != nil {
				t.Fatal(err)
			}
			embs := [][]float32{randFloats(rng, len(lists[0])*dim), randFloats(rng, len(lists[1])*dim)}
			input := make([]int64, n)
			for i := range input {
				if len(all) > 0 {
					input[i] = all[rng.IntN(len(all))]
				}
			}
			if len(all) == 0 {
				input = nil
			}
			out := make([]float32, len(input)*dim)
			if err := MapIDToEmbedding(out, &index, embs, dim, input); err != nil {
				t.Fatal(err)
			}
			g := randFloats(rng, len(out))
			ge := [][]float32{make([]float32, len(embs[0])), make([]float32, len(embs[1]))}
			if err := MapIDToEmbeddingGrad(ge, &index, input, g, dim); err != nil {
				t.Fatal(err)
			}
			l, la = dot(out, g)
			r, ra = dots(embs, ge)
			adjoint(t, "map_id_to_embedding", l, la, r, ra)

			flatEmb := slices.Concat(embs...)
			mapping := make([]int64, len(input))
			if err := GatherEmbeddingsByInput(out, mapping, &index, flatEmb, dim, input); err != nil {
				t.Fatal(err)
			}
			gf := make([]float32, len(flatEmb))
			if err := GatherEmbeddingsByInputGrad(gf, g, mapping, len(all), dim); err != nil {
				t.Fatal(err)
			}
			l, la = dot(out, g)
			r, ra = dot(flatEmb, gf)
			adjoint(t, "gather_embeddings_by_input", l, la, r, ra)

			// fused_gather_embeddings_by_input, with and without scale (D10).
			var fr FusedReorder[int64]
			dims := []int{dim, 1 + rng.IntN(4)}
			if err := FusedReorderByIndices(&fr, lists, 1+rng.IntN(6), dims, false); err != nil {
				t.Fatal(err)
			}
			E := 0
			for n, c := range fr.ShardedSlotSizes {
				E += int(c) * dims[n%2]
			}
			fused := randFloats(rng, E)
			offs := [][]int32{fr.FusedEmbOffset[:len(lists[0])], fr.FusedEmbOffset[len(lists[0]):]}
			outs := [][]float32{make([]float32, len(lists[0])*dims[0]), make([]float32, len(lists[1])*dims[1])}
			if err := FusedGatherEmbeddingsByInput(outs, fused, offs, dims); err != nil {
				t.Fatal(err)
			}
			gouts := randLike(rng, outs)
			scale := float32(0.25 + rng.Float64())
			gfused := make([]float32, E)
			if err := FusedGatherEmbeddingsByInputGrad(gfused, gouts, offs, dims, scale); err != nil {
				t.Fatal(err)
			}
			l, la = dots(outs, gouts)
			r, ra = dot(fused, gfused)
			adjoint(t, "fused_gather_embeddings_by_input", float64(scale)*l, float64(scale)*la, r, ra)

			// Reductions: sum, mean (linear in x), fused reduce and split, segment sum.
			rows := 1 + rng.IntN(n/3+1)
			rowIDs := make([]int64, n)
			for i := range rowIDs {
				rowIDs[i] = rng.Int64N(int64(rows))
			}
			y := make([]float32, rows*dim)
			gy := randFloats(rng, rows*dim)
			gxv := make([]float32, n*dim)
			for _, kind := range []string{"sum", "mean"} {
				fwd, bwd := ReduceSum, ReduceSumGrad
				if kind == "mean" {
					fwd, bwd = ReduceMean, ReduceMeanGrad
				}
				if err := fwd(y, rowIDs, x, rows, dim); err != nil {
					t.Fatal(err)
				}
				if err := bwd(gxv, rowIDs, gy, rows, dim); err != nil {
					t.Fatal(err)
				}
				l, la = dot(y, gy)
				r, ra = dot(x, gxv)
				adjoint(t, "reduce_"+kind, l, la, r, ra)
			}
			split := []int{rng.IntN(3), 1 + rng.IntN(3)}
			w := split[0] + split[1]
			xw := randFloats(rng, n*w)
			ys := [][]float32{make([]float32, rows*split[0]), make([]float32, rows*split[1])}
			if err := FusedReduceSumAndSplit(ys, rowIDs, xw, rows, split); err != nil {
				t.Fatal(err)
			}
			gys := randLike(rng, ys)
			gxw := make([]float32, len(xw))
			if err := FusedReduceSumAndSplitGrad(gxw, rowIDs, gys, rows, split); err != nil {
				t.Fatal(err)
			}
			l, la = dots(ys, gys)
			r, ra = dot(xw, gxw)
			adjoint(t, "fused_reduce_sum_and_split", l, la, r, ra)

			splits := randSplits(rng, n)
			ys1 := make([]float32, (len(splits)-1)*dim)
			if err := SegmentSum(ys1, splits, x, dim); err != nil {
				t.Fatal(err)
			}
			gseg := randFloats(rng, len(ys1))
			if err := SegmentSumGrad(gxv, splits, gseg, dim); err != nil {
				t.Fatal(err)
			}
			l, la = dot(ys1, gseg)
			r, ra = dot(x, gxv)
			adjoint(t, "segment_sum", l, la, r, ra)

			// Aggregation: its adjoint gathers the unique rows back per occurrence.
			var agg Aggregated[int64]
			ids := randIDs(rng, n)
			if err := AggregateGrads(&agg, ids, x, dim); err != nil {
				t.Fatal(err)
			}
			gu := randFloats(rng, len(agg.Grads))
			var uidx Index[int64]
			if err := uidx.Build(agg.IDs); err != nil {
				t.Fatal(err)
			}
			back := make([]float32, len(x))
			if err := GatherEmbeddingsByInput(back, make([]int64, n), &uidx, gu, dim, ids); err != nil {
				t.Fatal(err)
			}
			l, la = dot(agg.Grads, gu)
			r, ra = dot(x, back)
			adjoint(t, "aggregate_grads", l, la, r, ra)

			// fill_with_offset_map, each unique key filled once.
			key := Ragged[int64]{Values: ids, RowSplits: randSplits(rng, n)}
			kd := make([]int, key.Rows())
			for i := range kd {
				kd[i] = rng.IntN(4)
			}
			var uk UniqueKeys[int64]
			if err := UniqueKeyWithValueAndOffset(&uk, key, kd); err != nil {
				t.Fatal(err)
			}
			pos := Ragged[int64]{Values: make([]int64, len(uk.Keys.Values)), RowSplits: uk.Keys.RowSplits}
			need := 0
			for i := range pos.Values {
				pos.Values[i] = int64(i)
			}
			for r := range kd {
				need += int(pos.RowSplits[r+1]-pos.RowSplits[r]) * kd[r]
			}
			val := randFloats(rng, need)
			buf := make([]float32, uk.BufferLen)
			if err := FillWithOffsetMap(buf, pos, val, uk.ValueOffset, kd); err != nil {
				t.Fatal(err)
			}
			gbuf := randFloats(rng, len(buf))
			gval := make([]float32, need)
			if err := FillWithOffsetMapGrad(gval, pos, gbuf, uk.ValueOffset, kd); err != nil {
				t.Fatal(err)
			}
			l, la = dot(buf, gbuf)
			r, ra = dot(val, gval)
			adjoint(t, "fill_with_offset_map", l, la, r, ra)
		}
	}
}

// fdCheck compares grad with central differences of loss at x.
func fdCheck(t *testing.T, what string, x, grad []float32, loss func([]float32) float64) {
	t.Helper()
	const eps = 1e-2
	for i := range x {
		old := x[i]
		x[i] = old + eps
		up := loss(x)
		x[i] = old - eps
		down := loss(x)
		x[i] = old
		num := (up - down) / (2 * eps)
		if d := math.Abs(num - float64(grad[i])); d > 2e-2*math.Max(1, math.Abs(num)) {
			t.Errorf("%s: d/dx[%d] = %g analytically, %g numerically", what, i, grad[i], num)
		}
	}
}

func TestFiniteDifferences(t *testing.T) {
	rng := newRNG(t)
	for rep := 0; rep < 20; rep++ {
		n := 1 + rng.IntN(12)
		dim := 1 + rng.IntN(3)
		rows := 1 + rng.IntN(4)
		rowIDs := make([]int64, n)
		for i := range rowIDs {
			rowIDs[i] = rng.Int64N(int64(rows))
		}
		// Values bounded away from 0 so every sqrtn output is differentiable.
		x := make([]float32, n*dim)
		for i := range x {
			v := 0.5 + 1.5*rng.Float32()
			if rng.IntN(2) == 0 {
				v = -v
			}
			x[i] = v
		}
		g := randFloats(rng, rows*dim)
		y := make([]float32, rows*dim)
		gx := make([]float32, n*dim)

		loss := func(op func([]float32, []int64, []float32, int, int) error) func([]float32) float64 {
			return func(x []float32) float64 {
				if err := op(y, rowIDs, x, rows, dim); err != nil {
					t.Fatal(err)
				}
				s, _ := dot(y, g)
				return s
			}
		}
		if err := ReduceSqrtnGrad(gx, rowIDs, x, g, rows, dim); err != nil {
			t.Fatal(err)
		}
		fdCheck(t, "reduce_sqrtn", x, gx, loss(ReduceSqrtn))
		if err := ReduceMeanGrad(gx, rowIDs, g, rows, dim); err != nil {
			t.Fatal(err)
		}
		fdCheck(t, "reduce_mean", x, gx, loss(ReduceMean))
	}
}
