// Package runconfig is Monolith's RunConfig (the user's estimator config) and RunnerConfig
// (the runner's), with their flag binding, the RunConfig → RunnerConfig merge, the user
// overrides and the environment exports of spec §3.1, plus the distributed knobs.
//
// Departures: flags live in a flag.FlagSet the caller owns (no global FLAGS), post-init
// side effects are returned instead of written into flags or the process environment,
// Python's None is the zero value (a field set to its zero cannot be told from unset, as a
// field set to its default cannot be in Monolith), and bad enum values are errors naming
// the field.
package runconfig

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/monolith-go/monolith/internal/pytext"
)

// Discovery types.
const (
	DiscoveryConsul = "consul"
	DiscoveryZK     = "zk"
	DiscoveryPrimus = "primus"
	DiscoveryMLP    = "mlp"
	// DiscoveryTFConfig is primus under the name the CLI uses; DiscoveryStatic is a fixed
	// address list (the training config's ps.addrs). Both are this port's additions.
	DiscoveryTFConfig = "tf_config"
	DiscoveryStatic   = "static"
)

// RunnerConfig is Monolith's RunnerConfig ⊃ DistributedCpuTrainingConfig ⊃
// CpuTrainingConfig: the fields the Go runner uses or passes on, under their Monolith
// names.
type RunnerConfig struct {
	// CpuTrainingConfig
	ServerType                string `json:"server_type"`
	Index                     int    `json:"index"`
	NumPS                     int    `json:"num_ps"`
	NumWorkers                int    `json:"num_workers"`
	ModelDir                  string `json:"model_dir"`
	UUID                      string `json:"uuid"`
	Mode                      string `json:"mode"`
	EnableGPUTraining         bool   `json:"enable_gpu_training"`
	EnablePartialSyncTraining bool   `json:"enable_partial_sync_training"`
	EmbeddingPrefetchCapacity int    `json:"embedding_prefetch_capacity"`
	EnableEmbeddingPostpush   bool   `json:"enable_embedding_postpush"`
	EnableRealtimeTraining    bool   `json:"enable_realtime_training"`
	EnableFusedLayout         bool   `json:"enable_fused_layout"`
	EnableModelDump           bool   `json:"enable_model_dump"`
	EnableModelCkptInfo       bool   `json:"enable_model_ckpt_info"`
	EnableAliasMapAutoGen     bool   `json:"enable_alias_map_auto_gen"`
	WarmupFile                string `json:"warmup_file"`
	CheckpointsMaxToKeep      int    `json:"checkpoints_max_to_keep"`
	SaveCheckpointsSteps      int    `json:"save_checkpoints_steps"`
	MaxRPCDeadlineMillis      int    `json:"max_rpc_deadline_millis"`
	ChiefTimeoutSecs          int    `json:"chief_timeout_secs"`
	SaveSummarySteps          int    `json:"save_summary_steps"`
	LogStepCountSteps         int    `json:"log_step_count_steps"`
	DCAware                   bool   `json:"dc_aware"`
	// RunnerConfig
	Task                      string  `json:"task"`
	TFConfig                  string  `json:"tf_config"`
	DeepInsightName           string  `json:"deep_insight_name"`
	DiscoveryType             string  `json:"discovery_type"`
	ZKServer                  string  `json:"zk_server"`
	ZKWatchAddressFamily      string  `json:"zk_watch_address_family"`
	IsLocal                   bool    `json:"is_local"`
	Bzid                      string  `json:"bzid"`
	BaseName                  string  `json:"base_name"`
	TFGRPCWorkerCacheThreads  int     `json:"tf_grpc_worker_cache_threads"`
	GRPCWorkerHandlerMultiple float64 `json:"monolith_grpc_worker_service_handler_multiplier"`
	RestoreDir                string  `json:"restore_dir"`
	RestoreCkpt               string  `json:"restore_ckpt"`
	UnifiedServing            bool    `json:"unified_serving"`
	KafkaTopics               string  `json:"kafka_topics"`
	KafkaGroupID              string  `json:"kafka_group_id"`
	KafkaServers              string  `json:"kafka_servers"`
	DisableNativeMetrics      bool    `json:"disable_native_metrics"`
	// The distributed knobs of the earlier port: PS connection retries, their backoff, and
	// the PS barrier timeout.
	ConnectRetries   int   `json:"connect_retries"`
	RetryBackoffMs   int64 `json:"retry_backoff_ms"`
	BarrierTimeoutMs int64 `json:"barrier_timeout_ms"`
}

