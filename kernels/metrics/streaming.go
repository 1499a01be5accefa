package metrics

import (
	"fmt"
	"sort"
)

// DefaultThresholds is tf.compat.v1.metrics.auc's default num_thresholds.
const DefaultThresholds = 200

// StreamingAUC is tf.compat.v1.metrics.auc with its defaults (ROC curve, trapezoidal
// summation): confusion counts at fixed thresholds accumulated over every Update, and the
// area under the discretized curve. The zero value is not usable: use NewStreamingAUC.
type StreamingAUC struct {
	thresholds     []float32
	tp, fn, tn, fp []float64
}

// NewStreamingAUC returns an empty metric over n thresholds: -1e-7, i/(n-1) for
// i = 1…n-2, and 1+1e-7, as float32 as TensorFlow compares them.
func NewStreamingAUC(n int) (*StreamingAUC, error) {
	if n < 2 {
		return nil, fmt.Errorf("%w: %d thresholds (want at least 2)", ErrInput, n)
	}
	const kepsilon = 1e-7
	th := make([]float32, n)
	th[0] = float32(0.0 - kepsilon)
	for i := 0; i < n-2; i++ {
		th[i+1] = float32(float64(i+1) * 1.0 / float64(n-1))
	}
	th[n-1] = float32(1.0 + kepsilon)
	return &StreamingAUC{thresholds: th, tp: make([]float64, n), fn: make([]float64, n),
		tn: make([]float64, n), fp: make([]float64, n)}, nil
}

// Update adds rows: a label is positive when it is not 0, a prediction counts as positive at
// every threshold strictly below it. Predictions must lie in [0, 1] (TensorFlow asserts it);
// on an error nothing is added.
func (a *StreamingAUC) Update(labels, preds []float32) error {
	if len(labels) != len(preds) {
		return fmt.Errorf("%w: %d labels, %d predictions", ErrInput, len(labels), len(preds))
	}
	for i, p := range preds {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("%w: prediction %d is %v, outside [0, 1]", ErrInput, i, p)
		}
	}
	n := len(a.thresholds)
	// above[k]: rows of each label whose prediction exceeds exactly the first k thresholds.
	posAbove, negAbove := make([]float64, n+1), make([]float64, n+1)
	for i, p := range preds {
		k := sort.Search(n, func(j int) bool { return a.thresholds[j] >= p })
		if labels[i] != 0 {
			posAbove[k]++
		} else {
			negAbove[k]++
		}
	}
	var pos, neg float64
	for k := range posAbove {
		pos += posAbove[k]
		neg += negAbove[k]
	}
	// Rows counted positive at threshold j: those exceeding more than j thresholds.
	var posOver, negOver float64
	for j := n - 1; j >= 0; j-- {
		posOver += posAbove[j+1]
		negOver += negAbove[j+1]
		a.tp[j] += posOver
		a.fn[j] += pos - posOver
		a.fp[j] += negOver
		a.tn[j] += neg - negOver
	}
	return nil
}

// Value returns the area: recall (tp+ε)/(tp+fn+ε) against the false positive rate
// fp/(fp+tn+ε), ε = 1e-6, summed by trapezoids over adjacent thresholds. TensorFlow sums in
// float32; this sums in float64, so the last digits may differ. With no rows it is 0.
func (a *StreamingAUC) Value() float64 {
	const eps = 1e-6
	n := len(a.thresholds)
	var auc float64
	for i := 0; i < n-1; i++ {
		x0 := a.fp[i] / (a.fp[i] + a.tn[i] + eps)
		x1 := a.fp[i+1] / (a.fp[i+1] + a.tn[i+1] + eps)
		y0 := (a.tp[i] + eps) / (a.tp[i] + a.fn[i] + eps)
		y1 := (a.tp[i+1] + eps) / (a.tp[i+1] + a.fn[i+1] + eps)
		auc += (x0 - x1) * (y0 + y1) / 2
	}
	return auc
}
