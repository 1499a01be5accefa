package reduce

import (
	"fmt"
)

func checkNumSplits(what string, n int) error {
	if n < 0 || n > MaxSplits {
		return fmt.Errorf("%w: %s %d not in [0, %d]", ErrRange, what, n, MaxSplits)
	}
	return nil
}

// splitCounts validates indices against numSplits and counts the entries per split.
func splitCounts(indices []int64, numSplits int) ([]int, error) {
	counts := make([]int, numSplits)
	for i, s := range indices {
		if s < 0 || s >= int64(numSplits) {
			return nil, fmt.Errorf("%w: indices[%d] = %d not in [0, %d)", ErrRange, i, s, numSplits)
		}
		counts[s]++
	}
	return counts, nil
}

// SplitByIndices partitions the rows of x (len(indices) rows of dim elements,
// row-major) into numSplits groups: group i holds, in their original order, the rows r
// with indices[r] == i (Monolith's split_by_indices; a stable partition). Example:
// indices [0,1,2,2,0] over ids [0,1,2,2,3] with 3 splits gives [[0,3],[1],[2,2]].
//
// The result is newly allocated: one backing array of len(x) elements that the
// returned slices view (each capped at its own end), owned by the caller.
// An index outside [0, numSplits) is an [ErrRange] error.
func SplitByIndices[T any](indices []int64, x []T, dim, numSplits int) ([][]T, error) {
	if err := checkNumSplits("numSplits", numSplits); err != nil {
		return nil, err
	}
	if err := checkMatrix("tensor", len(x), len(indices), dim); err != nil {
		return nil, err
	}
	counts, err := splitCounts(indices, numSplits)
	if err != nil {
		return nil, err
	}
	backing := make([]T, len(x))
	out := make([][]T, numSplits)
	start := 0
	for i, c := range counts {
		end := start + c*dim
		out[i] = backing[start:end:end]
		counts[i] = start // reuse counts as the write cursor of split i
		start = end
	}
	for r, s := range indices {
		w := counts[s]
		copy(backing[w:w+dim], x[r*dim:r*dim+dim])
		counts[s] = w + dim
	}
	return out, nil
}

// SplitByIndicesGrad is the gradient of [SplitByIndices]: it scatters the rows of
// grads[i] (one grad tensor per split, rows of dim elements) back to the positions of
// the rows that formed split i, writing dst (len(indices)×dim, fully overwritten).
// len(grads) is the number of splits; each grads[i] must hold exactly the row count
// of split i.
func SplitByIndicesGrad[T any](dst []T, indices []int64, grads [][]T, dim int) error {
	if err := checkNumSplits("len(grads)", len(grads)); err != nil {
		return err
	}
	if err := checkMatrix("dst", len(dst), len(indices), dim); err != nil {
		return err
	}
	counts, err := splitCounts(indices, len(grads))
	if err != nil {
		return err
	}
	for i, c := range counts {
		if err := checkMatrix(fmt.Sprintf("grads[%d]", i), len(grads[i]), c, dim); err != nil {
			return err
		}
		counts[i] = 0
	}
	for r, s := range indices {
		w := counts[s]
		copy(dst[r*dim:r*dim+dim], grads[s][w:w+dim])
		counts[s] = w + dim
	}
	return nil
}

