package pipeline

import (
	"context"
	"fmt"

	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/transforms/config"
	"github.com/monolith-go/monolith/transforms/parse"
)

// Shape is the input of a benchmark run.
type Shape struct {
	BaseRows  int64 // rows at 1×
	BaseFiles int   // files at 1×
	MaxScale  int   // the largest scale; the data set holds MaxScale×BaseRows rows
	PS        int   // parameter-server shards
	Version   int   // op version of sharding and layout
	Unique    bool  // deduplicate fids per feature (training mode)
	BatchRows int   // rows per ExampleBatch record, one batch each (0: io/synth's 256)
}

// Data is a generated data set: scale s reads the first s×BaseFiles files, so every scale
// reads the same bytes per file and larger scales only add files.
type Data struct {
	Shape   Shape
	Synth   synth.Config
	Files   []string // MaxScale×BaseFiles files, each BaseRows/BaseFiles rows
	Bytes   int64    // size of all files
	Kernels config.Kernels
	Parse   parse.Config
}

// SynthConfig returns the io/synth configuration of sh: synth.DefaultConfig (ExampleBatch
// records of 256 rows in uncompressed PB streams, 16 individual and 4 shared v1 features of
// 1–3 Zipf fids, labels, LineIds) with sh's rows, files and batch rows.
func SynthConfig(sh Shape) synth.Config {
	c := synth.DefaultConfig()
	c.Rows = sh.BaseRows * int64(sh.MaxScale)
	c.Files = sh.BaseFiles * sh.MaxScale
	if sh.BatchRows > 0 {
		c.BatchRows = sh.BatchRows
	}
	return c
}

// FilesAt returns the files of scale s.
func (d *Data) FilesAt(s int) []string { return d.Files[:s*d.Shape.BaseFiles] }

// Prepare generates the data set of sh into dir and builds the kernel configuration and
// parse request that match it.
func Prepare(ctx context.Context, sh Shape, dir string) (*Data, error) {
	if sh.BaseRows <= 0 || sh.BaseFiles <= 0 || sh.MaxScale <= 0 || sh.BaseRows < int64(sh.BaseFiles) {
		return nil, fmt.Errorf("benchmarks/pipeline: bad shape %+v", sh)
	}
	c := SynthConfig(sh)
	if sh.BaseRows%int64(sh.BaseFiles) != 0 {
		return nil, fmt.Errorf("benchmarks/pipeline: %d base rows do not split evenly into %d files", sh.BaseRows, sh.BaseFiles)
	}
	res, err := synth.Generate(ctx, c, dir)
	if err != nil {
		return nil, fmt.Errorf("benchmarks/pipeline: generate: %w", err)
	}
	fc, err := synth.FeatureConfigs(c, synth.LayoutOptions{})
	if err != nil {
		return nil, fmt.Errorf("benchmarks/pipeline: feature configs: %w", err)
	}
	k, err := config.New(fc, sh.PS, sh.Version)
	if err != nil {
		return nil, fmt.Errorf("benchmarks/pipeline: kernel config: %w", err)
	}
	k.Unique = sh.Unique
	var names []string
	for _, f := range c.SparseFeatures() {
		names = append(names, f.Name)
	}
	return &Data{Shape: sh, Synth: c, Files: res.Paths(), Bytes: res.Bytes, Kernels: k, Parse: parse.SparseOnly(names...)}, nil
}

// Job returns the job of mode over the files of scale s.
func (d *Data) Job(mode string, s, workers int) Job {
	return Job{Mode: mode, Files: d.FilesAt(s), Kernels: d.Kernels, Parse: d.Parse, Workers: workers}
}
