package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/monolith-go/monolith/io/featurelist"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/pipelines/validate"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/transforms/beamio"
)

// errChecksFailed is returned when validation ran and some check failed.
var errChecksFailed = errors.New("validation failed")

// runValidate runs the layout-validation pipeline (pipelines/validate).
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("validate", stderr)
	var in inputFlags
	in.register(fs)
	var ro runners.Options
	ro.RegisterFlags(fs)
	input := fs.String("input", "", "training data: a glob, comma list, @file list or date pattern (required)")
	configs := fs.String("feature-configs", "", "FeatureConfigs in protobuf text (.pbtxt) or JSON (.json) (required)")
	list := fs.String("feature-list", "", "Monolith feature_list.conf: checks slots and versions against it")
	ps := fs.Int("ps-num", 1, "number of PS shards the layout check shards for")
	version := fs.Int("version", 5, "sharding/layout op version, 1-5")
	unique := fs.Bool("unique", false, "deduplicate fids per feature when sharding (training mode)")
	out := fs.String("out", "validate-report", "directory of the reports (validate.json, validate.txt, validate.html)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith validate --input PATTERN --feature-configs FILE [flags]\n\n"+
			"Checks that a FeatureConfigs and a data set agree before training: static checks of the\n"+
			"config (and feature list), then data checks over every row as a Beam pipeline on the\n"+
			"selected runner. Writes JSON, text and HTML reports; exits 1 when a check fails.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *input == "" || *configs == "" {
		return fmt.Errorf("%w: --input and --feature-configs are required", errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	ro.Verbose = ro.Verbose || in.verbose
	if err := ro.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	dso, err := in.options()
	if err != nil {
		return err
	}
	showProgress, _, err := progressMode(in.progress, stderr)
	if err != nil {
		return err
	}
	fc, err := pbtext.ReadFeatureConfigsFile(*configs)
	if err != nil {
		return err
	}
	opts := validate.Options{PS: *ps, Version: *version, Unique: *unique}
	if *list != "" {
		if opts.FeatureList, err = featurelist.ParseFile(*list); err != nil {
			return err
		}
	}
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	job := validate.Job{
		Inputs:         validate.Inputs{Pattern: *input, FeatureConfigs: *configs, FeatureList: *list},
		FeatureConfigs: fc,
		Options:        opts,
		Read: beamio.ReadConfig{
			Type: dso.Type, Format: dso.Format, Codec: dso.Record.Codec, PB: dso.Record.PB,
			AllowTruncatedTail: dso.Record.AllowTruncatedTail, RowsPerBatch: dso.BatchRows,
			DataSourceKey: dso.DataSourceKey,
		},
		OutDir: *out,
	}
	if showProgress {
		job.Progress = stderr
	}
	logger(stderr, in.verbose).Debug("validate", "input", *input, "runner", ro.Runner, "ps", *ps, "version", *version)
	rep, err := validate.Run(ctx, job, ro)
	if err != nil {
		return err
	}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	jp, tp, hp := validate.Files(*out)
	fmt.Fprintf(stdout, "\nreports: %s %s %s\n", jp, tp, hp)
	if rep.Failed() {
		return fmt.Errorf("%w: %d failing findings (see %s)", errChecksFailed, len(rep.Failing()), tp)
	}
	return nil
}
