package train

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/pipelines/train/controller"
	"github.com/monolith-go/monolith/pipelines/train/runconfig"
	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/ps/discovery"
	"github.com/monolith-go/monolith/ps/server"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/schemas/pspb"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/config"
)

// Options are the driver's settings that are not part of the training config.
type Options struct {
	Runner runners.Options
	// Progress receives the driver's and the workers' progress lines (nil: none).
	Progress io.Writer
	// ProgressEvery is the period of the progress lines (default 5s).
	ProgressEvery time.Duration
	// Logger receives the in-process PS servers' logs (nil: discarded).
	Logger *slog.Logger
	// DiscoveryWait bounds the wait for every PS shard to be found (default 60s).
	DiscoveryWait time.Duration
	// FollowEvery is the period at which a worker re-reads the PS membership from its
	// discovery backend (default 1s).
	FollowEvery time.Duration
	// Loop runs the same workers in a plain loop in this process instead of a Beam
	// pipeline: the baseline of the training benchmark (benchmarks/suite, section train).
	Loop bool
	// ControllerListen is the controller's address ("" = 127.0.0.1:0). The controller is
	// served when the job has a model directory (checkpoint.dir).
	ControllerListen string
	// TLS secures the gRPC of the run (internal/tlsconf): the PS clients, the in-process
	// shards and the chief's controller. The servers need its Cert and Key. Zero:
	// plaintext.
	TLS tlsconf.Config
	// HealthEvery is the period of the PS health checks (default 30s; negative: none).
	HealthEvery time.Duration
	// PSMemLimitBytes is the in-process PS shards' HealthCheck memory limit (0: the
	// server's default, effectively none).
	PSMemLimitBytes int64
	// Registry receives the job's metrics (Metrics, the PS client's, the controller's and
	// the in-process PS shards'); monolith train serves it with --metrics-listen. Nil: a
	// private registry.
	Registry *prometheus.Registry
	// PredictionDump, when set, is a folder that receives the evaluation's predictions as
	// Monolith's plain-text prediction dump: part-00000, one "prediction<TAB>label" line per
	// eval row, written through io/fileops and closed by its close hook at the end of
	// training.
	PredictionDump string
}

// Summary is the result of a run, printed as one JSON line.
type Summary struct {
	Model    string `json:"model"`
	PSShards int    `json:"ps_shards"`
	// Worker is this process's worker index (0: the chief, which saves, evaluates and
	// writes the summaries) of NumWorkers.
	Worker     int   `json:"worker"`
	NumWorkers int   `json:"num_workers"`
	BatchSize  int   `json:"batch_size"`
	Epochs     int   `json:"epochs"`
	Examples   int64 `json:"examples"`
	Steps      int64 `json:"steps"`
	GlobalStep int64 `json:"global_step"`
	// StartStep is the global step before training: non-zero when the PS restored a
	// checkpoint (a resumed run).
	StartStep      int64   `json:"start_step"`
	TrainSeconds   float64 `json:"train_seconds"`
	ExamplesPerSec float64 `json:"examples_per_sec"`
	TrainLogLoss   float64 `json:"train_logloss"`
	// TrainAUC is the streaming AUC (tf.metrics.auc's 200 thresholds) of the training rows
	// of this process's workers, each scored before its update; absent when they ran
	// elsewhere.
	TrainAUC *float64 `json:"train_auc,omitempty"`

	EvalExamples int64    `json:"eval_examples,omitempty"`
	EvalAUC      *float64 `json:"eval_auc,omitempty"`
	EvalLogLoss  *float64 `json:"eval_logloss,omitempty"`
	// EvalConstLogLoss is the log loss of the best constant predictor (the eval base rate).
	EvalConstLogLoss *float64 `json:"eval_constant_logloss,omitempty"`
	BayesAUC         *float64 `json:"bayes_auc,omitempty"`
	BayesLogLoss     *float64 `json:"bayes_logloss,omitempty"`

	Checkpoint string `json:"checkpoint,omitempty"`
	// EventFile holds the run's scalar summaries (TensorBoard's events.out.tfevents.*).
	EventFile string `json:"event_file,omitempty"`
	// Plots are the PNG curves drawn from EventFile (monolith train --plot).
	Plots    []string `json:"plots,omitempty"`
	WallSecs float64  `json:"wall_seconds"`
}

