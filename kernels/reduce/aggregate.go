package reduce

import (
	"fmt"
	"math"
)

// Aggregated holds per-id gradient sums: the result of [AggregateGrads] and
// [AggregateGradsRagged], the step before a parameter-server push. The zero value is
// ready to use; passing the same Aggregated to every call makes aggregation
// allocation-free once it has seen the largest batch. The slices are overwritten by
// the next call. Not safe for concurrent use.
type Aggregated[K ID] struct {
	// IDs is the distinct ids, in first-occurrence order.
	IDs []K
	// Grads holds the summed grad rows, in IDs order, concatenated.
	Grads []float32
	// Counts[u] is the number of occurrences summed into IDs[u].
	Counts []int32
	// Dim is the row width after AggregateGrads, 0 after AggregateGradsRagged.
	Dim int
	// Offsets[u] is the start of IDs[u]'s row in Grads (len(IDs)+1 entries) after
	// AggregateGradsRagged; nil after AggregateGrads (use Dim).
	Offsets []int

	table idTable
	offs  []int  // backing store of Offsets, kept across uniform calls
	sink  uint32 // keeps the prefetching loads alive
}

// aggBatch is the number of ids whose cache misses AggregateGrads overlaps.
const aggBatch = 32

// Len returns the number of distinct ids.
func (a *Aggregated[K]) Len() int { return len(a.IDs) }

// Row returns the summed grad row of IDs[u], a subslice of Grads.
func (a *Aggregated[K]) Row(u int) []float32 {
	if a.Offsets != nil {
		return a.Grads[a.Offsets[u]:a.Offsets[u+1]]
	}
	return a.Grads[u*a.Dim : (u+1)*a.Dim]
}

// AggregateGrads sums the grad rows of equal ids: grads is len(ids)×dim, one row per
// id occurrence. dst receives the distinct ids in first-occurrence order, their summed
// rows and occurrence counts. Each sum starts from the id's first row and adds the
// later rows in occurrence order, so results are bitwise deterministic. This is
// Monolith's map_id_to_embedding_gradient over unique ids, as DistributedHashTable's
// apply_gradients uses it, in one pass.
func AggregateGrads[K ID](dst *Aggregated[K], ids []K, grads []float32, dim int) error {
	if err := checkMatrix("grads", len(grads), len(ids), dim); err != nil {
		return err
	}
	if len(ids) > MaxIndexLen {
		return fmt.Errorf("%w: %d ids", ErrOverflow, len(ids))
	}
	dst.Dim = dim
	dst.Offsets = nil
	dst.table.reset(len(ids))
	uids := growCap(dst.IDs, len(ids))
	counts := growCap(dst.Counts, len(ids))
	// Grads is sized for the worst case (all distinct) so rows are written in place.
	out := growLen(dst.Grads, len(grads))
	// Blocks of aggBatch ids run in three stages so that cache misses overlap:
	// touch the table slots, probe them in order, touch the rows that get added to,
	// then copy or add the rows in order (which keeps the summation order).
	var us [aggBatch]int32
	var acc uint32
	for lo := 0; lo < len(ids); lo += aggBatch {
		blk := ids[lo:min(lo+aggBatch, len(ids))]
		acc ^= touch(&dst.table, blk)
		for j, id := range blk {
			u, isNew := dst.table.getOrInsert(uint64(id), int32(len(uids)))
			if isNew {
				uids = append(uids, id)
				counts = append(counts, 0)
				us[j] = ^u // marks "first occurrence"
				continue
			}
			us[j] = u
			if dim > 0 {
				acc ^= math.Float32bits(out[int(u)*dim])
			}
		}
		for j := range blk {
			i := lo + j
			src := grads[i*dim : i*dim+dim]
			if u := us[j]; u < 0 {
				u = ^u
				counts[u] = 1
				copy(out[int(u)*dim:int(u)*dim+dim], src)
			} else {
				counts[u]++
				addTo(out[int(u)*dim:int(u)*dim+dim], src)
			}
		}
	}
	dst.sink = acc
	dst.IDs = uids
	dst.Counts = counts
	dst.Grads = out[:len(uids)*dim]
	return nil
}

// AggregateGradsRagged is [AggregateGrads] for rows of varying width, such as a
// (table, ps) gradient buffer where each fid contributes its feature's D floats:
// occurrence i owns the next dims[i] floats of grads (len(grads) must be Σ dims).
// Every occurrence of an id must have the same width ([ErrShape] naming the id
// otherwise; dst is then left empty). dst.Offsets locates each distinct id's row;
// dst.Dim is 0.
func AggregateGradsRagged[K ID](dst *Aggregated[K], ids []K, grads []float32, dims []int) error {
	if len(dims) != len(ids) {
		return fmt.Errorf("%w: %d dims for %d ids", ErrShape, len(dims), len(ids))
	}
	if len(ids) > MaxIndexLen {
		return fmt.Errorf("%w: %d ids", ErrOverflow, len(ids))
	}
	total := 0
	for i, d := range dims {
		if d < 0 {
			return fmt.Errorf("%w: dims[%d] = %d is negative", ErrRange, i, d)
		}
		if d > len(grads)-total {
			return fmt.Errorf("%w: grads has %d floats, dims need more", ErrShape, len(grads))
		}
		total += d
	}
	if total != len(grads) {
		return fmt.Errorf("%w: grads has %d floats, dims sum to %d", ErrShape, len(grads), total)
	}
	dst.Dim = 0
	dst.table.reset(len(ids))
	uids := growCap(dst.IDs, len(ids))
	counts := growCap(dst.Counts, len(ids))
	offs := append(growCap(dst.offs, len(ids)+1), 0)
	out := growLen(dst.Grads, len(grads))
	// The same three stages as AggregateGrads.
	var us [aggBatch]int32
	var acc uint32
	r := 0
	for lo := 0; lo < len(ids); lo += aggBatch {
		blk := ids[lo:min(lo+aggBatch, len(ids))]
		acc ^= touch(&dst.table, blk)
		for j, id := range blk {
			d := dims[lo+j]
			u, isNew := dst.table.getOrInsert(uint64(id), int32(len(uids)))
			if isNew {
				uids = append(uids, id)
				counts = append(counts, 0)
				offs = append(offs, offs[len(offs)-1]+d)
				us[j] = ^u
				continue
			}
			if w := offs[u+1] - offs[u]; w != d {
				dst.IDs, dst.Counts, dst.Grads = uids[:0], counts[:0], out[:0]
				dst.offs, dst.Offsets = offs[:1], offs[:1]
				return fmt.Errorf("%w: id %d has %d floats at occurrence %d but %d before", ErrShape, id, d, lo+j, w)
			}
			us[j] = u
			if d > 0 {
				acc ^= math.Float32bits(out[offs[u]])
			}
		}
		for j := range blk {
			d := dims[lo+j]
			src := grads[r : r+d]
			r += d
			if u := us[j]; u < 0 {
				u = ^u
				counts[u] = 1
				copy(out[offs[u]:offs[u+1]], src)
			} else {
				counts[u]++
				addTo(out[offs[u]:offs[u+1]], src)
			}
		}
	}
	dst.sink = acc
	dst.IDs = uids
	dst.Counts = counts
	dst.offs = offs
	dst.Offsets = offs
	dst.Grads = out[:offs[len(offs)-1]]
	return nil
}
