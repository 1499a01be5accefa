package table

// Monolith's hash-table benchmark setup (spec/ps.md §10): one segment of dim 32, SGD,
// zeros; inserts of N distinct ids, finds of N ids uniform in [0, 2N) (about half miss).
// N is 10^6 here (PS_BENCH_N overrides; RESULTS.md uses 10^7):
//
//	go test -run '^$' -bench . -benchmem -count 5 ./ps/table | tee new.txt

import (
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

const benchBatch = 1000

func benchN(b *testing.B) int {
	if s := os.Getenv("PS_BENCH_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("PS_BENCH_N=%q", s)
		}
		return n
	}
	return 1_000_000
}

func benchTable(b *testing.B, opt string) *Table {
	return newTable(b, Options{Config: cfg(b, `entry_config { segments { dim_size: 32 init_config { zeros {} } opt_config { `+opt+` } } }`)})
}

func fill(b *testing.B, tb *Table, n int) {
	fids := make([]int64, benchBatch)
	rows := make([]float32, benchBatch*32)
	for i := 0; i < n; i += benchBatch {
		for j := range fids {
			fids[j] = int64(i + j)
		}
		if _, err := tb.Assign(fids[:min(benchBatch, n-i)], rows[:min(benchBatch, n-i)*32], 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInsert inserts N distinct fids into an empty table per iteration.
func BenchmarkInsert(b *testing.B) {
	n := benchN(b)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		tb := benchTable(b, `sgd {}`)
		runtime.GC()
		b.StartTimer()
		fill(b, tb, n)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "M-inserts/s")
}

// BenchmarkFind looks up N fids uniform in [0, 2N) in a table of N entries.
func BenchmarkFind(b *testing.B) {
	n := benchN(b)
	tb := benchTable(b, `sgd {}`)
	fill(b, tb, n)
	rng := rand.New(rand.NewPCG(1, 2))
	fids := make([]int64, n)
	for i := range fids {
		fids[i] = int64(rng.IntN(2 * n))
	}
	out := make([]float32, benchBatch*32)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := 0; i < n; i += benchBatch {
			m := min(benchBatch, n-i)
			if _, err := tb.Lookup(fids[i:i+m], out[:m*32], nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "M-finds/s")
}

// BenchmarkApplyAdagrad applies batches of 1000 distinct present fids with Adagrad.
func BenchmarkApplyAdagrad(b *testing.B) {
	n := benchN(b)
	tb := benchTable(b, `adagrad {}`)
	fill(b, tb, n)
	rng := rand.New(rand.NewPCG(3, 4))
	perm := rng.Perm(n)
	grads := make([]float32, benchBatch*32)
	for i := range grads {
		grads[i] = float32(rng.NormFloat64())
	}
	fids := make([]int64, n)
	for i, p := range perm {
		fids[i] = int64(p)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := 0; i+benchBatch <= n; i += benchBatch {
			if _, err := tb.Apply(fids[i:i+benchBatch], grads, nil, 1, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n/benchBatch*benchBatch)*float64(b.N)/b.Elapsed().Seconds()/1e6, "M-updates/s")
}

// BenchmarkLookupOrCreate is the training lookup (create_if_missing). hit: N ids uniform
// in [0, N) of a table holding [0, N), all present; half-new: N ids uniform in [0, 2N) of
// a fresh table holding [0, N) per iteration, so about a third of the lookups create.
func BenchmarkLookupOrCreate(b *testing.B) {
	n := benchN(b)
	run := func(b *testing.B, tb *Table, fids []int64, out []float32) {
		for i := 0; i < len(fids); i += benchBatch {
			m := min(benchBatch, len(fids)-i)
			if _, _, err := tb.LookupOrCreate(fids[i:i+m], out[:m*32], nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	out := make([]float32, benchBatch*32)
	b.Run("hit", func(b *testing.B) {
		tb := benchTable(b, `sgd {}`)
		fill(b, tb, n)
		rng := rand.New(rand.NewPCG(5, 6))
		fids := make([]int64, n)
		for i := range fids {
			fids[i] = int64(rng.IntN(n))
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			run(b, tb, fids, out)
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "M-lookups/s")
	})
	b.Run("half-new", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(7, 8))
		fids := make([]int64, n)
		for i := range fids {
			fids[i] = int64(rng.IntN(2 * n))
		}
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			tb := benchTable(b, `sgd {}`)
			fill(b, tb, n)
			runtime.GC()
			b.StartTimer()
			run(b, tb, fids, out)
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "M-lookups/s")
	})
}

// BenchmarkSnapshot walks a table of N/10 entries with a callback that keeps nothing, for
// the optimizers whose dumps have one, two and three repeated fields; allocs/entry is the
// heap allocations per entry dumped.
func BenchmarkSnapshot(b *testing.B) {
	n := benchN(b) / 10
	for _, opt := range []string{`sgd {}`, `adagrad {}`, `ftrl {}`, `adam {}`, `amsgrad {}`} {
		b.Run(opt[:len(opt)-3], func(b *testing.B) {
			tb := benchTable(b, opt)
			fill(b, tb, n)
			entries := 0
			var before, after runtime.MemStats
			b.ReportAllocs()
			b.ResetTimer()
			runtime.ReadMemStats(&before)
			for b.Loop() {
				entries = 0
				if err := tb.Snapshot(func(*hashtablepb.EntryDump) error { entries++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			if entries != n {
				b.Fatalf("snapshot gave %d entries, want %d", entries, n)
			}
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N)/float64(n), "allocs/entry")
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "M-entries/s")
		})
	}
}
