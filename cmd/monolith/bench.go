package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/monolith-go/monolith/benchmarks/suite"
)

// runBench runs the benchmark suite (benchmarks/suite) and writes its report.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", stderr)
	name := fs.String("suite", suite.Quick, "quick (small inputs, under 2 minutes here) or full (the issues' target sizes)")
	out := fs.String("out", "bench-results", "`DIR` for RESULTS.md, results.json and the PNG plots (created)")
	only := fs.String("only", "", "comma-separated sections to run (default all): "+strings.Join(suite.Sections, ","))
	verbose := fs.Bool("v", false, "debug logs")
	profiles := fs.String("cpuprofile", "", "`DIR` for a CPU profile of every child process of the pipeline section (KIND-xSCALE-repN.pprof; go tool pprof reads them)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith bench [--suite quick|full] [--out DIR] [--only SECTIONS]\n\n"+
			"Runs the kernel, decode, parameter-server, pipeline, NumPy-peer and scaling benchmarks,\n"+
			"each figure next to a baseline measured in the same run (memcpy, file read, in-process\n"+
			"PS, plain loop, NumPy), and writes DIR/RESULTS.md, DIR/results.json and DIR/*.png.\n"+
			"The NumPy peer needs python3 with numpy (Debian python3-numpy, or MONOLITH_PYTHON).")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *name != suite.Quick && *name != suite.Full {
		return fmt.Errorf("%w: --suite %q: want quick or full", errUsage, *name)
	}
	var sections []string
	if *only != "" {
		sections = strings.Split(*only, ",")
	}
	cmd := "go run ./cmd/monolith bench --suite " + *name + " --out " + *out
	if *only != "" {
		cmd += " --only " + *only
	}
	if *profiles != "" {
		if err := os.MkdirAll(*profiles, 0o755); err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		abs, err := filepath.Abs(*profiles)
		if err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		*profiles = abs
	}
	res, err := suite.Run(ctx, suite.Options{Suite: *name, Out: *out, Only: sections, Command: cmd, CPUProfile: *profiles,
		Log: loggerAt(stderr, *verbose, slog.LevelInfo)})
	if err != nil {
		return err
	}
	met, targets := 0, 0
	for _, f := range res.Figures {
		if f.Target != nil {
			targets++
			if f.Met() {
				met++
			}
		}
	}
	fmt.Fprintf(stdout, "%d of %d targets met in %s; wrote %s\n", met, targets, res.Took.Round(1e9), filepath.Join(*out, "RESULTS.md"))
	return nil
}
