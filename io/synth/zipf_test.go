package synth

import (
	"fmt"
	"math"
	"testing"
)

// TestZipfExact: for small vocabularies (head only, or head plus bands) the empirical
// frequency of every rank matches k^-s / H(n, s) within 5 standard errors.
func TestZipfExact(t *testing.T) {
	const draws = 400000
	for _, tc := range []struct {
		n uint64
		s float64
	}{{1, 1}, {5, 0.5}, {10, 1}, {10, 0}, {100, 2}, {headRanks + 500, 0.7}, {3 * headRanks, 1.2}} {
		t.Run(fmt.Sprint(tc.n, "/", tc.s), func(t *testing.T) {
			z, err := newZipf(tc.n, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			r := newRNG(42, 0, streamFeatures)
			t.Logf("seed 42")
			var norm float64
			for k := tc.n; k >= 1; k-- { // smallest terms first
				norm += math.Pow(float64(k), -tc.s)
			}
			counts := make([]int, tc.n+1)
			for range draws {
				k := z.sample(r)
				if k < 1 || k > tc.n {
					t.Fatalf("rank %d outside [1, %d]", k, tc.n)
				}
				counts[k]++
			}
			// Check single ranks at the top and aggregated ranges further down (head edge and
			// bands included).
			check := func(lo, hi uint64) {
				var p float64
				got := 0
				for k := lo; k <= hi; k++ {
					p += math.Pow(float64(k), -tc.s) / norm
					got += counts[k]
				}
				want := p * draws
				if sd := math.Sqrt(want * (1 - p)); math.Abs(float64(got)-want) > 5*sd+1 {
					t.Errorf("ranks [%d, %d]: %d draws, want %.0f ± %.0f", lo, hi, got, want, sd)
				}
			}
			for k := uint64(1); k <= min(tc.n, 20); k++ {
				check(k, k)
			}
			for lo := uint64(21); lo <= tc.n; lo = lo*2 + 1 {
				check(lo, min(lo*2, tc.n))
			}
		})
	}
}

// TestZipfRatio: over a large vocabulary (ranks beyond the head come from the bands) the
// rank-1 to rank-10 frequency ratio is 10^s, and the mass beyond the head matches the exact
// sum; tolerances are 4 standard errors.
func TestZipfRatio(t *testing.T) {
	draws := 1_000_000
	if raceEnabled {
		draws = 200_000
	}
	const n = 1_000_000
	for _, s := range []float64{0.8, 1, 1.1, 1.5} {
		z, err := newZipf(n, s)
		if err != nil {
			t.Fatal(err)
		}
		r := newRNG(7, 3, streamFeatures)
		t.Logf("seed 7, stream 3")
		var c1, c10, tail int
		for range draws {
			switch k := z.sample(r); {
			case k == 1:
				c1++
			case k == 10:
				c10++
			case k > headRanks:
				tail++
			}
		}
		var norm, pTail float64
		for k := n; k >= 1; k-- { // smallest terms first
			p := math.Pow(float64(k), -s)
			norm += p
			if k > headRanks {
				pTail += p
			}
		}
		p1, p10 := 1/norm, math.Pow(10, -s)/norm
		pTail /= norm
		ratio, want := float64(c1)/float64(c10), math.Pow(10, s)
		tol := 4 * math.Sqrt(1/(p1*float64(draws))+1/(p10*float64(draws)))
		if math.Abs(ratio/want-1) > tol {
			t.Errorf("s=%v: rank 1 / rank 10 = %.3f, want %.3f ± %.1f%%", s, ratio, want, 100*tol)
		}
		mean := pTail * float64(draws)
		if sd := math.Sqrt(mean * (1 - pTail)); math.Abs(float64(tail)-mean) > 4*sd {
			t.Errorf("s=%v: %d draws beyond the head, want %.0f ± %.0f", s, tail, mean, 4*sd)
		}
	}
}

func TestZipfHuge(t *testing.T) {
	z, err := newZipf(1<<48, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if last := z.bands[len(z.bands)-1]; last.lo+last.count != 1<<48+1 {
		t.Fatalf("bands end at %d", last.lo+last.count)
	}
	r := newRNG(1, 0, 1)
	big := 0
	for range 100000 {
		k := z.sample(r)
		if k < 1 || k > 1<<48 {
			t.Fatalf("rank %d", k)
		}
		if k > 1<<40 {
			big++
		}
	}
	if big == 0 {
		t.Errorf("no rank above 2^40 in 100000 draws with s=0.9 over 2^48")
	}
	if len(z.alias) > 1<<13 {
		t.Errorf("alias table of %d columns", len(z.alias))
	}
	if _, err := newZipf(0, 1); err == nil {
		t.Errorf("zipf over 0 ranks accepted")
	}
}

func BenchmarkZipf(b *testing.B) {
	for _, n := range []uint64{1000, 1_000_000, 1 << 40} {
		for _, s := range []float64{0.8, 1.1} {
			b.Run(fmt.Sprintf("n=%d/s=%v", n, s), func(b *testing.B) {
				z, _ := newZipf(n, s)
				r := newRNG(1, 0, 1)
				var sum uint64
				for b.Loop() {
					sum += z.sample(r)
				}
				_ = sum
			})
		}
	}
}
