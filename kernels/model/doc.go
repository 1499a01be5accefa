// Package model holds the trainable models of monolith train: LR, FM and DeepFM over the
// layout tensors of fused_embedding_to_layout, each with an exact forward and backward pass
// in plain Go over float32 slices (no Beam, no per-element allocation).
//
// # Contract
//
// A Model reads the layout outputs it was bound to (by name, see Input) and its dense
// parameters, and writes one logit per row. Backward takes d loss / d logit per row and
// writes the gradients of the same inputs and of every dense parameter. A dense parameter
// is a table of Rows rows of Cols floats (row-major); the trainer keeps it in the parameter
// server as a dense table whose fids are the row numbers 0..Rows-1.
//
//   - LR:     logit = w0 + bias
//   - FM:     logit = w0 + bias + Σ_{i<j} <x_i, x_j>, computed as ½ Σ_d ((Σ_i x_id)² − Σ_i x_id²)
//   - DeepFM: FM + MLP(x), the MLP over the concatenated field vectors (ReLU hidden layers,
//     one linear output)
//
// bias is a [B, 1] layout (an ADDN of the bias columns), x is a CONCAT layout [B, F·k] of
// F field vectors of width k. Forward caches what Backward needs, so a Model is not safe
// for concurrent use; Backward must follow the Forward of the same batch.
//
// The loss is the sigmoid cross entropy summed over the rows (SigmoidXent): the gradient
// of a row is p − y, as in Monolith's per-example sparse gradients.
package model
