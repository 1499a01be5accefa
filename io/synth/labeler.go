package synth

import "math/rand/v2"

// Row is what a Labeler sees of one row. Its slices are views of the generator's buffers,
// valid only during the call; a Labeler must not keep or modify them.
type Row struct {
	// Index is the 0-based index of the row in the data set.
	Index int64
	// Fids holds the fids of every sparse feature, in SparseFeatures order: the individual
	// features, then the shared ones.
	Fids [][]uint64
	// Dense is the dense feature (nil when Config.Dense is 0).
	Dense []float32
}

// A Labeler draws the labels of a row. It is the hook for models that draw labels from
// probabilities computed from the row's fids (a planted model); RandomLabeler ignores
// the row.
//
// Label writes len(labels) (= Config.Tasks) labels. Any randomness must come from r: each
// file has its own label stream, seeded from Config.Seed and separate from the feature
// stream, so the output is deterministic and the features do not depend on the Labeler.
// A label above 0 counts as positive: the row's LineId actions list action t+1 for every
// positive task t. Label is called from one goroutine per file being generated.
type Labeler interface {
	Label(r *rand.Rand, row *Row, labels []float32)
}

// RandomLabeler draws every label independently: 1 with probability PositiveRate, else 0.
// It is stateless and safe for concurrent use.
type RandomLabeler struct {
	PositiveRate float64
}

// Label implements Labeler.
func (l RandomLabeler) Label(r *rand.Rand, _ *Row, labels []float32) {
	for i := range labels {
		labels[i] = 0
		if r.Float64() < l.PositiveRate {
			labels[i] = 1
		}
	}
}
