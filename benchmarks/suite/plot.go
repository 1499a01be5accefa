package suite

import (
	"fmt"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotFile is one written plot.
type PlotFile struct {
	Name    string // file name in the output directory
	Caption string
}

// series is one line of a plot: its points in x order.
type series struct {
	name string
	pts  plotter.XYs
}

func (s *series) add(x, y float64) {
	s.pts = append(s.pts, plotter.XY{X: x, Y: y})
	slices.SortFunc(s.pts, func(a, b plotter.XY) int {
		switch {
		case a.X < b.X:
			return -1
		case a.X > b.X:
			return 1
		}
		return 0
	})
}

// lines draws the series into name (PNG) with log axes where asked; no file is written
// when no series has two points.
func lines(dir, name, title, xl, yl string, logX, logY bool, ss []*series) (bool, error) {
	var args []any
	for _, s := range ss {
		if len(s.pts) >= 2 {
			args = append(args, s.name, s.pts)
		}
	}
	if len(args) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xl, yl
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return false, fmt.Errorf("plot %s: %w", name, err)
	}
	if !logY {
		p.Y.Min = 0
		p.Y.Max *= 1.25 // room for the legend above the lines
	}
	if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, name)); err != nil {
		return false, fmt.Errorf("plot %s: %w", name, err)
	}
	return true, nil
}

// Plots writes the PNG plots of res into dir: throughput against batch size (kernels),
// against input size (pipeline and loop), against goroutines (kernels), and peak RSS
// against input size; each point is a median.
func Plots(dir string, res *Results) ([]PlotFile, error) {
	get := func(m map[string]*series, order *[]string, name string) *series {
		if m[name] == nil {
			m[name] = &series{name: name}
			*order = append(*order, name)
		}
		return m[name]
	}
	kern, pipe, rss := map[string]*series{}, map[string]*series{}, map[string]*series{}
	var kOrder, pOrder, rOrder []string
	for _, p := range res.BatchSize {
		if sec := Summarize(p.Seconds).Med; sec > 0 {
			get(kern, &kOrder, p.Stage).add(float64(p.Rows), float64(p.Rows)/sec)
		}
	}
	for _, p := range res.Scaling {
		if sec := Summarize(p.Seconds).Med; sec > 0 {
			get(pipe, &pOrder, p.Stage).add(float64(p.Scale), float64(p.Rows)/sec)
		}
		get(rss, &rOrder, p.Stage).add(float64(p.Scale), Summarize(p.RSSMiB).Med)
	}
	gor := map[string]*series{}
	var gOrder []string
	for _, f := range res.Figures {
		if f.Series != "" {
			get(gor, &gOrder, f.Series).add(f.X, Summarize(f.Values).Med)
		}
	}
	pick := func(m map[string]*series, order []string) []*series {
		var out []*series
		for _, n := range order {
			out = append(out, m[n])
		}
		return out
	}
	var out []PlotFile
	for _, pl := range []struct {
		file, title, xl, yl, caption string
		logX, logY                   bool
		ss                           []*series
	}{
		{"throughput-vs-batch-size.png", "Kernel throughput vs batch size (large shape, 1 goroutine)", "rows per batch", "rows/s", "Kernel throughput against batch size", true, false, pick(kern, kOrder)},
		{"throughput-vs-input-size.png", "Throughput vs input size (kernels: streams of batches)", "input (× the 1× size)", "rows/s", "Throughput of every stage against input size", true, false, pick(pipe, pOrder)},
		{"throughput-vs-goroutines.png", "Kernel throughput vs goroutines", "goroutines", "MB/s touched", "Kernel throughput on 1 and 2 goroutines", false, false, pick(gor, gOrder)},
		{"peak-rss-vs-input-size.png", "Peak RSS vs input size", "input (× the 1× size)", "peak RSS, MiB", "Peak RSS of every stage against input size", true, false, pick(rss, rOrder)},
	} {
		ok, err := lines(dir, pl.file, pl.title, pl.xl, pl.yl, pl.logX, pl.logY, pl.ss)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, PlotFile{Name: pl.file, Caption: pl.caption})
		}
	}
	return out, nil
}
