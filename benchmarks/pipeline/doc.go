// Package pipeline is the end-to-end benchmark of the Beam data path: read → parse →
// shard → layout run as a Beam pipeline on prism against the same kernels chained in a
// plain Go loop over the same files, each measurement in its own child process.
//
// `monolith bench` (benchmarks/suite) drives it. One synthetic data set (io/synth
// defaults: ExampleBatch records of 256 rows in uncompressed PB streams) holds
// MaxScale×BaseRows rows in BaseFiles×MaxScale files, scale s reading the first
// BaseFiles×s files. Every measurement runs in a fresh process of the executable
// (benchmarks/internal/child) so that its peak RSS is its own. Kinds are interleaved, in
// an order rotated every repetition, so that ratios are measured side by side:
//
//	loop               beamio.ReadFile → parse.Parser → shard.Batcher → layout.Forward per
//	                   file, the files shared by Workers goroutines, each with its own
//	                   kernel state: the code of the pipeline's DoFns, without Beam
//	pipeline           beamio.Read → parse.Parse → shard.Shard → layout.Layout → a counting
//	                   DoFn, on prism: one fused stage after the reshuffle of file names
//	pipeline-split     the same chain built Branches times, the files dealt round-robin to
//	                   the copies: prism runs one bundle per copy
//	pipeline-nooutput  the pipeline ending in a DoFn without output, which prism
//	                   busy-waits on
//
// Every kind computes the same checksum of the layout outputs; Check fails if two
// disagree.
package pipeline
