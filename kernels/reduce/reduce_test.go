package reduce

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// Exact cases: every worked example of data-path.md §5 and every exact case of
// §6.4–6.5, literally.

// eq compares by value, treating nil and empty slices alike (%v prints floats in
// their shortest round-trip form, so equal text means equal values).
func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) && fmt.Sprintf("%v", got) != fmt.Sprintf("%v", want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func close32(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > tol*math.Max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %v, want %v (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

func flat[T any](rows ...[]T) []T {
	var out []T
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

func TestSplitByIndicesExact(t *testing.T) {
	ids := []int64{0, 1, 2, 2, 3}
	idx := make([]int64, len(ids))
	if err := ShardIDs(idx, ids, 3); err != nil {
		t.Fatal(err)
	}
	got, err := SplitByIndices(idx, ids, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "split", got, [][]int64{{0, 3}, {1}, {2, 2}})

	// test_split_by_indices_gradient: indices [0,1,0], 3 splits, upstream ones.
	x := []float32{0, 0, 1, 1, 2, 2}
	sp, err := SplitByIndices([]int64{0, 1, 0}, x, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "split2", sp, [][]float32{{0, 0, 2, 2}, {1, 1}, {}})
	ones := make([][]float32, 3)
	for i, s := range sp {
		ones[i] = make([]float32, len(s))
		for j := range ones[i] {
			ones[i][j] = 1
		}
	}
	g := make([]float32, 6)
	if err := SplitByIndicesGrad(g, []int64{0, 1, 0}, ones, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "grad", g, []float32{1, 1, 1, 1, 1, 1})

	// test_split_by_indices_empty_gradient.
	sp, err = SplitByIndices[float32](nil, nil, 0, 3)
	if err != nil || len(sp) != 3 {
		t.Fatalf("empty split: %v %v", sp, err)
	}
	if err := SplitByIndicesGrad[float32](nil, nil, sp, 0); err != nil {
		t.Fatal(err)
	}
}

func TestRaggedSplitByIndicesExact(t *testing.T) {
	num := NewRagged([]int64{}, []int64{}, []int64{4, 3, 2}, []int64{1}, []int64{}, []int64{})
	splits, pos, err := RaggedSplitByIndices([]int64{0, 1, 0, 1}, num, 2)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "splits[0]", splits[0], NewRagged([]int64{}, []int64{}, []int64{4, 2}, []int64{}, []int64{}, []int64{}))
	eq(t, "splits[1]", splits[1], NewRagged([]int64{}, []int64{}, []int64{3}, []int64{1}, []int64{}, []int64{}))
	eq(t, "pos[0]", pos[0], NewRagged([]int64{}, []int64{}, []int64{0, 2}, []int64{}, []int64{}, []int64{}))
	eq(t, "pos[1]", pos[1], NewRagged([]int64{}, []int64{}, []int64{1}, []int64{3}, []int64{}, []int64{}))

	// Docstring example: [[4,3,2],[1]].
	splits, pos, err = RaggedSplitByIndices([]int64{0, 1, 0, 1}, NewRagged([]int64{4, 3, 2}, []int64{1}), 2)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "doc splits[0]", splits[0], NewRagged([]int64{4, 2}, []int64{}))
	eq(t, "doc splits[1]", splits[1], NewRagged([]int64{3}, []int64{1}))
	eq(t, "doc pos[1]", pos[1], NewRagged([]int64{1}, []int64{3}))

	_, _, err = RaggedSplitByIndices([]int64{0, 1, 0}, num, 2)
	if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "4 vs 3") {
		t.Errorf("len mismatch: %v", err)
	}
}

func TestReorderByIndicesExact(t *testing.T) {
	ids := []int64{0, 1, 2, 2, 3, 5}
	sh := make([]int32, len(ids))
	if err := ShardIDs(sh, ids, 3); err != nil {
		t.Fatal(err)
	}
	out, sizes, err := ReorderByIndices(ids, 1, sh, 3)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "output", out, []int64{3, 0, 1, 5, 2})
	eq(t, "sizes", sizes, []int32{2, 1, 2})

	// Docstring example.
	out, sizes, err = ReorderByIndices([]int64{1, 2, 3, 2}, 1, []int32{1, 0, 1, 0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "doc output", out, []int64{2, 3, 1})
	eq(t, "doc sizes", sizes, []int32{1, 2})

	// 2-D: deduplicated by the first column, rows kept whole.
	x := []float32{1, 10, 2, 20, 1, 99}
	out2, sizes, err := ReorderByIndices(x, 2, []int32{0, 0, 0}, 1)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "2-D output", out2, []float32{2, 20, 1, 10})
	eq(t, "2-D sizes", sizes, []int32{2})
}

