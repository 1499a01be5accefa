package readlayout_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/pipelines/readlayout"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/parse"
)

func TestMain(m *testing.M) { beamtest.VerifyMain(m) }

// testConfig generates rows of io/synth data in files files and the matching job config.
func testConfig(t *testing.T, rows int64, files, ps, version int) readlayout.Config {
	t.Helper()
	c := synth.DefaultConfig()
	c.Rows, c.Files = rows, files
	c.BatchRows = 100 // the last batch of each file is short
	res, err := synth.Generate(context.Background(), c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fc, err := synth.FeatureConfigs(c, synth.LayoutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := config.New(fc, ps, version)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range c.SparseFeatures() {
		names = append(names, f.Name)
	}
	return readlayout.Config{Files: res.Paths(), Kernels: k, Parse: parse.SparseOnly(names...)}
}

// TestPipelineMatchesChain runs the job on prism and the same work as a plain Chain over
// the files: rows, batches and the layout checksum must agree.
func TestPipelineMatchesChain(t *testing.T) {
	for _, tc := range []struct {
		name        string
		rows        int64
		files       int
		ps, version int
		unique      bool
		wantBatches int64
	}{
		{"v5 unique 3 PS", 1000, 2, 3, 5, true, 10},
		{"v4 plain 2 PS", 450, 3, 2, 4, false, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := testConfig(t, tc.rows, tc.files, tc.ps, tc.version)
			c.Kernels.Unique = tc.unique
			var ch readlayout.Chain
			if err := ch.Init(c); err != nil {
				t.Fatal(err)
			}
			var want readlayout.Totals
			for _, f := range c.Files {
				err := beamio.ReadFile(ctx, f, beamio.DefaultReadConfig(), nil, func(rec arrow.RecordBatch) error {
					h, err := ch.Batch(ctx, rec)
					want.Rows += rec.NumRows()
					want.Batches++
					want.Checksum += h
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			got, err := readlayout.Run(ctx, c, runners.Options{Runner: runners.Prism})
			if err != nil {
				t.Fatal(err)
			}
			if got.Rows != tc.rows || got.Batches != tc.wantBatches || got.Bundles < 1 || want.Checksum == 0 {
				t.Errorf("pipeline %+v: want %d rows in %d batches", got, tc.rows, tc.wantBatches)
			}
			if got.Rows != want.Rows || got.Batches != want.Batches || got.Checksum != want.Checksum {
				t.Errorf("pipeline %+v, chain %+v", got, want)
			}
		})
	}
}

// TestRunRejects checks the inputs Run refuses before building anything.
func TestRunRejects(t *testing.T) {
	ctx := context.Background()
	if _, err := readlayout.Run(ctx, readlayout.Config{}, runners.Options{Runner: runners.Prism}); err == nil {
		t.Error("no files: no error")
	}
	if _, err := readlayout.Run(ctx, readlayout.Config{Files: []string{"a,b"}}, runners.Options{Runner: runners.Prism}); err == nil {
		t.Error("a comma in a file name: no error")
	}
}