// Defaults returns a RunnerConfig with Monolith's defaults.
func Defaults() RunnerConfig {
	return RunnerConfig{
		ServerType: "worker", NumWorkers: 1, Mode: "train", WarmupFile: "./warmup_file", CheckpointsMaxToKeep: 10,
		MaxRPCDeadlineMillis: 30000, ChiefTimeoutSecs: 1800, SaveSummarySteps: 100, LogStepCountSteps: 100,
		DiscoveryType: DiscoveryConsul, ZKWatchAddressFamily: "ipv4", TFGRPCWorkerCacheThreads: 16,
		GRPCWorkerHandlerMultiple: 1.0, DisableNativeMetrics: true,
		ConnectRetries: 3, RetryBackoffMs: 50, BarrierTimeoutMs: 10000,
	}
}

// Validate checks the enumerations and ranges, naming the field.
func (c *RunnerConfig) Validate() error {
	switch c.DiscoveryType {
	case DiscoveryConsul, DiscoveryZK, DiscoveryPrimus, DiscoveryMLP, DiscoveryTFConfig, DiscoveryStatic:
	default:
		return fmt.Errorf("runconfig: discovery_type %q: want consul, zk, primus (tf_config), mlp or static", c.DiscoveryType)
	}
	switch c.ZKWatchAddressFamily {
	case "ipv4", "ipv6":
	default:
		return fmt.Errorf("runconfig: zk_watch_address_family %q: want ipv4 or ipv6", c.ZKWatchAddressFamily)
	}
	switch c.Mode {
	case "train", "eval", "infer":
	default:
		return fmt.Errorf("runconfig: mode %q: want train, eval or infer", c.Mode)
	}
	switch {
	case c.Index < 0 || c.NumPS < 0 || c.NumWorkers < 0:
		return fmt.Errorf("runconfig: index %d, num_ps %d, num_workers %d: negative", c.Index, c.NumPS, c.NumWorkers)
	case c.ConnectRetries < 0 || c.RetryBackoffMs < 0 || c.BarrierTimeoutMs <= 0:
		return fmt.Errorf("runconfig: connect_retries %d, retry_backoff_ms %d must be ≥ 0 and barrier_timeout_ms %d > 0",
			c.ConnectRetries, c.RetryBackoffMs, c.BarrierTimeoutMs)
	}
	return nil
}

// Retry is the PS client's connection retry policy.
func (c *RunnerConfig) Retry() (retries int, backoff time.Duration) {
	return c.ConnectRetries, time.Duration(c.RetryBackoffMs) * time.Millisecond
}

// BarrierTimeout is the PS barrier timeout.
func (c *RunnerConfig) BarrierTimeout() time.Duration {
	return time.Duration(c.BarrierTimeoutMs) * time.Millisecond
}

// Env is what the Estimator exports into the environment, as Python prints the values.
func (c *RunnerConfig) Env() []string {
	return []string{
		"TF_GRPC_WORKER_CACHE_THREADS=" + strconv.Itoa(c.TFGRPCWorkerCacheThreads),
		"MONOLITH_GRPC_WORKER_SERVICE_HANDLER_MULTIPLIER=" + pytext.Float(c.GRPCWorkerHandlerMultiple),
	}
}

// Decode reads a RunnerConfig over the defaults from JSON; unknown keys are errors.
func Decode(b []byte) (RunnerConfig, error) {
	c := Defaults()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("runconfig: %w", err)
	}
	return c, c.Validate()
}

// field is one settable field of a config struct.
type field struct {
	name string // Monolith's name
	v    reflect.Value
}

// fields lists the fields of *p (a pointer to a config struct) by json name.
func fields(p any) []field {
	v := reflect.ValueOf(p).Elem()
	t := v.Type()
	out := make([]field, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, field{name: name, v: v.Field(i)})
	}
	return out
}

// Flags are the command-line flags of a RunnerConfig: one per field, Monolith's name and
// default.
type Flags struct {
	fs   *flag.FlagSet
	vals RunnerConfig
}

