package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/monolith-go/monolith/pipelines/train/ckptstate"
	"github.com/monolith-go/monolith/pipelines/train/runconfig"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// ErrConfig is wrapped by every error of a training configuration.
var ErrConfig = errors.New("pipelines/train: invalid config")

// Config is the training configuration (a YAML or JSON file; see the README's "Training
// config" section). Relative paths are relative to the file's directory.
type Config struct {
	// Model is lr, fm or deepfm.
	Model string `json:"model"`
	// Layouts name the layout outputs the model reads: Bias (a [B,1] ADDN) and Vec (a CONCAT
	// of field vectors). Defaults "bias" and "vec".
	Layouts struct {
		Bias string `json:"bias"`
		Vec  string `json:"vec"`
	} `json:"layouts"`
	// Hidden are the DeepFM MLP's hidden widths (default [64, 32]).
	Hidden []int `json:"hidden"`

	// Data is a directory written by `monolith gen --planted`: it supplies the defaults
	// <data>/train/*, <data>/eval/*, <data>/feature_configs.pbtxt and <data>/planted.json.
	Data           string `json:"data"`
	TrainInput     string `json:"train_input"`     // file pattern of the training data
	EvalInput      string `json:"eval_input"`      // file pattern of the held-out data ("" = no evaluation)
	FeatureConfigs string `json:"feature_configs"` // FeatureConfigs (protobuf text or JSON)
	Planted        string `json:"planted"`         // planted.json of the eval data ("" = none)

	BatchSize int `json:"batch_size"` // rows per step (default 256)
	Epochs    int `json:"epochs"`     // passes over the training data (default 1)
	// EvalEveryEpochs also evaluates after every EvalEveryEpochs-th epoch (0: only once,
	// after training); each evaluation is a summary in the event file and the metrics.
	EvalEveryEpochs int   `json:"eval_every_epochs"`
	MaxSteps        int64 `json:"max_steps"` // stop at this global step (absolute; 0 = no limit)
	// Steps stops this many global steps after the step training starts from (the
	// restored checkpoint's; 0 = no limit). With max_steps too, the lower bound wins.
	Steps int64 `json:"steps"`
	// Threads is the goroutines each step of a bundle runs on (default 0: GOMAXPROCS of
	// the worker; the plain loop's goroutines too). Steps pipeline their batches, so up to
	// a few times Threads batches are between their lookup and their apply (asynchronous
	// training).
	Threads int `json:"threads"`
	// Filters and Labels are the sample filters and label ops run on every batch after
	// reading, filters first, each list in order (io.md §3.7): a list of one-key objects,
	// Monolith's op name → its options in snake_case, for example
	// [{negative_sample: {drop_rate: 0.5, threshold: 0.5}}].
	Filters json.RawMessage `json:"filters"`
	Labels  json.RawMessage `json:"labels"`
	// Unique deduplicates fids per feature before the lookup (training mode; default true).
	Unique *bool `json:"unique"`

	// Sparse configures the tables of the FeatureConfigs: Segments[i] is the initializer and
	// optimizer of segment i (one segment per slice dim; the last entry repeats).
	Sparse struct {
		Segments []Segment `json:"segments"`
	} `json:"sparse"`
	// Dense configures the model's dense parameter tables.
	Dense struct {
		Optimizer json.RawMessage `json:"optimizer"` // a monolith.hash_table.OptimizerConfig
	} `json:"dense"`
	// Tables replaces the generated spec of the named tables: a list of monolith.ps.TableSpec
	// in protobuf JSON (full control over filters, expiry, compression).
	Tables json.RawMessage `json:"tables"`

	// PS says where the parameter servers are: Addrs (static discovery), or the runner's
	// discovery_type; with neither, Shards in-process servers (default 1) are started on
	// 127.0.0.1.
	PS struct {
		Shards int      `json:"shards"`
		Addrs  []string `json:"addrs"`
		Seed   uint64   `json:"seed"` // in-process servers' initializer seed
		// UnavailableWaitSecs is how long a call to a shard that does not answer keeps
		// retrying (default 60): a shard restarting, or restarted on another address that
		// discovery has yet to name. Past it the run fails naming the shard.
		UnavailableWaitSecs int `json:"unavailable_wait_secs"`
	} `json:"ps"`
	// Checkpoint: the PS saves every EverySteps global steps and at the end of training.
	// In-process servers restore the newest checkpoint under Dir when they start.
	Checkpoint struct {
		Dir        string `json:"dir"`
		EverySteps int64  `json:"every_steps"`
		Keep       int    `json:"keep"`
		// RestoreDir starts a fresh job (no checkpoint in Dir yet) from another job's
		// checkpoint directory: its newest checkpoint, or RestoreCkpt (a basename such as
		// "model.ckpt-30") when it lists it (spec §3.4, restore_dir / restore_ckpt).
		RestoreDir  string `json:"restore_dir"`
		RestoreCkpt string `json:"restore_ckpt"`
		// Info writes ckpt.info-{step} (entries per slot) into Dir with every checkpoint
		// (Monolith's enable_model_ckpt_info).
		Info bool `json:"info"`
		// SaveTimeoutSecs bounds each shard's save (default 600), apart from the PS
		// clients' call deadline: a large shard or a slow disk takes longer than a call.
		SaveTimeoutSecs int `json:"save_timeout_secs"`
	} `json:"checkpoint"`

	// Runner is Monolith's RunnerConfig (pipelines/train/runconfig), under the key
	// "runner" with Monolith's field names; monolith train also binds each field to a flag
	// of the same name. The fields that act are RunnerKeys; any other field set to a value
	// other than its default is an error naming it.
	Runner runconfig.RunnerConfig `json:"runner"`

	// dir is the directory relative paths start from.
	dir string
	// ops are Filters then Labels, parsed and validated by Normalize.
	ops []OpSpec
	// runnerSet are the runner keys the file or the command line set (MarkRunnerSet).
	runnerSet map[string]bool
	// discovery is the resolved way to the PS: "" (in-process shards) or a discovery type.
	discovery string
}

