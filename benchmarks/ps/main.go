// Command ps measures the parameter server against the targets of issue 5 in one run:
// Monolith's hash-table benchmark setup (dim 32, SGD, N entries; finds of ids uniform in
// [0, 2N)), Adagrad applies, memory against the raw embedding and optimizer bytes, and
// gRPC loopback lookups against in-process lookups of the same table.
//
//	go run ./benchmarks/ps -n 10000000
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/server"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

const batch = 1000

func main() {
	n := flag.Int("n", 10_000_000, "entries of the insert/find table (Monolith used 10^7)")
	na := flag.Int("apply-n", 1_000_000, "entries of the Adagrad apply table")
	ng := flag.Int("grpc-n", 1_000_000, "entries of the table served over gRPC")
	reps := flag.Int("reps", 5, "repetitions of each measurement (the median is reported)")
	flag.Parse()
	if err := run(*n, *na, *ng, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks/ps:", err)
		os.Exit(1)
	}
}

func config(opt string) *hashtablepb.EmbeddingHashTableConfig {
	c := &hashtablepb.EmbeddingHashTableConfig{}
	text := `entry_config { segments { dim_size: 32 init_config { zeros {} } opt_config { ` + opt + ` } } }`
	if err := prototext.Unmarshal([]byte(text), c); err != nil {
		panic(err)
	}
	return c
}

// rate runs f once and returns ops per second.
func rate(ops int, f func() error) (float64, error) {
	start := time.Now()
	if err := f(); err != nil {
		return 0, err
	}
	return float64(ops) / time.Since(start).Seconds(), nil
}

// median runs f reps times and returns the median, min and max of its rate (ops/s).
func median(reps int, ops int, f func() error) (med, lo, hi float64, err error) {
	var rates []float64
	for range reps {
		r, err := rate(ops, f)
		if err != nil {
			return 0, 0, 0, err
		}
		rates = append(rates, r)
	}
	slices.Sort(rates)
	return rates[len(rates)/2], rates[0], rates[len(rates)-1], nil
}

func insert(tb *table.Table, n int) error {
	fids := make([]int64, batch)
	rows := make([]float32, batch*32)
	for i := 0; i < n; i += batch {
		m := min(batch, n-i)
		for j := range m {
			fids[j] = int64(i + j)
		}
		if _, err := tb.Assign(fids[:m], rows[:m*32], 1); err != nil {
			return err
		}
	}
	return nil
}

func row(name string, med, lo, hi float64, unit string, target string) {
	fmt.Printf("| %s | %.2f (%.2f–%.2f) %s | %s |\n", name, med/1e6, lo/1e6, hi/1e6, unit, target)
}

