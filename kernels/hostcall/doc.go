// Package hostcall is the pure part of Monolith's TPU host calls (monolith/core/base_host_call.py
// and base_embedding_host_call.py) as plain functions over slices: tensor compression by
// element type, decompression, the caching variables, TensorFlow's bucketed AUC and the summaries.
//
// # Compression
//
// A Recorder holds the global step (int64) and the tensors recorded by name (a scalar or a
// rank-1 slice of float32, float64, int32, int64 or bool); a name recorded twice is an error.
// Compress groups them by element type in order of first appearance and concatenates each
// group into the one row a core sends; the Layout keeps each group's names and lengths.
// Decompress takes, per group, the rows of every core (cores × Σk, row-major, as the TPU
// gathers them) and returns one Column (cores × k) per tensor, the global step first.
//
// # Embedding host call
//
// Keep is the record filter, ComputeNewValue the padded, rotated add of a step's values into
// a caching variable, and Cache the caching variables of one core (cleared at every step ≡ 1
// mod every_n). Summarize and SummarizeCached compute what the two host calls write, without
// writing it: per tensor a scalar ("_avg" mean, "_max", "_sum", otherwise the first value);
// then the AUC part: rows whose uid bucket is below 10 (and, cached, only while the stopping
// signals sum to 0) are sampled, the StreamingAUC is updated with them and its value written
// as "auc", DeepInsight rows are returned, and the means of the labels, predictions, request
// times and sample rates are written. Means of integer tensors truncate as tf.reduce_mean
// does; means of empty tensors are NaN. StreamingAUC is tf.compat.v1.metrics.auc (200
// thresholds, ROC, trapezoids) in float64 where TensorFlow uses float32; it accumulates over
// calls, and Summarize reports its value after the call's update (in the reference's graph the
// read and the update are unordered).
//
// Serializing the DeepInsight tensors, the TPU variables themselves and the host-call hook
// need TensorFlow and are not ported. Where the reference crashed on a missing tensor these
// functions return ErrInput.
package hostcall
