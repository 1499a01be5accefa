package metrics

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// naiveAUC is tf.compat.v1.metrics.auc written out literally: every threshold against every
// row, then the trapezoids.
func naiveAUC(labels, preds []float32, n int) float64 {
	th := make([]float32, n)
	th[0] = float32(-1e-7)
	for i := 1; i < n-1; i++ {
		th[i] = float32(float64(i) / float64(n-1))
	}
	th[n-1] = float32(1 + 1e-7)
	tp, fn, tn, fp := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for j, t := range th {
		for i, p := range preds {
			pos, over := labels[i] != 0, p > t
			switch {
			case pos && over:
				tp[j]++
			case pos:
				fn[j]++
			case over:
				fp[j]++
			default:
				tn[j]++
			}
		}
	}
	var auc float64
	for i := 0; i < n-1; i++ {
		x0, x1 := fp[i]/(fp[i]+tn[i]+1e-6), fp[i+1]/(fp[i+1]+tn[i+1]+1e-6)
		y0, y1 := (tp[i]+1e-6)/(tp[i]+fn[i]+1e-6), (tp[i+1]+1e-6)/(tp[i+1]+fn[i+1]+1e-6)
		auc += (x0 - x1) * (y0 + y1) / 2
	}
	return auc
}

func TestStreamingAUC(t *testing.T) {
	for _, tc := range []struct {
		name          string
		labels, preds []float32
		want          float64
		tol           float64
	}{
		{"separated", []float32{1, 1, 0, 0}, []float32{.9, .8, .2, .1}, 1, 1e-5},
		{"reversed", []float32{0, 0, 1, 1}, []float32{.9, .8, .2, .1}, 0, 1e-5},
		{"all tied", []float32{1, 0, 1, 0}, []float32{.5, .5, .5, .5}, .5, 1e-5},
		{"one bucket apart is not enough", []float32{1, 0}, []float32{.5021, .5022}, .5, 1e-5},
		{"edges 0 and 1", []float32{0, 1}, []float32{0, 1}, 1, 1e-5},
		{"no rows", nil, nil, 0, 0},
	} {
		got, err := bucketedAUC(tc.labels, tc.preds)
		if err != nil || math.Abs(got-tc.want) > tc.tol {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
		if n := naiveAUC(tc.labels, tc.preds, DefaultThresholds); len(tc.labels) > 0 && math.Abs(n-got) > 1e-12 {
			t.Errorf("%s: %v, naive %v", tc.name, got, n)
		}
	}
}

// TestStreamingAUCRandom: against the naive form on random data, streamed in pieces; and,
// with predictions at bucket centres (no two buckets share a threshold interval), against
// the exact AUC of kernels/metrics.
func TestStreamingAUCRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for round := 0; round < 20; round++ {
		n := 1 + rng.IntN(500)
		th := 2 + rng.IntN(300)
		labels, preds, centred := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range labels {
			if rng.IntN(3) == 0 {
				labels[i] = 1
			}
			preds[i] = rng.Float32()
			if rng.IntN(20) == 0 {
				preds[i] = float32(rng.IntN(2)) // exact 0 and 1
			}
			b := rng.IntN(DefaultThresholds - 1)
			centred[i] = float32((float64(b) + 0.5) / float64(DefaultThresholds-1))
		}
		a, err := NewStreamingAUC(th)
		if err != nil {
			t.Fatal(err)
		}
		cut := rng.IntN(n + 1)
		if err := a.Update(labels[:cut], preds[:cut]); err != nil {
			t.Fatal(err)
		}
		if err := a.Update(labels[cut:], preds[cut:]); err != nil {
			t.Fatal(err)
		}
		if got, want := a.Value(), naiveAUC(labels, preds, th); math.Abs(got-want) > 1e-9 {
			t.Fatalf("round %d (%d rows, %d thresholds): %v, naive %v", round, n, th, got, want)
		}
		got, err := bucketedAUC(labels, centred)
		if err != nil {
			t.Fatal(err)
		}
		exact, err := AUC(centred, labels)
		if errors.Is(err, ErrInput) {
			continue // one class only: the exact AUC is undefined
		}
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-exact) > 1e-4 {
			t.Fatalf("round %d: bucketed %v, exact %v", round, got, exact)
		}
	}
}

func TestStreamingAUCErrors(t *testing.T) {
	a, _ := NewStreamingAUC(DefaultThresholds)
	for _, tc := range []struct {
		labels, preds []float32
		err           string
	}{
		{[]float32{1}, []float32{1, 0}, "1 labels, 2 predictions"},
		{[]float32{1}, []float32{1.5}, "outside [0, 1]"},
		{[]float32{1}, []float32{-0.1}, "outside [0, 1]"},
		{[]float32{1}, []float32{float32(math.NaN())}, "outside [0, 1]"},
	} {
		if err := a.Update(tc.labels, tc.preds); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Update(%v, %v) = %v", tc.labels, tc.preds, err)
		}
	}
	if a.Value() != 0 {
		t.Error("a failed update was counted")
	}
	if _, err := NewStreamingAUC(1); !errors.Is(err, ErrInput) {
		t.Errorf("1 threshold: %v", err)
	}
}

// bucketedAUC is the area of one batch with the default thresholds.
func bucketedAUC(labels, preds []float32) (float64, error) {
	a, err := NewStreamingAUC(DefaultThresholds)
	if err != nil {
		return 0, err
	}
	if err := a.Update(labels, preds); err != nil {
		return 0, err
	}
	return a.Value(), nil
}
