package validate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/transforms/beamio"
)

// TestMain runs the pipelines on prism and fails the tests if a goroutine outlives them,
// but for prism's job server (beamtest.IgnorePrism).
func TestMain(m *testing.M) { beamtest.VerifyMain(m) }

// TestPipeline runs the data checks as a Beam pipeline on prism, over the fixture cut into
// batches of 7 rows (several bundles and merges), and compares every report with the one
// an in-memory Accumulator gives over the same batches.
func TestPipeline(t *testing.T) {
	fixture := fixtures.Path(t, "example_batch.pbtxt")
	tests := []struct {
		name   string
		config string
		opts   Options
		failed bool
	}{
		{"good", goodPath, Options{PS: 2, Version: 5}, false},
		{"good v4 unique", goodPath, Options{PS: 3, Version: 4, Unique: true}, false},
		{"broken", brokenPath, Options{FeatureList: list(t)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := load(t, tc.config)
			dir := t.TempDir()
			read := beamio.DefaultReadConfig()
			read.RowsPerBatch = 7
			job := Job{
				Inputs:         Inputs{Pattern: fixture, FeatureConfigs: tc.config},
				FeatureConfigs: fc, Options: tc.opts, Read: read, OutDir: dir,
			}
			got, err := Run(context.Background(), job, runners.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Failed() != tc.failed {
				t.Fatalf("Failed() = %v, want %v", got.Failed(), tc.failed)
			}

			fix := batchtest.FixtureRecord(t, memory.NewGoAllocator())
			acc, err := NewAccumulator(fc, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for lo := int64(0); lo < fix.NumRows(); lo += 7 {
				if err := acc.Add(fix.NewSlice(lo, min(lo+7, fix.NumRows()))); err != nil {
					t.Fatal(err)
				}
			}
			job.Inputs.Files = []string{fixture}
			want, err := Build(job.Inputs, fc, tc.opts, acc)
			if err != nil {
				t.Fatal(err)
			}
			var gj, wj bytes.Buffer
			if err := got.WriteJSON(&gj); err != nil {
				t.Fatal(err)
			}
			if err := want.WriteJSON(&wj); err != nil {
				t.Fatal(err)
			}
			if gj.String() != wj.String() {
				t.Fatalf("pipeline report differs from the in-memory one:\n got %s\nwant %s", gj.String(), wj.String())
			}
			jp, tp, hp := Files(dir)
			for _, p := range []string{jp, tp, hp} {
				b, err := os.ReadFile(p)
				if err != nil || len(b) == 0 {
					t.Fatalf("report %s: %v (%d bytes)", p, err, len(b))
				}
			}
			if b, _ := os.ReadFile(jp); !bytes.Equal(b, gj.Bytes()) {
				t.Errorf("%s is not the returned report", jp)
			}
			if _, err := os.Stat(filepath.Join(dir, stateFile)); !os.IsNotExist(err) {
				t.Errorf("state file left behind: %v", err)
			}
		})
	}
}

func TestPipelineErrors(t *testing.T) {
	fc := load(t, goodPath)
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.pb")
	if err := os.WriteFile(corrupt, []byte("\x05\x00\x00\x00\x00\x00\x00\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, pattern, want string
	}{
		{"no files", filepath.Join(dir, "none-*.pb"), "none-*.pb"},
		{"corrupt file", corrupt, "corrupt.pb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := Job{Inputs: Inputs{Pattern: tc.pattern}, FeatureConfigs: fc, Read: beamio.DefaultReadConfig(), OutDir: filepath.Join(dir, "out")}
			_, err := Run(context.Background(), job, runners.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}