// RaggedSplitByIndices splits the values of the ragged tensor num by indices (one
// index per value) into numSplits ragged tensors with the same number of rows as num:
// row r of splits[i] holds, in order, the values of row r whose index is i, and row r
// of pos[i] holds their positions in num.Values. Example: indices [0,1,0,1] over
// [[],[],[4,3,2],[1],[],[]] gives splits ([[],[],[4,2],[],[],[]], [[],[],[3],[1],[],[]])
// and pos ([[],[],[0,2],[],[],[]], [[],[],[1],[3],[],[]]).
//
// len(num.Values) ≠ len(indices) is an [ErrShape] error, as in Monolith. The result
// is newly allocated; pos[i].RowSplits is the same slice as splits[i].RowSplits.
func RaggedSplitByIndices[T any](indices []int64, num Ragged[T], numSplits int) (splits []Ragged[T], pos []Ragged[int64], err error) {
	if err := checkNumSplits("numSplits", numSplits); err != nil {
		return nil, nil, err
	}
	if len(num.Values) != len(indices) {
		return nil, nil, fmt.Errorf("%w: ragged tensor values size must match indices size: got %d vs %d", ErrShape, len(num.Values), len(indices))
	}
	if err := checkSplits("num", num.RowSplits, len(num.Values)); err != nil {
		return nil, nil, err
	}
	counts, err := splitCounts(indices, numSplits)
	if err != nil {
		return nil, nil, err
	}
	rows := num.Rows()
	nsplits := len(num.RowSplits)
	if n, ok := mulLen(numSplits, nsplits); !ok || n > MaxIndexLen {
		return nil, nil, fmt.Errorf("%w: %d splits × %d row splits", ErrOverflow, numSplits, nsplits)
	}
	valBack := make([]T, len(indices))
	posBack := make([]int64, len(indices))
	splitBack := make([]int64, numSplits*nsplits)
	splits = make([]Ragged[T], numSplits)
	pos = make([]Ragged[int64], numSplits)
	start := 0
	for i, c := range counts {
		rs := splitBack[i*nsplits : (i+1)*nsplits : (i+1)*nsplits]
		splits[i] = Ragged[T]{Values: valBack[start : start+c : start+c], RowSplits: rs}
		pos[i] = Ragged[int64]{Values: posBack[start : start+c : start+c], RowSplits: rs}
		counts[i] = 0 // now the number of values written to split i
		start += c
	}
	for r := 0; r < rows; r++ {
		for j := num.RowSplits[r]; j < num.RowSplits[r+1]; j++ {
			s := indices[j]
			w := counts[s]
			splits[s].Values[w] = num.Values[j]
			pos[s].Values[w] = j
			counts[s] = w + 1
		}
		for i := range splits {
			splits[i].RowSplits[r+1] = int64(counts[i])
		}
	}
	return splits, pos, nil
}

// ReorderByIndices deduplicates the rows of x (len(shardIDs) rows of dim elements) by
// their first element, keeping each first occurrence, and groups the survivors by
// shardIDs (the caller's precomputed shard of each row) in shard order. Within a
// shard the first-occurrence order is reversed, as Monolith's reorder_by_indices does.
// Example: [0,1,2,2,3,5] with shards id%3 gives [3,0,1,5,2] and sizes [2,1,2].
//
// Equality is Go's == on T (so NaN rows never deduplicate and -0 == +0, like
// Monolith's hash set). Every shard id must lie in [0, numShards); dim must be
// positive when there are rows. The result is newly allocated.
func ReorderByIndices[T comparable](x []T, dim int, shardIDs []int32, numShards int) (out []T, shardSizes []int32, err error) {
	if err := checkNumSplits("numShards", numShards); err != nil {
		return nil, nil, err
	}
	n := len(shardIDs)
	if err := checkMatrix("input", len(x), n, dim); err != nil {
		return nil, nil, err
	}
	if n > 0 && dim == 0 {
		return nil, nil, fmt.Errorf("%w: input rows have no first column to deduplicate by", ErrShape)
	}
	for i, s := range shardIDs {
		if s < 0 || int(s) >= numShards {
			return nil, nil, fmt.Errorf("%w: shard_ids[%d] = %d not in [0, %d)", ErrRange, i, s, numShards)
		}
	}
	seen := make(map[T]struct{}, n)
	firsts := make([]int, 0, n)
	ends := make([]int, numShards)
	for i := 0; i < n; i++ {
		k := x[i*dim]
		if _, ok := seen[k]; ok {
			continue
		}
		seen[k] = struct{}{}
		firsts = append(firsts, i)
		ends[shardIDs[i]]++
	}
	shardSizes = make([]int32, numShards)
	total := 0
	for s, c := range ends {
		shardSizes[s] = int32(c)
		total += c
		ends[s] = total
	}
	out = make([]T, len(firsts)*dim)
	for _, i := range firsts {
		s := shardIDs[i]
		ends[s]--
		w := ends[s] * dim
		copy(out[w:w+dim], x[i*dim:i*dim+dim])
	}
	return out, shardSizes, nil
}

