package filter

import (
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// TestProbabilisticRates checks admission rates against their formulas (§5.4) within five
// standard deviations, with a fixed seed.
func TestProbabilisticRates(t *testing.T) {
	const n, T, seed = 200000, 7, 12345
	t.Logf("seed %d", seed)
	for _, equal := range []bool{false, true} {
		want := func(c float64) float64 {
			if equal {
				p := 1 - math.Pow(0.05, 1.0/T)
				return 1 - math.Pow(1-p, c)
			}
			return min(1, c/T)
		}
		for _, c := range []uint32{1, 2, 3, 7, 10} {
			f := mustNew(t, &pspb.FilterConfig{Type: pspb.FilterConfig_PROBABILISTIC, EqualProbability: equal, Seed: seed}, occurrence(T))
			admitted := 0
			for i := range n {
				if f.Admit(int64(i), c) {
					admitted++
				}
			}
			p := want(float64(c))
			got := float64(admitted) / n
			tol := 5*math.Sqrt(p*(1-p)/n) + 1e-9
			if math.Abs(got-p) > tol {
				t.Errorf("equal=%t count=%d: rate %.4f, want %.4f ± %.4f", equal, c, got, p, tol)
			}
		}
	}
}

func TestProbabilisticSeed(t *testing.T) {
	run := func(seed uint64) []bool {
		f := mustNew(t, &pspb.FilterConfig{Type: pspb.FilterConfig_PROBABILISTIC, Seed: seed}, occurrence(5, 9, 0))
		out := make([]bool, 1000)
		for i := range out {
			out[i] = f.Admit(int64(fid.MakeV2(1, uint64(i))), 1)
		}
		for i := range 100 { // slot 9 has threshold 0
			if !f.Admit(int64(fid.MakeV2(9, uint64(i))), 1) {
				t.Fatal("threshold 0 rejected")
			}
		}
		return out
	}
	if !slices.Equal(run(1), run(1)) {
		t.Error("the same seed gives different decisions")
	}
	if slices.Equal(run(1), run(2)) {
		t.Error("different seeds give the same decisions")
	}
}

// TestProbabilisticConcurrent checks that concurrent callers are race-free and draw
// distinct values: the total admission rate stays within bounds.
func TestProbabilisticConcurrent(t *testing.T) {
	const workers, per, T = 8, 20000, 4
	f := mustNew(t, &pspb.FilterConfig{Type: pspb.FilterConfig_PROBABILISTIC, Seed: 7}, occurrence(T))
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			k := 0
			for i := range per {
				if f.Admit(int64(w*per+i), 1) {
					k++
				}
			}
			mu.Lock()
			admitted += k
			mu.Unlock()
		})
	}
	wg.Wait()
	n := float64(workers * per)
	p := 1.0 / T
	if got := float64(admitted) / n; math.Abs(got-p) > 5*math.Sqrt(p*(1-p)/n) {
		t.Errorf("rate %.4f, want %.4f", got, p)
	}
}