type fusedCase struct {
	name      string
	inputs    [][]int64
	shards    int
	output    []int64
	sizes     []int32
	slotSizes []int32
	dims      []int
	offsets   [][]int32
}

var fusedCases = []fusedCase{
	// distribution_ops_fused_test.py (§6.4), default dims 2.
	{"one list", [][]int64{{0, 1, 2, 2, 3, 5}}, 3, []int64{0, 3, 1, 2, 5}, []int32{2, 1, 2}, []int32{2, 1, 2}, nil, nil},
	{"extra empty list", [][]int64{{0, 1, 2, 2, 3, 5}, {}}, 3, []int64{0, 3, 1, 2, 5}, []int32{2, 1, 2}, []int32{2, 0, 1, 0, 2, 0}, nil, nil},
	{"plus 2*shards", [][]int64{{0, 1, 2, 2, 3, 5}, {6, 7, 8, 8, 9, 11}}, 3, []int64{0, 3, 6, 9, 1, 7, 2, 5, 8, 11}, []int32{4, 2, 4}, []int32{2, 2, 1, 1, 2, 2}, nil, nil},
	{"empty lists", [][]int64{{}, {}}, 2, []int64{}, []int32{0, 0}, []int32{0, 0, 0, 0}, nil, nil},
	{"two lists", [][]int64{{0, 1, 4, 5}, {2, 3, 6, 7}}, 2, []int64{0, 4, 2, 6, 1, 5, 3, 7}, []int32{4, 4}, []int32{2, 2, 2, 2}, nil, nil},
	{"dims 1,2,3", [][]int64{{0, 1, 0}, {3, 2, 3}, {5, 6, 7}}, 2, []int64{0, 2, 6, 1, 3, 5, 7}, []int32{3, 4}, []int32{1, 1, 1, 1, 1, 2},
		[]int{1, 2, 3}, [][]int32{{0, 6, 0}, {7, 1, 7}, {9, 3, 12}}},
	{"dims 3,2", [][]int64{{2, 3, 1, 2, 7, 2}, {5, 8, 4, 4, 5, 11, 6}}, 3, []int64{3, 6, 1, 7, 4, 2, 5, 8, 11}, []int32{2, 3, 4}, []int32{1, 1, 2, 1, 1, 3},
		[]int{3, 2}, [][]int32{{13, 0, 5, 13, 8, 13}, {16, 18, 11, 11, 16, 20, 3}}},
	// test_ragged_tensor_workflow: a..d concatenated per merged slot.
	{"ragged workflow", [][]int64{{0, 1, 4, 5}, {2, 3, 6, 7}}, 2, []int64{0, 4, 2, 6, 1, 5, 3, 7}, []int32{4, 4}, []int32{2, 2, 2, 2}, nil, nil},
}

func TestFusedReorderByIndicesExact(t *testing.T) {
	var dst FusedReorder[int64] // reused across cases on purpose
	for _, c := range fusedCases {
		dims := c.dims
		if dims == nil {
			dims = make([]int, len(c.inputs))
			for i := range dims {
				dims[i] = 2
			}
		}
		if MonolithRank0Empty(c.shards) {
			t.Fatalf("%s: §6.4 cases all have S ≤ 4", c.name)
		}
		if err := FusedReorderByIndices(&dst, c.inputs, c.shards, dims, false); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		eq(t, c.name+" output", dst.Output, c.output)
		eq(t, c.name+" shard_sizes", dst.ShardSizes, c.sizes)
		eq(t, c.name+" sharded_slot_sizes", dst.ShardedSlotSizes, c.slotSizes)
		var sz []int32
		for _, in := range c.inputs {
			sz = append(sz, int32(len(in)))
		}
		eq(t, c.name+" emb_offset_sz", dst.EmbOffsetSz, sz)
		if c.offsets != nil {
			eq(t, c.name+" fused_emb_offset", dst.FusedEmbOffset, flat(c.offsets...))
		}
	}
}