// Prepared is a validated run: the kernel configuration, the model's tables and the job
// every worker gets (without PS addresses).
type Prepared struct {
	Config   *Config
	Features *featcfg.Config
	Tables   *pspb.TablesConfig
	Job      Job
}

// readConfig is how the job reads its files: batches of batch_size rows.
func (c *Config) readConfig() beamio.ReadConfig {
	read := beamio.DefaultReadConfig()
	read.RowsPerBatch = c.BatchSize
	return read
}

// Prepare loads the FeatureConfigs, builds the model and the PS tables, and checks that
// they fit together.
func Prepare(c *Config) (*Prepared, error) {
	fc, err := pbtext.ReadFeatureConfigsFile(c.FeatureConfigs)
	if err != nil {
		return nil, fmt.Errorf("%w: feature_configs: %v", ErrConfig, err)
	}
	k, err := config.New(fc, c.PS.Shards, 5)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.FeatureConfigs, err)
	}
	k.Unique = *c.Unique
	cfg, err := k.Build()
	if err != nil {
		return nil, err
	}
	read := c.readConfig()
	j := Job{Kernels: k, Model: c.Model, Bias: c.Layouts.Bias, Vec: c.Layouts.Vec, Hidden: c.Hidden,
		MaxSteps: c.MaxSteps, Parallelism: c.Threads, Read: read, Ops: c.Ops(),
		SaveTimeout:     time.Duration(c.Checkpoint.SaveTimeoutSecs) * time.Second,
		UnavailableWait: time.Duration(c.PS.UnavailableWaitSecs) * time.Second}
	params, err := modelParams(j.ModelSpec(), &j)
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	tc, err := c.TablesConfig(cfg, params)
	if err != nil {
		return nil, err
	}
	return &Prepared{Config: c, Features: cfg, Tables: tc, Job: j}, nil
}

// LocalPS is a set of in-process PS shards on 127.0.0.1.
type LocalPS struct {
	Servers []*server.Server
	cancel  context.CancelFunc
	done    chan error
}

// LocalPSOptions configure StartLocalPS.
type LocalPSOptions struct {
	// CheckpointDir: the shards restore its newest checkpoints and save there ("" = none).
	CheckpointDir string
	Keep          int    // checkpoints kept per shard
	Seed          uint64 // initializer seed
	MemLimitBytes int64  // HealthCheck memory limit (0: the server's default)
	// RestoreFrom[i], when set, is the checkpoint folder shard i restores instead.
	RestoreFrom []string
	Logger      *slog.Logger
	// Registry receives the shards' metrics (nil: each shard its own).
	Registry *prometheus.Registry
	// TLS serves the shards over TLS (nil: plaintext).
	TLS *tls.Config
}

// StartLocalPS starts n shards serving tables on 127.0.0.1.
func StartLocalPS(ctx context.Context, n int, tables *pspb.TablesConfig, lo LocalPSOptions) (*LocalPS, error) {
	logger := lo.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &LocalPS{cancel: cancel, done: make(chan error, n)}
	for i := range n {
		o := server.DefaultOptions()
		o.Shard, o.NumShards, o.Tables, o.CheckpointDir, o.KeepCheckpoints, o.Seed, o.Logger = i, n, tables, lo.CheckpointDir, lo.Keep, lo.Seed, logger
		o.Registry, o.TLS = lo.Registry, lo.TLS
		if lo.MemLimitBytes > 0 {
			o.MemLimitBytes = lo.MemLimitBytes
		}
		if i < len(lo.RestoreFrom) {
			o.RestoreFrom = lo.RestoreFrom[i]
		}
		s, err := server.New(o)
		if err != nil {
			l.Stop()
			return nil, fmt.Errorf("pipelines/train: start PS shard %d: %w", i, err)
		}
		l.Servers = append(l.Servers, s)
		go func() { l.done <- s.Serve(ctx) }()
	}
	return l, nil
}

