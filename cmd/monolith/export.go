package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/ps/export"
)

// runExport is `monolith export`: it writes the embedding tables of a parameter-server
// checkpoint as EntryDump TFRecords, Avro or Parquet files (ps/export), one file per
// table, and by default reads them back and compares them with the checkpoint.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if slices.Contains(args, "--model") || slices.Contains(args, "-model") {
		return runExportModel(ctx, slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--model" || a == "-model" }), stdout, stderr)
	}
	fs := newFlagSet("export", stderr)
	ckpt := fs.String("checkpoint", "", "a checkpoint folder (with MANIFEST.json), a checkpoint root (with LATEST: its newest checkpoint) or a multi-shard root (with shard-I-of-N/ folders: the newest checkpoint of every shard)")
	to := fs.String("to", "", "output format: entrydump (TFRecord of EntryDump), avro or parquet")
	output := fs.String("output", "", "output folder, created if needed; one file per table: <table>.entries, <table>.avro or <table>.parquet")
	tables := fs.String("tables", "", "comma-separated tables to export (default: every table)")
	verify := fs.Bool("verify", true, "read every file back and compare it with the checkpoint entry by entry (fids and float bits)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith export --checkpoint DIR --to entrydump|avro|parquet --output DIR [flags]\n\n"+
			"Exports the trained embedding tables of a PS checkpoint, one file per table, losslessly:\n"+
			"every fid, every float bit, the optimizer state and the update times. Files are written\n"+
			"atomically; a damaged checkpoint fails the export.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: export takes no arguments (got %q)", errUsage, fs.Args())
	}
	if *ckpt == "" || *to == "" || *output == "" {
		return fmt.Errorf("%w: export needs --checkpoint, --to and --output", errUsage)
	}
	format, err := export.ParseFormat(*to)
	if err != nil {
		return fmt.Errorf("%w: --to: %v", errUsage, err)
	}
	src, err := export.Resolve(*ckpt)
	if err != nil {
		return err
	}
	if *tables != "" {
		var names []string
		for _, n := range strings.Split(*tables, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		if src, err = src.Only(names); err != nil {
			return err
		}
	}
	describe(stdout, stderr, src)
	sum, err := export.Export(ctx, src, format, *output)
	if err != nil {
		return err
	}
	status := "not verified"
	if *verify {
		if sum, err = export.Verify(ctx, src, format, *output); err != nil {
			return err
		}
		status = "verified"
	}
	for _, t := range sum.Tables {
		fmt.Fprintf(stdout, "table %q: %d entries, dim %d -> %s (%d bytes), %s\n", t.Table, t.Entries, t.Dim, t.Path, t.Bytes, status)
	}
	return nil
}

// runExportModel is `monolith export --model`: a training checkpoint as a versioned model
// directory for serving (ps/servingmodel), read back before it returns.
func runExportModel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export --model", stderr)
	cfgPath := fs.String("config", "", "the training config of the model (required)")
	data := fs.String("data", "", "a `DIR` written by monolith gen --planted; overrides the config's data and inputs")
	modelDir := fs.String("checkpoint-dir", "", "model directory (overrides checkpoint.dir)")
	ckpt := fs.String("checkpoint", "", "the checkpoint: model.ckpt-N in the model directory, or a path (default: the newest its checkpoint state names)")
	output := fs.String("output", "", "the models' base folder: the version goes to OUTPUT/NAME/VERSION, marked by OUTPUT/NAME/VERSION.write.done (required)")
	name := fs.String("name", "", "the model's name (required)")
	version := fs.Int64("version", -1, "the version (default: the checkpoint's global step)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith export --model --config FILE --output BASE --name NAME [flags]\n\n"+
			"Exports a training checkpoint for serving: the model spec (model, layouts, feature configs),\n"+
			"every table stored as its compressors say (fp32, fp16, fixed_r8, one_bit; skip_zero_embedding\n"+
			"honoured) with a manifest of sizes and CRC-32C checksums. The version appears atomically, then\n"+
			"its .write.done marker; it is read back and compared with the checkpoint before the command ends.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: export --model takes no arguments (got %q)", errUsage, fs.Args())
	case *cfgPath == "" || *output == "" || *name == "":
		return fmt.Errorf("%w: export --model needs --config, --output and --name", errUsage)
	}
	c, err := train.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *data != "" {
		c.SetData(*data)
	}
	if *modelDir != "" {
		c.Checkpoint.Dir = *modelDir
	}
	c.PS.Addrs, c.Runner.NumWorkers, c.Runner.Index = nil, 1, 0
	if err := c.Normalize(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	res, err := train.ExportModel(ctx, c, *ckpt, *output, *name, *version)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "model %q version %d from %s: %d tables, %d rows (%d all-zero rows skipped), %d bytes -> %s, verified\n",
		*name, res.Version, res.Checkpoint, res.Tables, res.Entries, res.Skipped, res.Bytes, res.Dir)
	return nil
}

// describe prints which checkpoints are exported, and notes on stderr what may surprise:
// shards saved at different steps, or one shard of several.
func describe(stdout, stderr io.Writer, src *export.Source) {
	if len(src.Shards) == 1 {
		s := src.Shards[0]
		fmt.Fprintf(stdout, "checkpoint %s (step %d): %d table(s)\n", s.Checkpoint, s.Step, len(src.Tables))
		if s.Count > 1 {
			fmt.Fprintf(stderr, "note: %s is shard %d of %d only; give the folder holding the shard-I-of-%d folders to export every shard\n",
				s.Checkpoint, s.Index, s.Count, s.Count)
		}
		return
	}
	fmt.Fprintf(stdout, "checkpoint %s: %d shards, %d table(s)\n", src.Path, len(src.Shards), len(src.Tables))
	for _, s := range src.Shards {
		fmt.Fprintf(stdout, "  shard %d of %d: %s (step %d)\n", s.Index, s.Count, s.Checkpoint, s.Step)
	}
	if steps := src.Steps(); len(steps) > 1 {
		fmt.Fprintf(stderr, "note: the shards' checkpoints are from different steps %v\n", steps)
	}
}