// BindFlags registers the flags on fs.
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs, vals: Defaults()}
	for _, fl := range fields(&f.vals) {
		usage := "Monolith RunnerConfig." + fl.name
		switch p := fl.v.Addr().Interface().(type) {
		case *string:
			fs.StringVar(p, fl.name, *p, usage)
		case *bool:
			fs.BoolVar(p, fl.name, *p, usage)
		case *int:
			fs.IntVar(p, fl.name, *p, usage)
		case *int64:
			fs.Int64Var(p, fl.name, *p, usage)
		case *float64:
			fs.Float64Var(p, fl.name, *p, usage)
		default:
			panic(fmt.Sprintf("runconfig: field %s of type %T has no flag", fl.name, p)) // a programming error
		}
	}
	return f
}

// Apply is gflags_utils.update: for each field still at its default, a flag value other
// than the default wins (code-set values beat flags, flags beat defaults).
func (f *Flags) Apply(c *RunnerConfig) {
	def := Defaults()
	cf, ff, df := fields(c), fields(&f.vals), fields(&def)
	for i := range cf {
		if cf[i].v.Equal(df[i].v) && !ff[i].v.Equal(df[i].v) {
			cf[i].v.Set(ff[i].v)
		}
	}
}

// Set lists the RunnerConfig flags given on the command line, by Monolith name.
func (f *Flags) Set() []string {
	names := map[string]bool{}
	for _, fl := range fields(&f.vals) {
		names[fl.name] = true
	}
	var out []string
	f.fs.Visit(func(fl *flag.Flag) {
		if names[fl.Name] {
			out = append(out, fl.Name)
		}
	})
	return out
}

// Changed lists the fields of c whose value differs from Defaults(), by Monolith name, in
// field order.
func (c *RunnerConfig) Changed() []string {
	def := Defaults()
	cf, df := fields(c), fields(&def)
	var out []string
	for i := range cf {
		if !cf[i].v.Equal(df[i].v) {
			out = append(out, cf[i].name)
		}
	}
	return out
}

// Names lists every RunnerConfig field by Monolith name, in field order.
func Names() []string {
	var c RunnerConfig
	fs := fields(&c)
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return out
}

// Lookup returns the string value of flag name ("" when unknown).
func (f *Flags) Lookup(name string) string {
	if fl := f.fs.Lookup(name); fl != nil {
		return fl.Value.String()
	}
	return ""
}

// PostInit is RunnerConfig's post-init: the GPU partial-sync index rule (index from
// OMPI_COMM_WORLD_RANK; env looks variables up) and the flag values it would set — the
// kafka_* values and restore_ckpt when its flag is unset — returned by flag name.
func (c *RunnerConfig) PostInit(f *Flags, env func(string) (string, bool)) (setFlags map[string]string, err error) {
	if c.EnableGPUTraining && c.EnablePartialSyncTraining && c.Index <= 0 && c.ServerType == "worker" {
		if v, ok := env("OMPI_COMM_WORLD_RANK"); ok && v != "" {
			if c.Index, err = strconv.Atoi(v); err != nil || c.Index < 0 {
				return nil, fmt.Errorf("runconfig: OMPI_COMM_WORLD_RANK=%q is not a rank", v)
			}
		} else {
			c.Index = 0
		}
	}
	setFlags = map[string]string{}
	if c.KafkaTopics != "" {
		setFlags["kafka_topics"] = strings.Join(strings.Split(c.KafkaTopics, ","), ",")
	}
	if c.KafkaGroupID != "" {
		setFlags["kafka_group_id"] = c.KafkaGroupID
	}
	if c.KafkaServers != "" {
		setFlags["kafka_servers"] = c.KafkaServers
	}
	if f != nil && c.RestoreCkpt != "" && f.Lookup("restore_ckpt") == "" {
		setFlags["restore_ckpt"] = c.RestoreCkpt
	}
	return setFlags, c.Validate()
}

