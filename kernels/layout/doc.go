// Package layout implements Monolith's fused_embedding_to_layout, versions 1 to 5, and its
// gradient: it pools the embeddings of every feature entry described by the sharding
// outputs into the layout tensors of a FeatureConfigs, and routes layout gradients back to
// one gradient row per fid-list entry (data-path.md §4).
//
// # Semantics
//
// Layouts run in name order, slices in config order, rows in order, fids in entry order.
// SUM adds the fids' slices, MEAN adds each slice divided by the entry's fid count (before
// summing, in float32; an empty entry gives 0), FIRSTN writes the first L fids to sequence
// positions 0..L-1. CONCAT, STACK and NONE write each slice into its own region; ADDN adds the
// pooled slices of a row. Shared features are pooled once and replicated to every row in the
// forward pass, and receive the sum of all rows' gradients in the backward pass. Outputs and
// embedding gradients start at zero.
//
// Embedding addressing per version (§4.1): v1 has one [rows, dim] tensor per (table, shard)
// and index2 is a row; v2 splits each (table, shard) tensor into per-feature segments by the
// row splits; v3 and v5 address flat tensors by float offset; v4 splits one flat buffer into
// ps-major chunks by fid_list_emb_row_lenth; v5 takes R ≥ 1 requests, request r owning rows
// [Σ B_r', +B_r) and the r-th part of every tensor (D8: R > 1 forward and backward).
//
// Decisions: D1 — FIRSTN in CONCAT and STACK layouts with several slices uses the addressing
// the shapes imply (CONCAT position stride Σw, STACK slice i at i·L·w); D2 — the v1/v2
// gradient accumulates purely (no "first write copies" flag).
//
// Inputs are checked before any work: offsets must be in range and every fid's embedding
// must lie inside its block, so a corrupt sharding output is an error, never a panic.
//
// # Performance and concurrency
//
// With Options.Parallel > 1 the forward pass splits rows across goroutines and the backward
// pass splits features (no two features share gradient rows), so both give results
// identical to the serial run. A Layouter reuses its scratch space and is not safe for
// concurrent use.
package layout
