package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the test binary serve as the benchmark's child process.
func TestMain(m *testing.M) {
	if child, err := MaybeChild(context.Background()); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestEndToEnd runs every kind, each in its own child process, on a small data set at two
// scales and on the one-batch input, and checks that they all processed the same rows and
// batches with the same layout checksum.
func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sh := Shape{BaseRows: 2048, BaseFiles: 2, MaxScale: 2, PS: 3, Version: 5, Unique: true}
	d, err := Prepare(ctx, sh, filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := Prepare(ctx, Shape{BaseRows: 256, BaseFiles: 1, MaxScale: 1, PS: 3, Version: 5, Unique: true}, filepath.Join(dir, "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := []Kind{
		{Name: "loop", Mode: ModeLoop, Workers: 2},
		{Name: "loop1", Mode: ModeLoop, Workers: 1},
		{Name: "pipeline", Mode: ModePipeline, Sink: SinkTotals},
		{Name: "pipeline-split", Mode: ModePipeline, Sink: SinkTotals, Branch: 2},
		{Name: "pipeline-nooutput", Mode: ModePipeline, Sink: SinkNoOutput},
	}
	plan := Plan{Scales: []int{1, 2}, Reps: 1, Kinds: kinds, StartupRun: true}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ms, err := Bench(ctx, d, tiny, plan, dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3*len(kinds) {
		t.Fatalf("got %d measurements, want %d", len(ms), 3*len(kinds))
	}
	if err := Check(ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		want := map[int]int64{0: 256, 1: 2048, 2: 4096}[m.Scale]
		if m.Rows != want || m.Batches != (want+255)/256 || m.Checksum == 0 {
			t.Errorf("%s at %d×: %d rows, %d batches, checksum %d; want %d rows", m.Kind, m.Scale, m.Rows, m.Batches, m.Checksum, want)
		}
		if m.MaxRSS <= 0 || m.CPU <= 0 || m.Wall <= 0 {
			t.Errorf("%s at %d×: no resource figures: %+v", m.Kind, m.Scale, m.Result)
		}
	}
	var b bytes.Buffer
	Report(&b, ms, kinds, ModeLoop, "loop1")
	if got := b.String(); !strings.Contains(got, "| 2× | 4096 | pipeline | 1 |") || !strings.Contains(got, "start-up (1 batch)") {
		t.Errorf("report lacks rows:\n%s", got)
	}
	var raw bytes.Buffer
	Raw(&raw, ms)
	back, err := ReadRaw(&raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(ms) || len(KindsOf(back)) != len(kinds) {
		t.Fatalf("raw round trip: %d measurements of %d kinds, want %d of %d", len(back), len(KindsOf(back)), len(ms), len(kinds))
	}
	for i, m := range back {
		if m.Kind != ms[i].Kind || m.Rows != ms[i].Rows || m.Checksum != ms[i].Checksum || m.Bundles != ms[i].Bundles {
			t.Errorf("raw round trip %d: %+v, want %+v", i, m, ms[i])
		}
	}
	if len(Quiet(back, 100)) != len(back) {
		t.Error("Quiet(100) dropped measurements")
	}
}

// TestInProcess compares the two modes run in this process, on a data set whose last
// ExampleBatch records are shorter than the others.
func TestInProcess(t *testing.T) {
	ctx := context.Background()
	d, err := Prepare(ctx, Shape{BaseRows: 1000, BaseFiles: 2, MaxScale: 1, PS: 2, Version: 4}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	loop, err := Run(ctx, d.Job(ModeLoop, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := Run(ctx, d.Job(ModePipeline, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if loop.Rows != 1000 || loop.Batches != 4 || pipe.Rows != loop.Rows || pipe.Batches != loop.Batches || pipe.Checksum != loop.Checksum {
		t.Errorf("loop %+v, pipeline %+v", loop, pipe)
	}
	if _, err := Run(ctx, Job{Mode: "bogus"}); err == nil {
		t.Error("unknown mode: no error")
	}
}

func TestStats(t *testing.T) {
	if s := stats([]float64{3, 1, 2}); s != (stat{2, 1, 3}) {
		t.Errorf("odd: %+v", s)
	}
	if s := stats([]float64{4, 1, 2, 3}); s != (stat{2.5, 1, 4}) {
		t.Errorf("even: %+v", s)
	}
	if g := group(1234567); g != "1 234 567" {
		t.Errorf("group: %q", g)
	}
	if _, err := parseScales("1,x"); err == nil {
		t.Error("bad scale accepted")
	}
}

// TestSplitRepeated runs the split pipeline several times: its per-branch totals once went
// missing intermittently (see Build), which a single run does not reliably show.
func TestSplitRepeated(t *testing.T) {
	ctx := context.Background()
	d, err := Prepare(ctx, Shape{BaseRows: 2048, BaseFiles: 4, MaxScale: 1, PS: 2, Version: 5}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		job := d.Job(ModePipeline, 1, 0)
		job.Branches = 2
		res, err := Run(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != 2048 || res.Batches != 8 || res.Bundles < 2 {
			t.Fatalf("run %d: %d rows, %d batches, %d bundles; want 2048 rows, 8 batches, 2+ bundles", i, res.Rows, res.Batches, res.Bundles)
		}
	}
}

// TestResultsTables re-aggregates the raw files of RESULTS.md's issue 4 section with
// `-from` and checks that every table row it prints appears in RESULTS.md unchanged.
func TestResultsTables(t *testing.T) {
	doc, err := os.ReadFile("../RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, files := range [][]string{
		{"../pipeline-2026-11-21-run1.tsv", "../pipeline-2026-11-21-run2.tsv", "../pipeline-2026-11-21-run3.tsv"},
		{"../pipeline-nooutput-2026-11-21.tsv"}, // RESULTS.md shows its quiet table only
	} {
		var b bytes.Buffer
		if err := reportFiles(&b, files, 0.2); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if len(files) == 1 {
			_, out, _ = strings.Cut(out, "Only measurements")
		}
		rows := 0
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| scale ") {
				continue
			}
			rows++
			if !bytes.Contains(doc, []byte(line)) {
				t.Errorf("%v: RESULTS.md lacks the row\n%s", files, line)
			}
		}
		if rows == 0 {
			t.Errorf("%v: no table rows", files)
		}
	}
}
