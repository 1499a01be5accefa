// Package shard implements Monolith's sharding_sparse_fids, versions 1 to 5: it splits the
// fids of a batch into one list per (table, PS shard) and describes every feature entry with
// the offset tensors the layout kernel reads (data-path.md §3).
//
// # Semantics
//
// Tables and features are ordered by name (byte-wise). A feature contributes one entry per
// row, or a single entry when it is shared (an ExampleBatch SHARED list, or a feature absent
// from an ExampleBatch); nfl_offset flags shared features with bit 31. A fid goes to shard
// uint64(fid) % P (D4). In unique mode duplicates are removed per feature (D3), keeping
// first-occurrence order; the value 0xFFFF_FFFF_FFFF_FFFF is never deduplicated, as in the
// reference. Outputs follow §3.5–3.6 exactly: fid lists table-major (ps-major for v4),
// fid_offset packed (index1 << 32 | index2) with the version's meaning of the two halves,
// feature_offset, nfl_offset, row splits, emb_size and the v4 length vectors. D7: v4 with a
// table absent from the batch gives empty lists and zero lengths.
//
// # Inputs
//
// The kernel reads plain slices (Input); FromBatch builds them zero-copy from an Arrow batch
// of schemas/batch, mapping each configured feature to its column the way the reference maps
// example, examplebatch and instance inputs (§3.3), including "fc_slot_N"/"slot_N" names for
// Instance top-level fids. D5: an Instance feature that has both a slot column and a named
// column is rejected.
//
// # Performance and concurrency
//
// Sharder keeps every buffer between calls, so sharding a batch allocates nothing once the
// buffers have grown to the batch's size; the modulo by P uses a precomputed reciprocal.
// With Options.Parallel > 1 features are split across goroutines; each feature's work is
// independent and written to disjoint ranges, so results are identical to the serial run.
// A Sharder is not safe for concurrent use; the Result it returns is valid until its next
// Shard call.
package shard