// RunnerKeys are the runner fields monolith train acts on, with what each does.
var RunnerKeys = map[string]string{
	"index":                   "this worker's index in [0, num_workers): it trains the input files i with i % num_workers == index; index 0 is the chief",
	"num_workers":             "the workers of the job (default 1); more than one needs shared PS shards (ps.addrs or a discovery)",
	"num_ps":                  "PS shards, as ps.shards",
	"server_type":             "must be worker (a PS is `monolith ps`)",
	"mode":                    "must be train (`monolith evaluate` and `monolith predict` are the other modes)",
	"model_dir":               "as checkpoint.dir",
	"restore_dir":             "as checkpoint.restore_dir",
	"restore_ckpt":            "as checkpoint.restore_ckpt",
	"enable_model_ckpt_info":  "as checkpoint.info",
	"save_checkpoints_steps":  "as checkpoint.every_steps",
	"checkpoints_max_to_keep": "as checkpoint.keep",
	"save_summary_steps":      "global steps between the event file's training summaries",
	"chief_timeout_secs":      "how long the chief waits for the other workers to finish before its final save and evaluation",
	"max_rpc_deadline_millis": "the PS clients' per-call deadline",
	"is_local":                "true: in-process PS shards, no discovery",
	"discovery_type":          "how workers find the PS: static (ps.addrs), zk, consul, tf_config (primus) or mlp",
	"zk_server":               "ZooKeeper servers (discovery zk)",
	"deep_insight_name":       "the job's ZooKeeper folder /monolith/{name} (discovery zk; default monolith)",
	"tf_config":               "the TF_CONFIG cluster JSON (discovery tf_config; default $TF_CONFIG)",
	"uuid":                    "the job's Consul psm (discovery consul)",
	"connect_retries":         "PS client retries of a failed call",
	"retry_backoff_ms":        "PS client retry backoff",
	"barrier_timeout_ms":      "the save barrier's wait for the workers to pause",
}

// MarkRunnerSet records runner keys set outside the file (command-line flags): a key set
// acts even at its default value (discovery_type consul, checkpoints_max_to_keep 10).
func (c *Config) MarkRunnerSet(keys ...string) {
	if c.runnerSet == nil {
		c.runnerSet = map[string]bool{}
	}
	for _, k := range keys {
		c.runnerSet[k] = true
	}
}

// Discovery is how the workers find the PS: "" for in-process shards, else a discovery
// type (static, zk, consul, tf_config or mlp).
func (c *Config) Discovery() string { return c.discovery }