func TestFusedReorderRank0Empty(t *testing.T) {
	// S = 5 with rank0Empty: shard = v%4 + 1, shard 0 stays empty.
	if !MonolithRank0Empty(5) || MonolithRank0Empty(4) {
		t.Fatal("MonolithRank0Empty: want S > 4")
	}
	var dst FusedReorder[int64]
	if err := FusedReorderByIndices(&dst, [][]int64{{0, 1, 2, 3, 4, 5, 4}}, 5, []int{1}, true); err != nil {
		t.Fatal(err)
	}
	eq(t, "output", dst.Output, []int64{0, 4, 1, 5, 2, 3})
	eq(t, "shard_sizes", dst.ShardSizes, []int32{0, 2, 2, 1, 1})
	eq(t, "offsets", dst.FusedEmbOffset, []int32{0, 2, 4, 5, 1, 3, 1})
	if err := FusedReorderByIndices(&dst, [][]int64{{1}}, 1, []int{1}, true); !errors.Is(err, ErrRange) {
		t.Errorf("rank0Empty with one shard: %v", err)
	}
}

func TestFusedReorderNegativeIDs(t *testing.T) {
	// D4: a negative id is sharded as uint64; Monolith's signed % would give -1.
	var dst FusedReorder[int64]
	if err := FusedReorderByIndices(&dst, [][]int64{{-1, 2}}, 3, []int{1}, false); err != nil {
		t.Fatal(err)
	}
	s := int(uint64(math.MaxUint64) % 3) // 0
	eq(t, "shard of -1", Shard(int64(-1), 3), s)
	eq(t, "output", dst.Output, []int64{-1, 2})
	eq(t, "shard_sizes", dst.ShardSizes, []int32{1, 0, 1})
}

func TestMapIDToEmbeddingExact(t *testing.T) {
	var idx Index[int64]
	if err := idx.Build([]int64{1}, []int64{2}); err != nil {
		t.Fatal(err)
	}
	emb := [][]float32{{1, 1}, {2, 2}}
	out := make([]float32, 4)
	if err := MapIDToEmbedding(out, &idx, emb, 2, []int64{1, 2}); err != nil { // input [[1],[2]]
		t.Fatal(err)
	}
	eq(t, "output", out, []float32{1, 1, 2, 2})

	// Gradient with input [1,1,2] and loss target − out: upstream −1 everywhere.
	grads := []float32{-1, -1, -1, -1, -1, -1}
	eg := [][]float32{make([]float32, 2), make([]float32, 2)}
	eg[0][0] = 99 // the op zeroes dst
	if err := MapIDToEmbeddingGrad(eg, &idx, []int64{1, 1, 2}, grads, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "grads", eg, [][]float32{{-2, -2}, {-1, -1}})

	err := MapIDToEmbedding(make([]float32, 2), &idx, emb, 2, []int64{7})
	if !errors.Is(err, ErrUnmappedID) || !strings.Contains(err.Error(), "unable to map id 7") {
		t.Errorf("missing id: %v", err)
	}
	if err := MapIDToEmbeddingGrad(eg, &idx, []int64{7}, []float32{1, 1}, 2); !errors.Is(err, ErrUnmappedID) {
		t.Errorf("missing id in grad: %v", err)
	}
	// First (list, position) wins on duplicates.
	if err := idx.Build([]int64{5, 5}, []int64{5}); err != nil {
		t.Fatal(err)
	}
	if err := MapIDToEmbedding(out[:1], &idx, [][]float32{{1, 2}, {3}}, 1, []int64{5}); err != nil {
		t.Fatal(err)
	}
	eq(t, "first wins", out[0], float32(1))
}

// test_map_id_to_embedding_multi_threads: 1000 ids, dim 16, P 10, split by id mod P,
// then map back; the result equals the embeddings.
func TestMapIDToEmbeddingRoundTrip(t *testing.T) {
	const n, dim, p = 1000, 16, 10
	ids := make([]int64, n)
	emb := make([]float32, n*dim)
	for i := range ids {
		ids[i] = int64(i)
		for j := 0; j < dim; j++ {
			emb[i*dim+j] = float32(j)
		}
	}
	ind := make([]int64, n)
	if err := ShardIDs(ind, ids, p); err != nil {
		t.Fatal(err)
	}
	sids, err := SplitByIndices(ind, ids, 1, p)
	if err != nil {
		t.Fatal(err)
	}
	semb, err := SplitByIndices(ind, emb, dim, p)
	if err != nil {
		t.Fatal(err)
	}
	var idx Index[int64]
	if err := idx.Build(sids...); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n*dim)
	if err := MapIDToEmbedding(out, &idx, semb, dim, ids); err != nil {
		t.Fatal(err)
	}
	eq(t, "mapped", out, emb)
}

