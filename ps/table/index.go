package table

// index maps fids to row slots with open addressing and linear probing: one flat array of
// 12-byte cells (the key's two halves and the slot side by side, so that a probe's key and
// slot share a cache line), no per-entry heap objects. The capacity is any integer (home
// cell = (low 32 hash bits × capacity) >> 32); it grows by half when the load passes 4/5,
// so the load stays in [0.53, 0.8] and a cell costs 15–23 bytes per entry. Key 0 marks an
// empty cell, so fid 0 lives in a side field. Deletion shifts later cells of the probe run
// back (no tombstones), so lookups stay short after evictions. Not safe for concurrent
// use; the shard lock guards it.
type index struct {
	cells []cell
	n     int // keys held in the cells (fid 0 not included)

	hasZero  bool
	zeroSlot uint32
}

// cell is one index cell: key lo | hi<<32 (0: empty) and its slot.
type cell struct{ lo, hi, slot uint32 }

func (c *cell) key() uint64 { return uint64(c.lo) | uint64(c.hi)<<32 }

func (c *cell) set(k uint64, s uint32) { c.lo, c.hi, c.slot = uint32(k), uint32(k>>32), s }

const minIndexCap = 16

// home is the first cell probed for hash h.
func (x *index) home(h uint64) uint64 { return (h & 0xffffffff) * uint64(len(x.cells)) >> 32 }

func (x *index) next(i uint64) uint64 {
	if i++; i == uint64(len(x.cells)) {
		return 0
	}
	return i
}

func (x *index) len() int {
	if x.hasZero {
		return x.n + 1
	}
	return x.n
}

// get returns the slot of key k with hash h.
func (x *index) get(k, h uint64) (uint32, bool) {
	if k == 0 {
		return x.zeroSlot, x.hasZero
	}
	if x.cells == nil {
		return 0, false
	}
	for i := x.home(h); ; i = x.next(i) {
		c := &x.cells[i]
		switch c.key() {
		case k:
			return c.slot, true
		case 0:
			return 0, false
		}
	}
}

// put inserts k (which must be absent) with slot s.
func (x *index) put(k, h uint64, s uint32) {
	if k == 0 {
		x.hasZero, x.zeroSlot = true, s
		return
	}
	if (x.n+1)*5 > len(x.cells)*4 { // load above 4/5
		x.grow()
	}
	i := x.home(h)
	for x.cells[i].key() != 0 {
		i = x.next(i)
	}
	x.cells[i].set(k, s)
	x.n++
}

// reserve sizes an empty index for about n keys: at load 2/3, so that shards holding up
// to a fifth more than their share still do not grow.
func (x *index) reserve(n int) {
	if x.n == 0 && n > 0 {
		x.rehash(max(minIndexCap, n*3/2+1))
	}
}

func (x *index) grow() { x.rehash(max(minIndexCap, len(x.cells)+len(x.cells)/2)) }

// rehash moves every key into a new array of n cells.
func (x *index) rehash(n int) {
	old := x.cells
	x.cells = make([]cell, n)
	for _, c := range old {
		k := c.key()
		if k == 0 {
			continue
		}
		j := x.home(hash(int64(k)))
		for x.cells[j].key() != 0 {
			j = x.next(j)
		}
		x.cells[j] = c
	}
}

// del removes k and returns its slot.
func (x *index) del(k, h uint64) (uint32, bool) {
	if k == 0 {
		if !x.hasZero {
			return 0, false
		}
		s := x.zeroSlot
		x.hasZero, x.zeroSlot = false, 0
		return s, true
	}
	if x.cells == nil {
		return 0, false
	}
	i := x.home(h)
	for x.cells[i].key() != k {
		if x.cells[i].key() == 0 {
			return 0, false
		}
		i = x.next(i)
	}
	s := x.cells[i].slot
	// Backward-shift deletion: move later members of the run into the hole when their
	// home position does not lie cyclically in (hole, j].
	for j := x.next(i); x.cells[j].key() != 0; j = x.next(j) {
		home := x.home(hash(int64(x.cells[j].key())))
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			x.cells[i] = x.cells[j]
			i = j
		}
	}
	x.cells[i] = cell{}
	x.n--
	return s, true
}

// each calls fn for every key and slot.
func (x *index) each(fn func(k uint64, s uint32)) {
	if x.hasZero {
		fn(0, x.zeroSlot)
	}
	for i := range x.cells {
		if k := x.cells[i].key(); k != 0 {
			fn(k, x.cells[i].slot)
		}
	}
}

func (x *index) memoryBytes() int64 { return int64(len(x.cells)) * 12 }
