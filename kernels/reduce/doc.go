// Package reduce implements Monolith's auxiliary data-path ops (distribution_ops.py):
// splitting and reordering ids by shard, mapping ids back to embeddings, the
// unique-key/offset-map pair, row reductions, and per-fid gradient aggregation.
// It is a kernel: pure Go over plain slices, no Beam, no Arrow, no allocation per
// element. Behaviour follows data-path.md §5 and decisions.md D4, D9 and D10.
//
// # Ops
//
//	Monolith op                                   Go
//	split_by_indices (+grad)                      SplitByIndices, SplitByIndicesGrad
//	ragged_split_by_indices                       RaggedSplitByIndices
//	reorder_by_indices                            ReorderByIndices
//	fused_reorder_by_indices                      FusedReorderByIndices (FusedReorder)
//	map_id_to_embedding (+grad)                   MapIDToEmbedding, MapIDToEmbeddingGrad (Index)
//	gather_embeddings_by_input (+grad)            GatherEmbeddingsByInput, GatherEmbeddingsByInputGrad
//	fused_gather_embeddings_by_input (+grad)      FusedGatherEmbeddingsByInput, FusedGatherEmbeddingsByInputGrad
//	unique_key_with_value_and_offset              UniqueKeyWithValueAndOffset (UniqueKeys)
//	fill_with_offset_map (+grad)                  FillWithOffsetMap, FillWithOffsetMapGrad
//	finalize_shared_tensor (+grad)                none: the buffer is a caller-owned slice
//	reduce_sum / reduce_mean / reduce_sqrtn       ReduceSum, ReduceMean, ReduceSqrtn (+Grad each)
//	fused_reduce_sum_and_split (+grad)            FusedReduceSumAndSplit, FusedReduceSumAndSplitGrad
//	fused_sorted_segment_sum (GPU)                ReduceSum, once per list
//	fused_reduce_and_split_gpu (GPU)              SegmentSum, SegmentSumGrad, then a column split
//	normalize_merged_split                        NormalizeMergedSplit
//	fused_value_rowids                            ValueRowIDs
//	DistributedHashTable.apply_gradients dedup    AggregateGrads, AggregateGradsRagged (Aggregated)
//
// aligned_flat_concat/split (a GPU memory-layout helper) has no counterpart.
//
// # Shapes and buffers
//
// Tensors are flat row-major slices with explicit shapes: "rows×dim" means a slice of
// exactly rows*dim elements. Ragged tensors are [Ragged] (values plus int64 row
// splits, TF's layout); row splits are validated (start at 0, non-decreasing, end at
// the value count). Monolith's [N, k] id_indices matrices are passed as their column
// 0 (rowIDs); its id_length tensor is the rows argument.
//
// Ownership follows one rule per op shape:
//   - When the output's size follows from the arguments' lengths and shape
//     parameters, the caller passes it (dst) and the op checks its length exactly.
//     Ops that accumulate zero dst first; dst is fully written on success.
//   - When the size depends on the data (deduplication, splitting), the op either
//     returns new slices owned by the caller (SplitByIndices, RaggedSplitByIndices,
//     ReorderByIndices), appends to a dst slice (NormalizeMergedSplit, ValueRowIDs),
//     or fills a reusable result struct ([FusedReorder], [UniqueKeys], [Aggregated])
//     whose slices the next call overwrites.
//   - Id lookups go through an [Index] built once and read many times (for example
//     by both MapIDToEmbedding and MapIDToEmbeddingGrad).
//
// The result structs and Index hold their scratch (an open-addressing hash table and
// per-element arrays) and reuse it, so the hot paths (AggregateGrads,
// GatherEmbeddingsByInput, FusedReorderByIndices) allocate nothing once warmed up.
// None of the ops start goroutines. A built Index and all input slices are only
// read, so callers may run an op concurrently on disjoint output ranges.
//
// # Errors
//
// No op panics on any input. Mismatched lengths are [ErrShape], indices, shards,
// positions and offsets outside their range are [ErrRange], an id missing from the
// id lists is [ErrUnmappedID] (the message names the id, like Monolith's "Unable to
// map id X"), and results beyond Monolith's int32 positions are [ErrOverflow]; all
// are wrapped with the offending values. Unless an op's doc says otherwise, its
// outputs are unspecified after an error. Accessor methods (Ragged.Row,
// Index.Locate, Index.ListLen, Aggregated.Row) index like slices: an out-of-range
// argument panics, as slice indexing does.
//
// # Determinism
//
// Every sum is taken in input order (occurrence order per id or row), so results are
// bitwise reproducible. Ids hash and compare by their uint64 bit pattern; shards are
// uint64(id) % P (D4). Deduplication always keeps first occurrences.
//
// # Decisions and divergences from Monolith
//
//   - D4: FusedReorderByIndices and ShardIDs read ids as uint64. Monolith's
//     fused_reorder_by_indices uses a signed C++ remainder (a negative id gives a
//     negative, undefined shard) and its older Python paths a signed floormod; all
//     agree on non-negative ids.
//   - fused_reorder_by_indices' rank0_empty rule is an explicit parameter. Monolith
//     derives it from MONOLITH_SYNC_EMPTY_RANK0_PS_SHARD (default "1") and S > 4;
//     [MonolithRank0Empty] gives that default.
//   - D9: ReduceMean of a row without values is 0 (Monolith: NaN), and the gradient's
//     counter has one entry per row (Monolith sizes it by dim).
//   - D10: FusedGatherEmbeddingsByInputGrad multiplies by scale (Monolith's CPU
//     kernel ignores it; its GPU kernel applies it).
//   - FillWithOffsetMap validates everything before writing (Monolith may fail
//     half-way), checks pos against the number of unique keys (Monolith compares it
//     with the number of offsets, then reads out of bounds), checks that every chunk
//     fits the buffer, and rejects a value longer than expected as well as a shorter
//     one.
//   - MapIDToEmbeddingGrad reports an unmapped id (Monolith dereferences a missing
//     map entry). Out-of-range split indices and shard ids, which Monolith does not
//     check, are errors.
//   - NormalizeMergedSplit requires every merged vector to have at least one entry;
//     merging zero vectors gives [0].
package reduce