// NumShards is the number of shards.
func (l *LocalPS) NumShards() int { return len(l.Servers) }

// Addrs returns the shards' addresses, in shard order.
func (l *LocalPS) Addrs() []string {
	out := make([]string, len(l.Servers))
	for i, s := range l.Servers {
		out[i] = s.Addr()
	}
	return out
}

// Stop stops the shards gracefully (each saves a checkpoint when it has a directory).
func (l *LocalPS) Stop() error {
	l.cancel()
	var errs []error
	for range l.Servers {
		errs = append(errs, <-l.done)
	}
	return errors.Join(errs...)
}

// Run trains and evaluates c on the engine o.Runner selects and returns the summary.
// With a model directory (checkpoint.dir) it also writes the scalar summaries into an
// event file there (every runner.save_summary_steps global steps and at every evaluation);
// a model directory that cannot be written fails before training starts.
func Run(ctx context.Context, c *Config, o Options) (_ *Summary, err error) {
	wall := time.Now()
	// Again: the caller may have changed fields since Normalize.
	if err := c.applyRunner(); err != nil {
		return nil, err
	}
	if err := c.resolveDiscovery(); err != nil {
		return nil, err
	}
	pr, err := Prepare(c)
	if err != nil {
		return nil, err
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = 5 * time.Second
	}
	m, err := NewMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clientTLS, err := o.TLS.Client()
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	var serverTLS *tls.Config // built where a server needs it: a worker without one may lack the files
	serveTLS := func() (*tls.Config, error) {
		if serverTLS == nil && o.TLS.Enabled() {
			if serverTLS, err = o.TLS.Server(); err != nil {
				return nil, fmt.Errorf("pipelines/train: %w", err)
			}
		}
		return serverTLS, nil
	}
	worker, workers := c.Runner.Index, c.Runner.NumWorkers
	var addrs []string
	var backend discovery.Backend
	if c.Discovery() == "" {
		restoreFrom, err := restoreFolders(ctx, c, o.Logger)
		if err != nil {
			return nil, err
		}
		st, err := serveTLS()
		if err != nil {
			return nil, err
		}
		local, err := StartLocalPS(ctx, c.PS.Shards, pr.Tables, LocalPSOptions{CheckpointDir: c.Checkpoint.Dir, Keep: c.Checkpoint.Keep,
			Seed: c.PS.Seed, MemLimitBytes: o.PSMemLimitBytes, RestoreFrom: restoreFrom, Logger: o.Logger, Registry: o.Registry, TLS: st})
		if err != nil {
			return nil, err
		}
		defer local.Stop()
		addrs = local.Addrs()
	} else {
		var id discovery.Identity
		if backend, id, err = openDiscovery(ctx, c, logger); err != nil {
			return nil, err
		}
		defer backend.Close()
		if worker, workers, err = identity(ctx, c, backend, id); err != nil {
			return nil, err
		}
		wait := o.DiscoveryWait
		if wait == 0 {
			wait = 60 * time.Second
		}
		if addrs, err = discovery.WaitFor(ctx, backend, "ps", c.PS.Shards, wait, logger); err != nil {
			return nil, fmt.Errorf("pipelines/train: worker %d: %w", worker, err)
		}
	}
	chief := worker == 0
	modelDir := c.Checkpoint.Dir
	if !chief {
		modelDir = "" // the chief saves and writes the summaries
	}
	sums, err := newSummaries(m, modelDir, int64(c.Runner.SaveSummarySteps), o.Progress, o.ProgressEvery)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := sums.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	j := pr.Job
	j.PS = addrs
	j.ConnectRetries, j.RetryBackoff = c.Runner.Retry()
	j.CallTimeout = time.Duration(c.Runner.MaxRPCDeadlineMillis) * time.Millisecond
	j.RunID = newRunID()
	ps, err := client.New(addrs, append(j.clientOptions(), client.WithMetrics(m.PS), client.WithLogger(logger), client.WithTLS(clientTLS))...)
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	defer ps.Close()
	if backend != nil {
		wait := o.DiscoveryWait
		if wait == 0 {
			wait = 60 * time.Second
		}
		if err := waitServing(ctx, ps, wait, logger); err != nil {
			return nil, fmt.Errorf("pipelines/train: worker %d: %w", worker, err)
		}
	}
	if backend != nil && c.Discovery() != runconfig.DiscoveryStatic {
		// Membership changes (a PS shard restarted on another address) reach the client.
		every := o.FollowEvery
		if every <= 0 {
			every = time.Second
		}
		fctx, stopFollow := context.WithCancel(ctx)
		var followed sync.WaitGroup
		followed.Go(func() {
			discovery.Follow(fctx, backend, "ps", c.PS.Shards, every, logger, func(a []string) {
				if err := ps.SetShards(a); err != nil {
					logger.Warn("PS membership change", "addrs", a, "err", err)
				}
			})
		})
		defer func() { stopFollow(); followed.Wait() }()
	}
	// The workers of this process (the embedded runner, LOOPBACK) share the driver's PS
	// client and count into m: the steps' Setup finds them in the context.
	ctx = withRun(ctx, &runHandle{ps: ps, metrics: m})
	barrier := ps.TrainingBarrier()
	if chief {
		// A new run starts with the training barrier removed (a PS that served an earlier
		// run may still hold its pause or stop).
		if st, err := barrier.Status(ctx); err != nil {
			return nil, fmt.Errorf("pipelines/train: training barrier: %w", err)
		} else if st.Placed {
			logger.Warn("training barrier left placed by an earlier run; removing it", "action", st.Action)
			if err := barrier.Remove(ctx); err != nil {
				return nil, fmt.Errorf("pipelines/train: training barrier: %w", err)
			}
		}
	}
	cm, err := m.controllerMetrics(barrier)
	if err != nil {
		return nil, err
	}
	defer cm.Unregister() // the barrier goes with the run
	saver := &controller.Saver{PS: ps, Barrier: barrier, MaxPending: c.Runner.BarrierTimeout(), Log: logger, Metrics: cm}
	if modelDir != "" {
		saver.Listeners = append(saver.Listeners, stateRecorder{dir: modelDir, keep: c.Checkpoint.Keep})
		if c.Checkpoint.Info {
			saver.Listeners = append(saver.Listeners, controller.BeforeSaveOnly{L: ckptInfo{ps: ps, dir: modelDir, tables: sparseNames(pr.Features)}})
		}
		st, err := serveTLS()
		if err != nil {
			return nil, err
		}
		ctl, err := controller.Serve(o.ControllerListen, modelDir, barrier, saver, cm, logger, st)
		if err != nil {
			return nil, fmt.Errorf("pipelines/train: %w", err)
		}
		defer ctl.Stop(5 * time.Second)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "train: controller at %s (monolith ctl stop|resume|status|save --model-dir %s)\n", ctl.Addr(), modelDir)
		}
	}
	sum := &Summary{Model: c.Model, PSShards: len(addrs), BatchSize: c.BatchSize, Worker: worker, NumWorkers: workers}
	files, err := beamio.Files(ctx, c.TrainInput)
	if err != nil {
		return nil, fmt.Errorf("pipelines/train: train_input %s: %w", c.TrainInput, err)
	}
	if files, err = workerFiles(files, worker, workers); err != nil {
		return nil, fmt.Errorf("pipelines/train: train_input %s: %w", c.TrainInput, err)
	}
	if sum.StartStep, err = ps.GlobalStep(ctx, 0, ""); err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	if sum.StartStep > 0 && o.Progress != nil {
		fmt.Fprintf(o.Progress, "train: resuming at global step %d (the PS restored a checkpoint)\n", sum.StartStep)
	}
	j.MaxSteps = stepLimit(c.MaxSteps, c.Steps, sum.StartStep)
	health := startHealth(ctx, ps, barrier, o.HealthEvery, logger)
	defer health.stop()
	eng := engine{j: j, o: o, ps: ps, metrics: m}
	var total Stats
	start := time.Now()
	periodic := startSaver(ctx, ps, saver, modelDir != "", c.Checkpoint.EverySteps, o.Progress)
	sums.start(ctx, ps)
	for e := 1; e <= c.Epochs; e++ {
		if err := health.failure(); err != nil {
			break
		}
		st, err := eng.epoch(ctx, e, files)
		if err != nil {
			periodic.stop()
			return nil, fmt.Errorf("pipelines/train: epoch %d: %w", e, err)
		}
		total.Add(st)
		sum.Epochs = e
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "train: epoch %d: %d steps, %d examples, loss %.4f\n", e, st.Steps, st.Examples, st.LossSum/float64(max(1, st.Examples)))
		}
		if j.MaxSteps > 0 && st.Skipped > 0 {
			break
		}
		if chief && c.EvalEveryEpochs > 0 && e%c.EvalEveryEpochs == 0 && e < c.Epochs {
			if err := evalSummary(ctx, c, eng, ps, sums); err != nil {
				periodic.stop()
				return nil, fmt.Errorf("pipelines/train: evaluation after epoch %d: %w", e, err)
			}
		}
	}
	sum.TrainSeconds = time.Since(start).Seconds()
	sums.stop()
	if err := periodic.stop(); err != nil {
		return nil, err
	}
	health.stop()
	if err := health.failure(); err != nil {
		step, _ := ps.GlobalStep(ctx, 0, "")
		return nil, fmt.Errorf("pipelines/train: training stopped at global step %d after %d epochs: %w", step, sum.Epochs, err)
	}
	sum.Examples, sum.Steps = total.Examples, total.Steps
	sum.ExamplesPerSec = float64(total.Examples) / sum.TrainSeconds
	sum.TrainLogLoss = total.LossSum / float64(max(1, total.Examples))
	if auc, rows := m.trainAUCRows(); rows > 0 {
		sum.TrainAUC = &auc
	}
	if sum.GlobalStep, err = ps.GlobalStep(ctx, 0, ""); err != nil {
		return nil, fmt.Errorf("pipelines/train: %w", err)
	}
	sums.train(sum.GlobalStep) // the steps since the last interval
	if workers > 1 {
		// The chief saves and evaluates the model once every worker is done.
		if err := endBarrier(ctx, ps, worker, workers, time.Duration(c.Runner.ChiefTimeoutSecs)*time.Second, o.Progress); err != nil {
			return nil, err
		}
		if sum.GlobalStep, err = ps.GlobalStep(ctx, 0, ""); err != nil {
			return nil, fmt.Errorf("pipelines/train: %w", err)
		}
	}
	if !chief {
		sum.WallSecs = time.Since(wall).Seconds()
		return sum, nil
	}
	if modelDir != "" {
		if _, err := saver.Save(ctx); err != nil {
			return nil, fmt.Errorf("pipelines/train: final checkpoint: %w", err)
		}
		sum.Checkpoint = c.Checkpoint.Dir
	}
	if c.Planted != "" {
		if err := readPlanted(c.Planted, sum); err != nil {
			return nil, err
		}
	}
	if c.EvalInput != "" {
		if err := evaluate(ctx, c, eng, o.PredictionDump, sum); err != nil {
			return nil, err
		}
		sums.eval(sum.GlobalStep, sum)
	}
	sum.EventFile = sums.Path()
	sum.WallSecs = time.Since(wall).Seconds()
	return sum, nil
}

