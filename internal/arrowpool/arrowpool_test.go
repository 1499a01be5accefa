package arrowpool

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func aligned64(b []byte) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment == 0
}

// TestReuse: a freed buffer serves the next allocation of its class, zeroed and aligned;
// other classes get new buffers.
func TestReuse(t *testing.T) {
	tests := []struct {
		name         string
		first, later int
		reused       bool
	}{
		{"same size", 1000, 1000, true},
		{"same class", 1000, 600, true},
		{"smaller class", 1000, 100, false},
		{"larger class", 1000, 3000, false},
		{"smallest class", 1, 64, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(0)
			b := p.Allocate(tc.first)
			for i := range b {
				b[i] = 0xAB
			}
			p.Free(b)
			r0, _ := p.Stats()
			c := p.Allocate(tc.later)
			r1, _ := p.Stats()
			if got := r1 > r0; got != tc.reused {
				t.Errorf("reused %v, want %v", got, tc.reused)
			}
			if len(c) != tc.later || !aligned64(c) {
				t.Fatalf("len %d (want %d), aligned %v", len(c), tc.later, aligned64(c))
			}
			for i, v := range c {
				if v != 0 {
					t.Fatalf("byte %d of a handed-out buffer is %#x", i, v)
				}
			}
		})
	}
}

// TestReallocate: growing keeps the bytes and zeroes the rest, within the class or not.
func TestReallocate(t *testing.T) {
	p := New(0)
	for _, grow := range []int{100, 128, 5000} {
		b := p.Allocate(80)
		for i := range b {
			b[i] = byte(i + 1)
		}
		b = b[:50] // shrunk by its owner: bytes 50..79 are stale
		g := p.Reallocate(grow, b)
		if len(g) != grow {
			t.Fatalf("len %d, want %d", len(g), grow)
		}
		for i, v := range g {
			want := byte(0)
			if i < 50 {
				want = byte(i + 1)
			}
			if v != want {
				t.Fatalf("grow to %d: byte %d is %d, want %d", grow, i, v, want)
			}
		}
	}
}

// TestLimit: the pool keeps no more than its limit, and ignores buffers of other shapes.
func TestLimit(t *testing.T) {
	p := New(4096)
	var bs [][]byte
	for range 3 {
		bs = append(bs, p.Allocate(2048))
	}
	for _, b := range bs {
		p.Free(b)
	}
	if p.held != 4096 {
		t.Errorf("holds %d bytes, want the limit 4096", p.held)
	}
	p.Free(make([]byte, 100))     // not a class size
	p.Free(make([]byte, 64, 100)) // cap not a power of two
	if p.held != 4096 {
		t.Errorf("holds %d bytes after foreign frees", p.held)
	}
}

// TestArrowBatches: Arrow arrays built, released and built again through the pool hold
// exactly what was appended (reused buffers never leak old values), from many goroutines.
func TestArrowBatches(t *testing.T) {
	p := New(1 << 20)
	mem := memory.NewCheckedAllocator(p)
	defer mem.AssertSize(t, 0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 50 {
				b := array.NewInt64Builder(mem)
				n := 10 + (round*7+g)%300
				for i := range n {
					if i%5 == 0 {
						b.AppendNull()
					} else {
						b.Append(int64(g*1000 + i))
					}
				}
				a := b.NewInt64Array()
				b.Release()
				for i := range n {
					if null := i%5 == 0; a.IsNull(i) != null || (!null && a.Value(i) != int64(g*1000+i)) {
						t.Errorf("goroutine %d round %d: element %d wrong", g, round, i)
					}
				}
				if a.DataType().ID() != arrow.INT64 {
					t.Error("type")
				}
				a.Release()
			}
		})
	}
	wg.Wait()
	if r, _ := p.Stats(); r == 0 {
		t.Error("no buffer was reused")
	}
}
