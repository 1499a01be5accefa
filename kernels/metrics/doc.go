// Package metrics computes evaluation metrics of binary classifiers: exact ROC AUC, log loss,
// and tf.metrics.auc's streaming, thresholded AUC (training's "auc" summary, as Monolith's host
// call). A kernel: pure Go over float32 slices, no Beam, no Arrow; results are float64.
package metrics
