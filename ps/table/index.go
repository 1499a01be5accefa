package table

// index maps fids to row slots with open addressing and linear probing: two flat
// arrays, no per-entry heap objects. The capacity is any integer (home cell =
// (low 32 hash bits × capacity) >> 32); it grows by half when the load passes 4/5, so the
// load stays in [0.53, 0.8] and a cell costs 15–23 bytes per entry. Key 0 marks an empty cell, so fid 0 lives in a side
// field. Deletion shifts later cells of the probe run back (no tombstones), so lookups
// stay short after evictions. Not safe for concurrent use; the shard lock guards it.
type index struct {
	keys  []uint64
	slots []uint32
	n     int // keys held in the arrays (fid 0 not included)

	hasZero  bool
	zeroSlot uint32
}

const minIndexCap = 16

// home is the first cell probed for hash h.
func (x *index) home(h uint64) uint64 { return (h & 0xffffffff) * uint64(len(x.keys)) >> 32 }

func (x *index) next(i uint64) uint64 {
	if i++; i == uint64(len(x.keys)) {
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
	if x.keys == nil {
		return 0, false
	}
	for i := x.home(h); ; i = x.next(i) {
		switch x.keys[i] {
		case k:
			return x.slots[i], true
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
	if (x.n+1)*5 > len(x.keys)*4 { // load above 4/5
		x.grow()
	}
	i := x.home(h)
	for x.keys[i] != 0 {
		i = x.next(i)
	}
	x.keys[i], x.slots[i] = k, s
	x.n++
}

// reserve sizes an empty index for about n keys: at load 2/3, so that shards holding up
// to a fifth more than their share still do not grow.
func (x *index) reserve(n int) {
	if x.n == 0 && n > 0 {
		x.rehash(max(minIndexCap, n*3/2+1))
	}
}

func (x *index) grow() { x.rehash(max(minIndexCap, len(x.keys)+len(x.keys)/2)) }

// rehash moves every key into a new array of n cells.
func (x *index) rehash(n int) {
	keys, slots := x.keys, x.slots
	x.keys, x.slots = make([]uint64, n), make([]uint32, n)
	for i, k := range keys {
		if k == 0 {
			continue
		}
		j := x.home(hash(int64(k)))
		for x.keys[j] != 0 {
			j = x.next(j)
		}
		x.keys[j], x.slots[j] = k, slots[i]
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
	if x.keys == nil {
		return 0, false
	}
	i := x.home(h)
	for x.keys[i] != k {
		if x.keys[i] == 0 {
			return 0, false
		}
		i = x.next(i)
	}
	s := x.slots[i]
	// Backward-shift deletion: move later members of the run into the hole when their
	// home position does not lie cyclically in (hole, j].
	for j := x.next(i); x.keys[j] != 0; j = x.next(j) {
		home := x.home(hash(int64(x.keys[j])))
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			x.keys[i], x.slots[i] = x.keys[j], x.slots[j]
			i = j
		}
	}
	x.keys[i], x.slots[i] = 0, 0
	x.n--
	return s, true
}

// each calls fn for every key and slot.
func (x *index) each(fn func(k uint64, s uint32)) {
	if x.hasZero {
		fn(0, x.zeroSlot)
	}
	for i, k := range x.keys {
		if k != 0 {
			fn(k, x.slots[i])
		}
	}
}

func (x *index) memoryBytes() int64 { return int64(len(x.keys)) * 12 }
