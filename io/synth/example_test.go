package synth_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/schemas/batch"
)

func ExampleGenerate() {
	dir, err := os.MkdirTemp("", "synth")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	c := synth.DefaultConfig()
	c.Type = batch.SourceExample
	c.Rows, c.Files = 1000, 2
	c.Record.Codec = compress.Gzip
	res, err := synth.Generate(context.Background(), c, dir)
	if err != nil {
		panic(err)
	}
	for _, f := range res.Files {
		fmt.Println(filepath.Base(f.Path), f.Records, "records")
	}

	fc, err := synth.FeatureConfigs(c, synth.LayoutOptions{})
	if err != nil {
		panic(err)
	}
	cfg, err := featcfg.New(fc)
	if err != nil {
		panic(err)
	}
	for _, l := range cfg.Layouts {
		fmt.Println(l.Name, l.OutType, l.Shapes)
	}
	// Output:
	// part-00000.pb.gz 500 records
	// part-00001.pb.gz 500 records
	// bias ADDN [[-1 1]]
	// deep CONCAT [[-1 128]]
	// shared NONE [[-1 8] [-1 8] [-1 8] [-1 8]]
}
