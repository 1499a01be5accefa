// Package train is the batch training pipeline: it trains an LR, FM or DeepFM model
// (kernels/model) over fused embedding layouts against a sharded parameter server, evaluates
// it on held-out data, and reports one summary (monolith train).
//
// # Pipeline
//
// Each epoch is one Beam pipeline. Only file names are reshuffled; one fused DoFn per file
// reads its batches (io/beamio.ReadFile) and runs, per batch, sharding_sparse_fids
// (unique fids per feature) → PS Lookup (creating absent fids) → fused_embedding_to_layout
// → model forward and backward → the layout gradient → ApplyGradients. With unique fids the
// layout gradient already holds one summed row per fid: that is the per-fid aggregation,
// and the PS sums any duplicates again (ps.md P2). Batches never cross a shuffle. The
// bundles' statistics are summed and collected by the driver (transforms/collect).
//
// Updates are asynchronous, as in Monolith's async training: workers never wait for each
// other, and each trainer overlaps the apply of step i with the lookup and compute of step
// i+1. The global step is a counter on PS shard 0 (the GlobalStep RPC), taken once per
// applied batch; max_steps stops the workers once it is passed.
//
// # Retries
//
// Every batch has an id: run id, epoch, file and batch index. Its GlobalStep and
// ApplyGradients requests carry ids derived from it, and the PS skips ids it has already
// applied (a bounded window), so a bundle that a runner retries does not apply its
// gradients twice. Retried batches are recomputed against the current parameters; only
// their duplicate applies are dropped.
//
// # Dense parameters
//
// The model's dense parameters are PS tables too ("dense_<param>", one row per fid
// 0..Rows-1), looked up with every batch and updated by ApplyGradients with the dense
// optimizer, like the embeddings.
//
// # Control
//
// With a model directory (checkpoint.dir) the driver serves the training controller
// (package controller; monolith ctl). Its barrier lives on PS shard 0: each bundle in
// progress joins it at StartBundle and leaves at FinishBundle, learns of a placed barrier
// from the GlobalStep response of its last step, and pauses at its next step boundary after
// collecting the apply in flight. The driver also polls every shard's HealthCheck (30 s);
// an unhealthy PS places the barrier with controller.ActionStop, the workers stop, and Run
// returns ErrPSUnhealthy with Monolith's report.
//
// # Checkpoints and evaluation
//
// The driver asks the PS to save every checkpoint.every_steps global steps and once at
// the end. Evaluation runs one more pipeline over the held-out files: lookups do not
// create fids, and the predictions and labels (8 bytes per row) are collected for exact
// AUC and log loss (kernels/metrics).
package train
