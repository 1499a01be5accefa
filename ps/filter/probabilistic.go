package filter

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/monolith-go/monolith/internal/mix"
	"github.com/monolith-go/monolith/io/tfrecord"
)

// golden is splitmix64's increment (the step of internal/mix's SplitMix sequence).
const golden = 0x9e3779b97f4a7c15

// probabilistic admits at random with a probability growing with the count (§5.4).
type probabilistic struct {
	th    *slotThresholds
	equal bool
	state atomic.Uint64 // SplitMix64 counter
}

func newProbabilistic(th *slotThresholds, equal bool, seed uint64) *probabilistic {
	p := &probabilistic{th: th, equal: equal}
	p.state.Store(seed)
	return p
}

// u32 returns the next uniform 32-bit value of the seeded SplitMix64 sequence. Concurrent
// callers each get a distinct element of the sequence.
func (p *probabilistic) u32() uint32 { return uint32(mix.Mix64(p.state.Add(golden)) >> 32) }

func (p *probabilistic) Kind() string { return KindProbabilistic }

// Admit implements Filter. A count of 0 counts as 1.
//
// Unequal mode: admit iff U·T < 0xFFFFFFFF·c, so P ≈ min(1, c/T). Equal mode: with
// p = 1 − 0.05^(1/T) per occurrence, admit with probability 1 − (1−p)^c = 1 − 0.05^(c/T),
// so T occurrences admit with probability 0.95.
func (p *probabilistic) Admit(f int64, count uint32) bool {
	t := p.th.of(f)
	if t == 0 {
		return true
	}
	c := uint64(max(count, 1))
	u := uint64(p.u32())
	if !p.equal {
		return u*uint64(t) < math.MaxUint32*c
	}
	return float64(u) < math.MaxUint32*(1-math.Pow(0.05, float64(c)/float64(t)))
}

// Save implements Filter: the filter is stateless and writes nothing.
func (p *probabilistic) Save(*tfrecord.Writer) error { return nil }

// Restore implements Filter: records are read and ignored (see the package doc).
func (p *probabilistic) Restore(r *tfrecord.Reader) error { return drain(r) }

// MemoryBytes implements Filter.
func (p *probabilistic) MemoryBytes() int64 { return int64(unsafe.Sizeof(*p)) + p.th.memoryBytes() }
