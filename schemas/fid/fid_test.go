package fid

import (
	"math/rand/v2"
	"testing"
)

func TestGoldens(t *testing.T) {
	// io.md §2.1: fixture fids.
	for _, tc := range []struct{ v1, v2, slot uint64 }{
		{0x007b24080526e4a7, 0x000124080526e4a7, 1},
		{0x3219c56807a425fc, 0x00c8c56807a425fc, 200},
	} {
		if got := V1ToV2(tc.v1); got != tc.v2 {
			t.Errorf("V1ToV2(%#x) = %#x, want %#x", tc.v1, got, tc.v2)
		}
		if SlotV1(tc.v1) != tc.slot || SlotV2(tc.v2) != tc.slot {
			t.Errorf("slots of %#x/%#x: %d/%d, want %d", tc.v1, tc.v2, SlotV1(tc.v1), SlotV2(tc.v2), tc.slot)
		}
	}
}

func TestRoundTrips(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for range 10000 {
		slot1, slot2, sig := rng.Uint64N(MaxSlotV1+1), rng.Uint64N(MaxSlotV2+1), rng.Uint64()
		v1, err := NewV1(slot1, sig)
		if err != nil || SlotV1(v1) != slot1 || v1&V1SigMask != sig&V1SigMask {
			t.Fatalf("NewV1(%d, %#x) = %#x, %v", slot1, sig, v1, err)
		}
		v2, err := NewV2(slot2, sig)
		if err != nil || SlotV2(v2) != slot2 || v2&V2SigMask != sig&V2SigMask || !ValidV2(v2) {
			t.Fatalf("NewV2(%d, %#x) = %#x, %v", slot2, sig, v2, err)
		}
		c := V1ToV2(v1)
		if SlotV2(c) != slot1 || c&V2SigMask != v1&V2SigMask || c>>58 != 0 {
			t.Fatalf("V1ToV2(%#x) = %#x", v1, c)
		}
		if SlotV2(SwitchSlotV2(v2, 7)) != 7 || SwitchSlotV2(v2, 7)&V2SigMask != v2&V2SigMask {
			t.Fatal("SwitchSlotV2")
		}
		if SlotV1(SwitchSlotV1(v1, 9)) != 9 || SwitchSlotV1(v1, 9)&V1SigMask != v1&V1SigMask {
			t.Fatal("SwitchSlotV1")
		}
	}
	if _, err := NewV1(1024, 0); err == nil {
		t.Error("NewV1 accepted slot 1024")
	}
	if _, err := NewV2(32768, 0); err == nil {
		t.Error("NewV2 accepted slot 32768")
	}
	fs := []uint64{0x007b24080526e4a7, 0x3219c56807a425fc}
	ConvertV1ToV2(fs)
	if fs[0] != 0x000124080526e4a7 || fs[1] != 0x00c8c56807a425fc {
		t.Errorf("ConvertV1ToV2 = %x", fs)
	}
}