func TestGatherEmbeddingsByInputExact(t *testing.T) {
	var idx Index[int64]
	if err := idx.Build([]int64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	emb := []float32{1, 1, 2, 2, 3, 3}
	out := make([]float32, 6)
	mapping := make([]int64, 3)
	if err := GatherEmbeddingsByInput(out, mapping, &idx, emb, 2, []int64{2, 1, 2}); err != nil {
		t.Fatal(err)
	}
	eq(t, "output", out, []float32{2, 2, 1, 1, 2, 2})
	eq(t, "mapping", mapping, []int64{1, 0, 1})

	// Docstring: input [1,3,2,3].
	out, mapping = make([]float32, 8), make([]int64, 4)
	if err := GatherEmbeddingsByInput(out, mapping, &idx, emb, 2, []int64{1, 3, 2, 3}); err != nil {
		t.Fatal(err)
	}
	eq(t, "doc output", out, []float32{1, 1, 3, 3, 2, 2, 3, 3})
	eq(t, "doc mapping", mapping, []int64{0, 2, 1, 2})

	// test_gather_embeddings_by_ids_gradient: input [1,2,1], upstream −1.
	mapping = make([]int64, 3)
	if err := GatherEmbeddingsByInput(make([]float32, 6), mapping, &idx, emb, 2, []int64{1, 2, 1}); err != nil {
		t.Fatal(err)
	}
	g := make([]float32, 6)
	if err := GatherEmbeddingsByInputGrad(g, []float32{-1, -1, -1, -1, -1, -1}, mapping, 3, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "grad", g, []float32{-2, -2, -1, -1, 0, 0})

	// test_gather_embeddings_by_ids_gradient_back_prop: ids [2,3,1].
	g = []float32{7, 7, 7, 7, 7, 7}
	if err := GatherEmbeddingsByInputGrad(g, []float32{1, 1, 2, 2, 4, 4, 8, 8}, []int64{1, 0, 1, 2}, 3, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "back prop", g, []float32{2, 2, 5, 5, 8, 8})

	if err := GatherEmbeddingsByInput(out[:2], mapping[:1], &idx, emb, 2, []int64{4}); !errors.Is(err, ErrUnmappedID) || !strings.Contains(err.Error(), "id 4") {
		t.Errorf("missing id: %v", err)
	}
	if err := GatherEmbeddingsByInput(out, mapping, &idx, emb[:4], 2, []int64{1}); !errors.Is(err, ErrShape) {
		t.Errorf("embeddings rows ≠ ids: %v", err)
	}
	if err := GatherEmbeddingsByInputGrad(g, []float32{1, 1}, []int64{3}, 3, 2); !errors.Is(err, ErrRange) {
		t.Errorf("mapping out of range: %v", err)
	}
}

// The fused buffer of the last §6.4 row: ids 3,6,1,7,4,2,5,8,11 with dims 3,2,3,3,2,3,2,2,2.
var fused22 = []float32{1.1, 1.2, 1.3, 2.1, 2.2, 3.1, 3.2, 3.3, 4.1, 4.2, 4.3, 5.1, 5.2, 6.1, 6.2, 6.3, 7.1, 7.2, 8.1, 8.2, 9.1, 9.2}

func repeat[T any](s []T, n int) []T {
	var out []T
	for i := 0; i < n; i++ {
		out = append(out, s...)
	}
	return out
}

func TestFusedGatherEmbeddingsByInputExact(t *testing.T) {
	const r0, r1 = 123, 117 // Monolith repeats 12345 and 11777 times for the GPU grid
	offs := [][]int32{repeat([]int32{13, 0, 5, 13, 8, 13}, r0), repeat([]int32{16, 18, 11, 11, 16, 20, 3}, r1)}
	dims := []int{3, 2}
	dst := [][]float32{make([]float32, 6*r0*3), make([]float32, 7*r1*2)}
	if err := FusedGatherEmbeddingsByInput(dst, fused22, offs, dims); err != nil {
		t.Fatal(err)
	}
	want0 := repeat([]float32{6.1, 6.2, 6.3, 1.1, 1.2, 1.3, 3.1, 3.2, 3.3, 6.1, 6.2, 6.3, 4.1, 4.2, 4.3, 6.1, 6.2, 6.3}, r0)
	want1 := repeat([]float32{7.1, 7.2, 8.1, 8.2, 5.1, 5.2, 5.1, 5.2, 7.1, 7.2, 9.1, 9.2, 2.1, 2.2}, r1)
	eq(t, "output 0", dst[0], want0)
	eq(t, "output 1", dst[1], want1)

	bad := [][]int32{{20}, {}}
	if err := FusedGatherEmbeddingsByInput([][]float32{make([]float32, 3), nil}, fused22, bad, dims); !errors.Is(err, ErrRange) {
		t.Errorf("offset past the end: %v", err)
	}
}

func TestFusedGatherEmbeddingsByInputGradExact(t *testing.T) {
	const reps = 888 // Monolith's SCALE: float sum precision over many repeats
	grads := [][]float32{
		repeat([]float32{1.1, 1.2, 1.3, 2.1, 2.2, 2.3, 3.1, 3.2, 3.3, 4.1, 4.2, 4.3, 5.1, 5.2, 5.3, 6.1, 6.2, 6.3}, reps),
		repeat([]float32{1.4, 1.5, 2.4, 2.5, 3.4, 3.5, 4.4, 4.5, 5.4, 5.5, 6.4, 6.5, 7.4, 7.5}, reps),
	}
	offs := [][]int32{repeat([]int32{13, 0, 5, 13, 8, 13}, reps), repeat([]int32{16, 18, 11, 11, 16, 20, 3}, reps)}
	want := []float32{2.1, 2.2, 2.3, 7.4, 7.5, 3.1, 3.2, 3.3, 5.1, 5.2, 5.3, 7.8, 8.0, 11.3, 11.6, 11.9, 6.8, 7.0, 2.4, 2.5, 6.4, 6.5}
	for _, scale := range []float32{1, 0.5, 3} {
		dst := make([]float32, 22)
		if err := FusedGatherEmbeddingsByInputGrad(dst, grads, offs, []int{3, 2}, scale); err != nil {
			t.Fatal(err)
		}
		w := make([]float32, len(want))
		for i, v := range want {
			w[i] = v * reps * scale
		}
		close32(t, "fused grad", dst, w, 1e-7*reps) // Monolith's rtol
	}
}

func TestUniqueKeyWithValueAndOffsetExact(t *testing.T) {
	var u UniqueKeys[int64]
	key := NewRagged([]int64{}, []int64{0, 1, 2, 1, 0}, []int64{0, 1, 0}, []int64{})
	dims := []int{1, 2, 3, 4}
	if err := UniqueKeyWithValueAndOffset(&u, key, dims); err != nil {
		t.Fatal(err)
	}
	eq(t, "unique", u.Keys, NewRagged([]int64{}, []int64{0, 1, 2}, []int64{0, 1}, []int64{}))
	// value_offset [[],[[0,8],[2,6],[4]],[[10,16],[13]],[]].
	eq(t, "offset splits", u.ValueOffset.Splits, []int64{0, 2, 4, 5, 7, 8})
	eq(t, "offsets", u.ValueOffset.Offsets, []int64{0, 8, 2, 6, 4, 10, 16, 13})
	eq(t, "buffer len", u.BufferLen, 19)

	pos := NewRagged([]int64{}, []int64{0, 1, 2}, []int64{3, 4}, []int64{})
	value := make([]float32, 12)
	for i := range value {
		value[i] = float32(i)
	}
	buf := make([]float32, u.BufferLen)
	if err := FillWithOffsetMap(buf, pos, value, u.ValueOffset, dims); err != nil {
		t.Fatal(err)
	}
	eq(t, "buffer", buf, []float32{0, 1, 2, 3, 4, 5, 2, 3, 0, 1, 6, 7, 8, 9, 10, 11, 6, 7, 8})

	grad := make([]float32, 19)
	for i := range grad {
		grad[i] = float32(i)
	}
	bg := make([]float32, 12)
	if err := FillWithOffsetMapGrad(bg, pos, grad, u.ValueOffset, dims); err != nil {
		t.Fatal(err)
	}
	eq(t, "fill grad", bg, []float32{8, 10, 8, 10, 4, 5, 26, 28, 30, 13, 14, 15})

	// test_fill_with_offset_map_error_case: value of 10 floats, 12 expected. Nothing
	// is written.
	buf2 := make([]float32, 19)
	err := FillWithOffsetMap(buf2, pos, value[:10], u.ValueOffset, dims)
	if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "expected 12, actual 10") {
		t.Errorf("short value: %v", err)
	}
	eq(t, "untouched", buf2, make([]float32, 19))
	if err := FillWithOffsetMap(buf2, pos, append(value, 12), u.ValueOffset, dims); !errors.Is(err, ErrShape) {
		t.Errorf("long value: %v", err)
	}
	badPos := NewRagged([]int64{}, []int64{0, 1, 5}, []int64{3, 4}, []int64{})
	if err := FillWithOffsetMap(buf2, badPos, value, u.ValueOffset, dims); !errors.Is(err, ErrRange) {
		t.Errorf("pos past the unique keys: %v", err)
	}
	if err := FillWithOffsetMap(buf2[:18], pos, value, u.ValueOffset, dims); !errors.Is(err, ErrRange) {
		t.Errorf("short buffer: %v", err)
	}
	if err := UniqueKeyWithValueAndOffset(&u, key, dims[:3]); !errors.Is(err, ErrShape) {
		t.Errorf("rows ≠ len(dims): %v", err)
	}

	// test_unique_key_with_value_and_offset_empty.
	if err := UniqueKeyWithValueAndOffset(&u, NewRagged([]int64{}, []int64{}, []int64{}), []int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	eq(t, "empty unique", u.Keys, NewRagged([]int64{}, []int64{}, []int64{}))
	eq(t, "empty offsets", u.ValueOffset.Offsets, []int64{})
	eq(t, "empty buffer", u.BufferLen, 0)
}

func TestUniqueAndFillDocstring(t *testing.T) {
	var u UniqueKeys[uint64]
	if err := UniqueKeyWithValueAndOffset(&u, NewRagged([]uint64{0, 1, 0}, []uint64{0}), []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	eq(t, "unique", u.Keys, NewRagged([]uint64{0, 1}, []uint64{0}))
	eq(t, "offsets", u.ValueOffset, OffsetMap{Offsets: []int64{0, 4, 2, 6}, Splits: []int64{0, 2, 3, 4}})
	eq(t, "buffer len", u.BufferLen, 9)
	buf := make([]float32, 9)
	if err := FillWithOffsetMap(buf, NewRagged([]int64{0, 1}, []int64{2}), []float32{0, 1, 2, 3, 4, 5, 6}, u.ValueOffset, []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	eq(t, "buffer", buf, []float32{0, 1, 2, 3, 0, 1, 4, 5, 6})
}

func TestReduceExact(t *testing.T) {
	out := make([]float32, 4)
	if err := ReduceMean(out, []int64{0, 0, 1}, []float32{4, 4, 2, 2, 1, 1}, 2, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "reduce_mean", out, []float32{3, 3, 1, 1})
	if err := ReduceSum(out, []int64{0, 0, 1}, []float32{1, 1, 2, 2, 4, 4}, 2, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "reduce_sum", out, []float32{3, 3, 4, 4})
	if err := ReduceSqrtn(out, []int64{0, 0, 1}, []float32{3, 3, 4, 4, 4, 4}, 2, 2); err != nil {
		t.Fatal(err)
	}
	close32(t, "reduce_sqrtn", out, []float32{5, 5, 4, 4}, 1e-6)

	g := make([]float32, 4)
	// reduce_mean gradient: loss target − 2·reduced, upstream −2.
	if err := ReduceMeanGrad(g, []int64{0, 0}, []float32{-2, -2}, 1, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "reduce_mean grad", g, []float32{-1, -1, -1, -1})
	if err := ReduceSumGrad(g, []int64{0, 0}, []float32{-1, -1}, 1, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "reduce_sum grad", g, []float32{-1, -1, -1, -1})
	if err := ReduceSqrtnGrad(g, []int64{0, 0}, []float32{3, 4, 4, 3}, []float32{-1, -1}, 1, 2); err != nil {
		t.Fatal(err)
	}
	close32(t, "reduce_sqrtn grad", g, []float32{-0.6, -0.8, -0.8, -0.6}, 1e-6)
	if err := ReduceSqrtnGrad(g, []int64{0, 0}, []float32{0, 0, 0, 0}, []float32{-1, -1}, 1, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "reduce_sqrtn grad at 0", g, []float32{0, 0, 0, 0})

	// D9: an empty row is 0, not NaN; the grad counter is sized by rows (row 5 ≥ dim 2).
	out = make([]float32, 6)
	if err := ReduceMean(out, []int64{0, 0}, []float32{1, 2, 3, 4}, 3, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "mean with empty rows", out, []float32{2, 3, 0, 0, 0, 0})
	g = make([]float32, 6)
	if err := ReduceMeanGrad(g, []int64{5, 5, 1}, []float32{0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 4, 8}, 6, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "mean grad rows ≥ dim", g, []float32{2, 4, 2, 4, 3, 3})

	if err := ReduceSum(out, []int64{0, 3}, []float32{1, 2, 3, 4}, 3, 2); !errors.Is(err, ErrRange) {
		t.Errorf("row id ≥ rows: %v", err)
	}
	if err := ReduceSum(out, []int64{0}, []float32{1, 2, 3}, 3, 2); !errors.Is(err, ErrShape) {
		t.Errorf("values length: %v", err)
	}
}

func TestFusedReduceSumAndSplitExact(t *testing.T) {
	vals := []float32{1, 1, 1, 2, 2, 1, 4, 4, 2}
	cases := []struct {
		ids   []int64
		rows  int
		split []int
		want  [][]float32
	}{
		{[]int64{0, 0, 1}, 2, []int{2, 1}, [][]float32{{3, 3, 4, 4}, {2, 2}}},
		{[]int64{0, 0, 1}, 2, []int{1, 2}, [][]float32{{3, 4}, {3, 2, 4, 2}}},
		{[]int64{0, 0, 2}, 4, []int{1, 2}, [][]float32{{3, 0, 4, 0}, {3, 2, 0, 0, 4, 2, 0, 0}}},
	}
	for _, c := range cases {
		dst := make([][]float32, len(c.split))
		for m, d := range c.split {
			dst[m] = make([]float32, c.rows*d)
		}
		if err := FusedReduceSumAndSplit(dst, c.ids, vals, c.rows, c.split); err != nil {
			t.Fatal(err)
		}
		eq(t, "fused reduce", dst, c.want)
	}
	// Gradient of the sum of all outputs: ones.
	g := make([]float32, 9)
	if err := FusedReduceSumAndSplitGrad(g, []int64{0, 0, 1}, [][]float32{{1, 1, 1, 1}, {1, 1}}, 2, []int{2, 1}); err != nil {
		t.Fatal(err)
	}
	eq(t, "fused reduce grad", g, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1})
}

func TestSegmentSumExact(t *testing.T) {
	// Rows [[a,b],[],[c]] with dim 2.
	vals := []float32{1, 2, 3, 4, 5, 6}
	dst := make([]float32, 6)
	if err := SegmentSum(dst, []int64{0, 2, 2, 3}, vals, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "segment sum", dst, []float32{4, 6, 0, 0, 5, 6})
	g := make([]float32, 6)
	if err := SegmentSumGrad(g, []int64{0, 2, 2, 3}, []float32{1, 2, 3, 4, 5, 6}, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "segment grad", g, []float32{1, 2, 1, 2, 5, 6})
	if err := SegmentSum(dst, []int64{0, 3, 2}, vals[:4], 2); !errors.Is(err, ErrShape) {
		t.Errorf("decreasing splits: %v", err)
	}
}

func TestNormalizeMergedSplitExact(t *testing.T) {
	got, err := NormalizeMergedSplit(nil, []int64{0, 2, 5, 5, 9, 0, 0, 3, 4}, []int32{5, 4})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "normalized", got, []int64{0, 2, 5, 5, 9, 9, 12, 13})
	got, err = NormalizeMergedSplit(got[:0], []int64{0, 1, 3, 0, 2, 0, 4, 5}, []int32{3, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "three vectors", got, []int64{0, 1, 3, 5, 9, 10})
	got, err = NormalizeMergedSplit(got[:0], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "empty merge", got, []int64{0})
	if _, err := NormalizeMergedSplit(nil, []int64{0, 1}, []int32{1, 0, 1}); !errors.Is(err, ErrRange) {
		t.Errorf("zero size: %v", err)
	}
	if _, err := NormalizeMergedSplit(nil, []int64{0, 1, 2}, []int32{2}); !errors.Is(err, ErrShape) {
		t.Errorf("sizes sum: %v", err)
	}
}

func TestValueRowIDsExact(t *testing.T) {
	got, err := ValueRowIDs(nil, []int64{0, 2, 2, 5})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "rowids", got, []int64{0, 0, 2, 2, 2})
	if _, err := ValueRowIDs(nil, []int64{0, 2, 1}); !errors.Is(err, ErrShape) {
		t.Errorf("decreasing: %v", err)
	}
	if _, err := ValueRowIDs(nil, []int64{1, 2}); !errors.Is(err, ErrShape) {
		t.Errorf("not starting at 0: %v", err)
	}
}

func TestAggregateGradsExact(t *testing.T) {
	var a Aggregated[uint64]
	ids := []uint64{5, 3, 5, 7, 3, 5}
	grads := []float32{1, 2, 10, 20, 100, 200, 7, 7, 30, 40, 1000, 2000}
	if err := AggregateGrads(&a, ids, grads, 2); err != nil {
		t.Fatal(err)
	}
	eq(t, "ids", a.IDs, []uint64{5, 3, 7})
	eq(t, "grads", a.Grads, []float32{1101, 2202, 40, 60, 7, 7})
	eq(t, "counts", a.Counts, []int32{3, 2, 1})
	eq(t, "row 1", a.Row(1), []float32{40, 60})

	// distributed_ps_benchmark: every id twice with grad 0.3 → one push of 0.6.
	if err := AggregateGrads(&a, []uint64{9, 8, 9, 8}, []float32{0.3, 0.3, 0.3, 0.3}, 1); err != nil {
		t.Fatal(err)
	}
	eq(t, "twice", a.Grads, []float32{0.6, 0.6})

	// Ragged: fid 1 has 3 floats, fid 2 has 1.
	if err := AggregateGradsRagged(&a, []uint64{1, 2, 1}, []float32{1, 2, 3, 9, 10, 20, 30}, []int{3, 1, 3}); err != nil {
		t.Fatal(err)
	}
	eq(t, "ragged ids", a.IDs, []uint64{1, 2})
	eq(t, "ragged grads", a.Grads, []float32{11, 22, 33, 9})
	eq(t, "ragged offsets", a.Offsets, []int{0, 3, 4})
	eq(t, "ragged row 1", a.Row(1), []float32{9})
	err := AggregateGradsRagged(&a, []uint64{1, 1}, []float32{1, 2, 3}, []int{2, 1})
	if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "id 1") {
		t.Errorf("dim mismatch: %v", err)
	}
	if a.Len() != 0 {
		t.Errorf("failed ragged call left %d ids", a.Len())
	}
	if err := AggregateGradsRagged(&a, []uint64{1}, []float32{1, 2, 3}, []int{2}); !errors.Is(err, ErrShape) {
		t.Errorf("dims sum: %v", err)
	}
	if err := AggregateGrads(&a, []uint64{1}, []float32{1, 2, 3}, 2); !errors.Is(err, ErrShape) {
		t.Errorf("grads length: %v", err)
	}
}

