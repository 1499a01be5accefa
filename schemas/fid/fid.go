// Package fid builds and takes apart Monolith feature ids (fids): the v1 layout (10-bit
// slot, 54-bit signature) and the v2 layout (15-bit slot, 48-bit signature), slot
// extraction and the v1→v2 conversion every parser applies (data-path.md §1.1).
//
// All functions are pure bit arithmetic on uint64 (a negative int64 id is its two's
// complement bits, D4). The data-path kernels treat fids as opaque; the checked
// constructors (NewV1, NewV2) are for tools and tests that build fids from slots.
package fid

import "fmt"

// Bit layout constants (frozen: they are Monolith's).
const (
	V1SigBits = 54
	V2SigBits = 48
	V1SigMask = 1<<V1SigBits - 1
	V2SigMask = 1<<V2SigBits - 1
	MaxSlotV1 = 1<<10 - 1 // 1023
	MaxSlotV2 = 1<<15 - 1 // 32767
)

// SlotV1 returns the slot of a v1 fid (bits 63..54).
func SlotV1(f uint64) uint64 { return f >> V1SigBits }

// SlotV2 returns the slot of a v2 fid (bits 62..48; bit 63 is reserved).
func SlotV2(f uint64) uint64 { return f >> V2SigBits & MaxSlotV2 }

// V1ToV2 converts a v1 fid to v2: the slot moves down to bit 48 and the signature keeps
// its low 48 bits (bits 53..48 are lost).
func V1ToV2(f uint64) uint64 { return SlotV1(f)<<V2SigBits | f&V2SigMask }

// V1Hi returns the six signature bits (53..48) of a v1 fid that V1ToV2 drops.
func V1Hi(f uint64) uint8 { return uint8(f>>V2SigBits) & 0x3F }

// V2ToV1 rebuilds a v1 fid from its v2 form (whose slot must fit 10 bits) and the six
// signature bits V1Hi kept: the exact inverse of V1ToV2 for v1 fids.
func V2ToV1(f uint64, hi uint8) uint64 {
	return (f>>V2SigBits&MaxSlotV1)<<V1SigBits | uint64(hi&0x3F)<<V2SigBits | f&V2SigMask
}

// MakeV1 builds a v1 fid from a slot and a signature, without checks (slot bits above 10
// are shifted out, signature bits above 54 are masked off).
func MakeV1(slot, sig uint64) uint64 { return slot<<V1SigBits | sig&V1SigMask }

// MakeV2 builds a v2 fid from a slot and a signature, without checks (signature bits above
// 48 are masked off).
func MakeV2(slot, sig uint64) uint64 { return slot<<V2SigBits | sig&V2SigMask }

// NewV1 builds a v1 fid; the slot must be at most MaxSlotV1.
func NewV1(slot, sig uint64) (uint64, error) {
	if slot > MaxSlotV1 {
		return 0, fmt.Errorf("schemas/fid: v1 slot %d exceeds %d", slot, MaxSlotV1)
	}
	return MakeV1(slot, sig), nil
}

// NewV2 builds a v2 fid; the slot must be at most MaxSlotV2 (bit 63 stays clear).
func NewV2(slot, sig uint64) (uint64, error) {
	if slot > MaxSlotV2 {
		return 0, fmt.Errorf("schemas/fid: v2 slot %d exceeds %d", slot, MaxSlotV2)
	}
	return MakeV2(slot, sig), nil
}

// SwitchSlotV1 replaces the slot of a v1 fid, keeping its 54 signature bits.
func SwitchSlotV1(f, slot uint64) uint64 { return MakeV1(slot, f) }

// SwitchSlotV2 replaces the slot of a v2 fid, keeping its 48 signature bits.
func SwitchSlotV2(f, slot uint64) uint64 { return MakeV2(slot, f) }

// ValidV2 reports whether f can be a v2 fid (bit 63 clear), as Monolith's FIDV2 type checks.
func ValidV2(f uint64) bool { return f>>63 == 0 }

// ConvertV1ToV2 converts a slice in place.
func ConvertV1ToV2(fs []uint64) {
	for i, f := range fs {
		fs[i] = V1ToV2(f)
	}
}
