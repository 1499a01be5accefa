package reduce

import (
	"fmt"
)

// Index maps ids to their first position in one or more id lists, the lookup that
// map_id_to_embedding and gather_embeddings_by_input build. Positions are flat: list
// i's entries follow list i-1's. On a duplicate id the first (list, position) wins.
//
// The zero value is an empty index. Build reuses the index's memory, so a long-lived
// Index is allocation-free once warmed up. Build is not safe for concurrent use, but
// once built, Lookup, Locate and the ops reading the index may run concurrently
// (for example on disjoint ranges of the input, which is how Monolith parallelises
// these ops).
type Index[K ID] struct {
	table    idTable
	listOf   []int32 // flat position → list
	starts   []int   // list → first flat position (len lists+1)
	distinct int
}

// Build resets the index to the given id lists. More than [MaxIndexLen] ids in total
// is an [ErrOverflow] error.
func (x *Index[K]) Build(lists ...[]K) error {
	total := 0
	for _, l := range lists {
		total += len(l)
	}
	if total > MaxIndexLen {
		return fmt.Errorf("%w: %d ids", ErrOverflow, total)
	}
	x.table.reset(total)
	x.listOf = growLen(x.listOf, total)
	x.starts = growLen(x.starts, len(lists)+1)
	x.distinct = 0
	flat := 0
	for li, l := range lists {
		x.starts[li] = flat
		lo := x.listOf[flat : flat+len(l)]
		for i, id := range l {
			if _, isNew := x.table.getOrInsert(uint64(id), int32(flat+i)); isNew {
				x.distinct++
			}
			lo[i] = int32(li)
		}
		flat += len(l)
	}
	x.starts[len(lists)] = flat
	return nil
}

// Lookup returns the flat position of id's first occurrence.
func (x *Index[K]) Lookup(id K) (flat int, ok bool) {
	v := x.table.get(uint64(id))
	return int(v), v >= 0
}

// Locate splits a flat position into (list, position within the list). flat must be
// in [0, Len()).
func (x *Index[K]) Locate(flat int) (list, pos int) {
	l := int(x.listOf[flat])
	return l, flat - x.starts[l]
}

// Len returns the total number of ids the index was built from, duplicates included.
func (x *Index[K]) Len() int {
	if len(x.starts) == 0 {
		return 0
	}
	return x.starts[len(x.starts)-1]
}

// Distinct returns the number of distinct ids.
func (x *Index[K]) Distinct() int { return x.distinct }

// NumLists returns the number of lists the index was built from.
func (x *Index[K]) NumLists() int { return max(len(x.starts)-1, 0) }

// ListLen returns the length of list i.
func (x *Index[K]) ListLen(i int) int { return x.starts[i+1] - x.starts[i] }

func unmapped[K ID](id K, k int) error {
	return fmt.Errorf("%w %d (input position %d)", ErrUnmappedID, id, k)
}

// MapIDToEmbedding writes, for each input id, the embedding row of its first
// occurrence in idx's lists into dst (len(input)×dim): embeddings[i] holds list i's
// rows (len(list i)×dim), as returned per PS shard (Monolith's map_id_to_embedding).
// An input id absent from idx is an [ErrUnmappedID] error naming the id. dst is fully
// overwritten on success and unspecified on error.
func MapIDToEmbedding[K ID](dst []float32, idx *Index[K], embeddings [][]float32, dim int, input []K) error {
	if err := checkEmbeddingLists(idx, embeddings, dim); err != nil {
		return err
	}
	if err := checkMatrix("dst", len(dst), len(input), dim); err != nil {
		return err
	}
	for k, id := range input {
		f := idx.table.get(uint64(id))
		if f < 0 {
			return unmapped(id, k)
		}
		l, p := idx.Locate(int(f))
		copy(dst[k*dim:k*dim+dim], embeddings[l][p*dim:p*dim+dim])
	}
	return nil
}

func checkEmbeddingLists[K ID](idx *Index[K], lists [][]float32, dim int) error {
	if len(lists) != idx.NumLists() {
		return fmt.Errorf("%w: %d embedding tensors for %d id lists", ErrShape, len(lists), idx.NumLists())
	}
	for i, e := range lists {
		if err := checkMatrix(fmt.Sprintf("embeddings[%d]", i), len(e), idx.ListLen(i), dim); err != nil {
			return err
		}
	}
	return nil
}

// MapIDToEmbeddingGrad is the gradient of [MapIDToEmbedding]: dst[i] (len(list i)×dim,
// zeroed by the op) receives, added in input order, the grad row of every input
// occurrence whose id maps to that row. grads is len(input)×dim. An unmapped input id
// is an [ErrUnmappedID] error (Monolith does not check).
func MapIDToEmbeddingGrad[K ID](dst [][]float32, idx *Index[K], input []K, grads []float32, dim int) error {
	if err := checkEmbeddingLists(idx, dst, dim); err != nil {
		return err
	}
	if err := checkMatrix("grads", len(grads), len(input), dim); err != nil {
		return err
	}
	for _, d := range dst {
		clear(d)
	}
	for k, id := range input {
		f := idx.table.get(uint64(id))
		if f < 0 {
			return unmapped(id, k)
		}
		l, p := idx.Locate(int(f))
		addTo(dst[l][p*dim:p*dim+dim], grads[k*dim:k*dim+dim])
	}
	return nil
}

