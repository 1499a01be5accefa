package metrics

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestAUC(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		name           string
		scores, labels []float32
		want           float64
	}{
		{"perfect", []float32{0.1, 0.2, 0.8, 0.9}, []float32{0, 0, 1, 1}, 1},
		{"reversed", []float32{0.9, 0.8, 0.2, 0.1}, []float32{0, 0, 1, 1}, 0},
		{"one pair each", []float32{0.3, 0.7}, []float32{0, 1}, 1},
		{"all equal", []float32{0.5, 0.5, 0.5, 0.5, 0.5}, []float32{1, 0, 0, 1, 0}, 0.5},
		// pairs (p,n): (0.4,0.1) 1, (0.4,0.35) 1, (0.4,0.8) 0, (0.8,0.1) 1, (0.8,0.35) 1, (0.8,0.8) ½ → 4.5/6.
		{"tie across classes", []float32{0.1, 0.4, 0.35, 0.8, 0.8}, []float32{0, 1, 0, 0, 1}, 4.5 / 6},
		// positives 2, 2, 3; negatives 1, 2: 1 + ½ + 1 + ½ + 1 + 1 = 5 of 6.
		{"tie group", []float32{2, 1, 2, 3, 2}, []float32{1, 0, 0, 1, 1}, 5.0 / 6},
		{"signed zeros tie", []float32{float32(math.Copysign(0, -1)), 0}, []float32{1, 0}, 0.5},
		{"infinities", []float32{-inf, inf, 0}, []float32{0, 1, 0}, 1},
		{"negative labels are negatives", []float32{1, 2, 3}, []float32{-1, 0, 2}, 1},
		// three negatives below one positive, one above: 3 of 4.
		{"classic", []float32{0.1, 0.4, 0.35, 0.8}, []float32{0, 0, 1, 1}, 0.75},
	} {
		got, err := AUC(tc.scores, tc.labels)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("%s: AUC = %v, want %v", tc.name, got, tc.want)
		}
		if want := bruteAUC(tc.scores, tc.labels); math.Abs(got-want) > 1e-15 {
			t.Errorf("%s: AUC = %v, brute force %v", tc.name, got, want)
		}
	}
}

// bruteAUC counts every (positive, negative) pair.
func bruteAUC(scores, labels []float32) float64 {
	var num, pairs float64
	for i, si := range scores {
		if labels[i] <= 0 {
			continue
		}
		for j, sj := range scores {
			if labels[j] > 0 {
				continue
			}
			pairs++
			switch {
			case si > sj:
				num++
			case si == sj:
				num += 0.5
			}
		}
	}
	return num / pairs
}

// TestAUCRandom compares AUC with the O(n²) pair count on random data, with few distinct
// scores (many ties) and with continuous scores, and checks that the order of the pairs
// does not change the result.
func TestAUCRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for _, n := range []int{2, 3, 63, 64, 65, 500, radixMin - 1, radixMin, 6000} {
		for _, levels := range []int{2, 10, 0} {
			scores, labels := make([]float32, n), make([]float32, n)
			for i := range scores {
				if levels > 0 {
					scores[i] = float32(r.IntN(levels)) / float32(levels)
				} else {
					scores[i] = r.Float32()
				}
				if r.Float32() < scores[i]*0.6+0.2 {
					labels[i] = 1
				}
			}
			labels[0], labels[1] = 0, 1 // both classes
			got, err := AUC(scores, labels)
			if err != nil {
				t.Fatal(err)
			}
			if want := bruteAUC(scores, labels); math.Abs(got-want) > 1e-12 {
				t.Errorf("n=%d levels=%d: AUC = %v, brute force %v", n, levels, got, want)
			}
			r.Shuffle(n, func(i, j int) {
				scores[i], scores[j] = scores[j], scores[i]
				labels[i], labels[j] = labels[j], labels[i]
			})
			if again, _ := AUC(scores, labels); again != got {
				t.Errorf("n=%d levels=%d: AUC %v after a shuffle, %v before", n, levels, again, got)
			}
		}
	}
}

// TestSortKeys: the radix sort agrees with slices.Sort on 33-bit keys, including keys whose
// digits are all equal in some pass.
func TestSortKeys(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	for _, mask := range []uint64{1<<33 - 1, 0x7ff << 11, 1, 0} {
		for _, n := range []int{radixMin, radixMin + 1, 3 * radixMin} {
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = r.Uint64() & mask
			}
			want := slices.Sorted(slices.Values(keys))
			if got := sortKeys(keys); !slices.Equal(got, want) {
				t.Errorf("mask %#x n=%d: radix sort differs from slices.Sort", mask, n)
			}
		}
	}
}

func TestAUCErrors(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name           string
		scores, labels []float32
	}{
		{"empty", nil, nil},
		{"length mismatch", []float32{1, 2}, []float32{1}},
		{"NaN score", []float32{1, nan, 0}, []float32{1, 0, 0}},
		{"no positive", []float32{1, 2}, []float32{0, -1}},
		{"no negative", []float32{1, 2}, []float32{1, 1}},
	} {
		if _, err := AUC(tc.scores, tc.labels); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", tc.name, err)
		}
	}
}

func TestLogLoss(t *testing.T) {
	for _, tc := range []struct {
		name          string
		probs, labels []float32
		want          float64
	}{
		{"half", []float32{0.5, 0.5}, []float32{1, 0}, math.Ln2},
		{"mixed", []float32{0.8, 0.25}, []float32{1, 0}, -(math.Log(float64(float32(0.8))) + math.Log(0.75)) / 2},
		{"confident right", []float32{1, 0}, []float32{1, 0}, -math.Log1p(-MinProb)},
		{"confident wrong", []float32{0, 1}, []float32{1, 0}, -(math.Log(MinProb) + math.Log1p(-MaxProb)) / 2},
		{"clipped outside [0,1]", []float32{-3, 7}, []float32{1, 1}, -(math.Log(MinProb) + math.Log(MaxProb)) / 2},
		{"label > 0 is positive", []float32{0.25}, []float32{3}, -math.Log(0.25)},
	} {
		got, err := LogLoss(tc.probs, tc.labels)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: LogLoss = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name          string
		probs, labels []float32
	}{
		{"empty", nil, nil},
		{"length mismatch", []float32{0.5}, []float32{1, 0}},
		{"NaN", []float32{0.5, float32(math.NaN())}, []float32{1, 0}},
	} {
		if _, err := LogLoss(tc.probs, tc.labels); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", tc.name, err)
		}
	}
}

// TestLossSum: merging partial sums gives the mean of the whole, Mean of nothing is NaN,
// and Add does not allocate.
func TestLossSum(t *testing.T) {
	probs := []float32{0.1, 0.9, 0.3, 0.6, 0.5}
	labels := []float32{0, 1, 1, 0, 1}
	var a, b LossSum
	if !math.IsNaN(a.Mean()) {
		t.Errorf("empty mean %v, want NaN", a.Mean())
	}
	for i := range probs {
		if i < 2 {
			a.Add(probs[i], labels[i])
		} else {
			b.Add(probs[i], labels[i])
		}
	}
	a.Merge(b)
	want, err := LogLoss(probs, labels)
	if err != nil {
		t.Fatal(err)
	}
	if a.N != 5 || math.Abs(a.Mean()-want) > 1e-15 {
		t.Errorf("merged: N=%d mean %v, want 5 and %v", a.N, a.Mean(), want)
	}
	if n := testing.AllocsPerRun(100, func() { a.Add(0.3, 1) }); n != 0 {
		t.Errorf("Add allocates %v times", n)
	}
}