// MonolithRank0Empty returns Monolith's default rank0Empty for
// [FusedReorderByIndices]: true when numShards > 4. (Monolith reads this from the
// environment variable MONOLITH_SYNC_EMPTY_RANK0_PS_SHARD, default "1", and turns
// the rule off for any other value; this package never reads the environment.)
func MonolithRank0Empty(numShards int) bool { return numShards > 4 }

// FusedReorder holds the five outputs of [FusedReorderByIndices] plus reusable
// scratch. The zero value is ready to use; passing the same FusedReorder to every call
// makes the op allocation-free once it has seen the largest input. The output slices
// are overwritten by the next call. Not safe for concurrent use.
type FusedReorder[K ID] struct {
	// Output is the deduplicated ids, concatenated over shard n then list m.
	Output []K
	// ShardSizes[n] is the number of Output ids of shard n.
	ShardSizes []int32
	// ShardedSlotSizes[n*M+m] is the number of Output ids of shard n from list m.
	ShardedSlotSizes []int32
	// EmbOffsetSz[m] is len(inputs[m]), duplicates included.
	EmbOffsetSz []int32
	// FusedEmbOffset has one entry per input occurrence (lists concatenated): the
	// float offset of its embedding in the fused buffer laid out like Output, where
	// each id of list m takes dims[m] floats.
	FusedEmbOffset []int32

	table  idTable
	uidx   []int32 // per occurrence: global unique index
	uval   []K     // per unique: the id
	ushard []int32 // per unique: its shard
	upos   []int32 // per unique: its position within bucket (shard, list)
	ustart []int   // per list: first global unique index (len M+1)
	start  []int32 // per bucket n*M+m: first Output position
	base   []int64 // per bucket n*M+m: first float offset
}

