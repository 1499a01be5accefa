package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/filepattern"
	"github.com/monolith-go/monolith/schemas/batch"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"inspect":  {"print records, rows and per-feature fid statistics of training data", runInspect},
		"convert":  {"convert training data between framings, message types and Parquet/Avro/JSON lines", runConvert},
		"shard":    {"run sharding_sparse_fids (v1-v5) on training data and print its outputs", runShard},
		"layout":   {"run fused_embedding_to_layout (v1-v5) and its gradient on synthetic embeddings", runLayout},
		"validate": {"check a FeatureConfigs against a data set (static and data checks, JSON/text/HTML reports)", runValidate},
		"gen":      {"write synthetic ExampleBatch / Example / Instance files (Zipf fids, shared features, seeded)", runGen},
		"train":    {"train LR/FM/DeepFM over fused layouts against a sharded PS (Beam), evaluate, print a JSON summary", runTrain},
		"evaluate": {"evaluate a checkpoint of a model directory on eval data and print the metrics as one JSON line", runEvaluate},
		"predict":  {"score data with a checkpoint: one prediction per row with its line id, as JSON lines or TFRecord", runPredict},
		"cluster":  {"run a training job as N worker and M PS processes on this machine (Monolith's LocalCluster)", runCluster},
		"export":   {"export the tables of a PS checkpoint (EntryDump TFRecord, Avro, Parquet) or, with --model, a model for serving; verified", runExport},
		"plot":     {"draw training curves (loss, eval AUC against step) from TensorBoard event files as PNGs", runPlot},
		"bench":    {"run the benchmark suite (quick or full): ratios against same-run baselines, RESULTS.md and plots", runBench},

		"serve":            {"serve exported models (export --model) with TF Serving's gRPC API and flags: status, reload, metadata, Predict", runServe},
		"fake-tfserving":   {"serve a TF Serving double (ModelService, GetModelMetadata; no Predict) behind tensorflow_model_server's flags until SIGTERM", runFakeTFServing},
		"tfs-client":       {"call a TF Serving or monolith serve: status, meta, load, get (Predict) — Monolith's tfs_client", runTFSClient},
		"agent":            {"run the serving agent (v1 replicas and TF Serving processes, v3 unified layouts) until SIGTERM", runAgent},
		"agent-client":     {"query a serving agent (hb, gr) and its ZooKeeper state (addr, get, load, unload, clean)", runAgentClient},
		"agent-controller": {"declare, publish and unpublish exported saved models in ZooKeeper layouts; print bzid_info", runAgentController},
		"fake-export":      {"write a fake exported model tree (entry, ps_i with saved_model.pb) for agent demos and tests", runFakeExport},
		"ctl":              {"pause, resume, checkpoint or query a running training job through its controller (--model-dir)", runCtl},
		"worker-pool":      {"serve Beam's worker pool for EXTERNAL environments: one process of this binary per SDK worker, until SIGTERM", runWorkerPool},

		"ps":        {"run one parameter-server shard (gRPC) until SIGTERM, checkpointing on shutdown", runPS},
		"ps-client": {"call a parameter server: lookup, apply, stats, barrier, health, save (JSON output)", runPSClient},
	}
}

// errUsage marks command-line mistakes (exit code 2).
var errUsage = errors.New("usage")

