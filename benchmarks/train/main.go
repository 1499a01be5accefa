// Command train measures the training pipeline against the target of issue 6 in one run:
// examples/s of the Beam pipeline (prism) against the same workers, kernels and model in a
// plain loop, both against in-process PS shards, at 1 and 2 shards and 1 and 2 trainer
// threads. Each configuration alternates loop and pipeline runs; medians are reported.
//
//	go run ./cmd/monolith gen --planted fm --seed 1 --out /tmp/monolith-planted
//	go run ./benchmarks/train --data /tmp/monolith-planted
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/runners"
)

func main() {
	data := flag.String("data", "/tmp/monolith-planted", "a `DIR` written by monolith gen --planted")
	config := flag.String("config", "pipelines/train/configs/planted_fm.yaml", "training config (its data is replaced by --data)")
	reps := flag.Int("reps", 3, "runs of each engine per configuration (the median is reported)")
	flag.Parse()
	runners.Init(false)
	if runners.MaybeWorker(os.Args[1:]) {
		return
	}
	if err := run(*config, *data, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks/train:", err)
		os.Exit(1)
	}
}

func run(config, data string, reps int) error {
	ctx := context.Background()
	fmt.Printf("# benchmarks/train: GOMAXPROCS %d, %s, %d reps, config %s, data %s\n", runtime.GOMAXPROCS(0), runtime.Version(), reps, config, data)
	fmt.Println("| PS shards | threads | loop examples/s | pipeline examples/s | pipeline ÷ loop |")
	fmt.Println("|---|---|---|---|---|")
	pipe := map[int]float64{}
	for _, shards := range []int{1, 2} {
		for _, threads := range []int{1, 2} {
			var loop, beam []float64
			for range reps {
				for _, isLoop := range []bool{true, false} {
					c, err := train.LoadConfig(config)
					if err != nil {
						return err
					}
					c.SetData(data)
					c.Epochs, c.Threads, c.PS.Shards = 1, threads, shards
					c.Checkpoint.Dir = ""
					if err := c.Normalize(); err != nil {
						return err
					}
					c.EvalInput, c.Planted = "", "" // training throughput only
					sum, err := train.Run(ctx, c, train.Options{Loop: isLoop})
					if err != nil {
						return err
					}
					if isLoop {
						loop = append(loop, sum.ExamplesPerSec)
					} else {
						beam = append(beam, sum.ExamplesPerSec)
					}
				}
			}
			l, b := median(loop), median(beam)
			if threads == 2 {
				pipe[shards] = b
			}
			fmt.Printf("| %d | %d | %.0f (%s) | %.0f (%s) | %.2f |\n", shards, threads, l, span(loop), b, span(beam), b/l)
		}
	}
	fmt.Printf("\npipeline scaling from 1 to 2 PS shards (2 threads): %.2f×\n", pipe[2]/pipe[1])
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func span(v []float64) string {
	lo, hi := slices.Min(v), slices.Max(v)
	var b strings.Builder
	fmt.Fprintf(&b, "%.0f–%.0f", lo, hi)
	return b.String()
}
