package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/pipelines/train"
	"github.com/monolith-go/monolith/pipelines/train/curves"
	"github.com/monolith-go/monolith/pipelines/train/runconfig"
	"github.com/monolith-go/monolith/runners"
)

// runTrain runs the batch training pipeline (pipelines/train) and prints its summary.
func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("train", stderr)
	var ro runners.Options
	ro.RegisterFlags(fs)
	cfgPath := fs.String("config", "", "training config, YAML or JSON (required; see README \"Training config\")")
	data := fs.String("data", "", "a `DIR` written by monolith gen --planted; overrides the config's data and inputs")
	ps := fs.String("ps", "", "comma-separated PS shard addresses (overrides ps.addrs; default: in-process shards)")
	disc := fs.String("discovery", "", "how workers find the PS shards: static (--ps), zk, consul, tf_config or mlp (sets runner.discovery_type; default: --ps, else in-process shards)")
	discWait := fs.Duration("discovery-wait", 60*time.Second, "how long to wait for every PS shard to be found")
	zk := fs.String("zk", "", "ZooKeeper servers host:port[,...] of --discovery zk (sets runner.zk_server)")
	job := fs.String("job", "", "the job's name: its ZooKeeper folder /monolith/NAME (sets runner.deep_insight_name; default monolith), or its Consul psm (runner.uuid)")
	shards := fs.Int("shards", 0, "PS shards (overrides ps.shards)")
	ckpt := fs.String("checkpoint-dir", "", "checkpoint directory (overrides checkpoint.dir)")
	epochs := fs.Int("epochs", 0, "epochs (overrides epochs)")
	maxSteps := fs.Int64("max-steps", -1, "stop after this many global steps (overrides max_steps; 0: no limit)")
	threads := fs.Int("threads", 0, "concurrent trainers per worker (overrides threads)")
	writeTables := fs.String("write-tables", "", "write the PS tables this run needs (a --tables file of monolith ps) and exit")
	progress := fs.String("progress", "always", "progress lines on stderr: auto, always or never")
	verbose := fs.Bool("v", false, "debug logs")
	tlsc := tlsconf.AddFlags(fs)
	predDump := fs.String("prediction-dump", "", "write the eval predictions to `DIR`/part-00000 (\"prediction<TAB>label\" lines)")
	healthEvery := fs.Duration("health-every", 30*time.Second, "period of the PS health checks (0: none)")
	ctlListen := fs.String("controller-listen", "127.0.0.1:0", "address of the training controller (monolith ctl)")
	metricsListen := fs.String("metrics-listen", "", "serve Prometheus metrics at http://`ADDR`/metrics while training (default off; a bare port binds 127.0.0.1)")
	plot := fs.Bool("plot", false, "after training, draw loss.png and auc.png from this run's event file into the model directory (needs checkpoint.dir)")
	runnerFlags := runconfig.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith train --config FILE [flags]\n\n"+
			"Trains an LR, FM or DeepFM model over fused embedding layouts against a sharded PS,\n"+
			"as a Beam pipeline on the selected runner, evaluates it on the held-out input, and\n"+
			"prints one JSON summary line (examples, steps, examples_per_sec, train_logloss,\n"+
			"eval_auc, eval_logloss, bayes_auc, ...).")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		return fmt.Errorf("%w: train needs --config FILE", errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	c, err := train.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	runnerFlags.Apply(&c.Runner) // Monolith's rule: a flag beats a value left at its default
	c.MarkRunnerSet(runnerFlags.Set()...)
	if *disc != "" {
		c.Runner.DiscoveryType = *disc
		c.MarkRunnerSet("discovery_type")
	}
	if *zk != "" {
		c.Runner.ZKServer = *zk
	}
	if *job != "" { // the job's ZooKeeper folder, or its Consul psm
		if c.Runner.DiscoveryType == "consul" {
			c.Runner.UUID = *job
		} else {
			c.Runner.DeepInsightName = *job
		}
	}
	if *data != "" {
		c.SetData(*data)
	}
	if *ps != "" {
		c.PS.Addrs = nil
		for a := range strings.SplitSeq(*ps, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.PS.Addrs = append(c.PS.Addrs, a)
			}
		}
		c.PS.Shards = len(c.PS.Addrs)
	}
	if *shards > 0 {
		c.PS.Shards = *shards
	}
	if *ckpt != "" {
		c.Checkpoint.Dir = *ckpt
	}
	if *epochs > 0 {
		c.Epochs = *epochs
	}
	if *maxSteps >= 0 {
		c.MaxSteps = *maxSteps
	}
	if *threads > 0 {
		c.Threads = *threads
	}
	if err := c.Normalize(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *writeTables != "" {
		pr, err := train.Prepare(c)
		if err != nil {
			return err
		}
		b, err := prototext.MarshalOptions{Multiline: true}.Marshal(pr.Tables)
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(*writeTables, b); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d tables to %s\n", len(pr.Tables.GetTables()), *writeTables)
		return nil
	}
	ro.Verbose = ro.Verbose || *verbose
	if err := ro.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	show, _, err := progressMode(*progress, stderr)
	if err != nil {
		return err
	}
	if *plot && c.Checkpoint.Dir == "" {
		return fmt.Errorf("%w: --plot draws the model directory's event file: set checkpoint.dir (or --checkpoint-dir)", errUsage)
	}
	o := train.Options{Runner: ro, PredictionDump: *predDump, HealthEvery: *healthEvery, ControllerListen: *ctlListen, DiscoveryWait: *discWait, TLS: *tlsc}
	if err := tlsc.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *metricsListen != "" {
		// Bound before training starts: an address in use fails here, naming it.
		o.Registry = metricsrv.NewRegistry()
		srv, err := metricsrv.Listen(*metricsListen, o.Registry, logger(stderr, *verbose))
		if err != nil {
			return err
		}
		defer srv.Close()
		fmt.Fprintf(stderr, "train: metrics at http://%s/metrics\n", srv.Addr())
	}
	if *healthEvery == 0 {
		o.HealthEvery = -1
	}
	if show {
		o.Progress = stderr
	}
	o.Logger = logger(stderr, *verbose) // warnings always: what a worker waits for, a PS shard that moved
	sum, err := train.Run(ctx, c, o)
	if err != nil {
		return err
	}
	if *plot {
		files, err := curves.WriteDir(sum.EventFile, c.Checkpoint.Dir)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		sum.Plots = files
	}
	return json.NewEncoder(stdout).Encode(sum) // one JSON line, as the other commands print
}
