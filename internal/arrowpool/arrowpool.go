// Package arrowpool is an Arrow memory.Allocator that keeps released buffers for reuse.
// A stream of batches of similar shape then takes its buffers from the batches released
// before it instead of from the Go heap, which leaves the collector little to find.
// Buffers are 64-byte aligned and zeroed when handed out, as memory.GoAllocator's are.
package arrowpool

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

const (
	alignment = 64
	minClass  = 6  // 64 bytes
	maxClass  = 30 // 1 GiB: larger buffers are not kept
	// DefaultLimit is the bytes of free buffers a Pool keeps by default.
	DefaultLimit = 32 << 20
)

// Pool is a memory.Allocator whose freed buffers serve later allocations of the same size
// class (powers of two). It keeps at most its limit of free bytes and lets the collector
// have the rest. Safe for concurrent use.
type Pool struct {
	limit   int
	mu      sync.Mutex
	free    [maxClass + 1][][]byte
	held    int // bytes in free
	reused  int64
	created int64
}

var _ memory.Allocator = (*Pool)(nil)

// New returns a Pool that keeps at most limit bytes of free buffers (DefaultLimit if
// limit ≤ 0).
func New(limit int) *Pool {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &Pool{limit: limit}
}

// class is the size class of a buffer of n bytes: the smallest c with 1<<c ≥ n.
func class(n int) int { return max(minClass, bits.Len(uint(n-1))) }

// Allocate returns a zeroed, 64-byte aligned slice of size bytes.
func (p *Pool) Allocate(size int) []byte {
	if size <= 0 {
		return []byte{}
	}
	c := class(size)
	if c <= maxClass {
		p.mu.Lock()
		if n := len(p.free[c]); n > 0 {
			b := p.free[c][n-1]
			p.free[c][n-1] = nil
			p.free[c] = p.free[c][:n-1]
			p.held -= cap(b)
			p.reused++
			p.mu.Unlock()
			b = b[:size]
			clear(b)
			return b
		}
		p.created++
		p.mu.Unlock()
		return aligned(1 << c)[:size]
	}
	return aligned(size)
}

// aligned returns a zeroed slice of n bytes (and as much capacity) starting at a 64-byte
// boundary.
func aligned(n int) []byte {
	buf := make([]byte, n+alignment)
	shift := (alignment - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%alignment)) % alignment
	return buf[shift : shift+n : shift+n]
}

// Reallocate returns a slice of size bytes holding b's bytes, zero beyond them.
func (p *Pool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free keeps b for a later allocation of its class, unless the pool holds its limit
// already or b did not come from a pool.
func (p *Pool) Free(b []byte) {
	n := cap(b)
	if n < 1<<minClass || n&(n-1) != 0 {
		return // not a class size: not ours
	}
	c := bits.Len(uint(n)) - 1
	if c > maxClass || uintptr(unsafe.Pointer(unsafe.SliceData(b[:1])))%alignment != 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+n > p.limit {
		return
	}
	p.free[c] = append(p.free[c], b[:0])
	p.held += n
}

// Stats reports the allocations served from released buffers and those made new.
func (p *Pool) Stats() (reused, created int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reused, p.created
}
