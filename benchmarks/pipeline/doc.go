// Package pipeline is the end-to-end benchmark of the Beam data path: the readlayout job
// (read → parse → shard → layout) on prism against the same kernels chained in a plain Go
// loop over the same files, each measurement in its own child process.
//
// `monolith bench` (benchmarks/suite) drives it. One synthetic data set (io/synth
// defaults: ExampleBatch records of 256 rows in uncompressed PB streams) holds
// MaxScale×BaseRows rows in BaseFiles×MaxScale files, scale s reading the first
// BaseFiles×s files. Every measurement runs in a fresh process of the executable
// (benchmarks/internal/child) so that its peak RSS is its own. Kinds are interleaved, in
// an order rotated every repetition, so that ratios are measured side by side:
//
//	loop      beamio.ReadFile → readlayout.Chain (parse → shard → layout) per file, the
//	          files shared by Workers goroutines, each with its own kernel state: the code
//	          of the pipeline's DoFns, without Beam
//	pipeline  pipelines/readlayout on prism: read → parse → shard → layout → a counting
//	          DoFn, one fused stage
//
// Every kind computes the same checksum of the layout outputs; Check fails if two
// disagree.
package pipeline
