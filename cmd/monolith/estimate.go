package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/runners"
)

// estimateFlags are the flags evaluate and predict share: the config, the model directory,
// the checkpoint and the runner.
type estimateFlags struct {
	ro       runners.Options
	config   *string
	data     *string
	modelDir *string
	ckpt     *string
	verbose  *bool
}

func bindEstimateFlags(fs *flag.FlagSet) *estimateFlags {
	f := &estimateFlags{}
	f.ro.RegisterFlags(fs)
	f.config = fs.String("config", "", "the training config of the model (required)")
	f.data = fs.String("data", "", "a `DIR` written by monolith gen --planted; overrides the config's data and inputs")
	f.modelDir = fs.String("checkpoint-dir", "", "model directory (overrides checkpoint.dir)")
	f.ckpt = fs.String("checkpoint", "", "the checkpoint: model.ckpt-N in the model directory, or a path (default: the newest its checkpoint state names)")
	f.verbose = fs.Bool("v", false, "debug logs")
	return f
}

// load reads the config with the flags applied.
func (f *estimateFlags) load(fs *flag.FlagSet, cmd string) (*train.Config, train.Options, error) {
	if *f.config == "" {
		return nil, train.Options{}, fmt.Errorf("%w: %s needs --config FILE", errUsage, cmd)
	}
	if fs.NArg() > 0 {
		return nil, train.Options{}, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	c, err := train.LoadConfig(*f.config)
	if err != nil {
		return nil, train.Options{}, err
	}
	if *f.data != "" {
		c.SetData(*f.data)
	}
	if *f.modelDir != "" {
		c.Checkpoint.Dir = *f.modelDir
	}
	// The checkpoint has the shards; the config's PS placement does not matter here.
	c.PS.Addrs, c.Runner.NumWorkers, c.Runner.Index = nil, 1, 0
	if err := c.Normalize(); err != nil {
		return nil, train.Options{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	f.ro.Verbose = f.ro.Verbose || *f.verbose
	if err := f.ro.Validate(); err != nil {
		return nil, train.Options{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	return c, train.Options{Runner: f.ro}, nil
}

// runEvaluate is `monolith evaluate`: a checkpoint plus eval data → one JSON line of
// metrics.
func runEvaluate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("evaluate", stderr)
	f := bindEstimateFlags(fs)
	evalInput := fs.String("eval-input", "", "file pattern of the data to evaluate on (overrides eval_input)")
	dump := fs.String("prediction-dump", "", "also write the predictions to `DIR`/part-00000 (\"prediction<TAB>label\" lines)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith evaluate --config FILE [flags]\n\n"+
			"Evaluates a checkpoint of the model directory on the eval data, as training's\n"+
			"evaluation does, and prints one JSON line (global_step, eval_auc, eval_logloss, ...).")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, o, err := f.load(fs, "evaluate")
	if err != nil {
		return err
	}
	if *evalInput != "" {
		c.EvalInput = *evalInput
	}
	if *f.verbose {
		o.Logger = logger(stderr, true)
	}
	sum, err := train.Evaluate(ctx, c, o, *f.ckpt, *dump)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(sum) // one JSON line, as the other commands print
}

// runPredict is `monolith predict`: a checkpoint plus data → one prediction per row, with
// its line id, as JSON lines or TFRecord.
func runPredict(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("predict", stderr)
	f := bindEstimateFlags(fs)
	input := fs.String("input", "", "file pattern of the data to score (default: eval_input)")
	out := fs.String("out", "", "output `FILE` (required)")
	format := fs.String("format", "jsonl", "output format: "+strings.Join(train.PredictionFormats, " or "))
	server := fs.String("server", "", "score with the model a server serves (monolith serve, TF Serving's API) at `ADDR` instead of a checkpoint")
	modelName := fs.String("model_name", "", "with --server: the served model's name (required)")
	tlsc := tlsconf.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith predict --config FILE --out FILE [flags]\n\n"+
			"Scores every row of the input with a checkpoint of the model directory, or with --server the\n"+
			"model a server serves, and writes one record per row: JSON lines {\"line_id\": {...},\n"+
			"\"prediction\": p, \"label\": y}, or TFRecord of monolith.Example (line_id, label, float\n"+
			"feature \"prediction\").")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: predict needs --out FILE", errUsage)
	}
	c, o, err := f.load(fs, "predict")
	if err != nil {
		return err
	}
	if *f.verbose {
		o.Logger = logger(stderr, true)
	}
	var n int64
	if *server != "" {
		if *modelName == "" || *f.ckpt != "" {
			return fmt.Errorf("%w: predict --server needs --model_name and takes no --checkpoint", errUsage)
		}
		ct, err := tlsClient(tlsc)
		if err != nil {
			return err
		}
		n, err = train.PredictRemote(ctx, c, *server, *modelName, ct, *input, *out, *format)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "predict: %d rows to %s\n", n, *out)
		return err
	}
	if *modelName != "" || tlsc.Enabled() {
		return fmt.Errorf("%w: --model_name and --tls-… go with --server", errUsage)
	}
	n, err = train.Predict(ctx, c, o, *f.ckpt, *input, *out, *format)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "predict: %d rows to %s\n", n, *out)
	return err
}