// evaluate runs the evaluation and fills the eval fields of sum; with dump set it also
// writes the predictions there.
func evaluate(ctx context.Context, c *Config, eng engine, dump string, sum *Summary) error {
	files, err := beamio.Files(ctx, c.EvalInput)
	if err != nil {
		return fmt.Errorf("pipelines/train: eval_input %s: %w", c.EvalInput, err)
	}
	r, err := eng.eval(ctx, files, dump)
	if err != nil {
		return err
	}
	auc, ll, cl := r.AUC, r.LogLoss, r.ConstLogLoss
	sum.EvalExamples = r.Examples
	sum.EvalAUC, sum.EvalLogLoss, sum.EvalConstLogLoss = &auc, &ll, &cl
	return nil
}

// evalSummary evaluates the model as it is now (during training) and writes the eval
// summary at the current global step.
func evalSummary(ctx context.Context, c *Config, eng engine, ps *client.Client, sums *summaries) error {
	step, err := ps.GlobalStep(ctx, 0, "")
	if err != nil {
		return err
	}
	sums.train(step)
	es := &Summary{}
	if c.Planted != "" {
		if err := readPlanted(c.Planted, es); err != nil {
			return err
		}
	}
	if err := evaluate(ctx, c, eng, "", es); err != nil {
		return err
	}
	sums.eval(step, es)
	if eng.o.Progress != nil {
		fmt.Fprintf(eng.o.Progress, "train: eval at global step %d: auc %.4f, log loss %.4f\n", step, *es.EvalAUC, *es.EvalLogLoss)
	}
	return nil
}