func run(n, na, ng, reps int) error {
	fmt.Printf("machine: %d CPUs, GOMAXPROCS %d, %s/%s, %s\n\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Println("| measurement | median (min–max) | target |")
	fmt.Println("|---|---|---|")

	// Insert: a fresh table per repetition.
	var tb *table.Table
	med, lo, hi, err := median(reps, n, func() error {
		tb = nil
		runtime.GC()
		var err error
		if tb, err = table.New(table.Options{Name: "sgd", Config: config("sgd {}")}); err != nil {
			return err
		}
		return insert(tb, n)
	})
	if err != nil {
		return err
	}
	row(fmt.Sprintf("insert %d entries, dim 32 SGD, 1 goroutine", n), med, lo, hi, "M/s", "≥ 5 M/s")

	// Memory of the last inserted table.
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	st := tb.Stats()
	fmt.Printf("| memory: table accounting ÷ raw (%d B ÷ %d B) | %.3f | ≤ 1.3 |\n", st.MemoryBytes, st.RawBytes, float64(st.MemoryBytes)/float64(st.RawBytes))
	fmt.Printf("| memory: Go heap in use ÷ raw (%d B) | %.3f | ≤ 1.3 |\n", ms.HeapInuse, float64(ms.HeapInuse)/float64(st.RawBytes))

	// Find: ids uniform in [0, 2n).
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(rng.IntN(2 * n))
	}
	out := make([]float32, batch*32)
	med, lo, hi, err = median(reps, n, func() error {
		for i := 0; i < n; i += batch {
			m := min(batch, n-i)
			if _, err := tb.Lookup(ids[i:i+m], out[:m*32], nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	row(fmt.Sprintf("find %d ids uniform in [0, 2N), batches of %d, 1 goroutine", n, batch), med, lo, hi, "M/s", "≥ 10 M/s")
	tb, ids = nil, nil
	runtime.GC()

	// Adagrad applies of distinct present fids.
	ta, err := table.New(table.Options{Name: "adagrad", Config: config("adagrad {}")})
	if err != nil {
		return err
	}
	if err := insert(ta, na); err != nil {
		return err
	}
	perm := rng.Perm(na)
	grads := make([]float32, batch*32)
	for i := range grads {
		grads[i] = float32(rng.NormFloat64())
	}
	pf := make([]int64, na)
	for i, p := range perm {
		pf[i] = int64(p)
	}
	nb := na / batch * batch
	med, lo, hi, err = median(reps, nb, func() error {
		for i := 0; i < nb; i += batch {
			if _, err := ta.Apply(pf[i:i+batch], grads, nil, 1, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	row(fmt.Sprintf("apply Adagrad to %d entries, batches of %d distinct fids, 1 goroutine", na, batch), med, lo, hi, "M fid-updates/s", "≥ 5 M/s")
	ta = nil
	runtime.GC()
	return grpcVsInProcess(ng, reps, rng)
}

// grpcVsInProcess serves one table on loopback and looks up the same ids in process and
// through the client, alternating, in batches of 1000.
func grpcVsInProcess(ng, reps int, rng *rand.Rand) error {
	spec := &pspb.TableSpec{Name: "emb", Config: config("sgd {}")}
	opts := server.DefaultOptions()
	opts.Tables = &pspb.TablesConfig{Tables: []*pspb.TableSpec{spec}}
	opts.Logger = slog.New(slog.DiscardHandler)
	srv, err := server.New(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	tb := srv.Tables()[0]
	if err := insert(tb, ng); err != nil {
		return err
	}
	cl, err := client.New([]string{srv.Addr()})
	if err != nil {
		return err
	}
	defer cl.Close()
	ids := make([]int64, ng)
	for i := range ids {
		ids[i] = int64(rng.IntN(2 * ng))
	}
	out := make([]float32, batch*32)
	var inproc, remote []float64
	for range reps {
		r, err := rate(ng, func() error {
			for i := 0; i < ng; i += batch {
				m := min(batch, ng-i)
				if _, err := tb.Lookup(ids[i:i+m], out[:m*32], nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		inproc = append(inproc, r)
		r, err = rate(ng, func() error {
			for i := 0; i < ng; i += batch {
				m := min(batch, ng-i)
				if _, err := cl.Lookup(ctx, "emb", 32, ids[i:i+m], client.LookupOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		remote = append(remote, r)
	}
	var ratios []float64
	for i := range inproc {
		ratios = append(ratios, remote[i]/inproc[i])
	}
	slices.Sort(inproc)
	slices.Sort(remote)
	slices.Sort(ratios)
	m := len(ratios) / 2
	row(fmt.Sprintf("lookup in process, %d entries, batches of %d", ng, batch), inproc[m], inproc[0], inproc[len(inproc)-1], "M/s", "")
	row("lookup over gRPC loopback, same ids, 1 client goroutine", remote[m], remote[0], remote[len(remote)-1], "M/s", "")
	fmt.Printf("| gRPC ÷ in-process (paired runs) | %.2f (%.2f–%.2f) | ≥ 0.3 |\n", ratios[m], ratios[0], ratios[len(ratios)-1])
	return nil
}