func exitCode(err error) int {
	if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: monolith <command> [flags] [args]\n\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-17s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun `monolith <command> -h` for the flags of a command.")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return fmt.Errorf("%w: no command", errUsage)
		}
		return nil
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		usage(stderr)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("monolith "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args, mapping flag errors to errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// inputFlags are the flags that say how to read training data.
type inputFlags struct {
	typ, format, codec         string
	sortID, lagrangeX          bool
	kafkaDump, kafkaDumpPrefix bool
	allowTruncatedTail         bool
	batchRows                  int
	dsk                        string
	progress                   string
	verbose                    bool
}

func (f *inputFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.typ, "type", "auto", "message type: auto, examplebatch, example or instance")
	fs.StringVar(&f.format, "format", "auto", "input format: auto, pbstream, tfrecord, pbtxt, json, dump, parquet, avro or jsonl")
	fs.StringVar(&f.codec, "codec", "auto", "input compression: auto (by file name), none, gzip, zlib, snappy or zstd")
	fs.BoolVar(&f.sortID, "sort-id", true, "PB stream records carry a sort id (Monolith's file default)")
	fs.BoolVar(&f.lagrangeX, "lagrangex", false, "PB stream records carry a LagrangeX header")
	fs.BoolVar(&f.kafkaDump, "kafka-dump", false, "PB stream records carry the kafka_dump u64")
	fs.BoolVar(&f.kafkaDumpPrefix, "kafka-dump-prefix", false, "PB stream records carry the Kafka dump prefix")
	fs.BoolVar(&f.allowTruncatedTail, "allow-truncated-tail", false, "end a file silently at a partial last record (Monolith's behaviour) instead of failing")
	fs.IntVar(&f.batchRows, "batch-rows", dataset.DefaultBatchRows, "Example/Instance rows per Arrow batch")
	fs.StringVar(&f.dsk, "data-source-key", "auto", "data_source_key policy: auto, header (Monolith) or message")
	fs.StringVar(&f.progress, "progress", "auto", "progress on stderr: auto (when stderr is a terminal), always or never")
	fs.BoolVar(&f.verbose, "v", false, "verbose logging")
}

// options turns the flags into dataset options.
func (f *inputFlags) options() (dataset.Options, error) {
	o := dataset.Options{Mem: memory.DefaultAllocator}
	if f.typ != "auto" && f.typ != "" {
		t, err := batch.ParseSource(f.typ)
		if err != nil {
			return o, fmt.Errorf("%w: --type: %v", errUsage, err)
		}
		o.Type = t
	}
	ff, err := dataset.ParseFormat(f.format)
	if err != nil {
		return o, fmt.Errorf("%w: --format: %v", errUsage, err)
	}
	o.Format = ff
	c, err := compress.ParseCodec(f.codec)
	if err != nil {
		return o, fmt.Errorf("%w: --codec: %v", errUsage, err)
	}
	o.Record.Codec = c
	o.Record.PB.HasSortID, o.Record.PB.LagrangeX = f.sortID, f.lagrangeX
	o.Record.PB.KafkaDump, o.Record.PB.KafkaDumpPrefix = f.kafkaDump, f.kafkaDumpPrefix
	o.Record.AllowTruncatedTail = f.allowTruncatedTail
	if f.batchRows <= 0 {
		return o, fmt.Errorf("%w: --batch-rows must be positive", errUsage)
	}
	o.BatchRows = f.batchRows
	switch f.dsk {
	case "auto":
	case "header":
		o.DataSourceKey = dataset.DSKHeader
	case "message":
		o.DataSourceKey = dataset.DSKMessage
	default:
		return o, fmt.Errorf("%w: --data-source-key %q (want auto, header or message)", errUsage, f.dsk)
	}
	return o, nil
}

// expand turns input specs into files.
func expand(ctx context.Context, specs []string) ([]string, error) {
	var files []string
	for _, s := range specs {
		fs, err := filepattern.Expand(ctx, s)
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no input files", errUsage)
	}
	return files, nil
}

// logger is the commands' text logger on stderr: debug and up when verbose, warnings and
// up otherwise (loggerAt for another quiet level).
func logger(stderr io.Writer, verbose bool) *slog.Logger {
	return loggerAt(stderr, verbose, slog.LevelWarn)
}

// loggerAt is logger with quiet as the level when not verbose.
func loggerAt(stderr io.Writer, verbose bool, quiet slog.Level) *slog.Logger {
	level := quiet
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// tlsServer and tlsClient are the TLS configs of a command's --tls-… flags; a setting
// that cannot work is a usage error naming the flag.
func tlsServer(c *tlsconf.Config) (*tls.Config, error) {
	cfg, err := c.Server()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return cfg, nil
}

func tlsClient(c *tlsconf.Config) (*tls.Config, error) {
	cfg, err := c.Client()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return cfg, nil
}
