// Package curves draws training curves from TensorBoard event files as PNG images: the
// training loss and the evaluation AUC (with the data's Bayes AUC as a reference line)
// against the global step. It backs `monolith plot`.
//
// Input is the scalar points of io/tfevents, under the tags the trainer writes: "loss"
// (TagLoss), "eval/auc" (TagAUC) and "eval/bayes_auc" (TagBayesAUC). Points are drawn in
// step order (equal steps keep their file order), as lines with a marker on every point
// so that a series of one point still shows. Non-finite values (a diverged NaN loss) are
// left out, since a line cannot pass through them.
package curves

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/io/tfevents"
)

// Tags read, as the trainer writes them.
const (
	TagLoss     = "loss"
	TagAUC      = "eval/auc"
	TagBayesAUC = "eval/bayes_auc"
)

// Output file names in the output directory.
const (
	LossFile = "loss.png"
	AUCFile  = "auc.png"
)

// Image size: 8×5 inches at gonum/plot's 96 dpi, i.e. WidthPx × HeightPx pixels.
const (
	width    = 8 * vg.Inch
	height   = 5 * vg.Inch
	WidthPx  = 768
	HeightPx = 480
)

// ErrNoPoints means there was nothing to draw: no finite "loss" or "eval/auc" point.
var ErrNoPoints = errors.New("pipelines/train/curves: no loss or eval/auc points")

// Write draws points into outDir (created if missing): LossFile, TagLoss against step,
// when there are loss points, and AUCFile, TagAUC against step, when there are AUC
// points, with a dashed horizontal line labelled "Bayes AUC" at the last TagBayesAUC
// value when there is one. It returns the paths written, LossFile first. Each file is
// replaced atomically. With neither kind of point it writes nothing and returns
// ErrNoPoints.
func Write(points []tfevents.Point, outDir string) ([]string, error) {
	loss, auc := series(points, TagLoss), series(points, TagAUC)
	if len(loss) == 0 && len(auc) == 0 {
		return nil, ErrNoPoints
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("pipelines/train/curves: output directory %s: %w", outDir, err)
	}
	var out []string
	if len(loss) > 0 {
		p := newPlot("Training loss", "loss")
		if err := addSeries(p, "loss", loss, 0); err != nil {
			return out, err
		}
		path := filepath.Join(outDir, LossFile)
		if err := save(p, path); err != nil {
			return out, err
		}
		out = append(out, path)
	}
	if len(auc) > 0 {
		p := newPlot("Evaluation AUC", "AUC")
		if err := addSeries(p, "eval AUC", auc, 1); err != nil {
			return out, err
		}
		if bayes := series(points, TagBayesAUC); len(bayes) > 0 {
			addBayes(p, bayes[len(bayes)-1].Y)
		}
		path := filepath.Join(outDir, AUCFile)
		if err := save(p, path); err != nil {
			return out, err
		}
		out = append(out, path)
	}
	return out, nil
}

// WriteDir reads every event file of eventsPath (tfevents.Files: the event files directly
// in a directory, or the file itself) and draws their points with Write.
func WriteDir(eventsPath, outDir string) ([]string, error) {
	files, err := tfevents.Files(eventsPath)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("pipelines/train/curves: no event files (%s*) in %s", tfevents.FilePrefix, eventsPath)
	}
	var pts []tfevents.Point
	for _, f := range files {
		ps, err := tfevents.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pts = append(pts, ps...)
	}
	out, err := Write(pts, outDir)
	if errors.Is(err, ErrNoPoints) {
		return nil, fmt.Errorf("%w in %s", err, eventsPath)
	}
	return out, err
}

// series returns the finite points of tag as (step, value), sorted by step (stable).
func series(points []tfevents.Point, tag string) plotter.XYs {
	var xys plotter.XYs
	for _, p := range points {
		if p.Tag == tag && !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) {
			xys = append(xys, plotter.XY{X: float64(p.Step), Y: p.Value})
		}
	}
	slices.SortStableFunc(xys, func(a, b plotter.XY) int {
		switch {
		case a.X < b.X:
			return -1
		case a.X > b.X:
			return 1
		}
		return 0
	})
	return xys
}

func newPlot(title, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, "step", yLabel
	p.Legend.Top = true
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(12), -vg.Points(6)
	p.Title.Padding = vg.Points(6)
	p.Add(plotter.NewGrid())
	return p
}

// addSeries draws xys as a line with a marker on each point, in palette colour i.
func addSeries(p *plot.Plot, name string, xys plotter.XYs, i int) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("pipelines/train/curves: %s: %w", name, err)
	}
	c := palette[i%len(palette)]
	l.Color, l.Width = c, vg.Points(1.5)
	s.Color, s.Shape, s.Radius = c, draw.CircleGlyph{}, vg.Points(2.5)
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// addBayes draws a dashed horizontal line at y across the plot, labelled "Bayes AUC",
// and widens the Y range to show it.
func addBayes(p *plot.Plot, y float64) {
	f := plotter.NewFunction(func(float64) float64 { return y })
	f.Color, f.Width, f.Dashes = palette[2], vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(f)
	p.Legend.Add("Bayes AUC", f)
	p.Y.Min, p.Y.Max = math.Min(p.Y.Min, y), math.Max(p.Y.Max, y)
}

// save renders p as a PNG and replaces path with it.
func save(p *plot.Plot, path string) error {
	// Margins, so that edge markers show whole, and room above for the legend. A zero
	// span is widened by gonum/plot itself (±1).
	if span := p.X.Max - p.X.Min; span > 0 {
		p.X.Min, p.X.Max = p.X.Min-0.03*span, p.X.Max+0.03*span
	}
	if span := p.Y.Max - p.Y.Min; span > 0 {
		p.Y.Min, p.Y.Max = p.Y.Min-0.05*span, p.Y.Max+0.2*span
	}
	wt, err := p.WriterTo(width, height, "png")
	if err != nil {
		return fmt.Errorf("pipelines/train/curves: %s: %w", path, err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return fmt.Errorf("pipelines/train/curves: %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, buf.Bytes()); err != nil {
		return fmt.Errorf("pipelines/train/curves: %w", err)
	}
	return nil
}
