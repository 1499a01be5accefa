// Package table is the collisionless embedding hash table of the parameter server
// (spec/ps.md §2): fid → entry, where an entry is a row of segments, each with its own
// dim, initializer, optimizer and training-time retriever, plus optimizer state and time.
//
// # Storage
//
// A Table is split into 16 shards by a hash of the fid, each with its own RWMutex.
// A shard keeps an open-addressing index (fid → slot: 12 bytes per cell, no tombstones)
// and its rows in 1024-row float32 chunks, so there is never one heap object per fid.
// Batched calls sort their fids by shard, take each shard's lock once, and walk each
// shard's fids in blocks whose index and row loads are issued together, so the memory
// latency of a block overlaps.
// A row is laid out as [weights (Σ dim) | optimizer state (Σ state) | time (2 words)]:
// the int64 update time is stored bit-cast in the last two words, so an apply touches
// one contiguous stretch of memory.
//
// # Semantics and decisions
//
//   - Lookup is read-only: absent fids read as zeros (P1, Monolith mode). LookupOrCreate
//     is the seed contract's create_if_missing path (§8.2), which counts per position.
//   - Apply sums duplicate fids first and steps each unique fid once (P2, §8.3). In the
//     default mode an absent fid that the filter admits (count = its occurrences in the
//     request) is created from its initializer and then stepped, as Monolith trains new
//     fids; Options.ReadOnlyApply counts it not found instead.
//   - One filter per table (P5); lookups never consult it.
//   - Times are int64 seconds (P6). An apply's time is its update_time (the data's
//     req_time) or, when that is 0, the wall clock. The expiry clock is the newest update
//     time the table has seen; expire_time 0 days means never expire (the reference
//     expires everything), otherwise an entry expires when clock − time ≥ days × 86400.
//   - Snapshot copies one shard at a time under its read lock, so a checkpoint never
//     freezes the table (P7; the reference locks every bucket for the whole save).
//   - SERVING entries (compressed storage for serving replicas) are not implemented: New
//     returns a "not implemented" error for them.
//
// All methods are safe for concurrent use. Concurrent applies to one fid serialize on its
// shard lock; applies of different fids interleave freely (Monolith's Hogwild semantics).
package table
