package curves_test

import (
	"errors"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/io/tfevents"
	"github.com/monolith-go/monolith/pipelines/train/curves"
)

// trainingPoints is a short run: loss every 10 steps (with a NaN the plot skips), eval
// every 50 steps, the Bayes figures with each eval.
func trainingPoints(evals int) []tfevents.Point {
	var pts []tfevents.Point
	for step := int64(10); step <= 100; step += 10 {
		pts = append(pts,
			tfevents.Point{Step: step, Tag: "loss", Value: 0.7 - 0.002*float64(step)},
			tfevents.Point{Step: step, Tag: "examples_per_sec", Value: 1000},
			tfevents.Point{Step: step, Tag: "global_step", Value: float64(step)})
	}
	pts = append(pts, tfevents.Point{Step: 55, Tag: "loss", Value: math.NaN()})
	for i := range evals {
		step := int64(50 * (i + 1))
		pts = append(pts,
			tfevents.Point{Step: step, Tag: "eval/auc", Value: 0.6 + 0.05*float64(i)},
			tfevents.Point{Step: step, Tag: "eval/logloss", Value: 0.6},
			tfevents.Point{Step: step, Tag: "eval/bayes_auc", Value: 0.8},
			tfevents.Point{Step: step, Tag: "eval/bayes_logloss", Value: 0.45})
	}
	return pts
}

// checkPNG decodes path and checks its size.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != curves.WidthPx || b.Dy() != curves.HeightPx {
		t.Errorf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), curves.WidthPx, curves.HeightPx)
	}
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pts   []tfevents.Point
		files []string
	}{
		{"loss and auc", trainingPoints(2), []string{curves.LossFile, curves.AUCFile}},
		{"one eval point", trainingPoints(1), []string{curves.LossFile, curves.AUCFile}},
		{"no eval", trainingPoints(0), []string{curves.LossFile}},
		{"auc without bayes", []tfevents.Point{{Step: 1, Tag: "eval/auc", Value: 0.7}}, []string{curves.AUCFile}},
		{"one loss point", []tfevents.Point{{Step: 3, Tag: "loss", Value: 0.5}}, []string{curves.LossFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "plots")
			got, err := curves.Write(tc.pts, dir)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, f := range tc.files {
				want = append(want, filepath.Join(dir, f))
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("wrote %v, want %v", got, want)
			}
			for _, p := range got {
				checkPNG(t, p)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != len(want) {
				t.Errorf("%d entries in %s, want %d (no temporary files left)", len(ents), dir, len(want))
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	if _, err := curves.Write([]tfevents.Point{{Tag: "examples_per_sec", Value: 1}, {Tag: "loss", Value: math.Inf(1)}}, t.TempDir()); !errors.Is(err, curves.ErrNoPoints) {
		t.Errorf("no drawable points: %v, want ErrNoPoints", err)
	}
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(file, "plots")
	if _, err := curves.Write(trainingPoints(1), out); err == nil || !strings.Contains(err.Error(), out) {
		t.Errorf("unwritable outDir: %v, want an error naming %s", err, out)
	}
	// A directory where the PNG should go.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, curves.LossFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := curves.Write(trainingPoints(1), dir); err == nil || !strings.Contains(err.Error(), curves.LossFile) {
		t.Errorf("loss.png is a directory: %v, want an error naming it", err)
	}
}

func TestWriteDir(t *testing.T) {
	dir := t.TempDir()
	w, err := tfevents.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for step := int64(1); step <= 5; step++ {
		if err := w.WriteScalars(step, now, tfevents.Scalar{Tag: "loss", Value: 1 / float64(step)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteScalars(5, now, tfevents.Scalar{Tag: "eval/auc", Value: 0.7}, tfevents.Scalar{Tag: "eval/bayes_auc", Value: 0.75}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	got, err := curves.WriteDir(dir, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("wrote %v", got)
	}
	for _, p := range got {
		checkPNG(t, p)
	}
	if got, err := curves.WriteDir(w.Path(), t.TempDir()); err != nil || len(got) != 2 {
		t.Errorf("WriteDir(file) = %v, %v", got, err)
	}
	if _, err := curves.WriteDir(t.TempDir(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "no event files") {
		t.Errorf("empty dir: %v", err)
	}
	// A damaged file: the tfevents error, naming the file and offset.
	b, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), filepath.Base(w.Path()))
	if err := os.WriteFile(bad, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := curves.WriteDir(bad, t.TempDir()); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "offset") {
		t.Errorf("truncated file: %v", err)
	}
}
