package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/io/tfevents"
	"github.com/monolith-go/monolith/io/tfrecord"
)

// writeEvents writes an event file into dir: loss at steps 1 and 2, then one evaluation
// (with a NaN logloss) at step 2.
func writeEvents(t *testing.T, dir string) string {
	t.Helper()
	w, err := tfevents.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 500_000_000)
	for _, ev := range []struct {
		step    int64
		scalars []tfevents.Scalar
	}{
		{1, []tfevents.Scalar{{Tag: "loss", Value: 0.75}, {Tag: "examples_per_sec", Value: 1024}}},
		{2, []tfevents.Scalar{{Tag: "loss", Value: 0.1}}},
		{2, []tfevents.Scalar{{Tag: "eval/auc", Value: 0.625}, {Tag: "eval/logloss", Value: math.NaN()}}},
	} {
		if err := w.WriteScalars(ev.step, t0.Add(time.Duration(ev.step)*time.Second), ev.scalars...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

func TestInspectEvents(t *testing.T) {
	dir := t.TempDir()
	path := writeEvents(t, dir)
	want := [][]string{
		{"STEP", "TAG", "VALUE", "WALL_TIME"},
		{"1", "loss", "0.75", "1700000001.500"},
		{"1", "examples_per_sec", "1024", "1700000001.500"},
		{"2", "loss", "0.1", "1700000002.500"},
		{"2", "eval/auc", "0.625", "1700000002.500"},
		{"2", "eval/logloss", "NaN", "1700000002.500"},
	}
	for _, arg := range []string{dir, path} {
		out, stderr, err := runCLI(t, "inspect", arg)
		if err != nil {
			t.Fatalf("inspect %s: %v\n%s", arg, err, stderr)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(lines) != len(want) {
			t.Fatalf("inspect %s printed %d lines, want %d:\n%s", arg, len(lines), len(want), out)
		}
		for i, l := range lines {
			if got := strings.Fields(l); strings.Join(got, " ") != strings.Join(want[i], " ") {
				t.Errorf("inspect %s line %d = %q, want fields %v", arg, i, l, want[i])
			}
		}
	}

	out, stderr, err := runCLI(t, "inspect", "--json", dir)
	if err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, stderr)
	}
	var pts []struct {
		File     string  `json:"file"`
		Step     int64   `json:"step"`
		Tag      string  `json:"tag"`
		Value    any     `json:"value"`
		WallTime float64 `json:"wall_time"`
	}
	if err := json.Unmarshal([]byte(out), &pts); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if len(pts) != 5 || pts[0].File != path || pts[0].Step != 1 || pts[0].Tag != "loss" || pts[0].Value != 0.75 ||
		pts[0].WallTime != 1700000001.5 || pts[3].Value != 0.625 || pts[4].Value != "NaN" {
		t.Errorf("--json points %+v", pts)
	}
}

func TestInspectEventsTwoFiles(t *testing.T) {
	dir := t.TempDir()
	first := writeEvents(t, dir)
	second := writeEvents(t, dir) // same second: Create gives it a suffix
	out, _, err := runCLI(t, "inspect", "--json", second, first)
	if err != nil {
		t.Fatal(err)
	}
	var pts []struct {
		File string `json:"file"`
	}
	if err := json.Unmarshal([]byte(out), &pts); err != nil {
		t.Fatal(err)
	}
	if len(pts) != 10 || pts[0].File != second || pts[9].File != first {
		t.Errorf("points of two files in argument order: %+v", pts)
	}
}

func TestInspectEventsDamaged(t *testing.T) {
	src := writeEvents(t, t.TempDir())
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	// Record offsets: walk the framing.
	var offs []int
	for off := 0; off < len(b); {
		offs = append(offs, off)
		off += 12 + int(b[off]) + int(b[off+1])<<8 + 4
	}
	last := offs[len(offs)-1]
	flipped := append([]byte(nil), b...)
	flipped[offs[1]+20] ^= 0xff
	for _, tc := range []struct {
		name   string
		data   []byte
		offset int
		is     error
	}{
		{"truncated", b[:len(b)-2], last, tfrecord.ErrTruncated},
		{"corrupt", flipped, offs[1], tfrecord.ErrChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), filepath.Base(src))
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, arg := range []string{path, filepath.Dir(path)} {
				out, _, err := runCLI(t, "inspect", arg)
				if err == nil {
					t.Fatalf("inspect %s succeeded:\n%s", arg, out)
				}
				if exitCode(err) == 0 || !errors.Is(err, tc.is) {
					t.Errorf("inspect %s: %v (exit %d), want %v", arg, err, exitCode(err), tc.is)
				}
				if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "offset "+itoa(tc.offset)) {
					t.Errorf("error %q does not name %s and offset %d", msg, path, tc.offset)
				}
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestInspectNotEvents checks that data files and directories without event files still
// get the data report.
func TestInspectNotEvents(t *testing.T) {
	files, ok, err := eventFiles([]string{t.TempDir()})
	if err != nil || ok || files != nil {
		t.Errorf("empty directory: %v, %v, %v; want the data path", files, ok, err)
	}
	dir := t.TempDir()
	writeEvents(t, dir)
	plain := filepath.Join(t.TempDir(), "data.tfrecord")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := eventFiles([]string{dir, plain}); ok {
		t.Error("a data file among event files: took the events path")
	}
	if _, ok, _ := eventFiles([]string{filepath.Join(dir, "events.out.tfevents.*")}); ok {
		t.Error("a pattern: took the events path")
	}
}
