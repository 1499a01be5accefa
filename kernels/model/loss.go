package model

import (
	"fmt"
	"math"
)

// Sigmoid is 1 / (1 + e^-x), computed without overflow.
func Sigmoid(x float32) float32 {
	if x >= 0 {
		return float32(1 / (1 + math.Exp(-float64(x))))
	}
	e := math.Exp(float64(x))
	return float32(e / (1 + e))
}

// SigmoidXent computes, for every row r, the probability probs[r] = σ(logits[r]) and the
// gradient dlogits[r] = probs[r] − labels[r] of the sigmoid cross entropy, and returns the
// summed loss Σ_r −(y log p + (1−y) log(1−p)), computed stably from the logits. Labels
// above 0 count as 1. probs or dlogits may be nil.
func SigmoidXent(logits, labels, probs, dlogits []float32) (float64, error) {
	n := len(logits)
	if len(labels) != n || (probs != nil && len(probs) < n) || (dlogits != nil && len(dlogits) < n) {
		return 0, fmt.Errorf("%w: loss: %d logits, %d labels, %d probs, %d gradients", ErrInput, n, len(labels), len(probs), len(dlogits))
	}
	var sum float64
	for r, z := range logits {
		y := float32(0)
		if labels[r] > 0 {
			y = 1
		}
		zf := float64(z)
		// max(z, 0) − z·y + log(1 + e^-|z|)
		sum += math.Max(zf, 0) - zf*float64(y) + math.Log1p(math.Exp(-math.Abs(zf)))
		p := Sigmoid(z)
		if probs != nil {
			probs[r] = p
		}
		if dlogits != nil {
			dlogits[r] = p - y
		}
	}
	return sum, nil
}
