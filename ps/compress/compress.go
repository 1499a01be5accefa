package compress

// Retriever is how a training table reads one segment (§2.5). Tables use a nil Retriever
// for the identity (fp32, fp16 or no compressor).
type Retriever interface {
	// Fill writes the value a lookup returns for weights w into dst (same length).
	Fill(dst, w []float32)
	// Backward rewrites the gradient g in place before the optimizer step, for weights w at
	// the global step.
	Backward(g, w []float32, step int64)
}