// FusedReorderByIndices deduplicates each input list (keeping first occurrences),
// shards every id and lays the ids out shard-major, list-minor, with the float
// offsets of a fused embedding buffer in that layout (Monolith's
// fused_reorder_by_indices; see the FusedReorder fields for the five outputs).
//
// The shard of an id v is uint64(v) % (numShards − r) + r with r = 1 when rank0Empty
// (shard 0 then receives nothing) and r = 0 otherwise. Monolith computes the rule
// from an environment variable (see [MonolithRank0Empty]); here the caller decides.
// Monolith uses a signed remainder, which gives negative (invalid) shards for
// negative ids; following D4 the id is read as uint64. Results agree for ids ≥ 0.
//
// len(dims) must equal len(inputs); rank0Empty needs numShards ≥ 2. Positions and
// offsets are int32 as in Monolith: larger results are an [ErrOverflow] error.
func FusedReorderByIndices[K ID](dst *FusedReorder[K], inputs [][]K, numShards int, dims []int, rank0Empty bool) error {
	if numShards < 1 || numShards > MaxSplits {
		return fmt.Errorf("%w: numShards %d not in [1, %d]", ErrRange, numShards, MaxSplits)
	}
	if rank0Empty && numShards < 2 {
		return fmt.Errorf("%w: rank0Empty needs at least 2 shards, got %d", ErrRange, numShards)
	}
	M := len(inputs)
	if len(dims) != M {
		return fmt.Errorf("%w: %d dims for %d input lists", ErrShape, len(dims), M)
	}
	if err := checkDims("dims", dims); err != nil {
		return err
	}
	for m, d := range dims {
		if d > MaxIndexLen {
			return fmt.Errorf("%w: dims[%d] = %d", ErrOverflow, m, d)
		}
	}
	if _, ok := mulLen(numShards, M); !ok || numShards*M > MaxIndexLen {
		return fmt.Errorf("%w: %d shards × %d lists", ErrOverflow, numShards, M)
	}
	total := 0
	for _, in := range inputs {
		total += len(in)
	}
	if total > MaxIndexLen {
		return fmt.Errorf("%w: %d ids", ErrOverflow, total)
	}

	var r uint64
	if rank0Empty {
		r = 1
	}
	p := uint64(numShards) - r
	pow2 := p&(p-1) == 0
	nb := numShards * M

	dst.ShardSizes = growLen(dst.ShardSizes, numShards)
	dst.ShardedSlotSizes = growLen(dst.ShardedSlotSizes, nb)
	dst.EmbOffsetSz = growLen(dst.EmbOffsetSz, M)
	dst.FusedEmbOffset = growLen(dst.FusedEmbOffset, total)
	dst.uidx = growLen(dst.uidx, total)
	dst.ustart = growLen(dst.ustart, M+1)
	dst.start = growLen(dst.start, nb)
	dst.base = growLen(dst.base, nb)
	clear(dst.ShardSizes)
	counts := dst.ShardedSlotSizes
	clear(counts)
	uval, ushard, upos := growCap(dst.uval, total), growCap(dst.ushard, total), growCap(dst.upos, total)

	// Pass 1: per list, deduplicate and assign each unique id its shard and its
	// position in bucket (shard, list).
	off := 0
	for m, in := range inputs {
		dst.EmbOffsetSz[m] = int32(len(in))
		dst.ustart[m] = len(uval)
		dst.table.reset(len(in))
		uidx := dst.uidx[off : off+len(in)]
		for i, v := range in {
			u, isNew := dst.table.getOrInsert(uint64(v), int32(len(uval)))
			if isNew {
				var s uint64
				if pow2 {
					s = uint64(v)&(p-1) + r
				} else {
					s = uint64(v)%p + r
				}
				b := int(s)*M + m
				uval = append(uval, v)
				ushard = append(ushard, int32(s))
				upos = append(upos, counts[b])
				counts[b]++
			}
			uidx[i] = u
		}
		off += len(in)
	}
	dst.ustart[M] = len(uval)
	dst.uval, dst.ushard, dst.upos = uval, ushard, upos

	// Pass 2: bucket starts (ids) and bases (floats), shard-major, list-minor.
	var pos int32
	var floats int64
	for n := 0; n < numShards; n++ {
		for m := 0; m < M; m++ {
			b := n*M + m
			c := counts[b]
			dst.start[b] = pos
			dst.base[b] = floats
			pos += c
			dst.ShardSizes[n] += c
			floats += int64(c) * int64(dims[m])
		}
	}
	if floats > MaxIndexLen {
		return fmt.Errorf("%w: fused embedding buffer of %d floats", ErrOverflow, floats)
	}

	// Pass 3: place the unique ids.
	dst.Output = growLen(dst.Output, len(uval))
	for m := 0; m < M; m++ {
		for u := dst.ustart[m]; u < dst.ustart[m+1]; u++ {
			b := int(ushard[u])*M + m
			dst.Output[dst.start[b]+upos[u]] = uval[u]
		}
	}

	// Pass 4: the fused embedding offset of every occurrence.
	off = 0
	for m, in := range inputs {
		dim := int64(dims[m])
		uidx := dst.uidx[off : off+len(in)]
		out := dst.FusedEmbOffset[off : off+len(in)]
		for i, u := range uidx {
			b := int(ushard[u])*M + m
			out[i] = int32(dst.base[b] + int64(upos[u])*dim)
		}
		off += len(in)
	}
	return nil
}
