// Package benchmarks holds the end-to-end benchmarks of monolith-go and the helpers that
// build their synthetic inputs. Every throughput figure is reported next to a baseline
// measured in the same process and run (memcpy bandwidth for decoding), never alone.
// Results and the commands that produce them are in RESULTS.md.
package benchmarks