// RunConfig is Monolith's RunConfig, the user's configuration (estimator.py), with the
// distributed knobs.
type RunConfig struct {
	IsLocal               bool   `json:"is_local"`
	NumPS                 int    `json:"num_ps"`
	NumWorkers            int    `json:"num_workers"`
	ChiefTimeoutSecs      int    `json:"chief_timeout_secs"`
	EnableFusedLayout     bool   `json:"enable_fused_layout"`
	EnableModelDump       bool   `json:"enable_model_dump"`
	Bzid                  string `json:"bzid"`
	BaseName              string `json:"base_name"`
	EnableParameterSync   bool   `json:"enable_parameter_sync"`
	ModelDir              string `json:"model_dir"`
	RestoreDir            string `json:"restore_dir"`
	RestoreCkpt           string `json:"restore_ckpt"`
	SaveCheckpointsSteps  int    `json:"save_checkpoints_steps"`
	MaxRPCDeadlineMillis  int    `json:"max_rpc_deadline_millis"`
	CheckpointsMaxToKeep  int    `json:"checkpoints_max_to_keep"`
	WarmupFile            string `json:"warmup_file"`
	EnableAliasMapAutoGen bool   `json:"enable_alias_map_auto_gen"`
	KafkaTopics           string `json:"kafka_topics"`
	KafkaGroupID          string `json:"kafka_group_id"`
	KafkaServers          string `json:"kafka_servers"`
	DisableNativeMetrics  bool   `json:"disable_native_metrics"`
	SaveSummarySteps      int    `json:"save_summary_steps"`
	LogStepCountSteps     int    `json:"log_step_count_steps"`
	ConnectRetries        int    `json:"connect_retries"`
	RetryBackoffMs        int64  `json:"retry_backoff_ms"`
	BarrierTimeoutMs      int64  `json:"barrier_timeout_ms"`
}

// RunDefaults returns a RunConfig with Monolith's defaults.
func RunDefaults() RunConfig {
	return RunConfig{NumWorkers: 1, ChiefTimeoutSecs: 1800, MaxRPCDeadlineMillis: 30000, CheckpointsMaxToKeep: 10,
		WarmupFile: "./warmup_file", DisableNativeMetrics: true, SaveSummarySteps: 100, LogStepCountSteps: 100,
		ConnectRetries: 3, RetryBackoffMs: 50, BarrierTimeoutMs: 10000}
}

// UserOverrides lists the fields the user set to something other than the default, in
// field order (RunConfig.__post_init__'s user params).
func (r RunConfig) UserOverrides() []string {
	def := RunDefaults()
	rf, df := fields(&r), fields(&def)
	var out []string
	for i := range rf {
		if !rf[i].v.Equal(df[i].v) {
			out = append(out, rf[i].name)
		}
	}
	return out
}

// explicit are the fields to_runner_config passes to the RunnerConfig constructor, so that
// flag binding sees them.
var explicit = map[string]bool{
	"restore_dir": true, "restore_ckpt": true, "model_dir": true, "enable_fused_layout": true, "enable_model_dump": true,
	"warmup_file": true, "enable_alias_map_auto_gen": true, "kafka_topics": true, "kafka_group_id": true,
	"kafka_servers": true, "save_summary_steps": true, "log_step_count_steps": true, "disable_native_metrics": true,
}

// ToRunnerConfig is RunConfig.to_runner_config: the explicit fields go into a fresh
// RunnerConfig, then the flags (f may be nil) are applied, then every other shared field
// the user changed from RunConfig's default is copied; CONSUL discovery becomes ZK,
// training without GPU gets embedding_prefetch_capacity ≥ 1 and post-push, and
// enable_parameter_sync turns on realtime training.
func (r RunConfig) ToRunnerConfig(f *Flags) RunnerConfig {
	c := Defaults()
	cf := map[string]reflect.Value{}
	for _, fl := range fields(&c) {
		cf[fl.name] = fl.v
	}
	def := RunDefaults()
	rf, df := fields(&r), fields(&def)
	for _, fl := range rf {
		if explicit[fl.name] {
			cf[fl.name].Set(fl.v)
		}
	}
	if f != nil {
		f.Apply(&c)
	}
	for i, fl := range rf {
		v, ok := cf[fl.name]
		if ok && !fl.v.Equal(df[i].v) && !v.Equal(fl.v) {
			v.Set(fl.v)
		}
	}
	if c.DiscoveryType == DiscoveryConsul {
		c.DiscoveryType = DiscoveryZK
	}
	if !c.EnableGPUTraining {
		if c.EmbeddingPrefetchCapacity <= 0 {
			c.EmbeddingPrefetchCapacity = 1
		}
		c.EnableEmbeddingPostpush = true
	}
	if r.EnableParameterSync {
		c.EnableRealtimeTraining = true
	}
	return c
}
