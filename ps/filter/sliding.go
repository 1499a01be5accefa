package filter

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/monolith-go/monolith/internal/mix"
)

// Sliding filter constants (frozen: dumps record and validate them).
const (
	maxForwardStep = 2  // sub-filters searched forward from head (Monolith's max_forward_step)
	maxStep        = 16 // cells probed per sub-filter (Monolith's MAX_STEP of the sliding filter)
	fillRate       = 1.2
	countBits      = 16
	countMask      = 1<<countBits - 1 // also the saturated count
	// MaxSplitNum bounds split_num so that a configuration cannot allocate an absurd ring.
	MaxSplitNum = 1024
)

// geometry is the shape of a sliding filter, fixed at construction.
type geometry struct {
	capacity      uint64 // distinct fids tracked (after defaulting and raising to MinCapacity)
	splitNum      int    // sub-filters in the ring: max(split_num, MinSplitNum)
	splitCapacity uint64 // elements a sub-filter holds before it is full
	totalSize     uint64 // probe starts lie in [0, totalSize)
	cells         int    // cells per sub-filter: totalSize + maxStep (probes never wrap)
}

func newGeometry(capacity uint64, splitNum uint32) (geometry, error) {
	switch {
	case capacity == 0:
		capacity = DefaultCapacity
	case capacity < MinCapacity:
		capacity = MinCapacity
	case capacity > MaxCapacity:
		return geometry{}, fmt.Errorf("%w: capacity %d exceeds the maximum %d", ErrInvalidConfig, capacity, uint64(MaxCapacity))
	}
	switch {
	case splitNum == 0:
		splitNum = DefaultSplitNum
	case splitNum < MinSplitNum:
		splitNum = MinSplitNum
	case splitNum > MaxSplitNum:
		return geometry{}, fmt.Errorf("%w: split_num %d exceeds the maximum %d", ErrInvalidConfig, splitNum, MaxSplitNum)
	}
	g := geometry{capacity: capacity, splitNum: int(splitNum)}
	// Monolith keeps max_forward_step-1 sub-filters free for looking forward.
	g.splitCapacity = capacity / uint64(g.splitNum-maxForwardStep+1)
	if g.splitCapacity < 2 {
		return geometry{}, fmt.Errorf("%w: capacity %d is too small for split_num %d (each sub-filter must hold at least 2 fids)", ErrInvalidConfig, capacity, splitNum)
	}
	g.totalSize = g.splitCapacity * 12 / 10 // × fillRate, truncated like Monolith's size_t(capacity*1.2)
	g.cells = int(g.totalSize) + maxStep
	return g, nil
}

// subFilter is one open-addressing counting filter of the ring (Monolith's HashFilter).
// Cells are (signature << 16) | count with count >= 1; 0 is an empty cell. A cell only
// changes from empty to a signature, or its count grows, while the owning sliding filter's
// read lock is held; clearing takes the write lock.
type subFilter struct {
	cells       []atomic.Uint32
	numElements atomic.Uint64 // non-empty cells, capped at splitCapacity (as Monolith)
	failures    atomic.Uint64 // probes of this sub-filter that found no usable cell
}

// probe returns the first cell of h's probe sequence that is empty or holds its
// signature, with its value, or -1 when none of the maxStep cells qualifies.
func (f *subFilter) probe(h hashed) (int, uint32) {
	cells := f.cells[h.pos : h.pos+maxStep]
	for i := range cells {
		c := cells[i].Load()
		if c == 0 || c>>countBits == h.sig {
			return int(h.pos) + i, c
		}
	}
	return -1, 0
}

// countElement records a new non-empty cell.
func (f *subFilter) countElement(capacity uint64) {
	for {
		n := f.numElements.Load()
		if n >= capacity || f.numElements.CompareAndSwap(n, n+1) {
			return
		}
	}
}

// full is Monolith's HashFilter::full.
func (f *subFilter) full(capacity uint64) bool { return f.numElements.Load() >= capacity-1 }

// sliding is the sliding counting hash filter (§5.3).
type sliding struct {
	g  geometry
	th *slotThresholds

	// mu is held for reading by Admit, which updates cells with atomic operations, and for
	// writing by a slide, Save and Restore.
	mu            sync.RWMutex
	head          int    // guarded by mu
	headIncrement uint32 // slides so far, saturating; guarded by mu
	failures      atomic.Uint64
	filters       []subFilter
}

func newSliding(g geometry, th *slotThresholds) *sliding {
	s := &sliding{g: g, th: th, filters: make([]subFilter, g.splitNum)}
	for i := range s.filters {
		s.filters[i].cells = make([]atomic.Uint32, g.cells)
	}
	return s
}

// hashed is a fid's probe start and signature.
type hashed struct {
	pos uint64
	sig uint32
}

