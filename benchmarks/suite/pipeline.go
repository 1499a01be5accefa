package suite

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/monolith-go/monolith/benchmarks/pipeline"
)

// Stage names of the pipeline scaling points.
const (
	stageLoop     = "loop"
	stageLoop1    = "loop1"
	stagePipeline = "pipeline"
)

// pipeline measures read → parse → shard → layout as a Beam pipeline on prism against the
// plain loop (GOMAXPROCS goroutines) over the same files, at every input multiple, each
// measurement in its own child process (peak RSS), kinds interleaved per repetition.
func (r *run) pipeline(ctx context.Context) error {
	sh := r.sz.pipe
	d, err := pipeline.Prepare(ctx, sh, filepath.Join(r.tmp, "pipeline-data"))
	if err != nil {
		return err
	}
	tiny, err := pipeline.Prepare(ctx, pipeline.Shape{BaseRows: int64(d.Synth.BatchRows), BaseFiles: 1, MaxScale: 1, PS: sh.PS, Version: sh.Version, Unique: sh.Unique},
		filepath.Join(r.tmp, "pipeline-tiny"))
	if err != nil {
		return err
	}
	workers := runtime.GOMAXPROCS(0)
	r.res.Inputs = append(r.res.Inputs, fmt.Sprintf("pipeline: io/synth defaults (ExampleBatch records of %d rows, %d+%d sparse v1 features of %d–%d fids, uncompressed PB streams), %d rows in %d files at 1× (%.1f MB), up to %d×; PS %d, v%d, unique; the loop on %d goroutines",
		d.Synth.BatchRows, d.Synth.Features, d.Synth.Shared, d.Synth.FidsMin, d.Synth.FidsMax, sh.BaseRows, sh.BaseFiles, float64(d.Bytes)/float64(sh.MaxScale)/1e6, sh.MaxScale, sh.PS, sh.Version, workers))
	kinds := []pipeline.Kind{{Name: stageLoop, Mode: pipeline.ModeLoop, Workers: workers}}
	if r.opts.Suite == Full {
		kinds = append(kinds, pipeline.Kind{Name: stageLoop1, Mode: pipeline.ModeLoop, Workers: 1})
	}
	kinds = append(kinds, pipeline.Kind{Name: stagePipeline, Mode: pipeline.ModePipeline})
	plan := pipeline.Plan{Scales: r.sz.scales, Reps: r.sz.reps, Kinds: kinds, StartupRun: r.sz.pipeStartup, CPUProfile: r.opts.CPUProfile}
	ms, err := pipeline.Bench(ctx, d, tiny, plan, r.tmp, r.log)
	if err != nil {
		return err
	}
	if err := pipeline.Check(ms); err != nil {
		return err
	}
	type key struct {
		kind  string
		scale int
	}
	byRep := map[key]map[int]pipeline.Measurement{}
	for _, m := range ms {
		k := key{m.Kind, m.Scale}
		if byRep[k] == nil {
			byRep[k] = map[int]pipeline.Measurement{}
		}
		byRep[k][m.Rep] = m
	}
	rps := func(m pipeline.Measurement) float64 { return float64(m.Rows) / m.Wall.Seconds() }
	for _, k := range kinds {
		for _, s := range r.sz.scales {
			p := ScalePoint{Stage: k.Name, Scale: s, Threads: max(k.Workers, 1)}
			for rep := range r.sz.reps {
				m := byRep[key{k.Name, s}][rep]
				p.Rows = m.Rows
				p.Seconds = append(p.Seconds, m.Wall.Seconds())
				p.RSSMiB = append(p.RSSMiB, float64(m.MaxRSS)/(1<<20))
			}
			if k.Mode == pipeline.ModePipeline {
				p.Note = "Beam on prism, start-up included"
			}
			r.res.Scaling = append(r.res.Scaling, p)
		}
	}
	for _, s := range r.sz.scales {
		for _, ref := range kinds {
			if ref.Name == stagePipeline {
				continue
			}
			var pv, lv []float64
			for rep := range r.sz.reps {
				pv = append(pv, rps(byRep[key{stagePipeline, s}][rep]))
				lv = append(lv, rps(byRep[key{ref.Name, s}][rep]))
			}
			f := Figure{Issue: 18, Section: SectionPipeline, Name: fmt.Sprintf("pipeline vs %s, %d× (%d rows)", ref.Name, s, byRep[key{stagePipeline, s}][0].Rows),
				Unit: "rows/s", Values: pv, Baseline: ref.Name + " rows/s", Base: lv, RatioOf: "pipeline ÷ " + ref.Name, Ratios: ratios(pv, lv)}
			switch {
			case ref.Name == stageLoop && (r.opts.Suite != Quick || s >= 4):
				f.Target = &Target{On: OnRatio, Op: ">=", Bound: 0.9, Text: "≥ 0.9× the plain loop on as many goroutines"}
			case ref.Name == stageLoop:
				f.Note = "no target: the quick suite's inputs below 4× are small enough that prism's start-up shows"
			default:
				f.Note = "the parallelism prism gives the pipeline (one bundle per stage)"
			}
			r.add(f)
		}
	}
	if r.sz.pipeStartup {
		var pv, lv []float64
		for rep := range r.sz.reps {
			pv = append(pv, byRep[key{stagePipeline, 0}][rep].Wall.Seconds())
			lv = append(lv, byRep[key{stagePipeline, 1}][rep].Wall.Seconds())
		}
		r.add(Figure{Issue: 4, Section: SectionPipeline, Name: "pipeline start-up: one-batch run vs the 1× run", Unit: "s", Values: pv,
			Baseline: "1× run s", Base: lv, RatioOf: "share of the 1× run", Ratios: ratios(pv, lv),
			Target: &Target{On: OnRatio, Op: "<=", Bound: 0.1, Text: "start-up < 10% of the run"}})
	}
	for _, k := range kinds {
		if f, ok := rssFigure(r.res.Scaling, k.Name); ok {
			f.Issue, f.Section = 4, SectionPipeline
			r.add(f)
		}
	}
	return nil
}
