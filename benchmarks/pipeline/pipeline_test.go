package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/monolith-go/monolith/runners/beamtest"
)

// TestMain lets the test binary serve as the benchmark's child process; as the parent, it
// fails the tests if a goroutine outlives them (goleak), but for the embedded prism job
// server that TestInProcess starts, which runs for the life of the process by design of the
// Beam SDK.
func TestMain(m *testing.M) {
	if served, err := MaybeChild(context.Background()); served {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, beamtest.IgnorePrism())
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
		{Name: "pipeline", Mode: ModePipeline},
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
