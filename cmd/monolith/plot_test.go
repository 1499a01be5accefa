package main

import (
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pipelines/train/curves"
)

func TestPlot(t *testing.T) {
	dir := t.TempDir()
	path := writeEvents(t, dir)
	for _, tc := range []struct {
		name    string
		args    []string
		wantDir string
	}{
		{"dir, default out", []string{dir}, dir},
		{"file, default out", []string{path}, dir},
		{"--out", []string{"--out", filepath.Join(dir, "plots"), dir}, filepath.Join(dir, "plots")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runCLI(t, append([]string{"plot"}, tc.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			want := []string{filepath.Join(tc.wantDir, "loss.png"), filepath.Join(tc.wantDir, "auc.png")}
			if got := strings.Fields(out); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("printed %q, want %v", out, want)
			}
			for _, p := range want {
				f, err := os.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				img, err := png.Decode(f)
				f.Close()
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				if b := img.Bounds(); b.Dx() != curves.WidthPx || b.Dy() != curves.HeightPx {
					t.Errorf("%s is %v", p, b)
				}
			}
		})
	}
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	writeEvents(t, dir)
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		usage bool
		msg   string
	}{
		{"no argument", nil, true, "one events directory"},
		{"two arguments", []string{dir, dir}, true, "one events directory"},
		{"missing", []string{filepath.Join(dir, "missing")}, false, "missing"},
		{"no event files", []string{t.TempDir()}, false, "no event files"},
		{"unwritable out", []string{"--out", filepath.Join(file, "plots"), dir}, false, filepath.Join(file, "plots")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"plot"}, tc.args...)...)
			if err == nil {
				t.Fatal("plot succeeded")
			}
			if errors.Is(err, errUsage) != tc.usage || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want usage=%v and %q", err, tc.usage, tc.msg)
			}
		})
	}
}
