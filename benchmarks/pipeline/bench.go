package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/monolith-go/monolith/benchmarks/internal/child"
)

// Kind is one way of running the chain.
type Kind struct {
	Name    string // column label
	Mode    string // ModeLoop or ModePipeline
	Workers int    // loop goroutines
}

// Plan is a whole benchmark run.
type Plan struct {
	Scales     []int
	Reps       int
	Kinds      []Kind
	StartupRun bool   // also time every kind on a one-batch input (scale 0)
	CPUProfile string // directory for CPU profiles of every child ("" = none)
	// Quiet, when positive, makes every measurement wait (at most QuietWait) until other
	// processes use less than Quiet CPUs: the machine is shared.
	Quiet     float64
	QuietWait time.Duration
}

// Measurement is one child run.
type Measurement struct {
	Rep   int
	Scale int // 0 is the one-batch start-up input
	Kind  string
	Result
}

// Bench runs the plan's measurements, each in its own child process, interleaving the
// kinds (in an order rotated every repetition) so that each repetition measures them side
// by side. tiny is the one-batch data set of the start-up runs.
func Bench(ctx context.Context, d, tiny *Data, p Plan, tmp string, log *slog.Logger) ([]Measurement, error) {
	var out []Measurement
	scales := p.Scales
	if p.StartupRun {
		scales = append([]int{0}, scales...)
	}
	for rep := range p.Reps {
		for _, s := range scales {
			for i := range p.Kinds {
				k := p.Kinds[(i+rep)%len(p.Kinds)]
				var job Job
				if s == 0 {
					job = tiny.Job(k.Mode, 1, k.Workers)
				} else {
					job = d.Job(k.Mode, s, k.Workers)
				}
				if p.CPUProfile != "" {
					job.CPUProfile = fmt.Sprintf("%s/%s-x%d-rep%d.pprof", p.CPUProfile, k.Name, s, rep)
				}
				if p.Quiet > 0 {
					t0 := time.Now()
					load, err := child.WaitQuiet(ctx, p.Quiet, p.QuietWait)
					if err != nil {
						return out, err
					}
					if waited := time.Since(t0); waited > 2*time.Second {
						log.Info("waited for a quiet machine", "waited", waited.Round(time.Second), "others_cpus", fmt.Sprintf("%.2f", load))
					}
				}
				res, err := RunChild(ctx, job, tmp)
				if err != nil {
					return out, err
				}
				m := Measurement{Rep: rep, Scale: s, Kind: k.Name, Result: res}
				log.Info("measured", "rep", rep, "scale", s, "kind", k.Name, "rows", res.Rows,
					"wall", res.Wall.Round(time.Millisecond), "rows/s", int64(rowsPerSec(res)),
					"maxrss_mib", res.MaxRSS>>20, "cpu", res.CPU.Round(time.Millisecond), "bundles", res.Bundles, "others_cpus", fmt.Sprintf("%.2f", res.Others))
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// Check reports the first disagreement between kinds on the rows, batches or checksum of
// one scale.
func Check(ms []Measurement) error {
	first := map[int]Measurement{}
	for _, m := range ms {
		f, ok := first[m.Scale]
		if !ok {
			first[m.Scale] = m
			continue
		}
		if m.Rows != f.Rows || m.Batches != f.Batches || m.Checksum != f.Checksum {
			return fmt.Errorf("benchmarks/pipeline: scale %d: %s rep %d did %d rows, %d batches, checksum %d; %s rep %d did %d rows, %d batches, checksum %d",
				m.Scale, m.Kind, m.Rep, m.Rows, m.Batches, m.Checksum, f.Kind, f.Rep, f.Rows, f.Batches, f.Checksum)
		}
	}
	return nil
}

func rowsPerSec(r Result) float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Wall.Seconds()
}
