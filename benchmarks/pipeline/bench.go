package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Kind is one way of running the chain.
type Kind struct {
	Name    string // column label
	Mode    string // ModeLoop or ModePipeline
	Workers int    // loop goroutines
	Sink    string // pipeline sink (SinkTotals or SinkNoOutput)
	Branch  int    // pipeline branches (Job.Branches)
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
				job.Sink, job.Branches = k.Sink, k.Branch
				if p.CPUProfile != "" {
					job.CPUProfile = fmt.Sprintf("%s/%s-x%d-rep%d.pprof", p.CPUProfile, k.Name, s, rep)
				}
				if p.Quiet > 0 {
					t0 := time.Now()
					load, err := WaitQuiet(ctx, p.Quiet, p.QuietWait)
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

// stat is a median with its range.
type stat struct{ med, lo, hi float64 }

func stats(v []float64) stat {
	if len(v) == 0 {
		return stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{med, s[0], s[len(s)-1]}
}

// Report writes the summary table of ms in Markdown: per scale and kind, rows/s, wall
// time, the ratio of its rows/s to that of every kind in refs measured in the same
// repetition, peak RSS, cores used (CPU time ÷ process wall time) and CPU time per row
// (of the whole child process, start-up included).
func Report(w io.Writer, ms []Measurement, kinds []Kind, refs ...string) {
	by := map[int]map[string][]Measurement{}
	var scales []int
	for _, m := range ms {
		if by[m.Scale] == nil {
			by[m.Scale] = map[string][]Measurement{}
			scales = append(scales, m.Scale)
		}
		by[m.Scale][m.Kind] = append(by[m.Scale][m.Kind], m)
	}
	slices.Sort(scales)
	fmt.Fprintf(w, "| scale | rows | kind | runs | rows/s median (min–max) | wall s |")
	for _, ref := range refs {
		fmt.Fprintf(w, " **÷ %s** median (min–max) |", ref)
	}
	fmt.Fprintf(w, " peak RSS MiB median (min–max) | CPU s / wall s | CPU µs per row | other processes' CPUs, max |\n|---|---|---|---|---|---|%s---|---|---|---|\n", strings.Repeat("---|", len(refs)))
	for _, s := range scales {
		label := fmt.Sprintf("%d×", s)
		if s == 0 {
			label = "start-up (1 batch)"
		}
		for _, k := range kinds {
			runs := by[s][k.Name]
			if len(runs) == 0 {
				continue
			}
			var rps, wall, rss, cores, cpuRow []float64
			others := -1.0
			ratios := make([][]float64, len(refs))
			for _, m := range runs {
				rps = append(rps, rowsPerSec(m.Result))
				wall = append(wall, m.Wall.Seconds())
				rss = append(rss, float64(m.MaxRSS)/(1<<20))
				others = max(others, m.Others)
				if m.ProcRun > 0 {
					cores = append(cores, m.CPU.Seconds()/m.ProcRun.Seconds())
				}
				if m.Rows > 0 {
					cpuRow = append(cpuRow, float64(m.CPU.Microseconds())/float64(m.Rows))
				}
				for i, ref := range refs {
					for _, r := range by[s][ref] {
						if k.Name != ref && r.Rep == m.Rep && rowsPerSec(r.Result) > 0 {
							ratios[i] = append(ratios[i], rowsPerSec(m.Result)/rowsPerSec(r.Result))
						}
					}
				}
			}
			r, wl, mem, c, cr := stats(rps), stats(wall), stats(rss), stats(cores), stats(cpuRow)
			fmt.Fprintf(w, "| %s | %d | %s | %d | %s (%s–%s) | %.2f |", label, runs[0].Rows, k.Name, len(runs), group(r.med), group(r.lo), group(r.hi), wl.med)
			for _, ratio := range ratios {
				if len(ratio) == 0 {
					fmt.Fprintf(w, " — |")
					continue
				}
				q := stats(ratio)
				fmt.Fprintf(w, " **%.2f** (%.2f–%.2f) |", q.med, q.lo, q.hi)
			}
			fmt.Fprintf(w, " %.0f (%.0f–%.0f) | %.2f | %.1f | %.2f |\n", mem.med, mem.lo, mem.hi, c.med, cr.med, others)
		}
	}
}

// Raw writes one line per measurement.
func Raw(w io.Writer, ms []Measurement) {
	fmt.Fprintf(w, "rep\tscale\tkind\trows\tbatches\tchecksum\tbundles\twall_s\trows_per_s\tmaxrss_mib\tcpu_s\tprocess_s\tothers_cpus\n")
	for _, m := range ms {
		fmt.Fprintf(w, "%d\t%d\t%s\t%d\t%d\t%d\t%d\t%.3f\t%.0f\t%.1f\t%.3f\t%.3f\t%.2f\n", m.Rep, m.Scale, m.Kind, m.Rows, m.Batches, m.Checksum, m.Bundles,
			m.Wall.Seconds(), rowsPerSec(m.Result), float64(m.MaxRSS)/(1<<20), m.CPU.Seconds(), m.ProcRun.Seconds(), m.Others)
	}
}

// group formats a rate with thin spaces between thousands, as RESULTS.md does.
func group(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Quiet returns the measurements during which other processes used fewer than maxCores
// CPUs (as far as /proc/stat tells).
func Quiet(ms []Measurement, maxCores float64) []Measurement {
	var out []Measurement
	for _, m := range ms {
		if m.Others >= 0 && m.Others < maxCores {
			out = append(out, m)
		}
	}
	return out
}

// ReadRaw reads measurements written by Raw, adding repOffset to their repetitions (so
// that runs of several files stay apart when merged).
func ReadRaw(r io.Reader, repOffset int) ([]Measurement, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("benchmarks/pipeline: %w", err)
	}
	var out []Measurement
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if i == 0 {
			continue // header
		}
		var m Measurement
		var wall, rps, rss, cpu, proc float64
		_, err := fmt.Sscanf(line, "%d\t%d\t%s\t%d\t%d\t%d\t%d\t%g\t%g\t%g\t%g\t%g\t%g",
			&m.Rep, &m.Scale, &m.Kind, &m.Rows, &m.Batches, &m.Checksum, &m.Bundles, &wall, &rps, &rss, &cpu, &proc, &m.Others)
		if err != nil {
			return nil, fmt.Errorf("benchmarks/pipeline: raw line %d %q: %w", i+1, line, err)
		}
		m.Rep += repOffset
		m.Mode = m.Kind
		m.Wall = time.Duration(wall * float64(time.Second))
		m.MaxRSS = int64(rss * (1 << 20))
		m.CPU = time.Duration(cpu * float64(time.Second))
		m.ProcRun = time.Duration(proc * float64(time.Second))
		out = append(out, m)
	}
	return out, nil
}

// KindsOf returns the kinds measured in ms, in the order the benchmark lists them.
func KindsOf(ms []Measurement) []Kind {
	seen := map[string]bool{}
	for _, m := range ms {
		seen[m.Kind] = true
	}
	var out []Kind
	for _, n := range []string{ModeLoop, "loop1", ModePipeline, "pipeline-split", "pipeline-nooutput"} {
		if seen[n] {
			out = append(out, Kind{Name: n})
			delete(seen, n)
		}
	}
	var rest []string
	for n := range seen {
		rest = append(rest, n)
	}
	slices.Sort(rest)
	for _, n := range rest {
		out = append(out, Kind{Name: n})
	}
	return out
}
