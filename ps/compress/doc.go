// Package compress holds Monolith's float compressors (spec/ps.md §2.5–§2.6) as far as
// training uses them: the binary16 conversions and the training-time retrievers that
// fake-quantize a segment on lookup and adjust its gradient before the optimizer step, and
// the storage codecs of SERVING entries (Codec: fp32, fp16, fixed_r8, one_bit over slices),
// which the serving model export writes its tables with.
//
// # Conversions
//
// Float32ToFp16 (nearest, ties to even) and Fp16ToFloat32 (exact) match half.hpp 2.1
// (Monolith's converter) bit for bit: overflow to ±Inf, gradual underflow through
// subnormals, signed zeros, quiet NaN keeping the top payload bits. The optimizers'
// stochastic_rounding_float16 builds on them. fixed_r8's quantization (step r/128, see
// FixedR8Step) maps NaN to 0, moves x half a step away from zero, truncates x/step toward
// zero and clamps to [−128, 127]; the clamp runs before the integer conversion, so ±Inf
// and huge values saturate (in C++ that conversion is undefined behaviour).
//
// # Retrievers
//
// NewRetriever builds the Retriever of a training segment: nil for raw reads (no config,
// fp32, fp16), fake quantization for fixed_r8 (straight-through gradient), HashNet for
// one_bit. The HashNet scale is one value per retriever, shared by all entries of the
// segment and stored atomically, so Fill and Backward may run concurrently. Backward
// recomputes it at every step that is a multiple of step_size, once per call rather than
// once per element as Monolith does (same value: the step is the same), and never
// publishes the unclamped intermediate value that Monolith's atomic briefly holds. A
// negative step keeps the current scale (Monolith would take the square root of a
// negative number once step < −200); step_size ≤ 0 is a configuration error (Monolith
// divides by it).
package compress
