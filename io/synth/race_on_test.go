//go:build race

package synth

// raceEnabled is true under the race detector, which slows generation about tenfold; the
// statistical tests then draw fewer samples (their tolerances follow the sample size).
const raceEnabled = true