func TestShardIDs(t *testing.T) {
	ids := []uint64{0, 1, 7, 8, math.MaxUint64}
	for _, p := range []int{1, 3, 4} {
		dst := make([]int64, len(ids))
		if err := ShardIDs(dst, ids, p); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			if dst[i] != int64(id%uint64(p)) || Shard(id, p) != int(id%uint64(p)) {
				t.Errorf("P=%d id %d: shard %d", p, id, dst[i])
			}
		}
	}
	if err := ShardIDs(make([]int32, 1), ids[:1], 0); !errors.Is(err, ErrRange) {
		t.Errorf("P=0: %v", err)
	}
}

func TestSplitErrors(t *testing.T) {
	if _, err := SplitByIndices([]int64{0, 3}, []int64{1, 2}, 1, 3); !errors.Is(err, ErrRange) {
		t.Errorf("index 3 of 3: %v", err)
	}
	if _, err := SplitByIndices([]int64{-1}, []int64{1}, 1, 3); !errors.Is(err, ErrRange) {
		t.Errorf("negative index: %v", err)
	}
	if _, err := SplitByIndices([]int64{0}, []int64{1, 2}, 1, 3); !errors.Is(err, ErrShape) {
		t.Errorf("tensor length: %v", err)
	}
	if err := SplitByIndicesGrad(make([]float32, 2), []int64{0, 1}, [][]float32{{1}, {}}, 1); !errors.Is(err, ErrShape) {
		t.Errorf("grad split size: %v", err)
	}
	if _, _, err := ReorderByIndices([]int64{1, 2}, 1, []int32{0, 2}, 2); !errors.Is(err, ErrRange) {
		t.Errorf("shard id 2 of 2: %v", err)
	}
	var fr FusedReorder[int64]
	if err := FusedReorderByIndices(&fr, [][]int64{{1}}, 2, []int{1, 2}, false); !errors.Is(err, ErrShape) {
		t.Errorf("dims count: %v", err)
	}
	if err := FusedReorderByIndices(&fr, [][]int64{{1}}, 0, []int{1}, false); !errors.Is(err, ErrRange) {
		t.Errorf("zero shards: %v", err)
	}
}