// hash returns f's probe start (from the high bits of the hash, by multiply-shift
// reduction into [0, totalSize)) and its 16-bit signature (the low bits). The hash is the
// first splitmix64 output seeded with f (frozen: dumps depend on it).
func (s *sliding) hash(f int64) hashed {
	h := mix.SplitMix(uint64(f), 1)
	pos, _ := bits.Mul64(h, s.g.totalSize)
	return hashed{pos: pos, sig: uint32(h & countMask)}
}

func (s *sliding) Kind() string { return KindSlidingHash }

// Admit implements Filter. A count of 0 counts as 1.
func (s *sliding) Admit(f int64, count uint32) bool {
	t := s.th.of(f)
	if t == 0 {
		return true // threshold 0 always admits and is not counted (as Monolith)
	}
	count = max(count, 1)
	before, slide := s.add(s.hash(f), count)
	if slide {
		s.slide()
	}
	return admits(before, count, t)
}

func (s *sliding) next(i int) int { return (i + 1) % s.g.splitNum }
func (s *sliding) prev(i int) int { return (i + s.g.splitNum - 1) % s.g.splitNum }

// add adds count to h's counter and returns the count before adding (countMask when no
// cell was found, which admits every threshold). slide reports that filters[head] is full
// and the ring must advance.
func (s *sliding) add(h hashed, count uint32) (before uint32, slide bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for {
		fwd, idx, cell, missed := s.forward(h)
		for j := s.head; missed > 0; j, missed = s.next(j), missed-1 {
			s.filters[j].failures.Add(1)
		}
		if fwd == nil {
			s.failures.Add(1)
			return countMask, false
		}
		c := &fwd.cells[idx]
		if cell != 0 {
			// Known fid: saturating add. The signature of a non-empty cell never changes
			// under the read lock, so only the count can have moved.
			for {
				old := cell & countMask
				if old == countMask || c.CompareAndSwap(cell, h.sig<<countBits|saturate(uint64(old)+uint64(count))) {
					return old, false
				}
				cell = c.Load()
			}
		}
		// New in the forward window: carry the count of an older sub-filter, if any.
		old := s.backward(h)
		if !c.CompareAndSwap(0, h.sig<<countBits|saturate(uint64(old)+uint64(count))) {
			continue // another writer took the cell; search again
		}
		fwd.countElement(s.g.splitCapacity)
		return old, s.filters[s.head].full(s.g.splitCapacity)
	}
}

// forward searches head, head+1, … (maxForwardStep sub-filters) for a cell holding h or
// empty. It returns the first sub-filter that has one with the cell's index and value, and
// the number of sub-filters probed in vain before it (all of them, with a nil sub-filter,
// when none has one). It changes nothing. The caller holds the read lock.
func (s *sliding) forward(h hashed) (f *subFilter, idx int, cell uint32, missed int) {
	for j := s.head; missed < maxForwardStep; j, missed = s.next(j), missed+1 {
		f := &s.filters[j]
		if idx, cell := f.probe(h); idx >= 0 {
			return f, idx, cell, missed
		}
	}
	return nil, -1, 0, missed
}

// backward returns h's count in the newest of the min(headIncrement, splitNum-2) sub-filters
// before head that holds it, or 0.
func (s *sliding) backward(h hashed) uint32 {
	n := min(int(min(s.headIncrement, math.MaxInt32)), s.g.splitNum-maxForwardStep)
	for i, j := 0, s.prev(s.head); i < n; i, j = i+1, s.prev(j) {
		if idx, cell := s.filters[j].probe(h); idx >= 0 && cell != 0 {
			return cell & countMask
		}
	}
	return 0
}

// slide advances head when filters[head] is full and clears the sub-filter after the new
// head, forgetting the oldest counts.
func (s *sliding) slide() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.filters[s.head].full(s.g.splitCapacity) {
		return // another writer slid first
	}
	s.head = s.next(s.head)
	if s.headIncrement < math.MaxUint32 {
		s.headIncrement++
	}
	f := &s.filters[s.next(s.head)]
	clear(f.cells)
	f.numElements.Store(0)
	f.failures.Store(0)
}

// saturate caps a count at countMask.
func saturate[T uint32 | uint64](c T) uint32 { return uint32(min(c, countMask)) }

// MemoryBytes implements Filter: the cells, the thresholds and the bookkeeping.
func (s *sliding) MemoryBytes() int64 {
	var cell atomic.Uint32
	n := int64(unsafe.Sizeof(*s)) + s.th.memoryBytes()
	n += int64(len(s.filters)) * (int64(unsafe.Sizeof(subFilter{})) + int64(s.g.cells)*int64(unsafe.Sizeof(cell)))
	return n
}
