package synth

import "github.com/monolith-go/monolith/schemas/fid"

// Fid returns the fid of the rank-th most frequent value (rank >= 1) of the feature in
// slot: a v1 fid when version is 1, else a v2 fid. The low 48 signature bits are a
// bijection of the rank within the slot (no two ranks of a slot share a fid) and do not
// depend on the seed, so the vocabulary of a slot is the same in every data set. A v1 fid
// also sets signature bits 48..53 from the rank, as real v1 fids do; converting it to v2
// (fid.V1ToV2) gives exactly the v2 fid of the same slot and rank.
func Fid(version, slot int, rank uint64) uint64 {
	sig := perm48(rank + sigOffset(uint64(slot)))
	if version == 1 {
		return uint64(slot)<<fid.V1SigBits | v1High(sig) | sig
	}
	return uint64(slot)<<fid.V2SigBits | sig
}

// sigOffset is the per-slot offset added to the rank before perm48.
func sigOffset(slot uint64) uint64 { return slot * 0x5851f42d4c95 }

// v1High returns signature bits 48..53 of a v1 fid whose low 48 bits are sig.
func v1High(sig uint64) uint64 { return sig * 0x9e3779b97f4a7c15 >> 58 << fid.V2SigBits }

// perm48 is a bijection on [0, 2^48): xor-shifts and odd multiplications modulo 2^48.
func perm48(x uint64) uint64 {
	const mask = 1<<48 - 1
	x &= mask
	x ^= x >> 24
	x = x * 0x9e3779b97f4b & mask
	x ^= x >> 21
	x = x * 0xbf58476d1ce5 & mask
	x ^= x >> 26
	return x
}