// GatherEmbeddingsByInput writes, for each input id, the row of embeddings
// (idx.Len()×dim, row j belonging to the id at flat position j) at the id's first
// position into dst (len(input)×dim), and that position into mapping (len(input)), as
// Monolith's gather_embeddings_by_input does with its single ids list. An input id
// absent from idx is an [ErrUnmappedID] error. Example: ids [1,2,3], rows
// [1,1],[2,2],[3,3], input [2,1,2] give [[2,2],[1,1],[2,2]] and mapping [1,0,1].
func GatherEmbeddingsByInput[K ID](dst []float32, mapping []int64, idx *Index[K], embeddings []float32, dim int, input []K) error {
	if err := checkMatrix("embeddings", len(embeddings), idx.Len(), dim); err != nil {
		return err
	}
	if err := checkMatrix("dst", len(dst), len(input), dim); err != nil {
		return err
	}
	if len(mapping) != len(input) {
		return fmt.Errorf("%w: mapping has %d entries for %d inputs", ErrShape, len(mapping), len(input))
	}
	mapping = mapping[:len(input)]
	t := &idx.table
	for k, id := range input {
		f := t.get(uint64(id))
		if f < 0 {
			return unmapped(id, k)
		}
		p := int(f) * dim
		copy(dst[k*dim:k*dim+dim], embeddings[p:p+dim])
		mapping[k] = int64(f)
	}
	return nil
}

// GatherEmbeddingsByInputGrad is the gradient of [GatherEmbeddingsByInput]: dst
// (rows×dim, zeroed by the op) receives grads row k (len(mapping)×dim) added at row
// mapping[k], in k order. A mapping entry outside [0, rows) is an [ErrRange] error.
// Example: mapping [1,0,1,2], grads [1,1],[2,2],[4,4],[8,8], rows 3 give
// [[2,2],[5,5],[8,8]].
func GatherEmbeddingsByInputGrad(dst []float32, grads []float32, mapping []int64, rows, dim int) error {
	if err := checkMatrix("dst", len(dst), rows, dim); err != nil {
		return err
	}
	if err := checkMatrix("grads", len(grads), len(mapping), dim); err != nil {
		return err
	}
	for k, m := range mapping {
		if m < 0 || m >= int64(rows) {
			return fmt.Errorf("%w: index_mapping[%d] = %d not in [0, %d)", ErrRange, k, m, rows)
		}
	}
	clear(dst)
	for k, m := range mapping {
		p := int(m) * dim
		addTo(dst[p:p+dim], grads[k*dim:k*dim+dim])
	}
	return nil
}

// checkFused validates per-list offsets into a fused buffer of n floats.
func checkFused(what string, n int, lists [][]float32, offsets [][]int32, dims []int) error {
	if len(offsets) != len(dims) || len(lists) != len(dims) {
		return fmt.Errorf("%w: %d %s, %d offset lists and %d dims", ErrShape, len(lists), what, len(offsets), len(dims))
	}
	if err := checkDims("dims", dims); err != nil {
		return err
	}
	for m, offs := range offsets {
		if err := checkMatrix(fmt.Sprintf("%s[%d]", what, m), len(lists[m]), len(offs), dims[m]); err != nil {
			return err
		}
		d := int64(dims[m])
		for j, o := range offs {
			if o < 0 || int64(o)+d > int64(n) {
				return fmt.Errorf("%w: offsets[%d][%d] = %d with dim %d outside the %d-float fused buffer", ErrRange, m, j, o, d, n)
			}
		}
	}
	return nil
}

// FusedGatherEmbeddingsByInput copies, for every list m and entry j, the dims[m]
// floats of fused starting at offsets[m][j] into row j of dst[m]
// (len(offsets[m])×dims[m]); Monolith's fused_gather_embeddings_by_input over the
// FusedEmbOffset of [FusedReorderByIndices]. An offset whose row would leave fused is
// an [ErrRange] error; nothing is written then.
func FusedGatherEmbeddingsByInput(dst [][]float32, fused []float32, offsets [][]int32, dims []int) error {
	if err := checkFused("dst", len(fused), dst, offsets, dims); err != nil {
		return err
	}
	for m, offs := range offsets {
		d := dims[m]
		out := dst[m]
		for j, o := range offs {
			copy(out[j*d:j*d+d], fused[int(o):int(o)+d])
		}
	}
	return nil
}

// FusedGatherEmbeddingsByInputGrad is the gradient of [FusedGatherEmbeddingsByInput]:
// dst (the fused buffer's length, zeroed by the op) receives scale × row j of
// grads[m] added at offsets[m][j], lists in order, rows in order. Following D10 the
// scale applies on every path (Monolith's CPU kernel ignores it; its GPU kernel
// multiplies each addend, as here). Pass scale 1 for the plain gradient.
func FusedGatherEmbeddingsByInputGrad(dst []float32, grads [][]float32, offsets [][]int32, dims []int, scale float32) error {
	if err := checkFused("grads", len(dst), grads, offsets, dims); err != nil {
		return err
	}
	clear(dst)
	for m, offs := range offsets {
		d := dims[m]
		g := grads[m]
		for j, o := range offs {
			if scale == 1 {
				addTo(dst[int(o):int(o)+d], g[j*d:j*d+d])
			} else {
				addScaledTo(dst[int(o):int(o)+d], g[j*d:j*d+d], scale)
			}
		}
	}
	return nil
}
