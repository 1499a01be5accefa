package initializer

import "math/rand/v2"

// Initializer fills one segment's weights. Implementations are safe for concurrent use
// with distinct generators.
type Initializer interface {
	// Dim is the number of weights it fills.
	Dim() int
	// Fill writes Dim() values into dst, drawing from r when random.
	Fill(dst []float32, r *rand.Rand)
	// Kind is the config oneof name ("zeros", "random_uniform", "ones", "constants").
	Kind() string
}