// Ops returns the config's filters and label ops, in the order they run.
func (c *Config) Ops() []OpSpec { return c.ops }

// Segment is the initializer and optimizer of one table segment, in protobuf JSON
// (monolith.hash_table.InitializerConfig and OptimizerConfig, e.g. {"zeros": {}} and
// {"adagrad": {"learning_rate": 0.05}}).
type Segment struct {
	Init      json.RawMessage `json:"init"`
	Optimizer json.RawMessage `json:"optimizer"`
	// Compress is the segment's monolith.hash_table.FloatCompressorConfig in protobuf JSON
	// ({fp16: {}}, {fixed_r8: {r: 1}}, {one_bit: {…}}): how `monolith export --model` stores
	// it for serving, and fixed_r8's and one_bit's retrieval in training. Default fp32.
	Compress json.RawMessage `json:"compress"`
}

// LoadConfig reads a YAML (.yaml, .yml) or JSON configuration and applies the defaults.
// Unknown keys are errors.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	c, err := ParseConfig(b, strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.dir = filepath.Dir(path)
	if err := c.Normalize(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses a configuration (YAML when yamlText, else JSON) without defaults.
func ParseConfig(b []byte, yamlText bool) (*Config, error) {
	if yamlText {
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		if v == nil {
			v = map[string]any{}
		}
		j, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		b = j
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	c := &Config{Runner: runconfig.Defaults()}
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var keys struct {
		Runner map[string]json.RawMessage `json:"runner"`
	}
	if err := json.Unmarshal(b, &keys); err == nil {
		for k := range keys.Runner {
			c.MarkRunnerSet(k)
		}
	}
	return c, nil
}

// path resolves p against the configuration's directory.
func (c *Config) path(p string) string {
	if p == "" || filepath.IsAbs(p) || c.dir == "" {
		return p
	}
	return filepath.Join(c.dir, p)
}

// SetData points the inputs at a `monolith gen --planted` directory (the CLI's --data),
// overriding the file's data, inputs, feature configs and planted file.
func (c *Config) SetData(dir string) {
	c.Data, c.TrainInput, c.EvalInput, c.FeatureConfigs, c.Planted = dir, "", "", "", ""
	c.dir = ""
}

// Default optimizer and initializers: Adagrad, zero bias columns, small uniform vectors.
const (
	defaultSparseBias = `{"init": {"zeros": {}}, "optimizer": {"adagrad": {"learning_rate": 0.05, "initial_accumulator_value": 0.1}}}`
	defaultSparseVec  = `{"init": {"random_uniform": {"minval": -0.05, "maxval": 0.05}}, "optimizer": {"adagrad": {"learning_rate": 0.05, "initial_accumulator_value": 0.1}}}`
	defaultDenseOpt   = `{"adagrad": {"learning_rate": 0.01, "initial_accumulator_value": 0.1}}`
)

// Normalize applies the defaults, resolves the paths and checks the values.
func (c *Config) Normalize() error {
	if c.Model == "" {
		c.Model = "fm"
	}
	if c.Layouts.Bias == "" {
		c.Layouts.Bias = "bias"
	}
	if c.Layouts.Vec == "" {
		c.Layouts.Vec = "vec"
	}
	if c.Data != "" {
		d := c.path(c.Data)
		if c.TrainInput == "" {
			c.TrainInput = filepath.Join(d, "train", "*")
		}
		if c.EvalInput == "" {
			c.EvalInput = filepath.Join(d, "eval", "*")
		}
		if c.FeatureConfigs == "" {
			c.FeatureConfigs = filepath.Join(d, "feature_configs.pbtxt")
		}
		if c.Planted == "" {
			if p := filepath.Join(d, "planted.json"); fileExists(p) {
				c.Planted = p
			}
		}
		c.Data = d
	}
	c.TrainInput, c.EvalInput = c.path(c.TrainInput), c.path(c.EvalInput)
	c.FeatureConfigs, c.Planted = c.path(c.FeatureConfigs), c.path(c.Planted)
	if err := c.Runner.Validate(); err != nil {
		return fmt.Errorf("%w: runner: %v", ErrConfig, err)
	}
	if err := c.applyRunner(); err != nil {
		return err
	}
	if c.Checkpoint.Dir == "" {
		c.Checkpoint.Dir = c.Runner.ModelDir
	}
	if c.Checkpoint.RestoreDir == "" {
		c.Checkpoint.RestoreDir = c.Runner.RestoreDir
	}
	if c.Checkpoint.RestoreCkpt == "" {
		c.Checkpoint.RestoreCkpt = c.Runner.RestoreCkpt
	}
	c.Checkpoint.Info = c.Checkpoint.Info || c.Runner.EnableModelCkptInfo
	c.Checkpoint.Dir = c.path(c.Checkpoint.Dir)
	if !ckptstate.IsHDFS(c.Checkpoint.RestoreDir) {
		c.Checkpoint.RestoreDir = c.path(c.Checkpoint.RestoreDir)
	}
	c.dir = "" // resolved: a second Normalize keeps the paths
	if c.BatchSize == 0 {
		c.BatchSize = 256
	}
	if c.Epochs == 0 {
		c.Epochs = 1
	}
	if c.Unique == nil {
		t := true
		c.Unique = &t
	}
	if len(c.Sparse.Segments) == 0 {
		var b, v Segment
		_ = json.Unmarshal([]byte(defaultSparseBias), &b)
		_ = json.Unmarshal([]byte(defaultSparseVec), &v)
		c.Sparse.Segments = []Segment{b, v}
	}
	if len(c.Dense.Optimizer) == 0 {
		c.Dense.Optimizer = json.RawMessage(defaultDenseOpt)
	}
	if c.PS.Shards == 0 {
		c.PS.Shards = max(1, len(c.PS.Addrs))
	}
	if c.Checkpoint.Keep == 0 {
		c.Checkpoint.Keep = 3
	}
	if c.Checkpoint.SaveTimeoutSecs == 0 {
		c.Checkpoint.SaveTimeoutSecs = 600
	}
	if c.PS.UnavailableWaitSecs == 0 {
		c.PS.UnavailableWaitSecs = 60
	}
	if c.PS.UnavailableWaitSecs < 0 {
		return fmt.Errorf("%w: ps.unavailable_wait_secs %d must be > 0", ErrConfig, c.PS.UnavailableWaitSecs)
	}
	if c.Checkpoint.SaveTimeoutSecs < 0 {
		return fmt.Errorf("%w: checkpoint.save_timeout_secs %d must be > 0", ErrConfig, c.Checkpoint.SaveTimeoutSecs)
	}
	if c.Steps < 0 {
		return fmt.Errorf("%w: steps %d must not be negative", ErrConfig, c.Steps)
	}
	switch {
	case c.TrainInput == "":
		return fmt.Errorf("%w: train_input is empty (set it, or data)", ErrConfig)
	case c.FeatureConfigs == "":
		return fmt.Errorf("%w: feature_configs is empty (set it, or data)", ErrConfig)
	case c.Checkpoint.RestoreDir != "" && c.Checkpoint.Dir == "":
		return fmt.Errorf("%w: checkpoint.restore_dir needs checkpoint.dir", ErrConfig)
	case c.BatchSize < 0 || c.Epochs < 0 || c.MaxSteps < 0 || c.Threads < 0 || c.PS.Shards < 0 || c.Checkpoint.EverySteps < 0 || c.EvalEveryEpochs < 0:
		return fmt.Errorf("%w: batch_size %d, epochs %d, max_steps %d, threads %d, ps.shards %d, checkpoint.every_steps %d and eval_every_epochs %d must not be negative",
			ErrConfig, c.BatchSize, c.Epochs, c.MaxSteps, c.Threads, c.PS.Shards, c.Checkpoint.EverySteps, c.EvalEveryEpochs)
	case c.EvalEveryEpochs > 0 && c.EvalInput == "":
		return fmt.Errorf("%w: eval_every_epochs %d needs eval_input", ErrConfig, c.EvalEveryEpochs)
	case len(c.PS.Addrs) > 0 && c.PS.Shards != len(c.PS.Addrs):
		return fmt.Errorf("%w: ps.shards is %d but ps.addrs lists %d servers", ErrConfig, c.PS.Shards, len(c.PS.Addrs))
	}
	if err := c.resolveDiscovery(); err != nil {
		return err
	}
	for i, s := range c.Sparse.Segments {
		if _, err := s.build(0); err != nil {
			return fmt.Errorf("%w: sparse.segments[%d]: %v", ErrConfig, i, err)
		}
	}
	if _, err := optimizer(c.Dense.Optimizer); err != nil {
		return fmt.Errorf("%w: dense.optimizer: %v", ErrConfig, err)
	}
	if _, err := c.tableOverrides(); err != nil {
		return err
	}
	filters, err := parseOps("filters", c.Filters)
	if err != nil {
		return err
	}
	labels, err := parseOps("labels", c.Labels)
	if err != nil {
		return err
	}
	c.ops = append(filters, labels...)
	return nil
}

// applyRunner copies the runner keys that stand for a key of this config (num_ps,
// save_checkpoints_steps, checkpoints_max_to_keep), checks the ones that act here, and
// rejects every other field set to a value other than its default.
func (c *Config) applyRunner() error {
	r := &c.Runner
	for _, k := range r.Changed() {
		if _, ok := RunnerKeys[k]; !ok {
			return fmt.Errorf("%w: runner.%s is not supported by monolith train (the keys that act are in the README's training config table)", ErrConfig, k)
		}
	}
	switch {
	case r.ServerType != "worker":
		return fmt.Errorf("%w: runner.server_type %q: monolith train runs workers (a PS is monolith ps)", ErrConfig, r.ServerType)
	case r.Mode != "train":
		return fmt.Errorf("%w: runner.mode %q: monolith train trains (use monolith evaluate or monolith predict)", ErrConfig, r.Mode)
	case r.NumWorkers < 1:
		return fmt.Errorf("%w: runner.num_workers %d, want ≥ 1", ErrConfig, r.NumWorkers)
	case r.Index >= r.NumWorkers:
		return fmt.Errorf("%w: runner.index %d outside [0, %d) (runner.num_workers %d)", ErrConfig, r.Index, r.NumWorkers, r.NumWorkers)
	case r.ChiefTimeoutSecs <= 0 || r.MaxRPCDeadlineMillis <= 0:
		return fmt.Errorf("%w: runner.chief_timeout_secs %d and runner.max_rpc_deadline_millis %d must be > 0", ErrConfig, r.ChiefTimeoutSecs, r.MaxRPCDeadlineMillis)
	}
	agree := func(key string, rv, cv int64, ckey string) (int64, error) {
		switch {
		case rv == 0 || rv == cv:
			return cv, nil
		case cv == 0:
			return rv, nil
		}
		return 0, fmt.Errorf("%w: runner.%s is %d but %s is %d", ErrConfig, key, rv, ckey, cv)
	}
	shards, err := agree("num_ps", int64(r.NumPS), int64(c.PS.Shards), "ps.shards")
	if err != nil {
		return err
	}
	c.PS.Shards = int(shards)
	if c.Checkpoint.EverySteps, err = agree("save_checkpoints_steps", int64(r.SaveCheckpointsSteps), c.Checkpoint.EverySteps, "checkpoint.every_steps"); err != nil {
		return err
	}
	if c.runnerSet["checkpoints_max_to_keep"] || r.CheckpointsMaxToKeep != runconfig.Defaults().CheckpointsMaxToKeep {
		keep, err := agree("checkpoints_max_to_keep", int64(r.CheckpointsMaxToKeep), int64(c.Checkpoint.Keep), "checkpoint.keep")
		if err != nil {
			return err
		}
		c.Checkpoint.Keep = int(keep)
	}
	return nil
}

// resolveDiscovery sets c.discovery from ps.addrs and the runner's discovery keys, and
// rejects discovery keys that would not act.
func (c *Config) resolveDiscovery() error {
	r := &c.Runner
	d := ""
	switch {
	case r.IsLocal:
		if len(c.PS.Addrs) > 0 || c.runnerSet["discovery_type"] {
			return fmt.Errorf("%w: runner.is_local starts in-process PS shards: drop ps.addrs and runner.discovery_type", ErrConfig)
		}
	case c.runnerSet["discovery_type"] || r.DiscoveryType != runconfig.Defaults().DiscoveryType:
		d = r.DiscoveryType
		if d == runconfig.DiscoveryPrimus {
			d = runconfig.DiscoveryTFConfig
		}
	case len(c.PS.Addrs) > 0:
		d = runconfig.DiscoveryStatic
	}
	needs := map[string]string{"zk_server": runconfig.DiscoveryZK, "deep_insight_name": runconfig.DiscoveryZK,
		"tf_config": runconfig.DiscoveryTFConfig, "uuid": runconfig.DiscoveryConsul}
	changed := r.Changed()
	for _, k := range []string{"zk_server", "deep_insight_name", "tf_config", "uuid"} {
		if slices.Contains(changed, k) && d != needs[k] {
			return fmt.Errorf("%w: runner.%s acts with runner.discovery_type %s, not %q", ErrConfig, k, needs[k], d)
		}
	}
	switch {
	case d == runconfig.DiscoveryStatic && len(c.PS.Addrs) == 0:
		return fmt.Errorf("%w: runner.discovery_type static needs ps.addrs", ErrConfig)
	case d != runconfig.DiscoveryStatic && len(c.PS.Addrs) > 0:
		return fmt.Errorf("%w: ps.addrs is static discovery, but runner.discovery_type is %s", ErrConfig, d)
	case d == runconfig.DiscoveryZK && r.ZKServer == "":
		return fmt.Errorf("%w: runner.discovery_type zk needs runner.zk_server", ErrConfig)
	case d == runconfig.DiscoveryConsul && r.UUID == "":
		return fmt.Errorf("%w: runner.discovery_type consul needs runner.uuid (the job's psm)", ErrConfig)
	case d == "" && r.NumWorkers > 1:
		return fmt.Errorf("%w: runner.num_workers %d needs PS shards the workers share: set ps.addrs or runner.discovery_type", ErrConfig, r.NumWorkers)
	case d != "" && c.Checkpoint.RestoreDir != "":
		return fmt.Errorf("%w: checkpoint.restore_dir needs in-process PS shards (external shards restore their own checkpoint folders)", ErrConfig)
	}
	c.discovery = d
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// build returns the segment as an EntryConfig segment of dim floats.
func (s Segment) build(dim int) (*hashtablepb.EntryConfig_Segment, error) {
	seg := &hashtablepb.EntryConfig_Segment{DimSize: ptr(int32(dim))}
	if len(s.Init) == 0 {
		seg.InitConfig = &hashtablepb.InitializerConfig{Type: &hashtablepb.InitializerConfig_Zeros{Zeros: &hashtablepb.ZerosInitializerConfig{}}}
	} else {
		seg.InitConfig = &hashtablepb.InitializerConfig{}
		if err := protojson.Unmarshal(s.Init, seg.InitConfig); err != nil {
			return nil, fmt.Errorf("init: %v", err)
		}
	}
	opt, err := optimizer(s.Optimizer)
	if err != nil {
		return nil, err
	}
	seg.OptConfig = opt
	if len(s.Compress) > 0 {
		seg.CompConfig = &hashtablepb.FloatCompressorConfig{}
		if err := protojson.Unmarshal(s.Compress, seg.CompConfig); err != nil {
			return nil, fmt.Errorf("compress: %v", err)
		}
	}
	return seg, nil
}

func optimizer(b json.RawMessage) (*hashtablepb.OptimizerConfig, error) {
	if len(b) == 0 {
		return nil, errors.New("optimizer: missing")
	}
	o := &hashtablepb.OptimizerConfig{}
	if err := protojson.Unmarshal(b, o); err != nil {
		return nil, fmt.Errorf("optimizer: %v", err)
	}
	if o.GetType() == nil {
		return nil, errors.New("optimizer: no optimizer set (e.g. {\"adagrad\": {\"learning_rate\": 0.05}})")
	}
	return o, nil
}

// tableOverrides parses Tables.
func (c *Config) tableOverrides() (map[string]*pspb.TableSpec, error) {
	out := map[string]*pspb.TableSpec{}
	if len(c.Tables) == 0 {
		return out, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(c.Tables, &raws); err != nil {
		return nil, fmt.Errorf("%w: tables: want a list of monolith.ps.TableSpec: %v", ErrConfig, err)
	}
	for i, r := range raws {
		s := &pspb.TableSpec{}
		if err := protojson.Unmarshal(r, s); err != nil {
			return nil, fmt.Errorf("%w: tables[%d]: %v", ErrConfig, i, err)
		}
		if s.GetName() == "" {
			return nil, fmt.Errorf("%w: tables[%d]: no name", ErrConfig, i)
		}
		out[s.GetName()] = s
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }
