// Package metrics computes evaluation metrics of binary classifiers: exact ROC AUC and log loss.
// It is a kernel: pure Go over plain float32 slices, no Beam, no Arrow; labels > 0 are positives.
// Inputs are only read; results are float64, deterministic for a given multiset of (score, label) pairs.
package metrics