// readPlanted copies the Bayes figures of a planted data set.
func readPlanted(path string, sum *Summary) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("pipelines/train: planted: %w", err)
	}
	var p struct {
		BayesAUC     *float64 `json:"bayes_auc"`
		BayesLogLoss *float64 `json:"bayes_logloss"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("pipelines/train: planted %s: %w", path, err)
	}
	sum.BayesAUC, sum.BayesLogLoss = p.BayesAUC, p.BayesLogLoss
	return nil
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// periodicSaver writes a checkpoint every everySteps global steps while training runs.
type periodicSaver struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	err    error
}

func startSaver(ctx context.Context, ps *client.Client, saver *controller.Saver, enabled bool, everySteps int64, progress io.Writer) *periodicSaver {
	ctx, cancel := context.WithCancel(ctx)
	s := &periodicSaver{cancel: cancel}
	if !enabled || everySteps <= 0 {
		return s
	}
	s.wg.Go(func() {
		next := everySteps
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			step, err := ps.GlobalStep(ctx, 0, "")
			if err != nil || step < next {
				continue
			}
			res, err := saver.Save(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.err = fmt.Errorf("pipelines/train: periodic %w", err)
				}
				return
			}
			step = res.Step
			if progress != nil {
				note := ""
				if !res.Consistent {
					note = fmt.Sprintf(" (not consistent: workers %v did not pause)", res.Running)
				}
				fmt.Fprintf(progress, "train: checkpoint at global step %d%s\n", step, note)
			}
			for next <= step {
				next += everySteps
			}
		}
	})
	return s
}

func (s *periodicSaver) stop() error {
	s.cancel()
	s.wg.Wait()
	return s.err
}

// openDiscovery opens the discovery backend the config selects.
func openDiscovery(ctx context.Context, c *Config, logger *slog.Logger) (discovery.Backend, discovery.Identity, error) {
	r := &c.Runner
	dc := discovery.Config{Type: c.Discovery(), TFConfig: r.TFConfig, PSM: r.UUID, JobName: r.DeepInsightName,
		ZKServers: r.ZKServer, Static: c.PS.Addrs, Logger: logger}
	if dc.TFConfig == "" {
		dc.TFConfig = os.Getenv("TF_CONFIG")
	}
	if dc.JobName == "" {
		dc.JobName = "monolith"
	}
	b, id, err := discovery.New(ctx, dc, os.LookupEnv)
	if err != nil {
		return nil, id, fmt.Errorf("pipelines/train: discovery %s: %w", c.Discovery(), err)
	}
	return b, id, nil
}

// identity is this worker's index and the job's worker count: the runner's index and
// num_workers, or what a TF_CONFIG or MLP environment says when they are not set (set
// and different is an error).
func identity(ctx context.Context, c *Config, b discovery.Backend, id discovery.Identity) (worker, workers int, err error) {
	worker, workers = c.Runner.Index, c.Runner.NumWorkers
	if id.Index < 0 {
		return worker, workers, nil
	}
	if id.ServerType != "" && id.ServerType != "worker" && id.ServerType != "chief" {
		return 0, 0, fmt.Errorf("%w: discovery %s says this process is %s %d, not a worker", ErrConfig, c.Discovery(), id.ServerType, id.Index)
	}
	set := func(k string) bool { return c.runnerSet[k] || slices.Contains(c.Runner.Changed(), k) }
	if set("index") && worker != id.Index {
		return 0, 0, fmt.Errorf("%w: runner.index %d, but discovery %s says worker %d", ErrConfig, worker, c.Discovery(), id.Index)
	}
	worker = id.Index
	all, err := b.Query(ctx, "worker")
	if err != nil {
		return 0, 0, fmt.Errorf("pipelines/train: discovery %s: %w", c.Discovery(), err)
	}
	if n := len(all); n > 0 {
		if set("num_workers") && workers != n {
			return 0, 0, fmt.Errorf("%w: runner.num_workers %d, but discovery %s lists %d workers", ErrConfig, workers, c.Discovery(), n)
		}
		workers = n
	}
	if worker >= workers {
		return 0, 0, fmt.Errorf("%w: worker index %d outside [0, %d)", ErrConfig, worker, workers)
	}
	return worker, workers, nil
}

// workerFiles are the files of worker i of n: every n-th one from the i-th.
func workerFiles(files []string, i, n int) ([]string, error) {
	if n <= 1 {
		return files, nil
	}
	if len(files) < n {
		return nil, fmt.Errorf("%d files for %d workers: each worker reads whole files, so it needs at least one (split the input into more files)", len(files), n)
	}
	var out []string
	for k := i; k < len(files); k += n {
		out = append(out, files[k])
	}
	return out, nil
}

// stepLimit is the global step training stops at: max_steps (absolute), or steps past the
// start step, whichever comes first (0: none).
func stepLimit(maxSteps, steps, start int64) int64 {
	if steps <= 0 {
		return maxSteps
	}
	if rel := start + steps; maxSteps <= 0 || rel < maxSteps {
		return rel
	}
	return maxSteps
}

// endBarrierID is the PS barrier the workers meet at when they are done training.
const endBarrierID = "monolith/train-end"

// endBarrier waits, bounded by wait, until every worker has finished training.
func endBarrier(ctx context.Context, ps *client.Client, worker, workers int, wait time.Duration, progress io.Writer) error {
	if progress != nil {
		fmt.Fprintf(progress, "train: worker %d done; waiting up to %v for the other %d workers\n", worker, wait, workers-1)
	}
	if err := ps.Barrier(ctx, endBarrierID, worker, workers, wait); err != nil {
		return fmt.Errorf("pipelines/train: worker %d waiting for the other %d workers to finish (runner.chief_timeout_secs): %w", worker, workers-1, err)
	}
	return nil
}

// waitServing waits, bounded by wait, until every PS shard answers (addresses known in
// advance, as TF_CONFIG's and static lists are, may belong to shards still starting).
func waitServing(ctx context.Context, ps *client.Client, wait time.Duration, logger *slog.Logger) error {
	deadline := time.Now().Add(wait)
	delay := 50 * time.Millisecond
	logged := time.Time{}
	for {
		_, err := ps.HealthCheckAll(ctx, "")
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("PS shards %v not answering within %v: %w", ps.Addrs(), wait, err)
		}
		if time.Since(logged) > 5*time.Second {
			logger.Info("waiting for the PS shards to answer", "addrs", ps.Addrs(), "err", err)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}
