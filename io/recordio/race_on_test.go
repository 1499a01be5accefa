//go:build race

package recordio

// raceEnabled is true when tests run under the race detector, which slows the decompressors
// about fifty-fold; the sweeps then sample fewer points.
const raceEnabled = true
