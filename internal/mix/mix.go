// Package mix is the project's one integer hash: the splitmix64 finalizer and the splitmix64
// sequence built on it. Its outputs are frozen: table placement, filter dumps, initializer
// seeds and generated data sets depend on them bit for bit.
package mix

// golden is splitmix64's increment, 2^64 / φ.
const golden = 0x9e3779b97f4a7c15

// Mix64 is the splitmix64 finalizer, a bijection on uint64: every input bit reaches every
// output bit.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// SplitMix returns output k (1-based) of the splitmix64 generator seeded with seed: seeds
// of independent streams derived from one seed.
func SplitMix(seed, k uint64) uint64 { return Mix64(seed + k*golden) }
