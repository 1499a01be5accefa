// Package initializer fills the weights of a new embedding entry (spec/ps.md §4): zeros,
// ones, constants and random uniform. Random draws come from a caller-owned generator, so
// a table shard seeds its own and results are reproducible per shard.
//
// New builds an Initializer from Monolith's InitializerConfig; the dim_size inside the
// config is ignored in favour of the segment dim passed to New. Initializers hold only
// their parameters and are safe for concurrent use as long as each goroutine passes its
// own *rand.Rand (a rand.Rand is not safe for concurrent use).
//
// random_uniform draws i.i.d. float32 values in [minval, maxval) as
// minval + (maxval − minval)·u with u from r.Float64(), computed in float64; a result that
// rounds up to maxval is replaced by the largest float32 below it, so the interval stays
// half-open. minval == maxval fills the constant minval. Monolith draws from a per-thread
// mt19937 with the default seed, so its sequences cannot be reproduced bit for bit; the
// distribution is the same.
package initializer
