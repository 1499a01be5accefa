package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/monolith-go/monolith/pipelines/train/curves"
)

// runPlot draws the training curves of an event file or directory as PNGs.
func runPlot(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("plot", stderr)
	out := fs.String("out", "", "directory for the PNGs (default: the events directory)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith plot [--out DIR] EVENTS_DIR|FILE\n\n"+
			"Draws loss.png (\"loss\" against step) and, when the events hold evaluations, auc.png\n"+
			"(\"eval/auc\" against step, with the Bayes AUC line) from TensorBoard event files\n"+
			"(the events.out.tfevents.* files directly in EVENTS_DIR, or FILE), and prints their paths.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: plot takes one events directory or file, got %d arguments", errUsage, fs.NArg())
	}
	events := fs.Arg(0)
	dir := *out
	if dir == "" {
		dir = events
		if st, err := os.Stat(events); err == nil && !st.IsDir() {
			dir = filepath.Dir(events)
		}
	}
	files, err := curves.WriteDir(events, dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(stdout, f)
	}
	return nil
}
