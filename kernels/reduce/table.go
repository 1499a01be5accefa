package reduce

// idTable is an open-addressing (linear probing) hash table from uint64 keys to
// int32 values, the only hash structure of the package. Each 16-byte slot holds its
// key, value and the generation that wrote it, so a probe touches one cache line and
// reset empties the table by bumping the generation instead of clearing memory.
// reset sizes the table for n keys at load ≤ 1/2 and reuses the slot array, so a
// warmed-up table never allocates.
type idTable struct {
	slots []slot
	gen   uint32
	mask  uint64
	shift uint
}

type slot struct {
	key uint64
	val int32
	gen uint32 // the slot is occupied iff gen == idTable.gen
}

// minTableSize is the smallest slot count (a power of two).
const minTableSize = 16

// reset empties the table and sizes it for up to n distinct keys.
func (t *idTable) reset(n int) {
	size, bits := minTableSize, uint(4)
	for size < 2*n {
		size <<= 1
		bits++
	}
	if cap(t.slots) < size {
		t.slots = make([]slot, size)
		t.gen = 0
	}
	t.slots = t.slots[:size]
	t.gen++
	if t.gen == 0 { // wrapped: stale slots could look current
		clear(t.slots[:cap(t.slots)])
		t.gen = 1
	}
	t.mask = uint64(size - 1)
	t.shift = 64 - bits
}

// home returns the home slot of k: a Fibonacci hash of k with its high half folded
// in, so fids differing only in their slot bits (high) or only in their low bits
// both spread.
func (t *idTable) home(k uint64) uint64 {
	return ((k ^ k>>32) * 0x9E3779B97F4A7C15) >> t.shift
}

// getOrInsert returns the value of k, inserting v when k is absent. inserted reports
// whether k was new. The caller guarantees at most n distinct keys since reset(n).
func (t *idTable) getOrInsert(k uint64, v int32) (got int32, inserted bool) {
	slots, mask, gen := t.slots, t.mask, t.gen
	i := t.home(k)
	for {
		i &= mask
		s := &slots[i]
		if s.gen != gen {
			*s = slot{key: k, val: v, gen: gen}
			return v, true
		}
		if s.key == k {
			return s.val, false
		}
		i++
	}
}

// get returns the value of k, or -1 when k is absent.
func (t *idTable) get(k uint64) int32 {
	slots, mask, gen := t.slots, t.mask, t.gen
	if len(slots) == 0 {
		return -1
	}
	i := t.home(k)
	for {
		i &= mask
		s := &slots[i]
		if s.gen != gen {
			return -1
		}
		if s.key == k {
			return s.val
		}
		i++
	}
}

// touch loads the home slots of keys so that their cache misses overlap; the
// returned value only keeps the loads alive. Batched kernels call it on the next
// few keys before probing them one by one.
func touch[K ID](t *idTable, keys []K) uint32 {
	var acc uint32
	slots, mask := t.slots, t.mask
	for _, k := range keys {
		acc ^= slots[t.home(uint64(k))&mask].gen
	}
	return acc
}
