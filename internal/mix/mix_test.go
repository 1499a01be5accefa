package mix

import "testing"

// The reference outputs of splitmix64 seeded with 0 (Vigna's splitmix64.c): changing the
// hash would silently change every table layout, dump and data set built on it.
func TestSplitMixReference(t *testing.T) {
	for k, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		if got := SplitMix(0, uint64(k+1)); got != want {
			t.Errorf("output %d: %#x, want %#x", k+1, got, want)
		}
	}
	if Mix64(0) != 0 {
		t.Errorf("Mix64(0) = %#x, want 0", Mix64(0))
	}
}
