package config

import (
	"fmt"
	"reflect"
	"strings"
)

// TFSHome is the serving installation root of the reference deployment.
const TFSHome = "/opt/tiger/monolith_serving"

// DefaultPlatformConfigFile is where Resolve points platform_config_file when the conf leaves it unset.
const DefaultPlatformConfigFile = TFSHome + "/conf/platform_config_file.cfg"

// DeployType is the role of an agent's TF Serving process(es): one of the Deploy* constants,
// always lower case; "" means unset.
type DeployType string

// Deploy types (§1.6).
const (
	DeployPS      DeployType = "ps"
	DeployEntry   DeployType = "entry"
	DeployDense   DeployType = "dense"
	DeployMixed   DeployType = "mixed" // ps and entry (and dense) processes in one container
	DeployUnified DeployType = "unified"
)

// ParseDeployType accepts a deploy type in any case.
func ParseDeployType(s string) (DeployType, error) {
	switch d := DeployType(strings.ToLower(s)); d {
	case DeployPS, DeployEntry, DeployDense, DeployMixed, DeployUnified:
		return d, nil
	}
	return "", fmt.Errorf("serving/config: unknown deploy type %q (want ps, entry, dense, mixed or unified)", s)
}

// CompatServerType is the reference's DeployType.compat_server_type: the server type a
// process of this deployment runs when asked for st ("" = unspecified).
func (d DeployType) CompatServerType(st string) (string, error) {
	switch {
	case st == "" || st == string(DeployMixed):
		if d == DeployMixed {
			return "", fmt.Errorf("serving/config: deploy type mixed needs an explicit server type, got %q", st)
		}
		return string(d), nil
	case d == DeployMixed:
		return st, nil
	case st != string(d):
		return "", fmt.Errorf("serving/config: server type %q is not compatible with deploy type %q", st, d)
	}
	return st, nil
}

// TFServingConfig holds the settings forwarded to TF Serving as flags when they differ from
// their defaults (reference TfServingConfig). Strings are null when empty. Field order is
// the reference's declaration order, which is the order of the flags.
type TFServingConfig struct {
	EnableBatching                         bool    `conf:"enable_batching"`
	AllowVersionLabelsForUnavailableModels bool    `conf:"allow_version_labels_for_unavailable_models"`
	BatchingParametersFile                 string  `conf:"batching_parameters_file"`
	NumLoadThreads                         int     `conf:"num_load_threads"`
	NumUnloadThreads                       int     `conf:"num_unload_threads"`
	MaxNumLoadRetries                      int     `conf:"max_num_load_retries"`
	LoadRetryIntervalMicros                int     `conf:"load_retry_interval_micros"`
	FileSystemPollWaitSeconds              int     `conf:"file_system_poll_wait_seconds"`
	FlushFilesystemCaches                  bool    `conf:"flush_filesystem_caches"`
	TensorflowSessionParallelism           int     `conf:"tensorflow_session_parallelism"`
	TensorflowIntraOpParallelism           int     `conf:"tensorflow_intra_op_parallelism"`
	TensorflowInterOpParallelism           int     `conf:"tensorflow_inter_op_parallelism"`
	SSLConfigFile                          string  `conf:"ssl_config_file"`
	PlatformConfigFile                     string  `conf:"platform_config_file"`
	PerProcessGPUMemoryFraction            float64 `conf:"per_process_gpu_memory_fraction"`
	AllowGrowth                            bool    `conf:"allow_growth"`
	SavedModelTags                         string  `conf:"saved_model_tags"`
	GRPCChannelArguments                   string  `conf:"grpc_channel_arguments"`
	GRPCMaxThreads                         int     `conf:"grpc_max_threads"`
	EnableModelWarmup                      bool    `conf:"enable_model_warmup"`
	Version                                string  `conf:"version"`
	RemoveUnusedFieldsFromBundleMetagraph  bool    `conf:"remove_unused_fields_from_bundle_metagraph"`
	EnableSignatureMethodNameCheck         bool    `conf:"enable_signature_method_name_check"`
	XLACPUCompilationEnabled               bool    `conf:"xla_cpu_compilation_enabled"`
	EnableProfiler                         bool    `conf:"enable_profiler"`
}

// DefaultTFServingConfig returns the reference defaults.
func DefaultTFServingConfig() TFServingConfig {
	return TFServingConfig{
		MaxNumLoadRetries:                     5,
		LoadRetryIntervalMicros:               60 * 1000 * 1000,
		FileSystemPollWaitSeconds:             1,
		FlushFilesystemCaches:                 true,
		AllowGrowth:                           true,
		EnableModelWarmup:                     true,
		RemoveUnusedFieldsFromBundleMetagraph: true,
		EnableProfiler:                        true,
	}
}

// AgentConfig is the serving agent's configuration (reference AgentConfig): every conf key,
// with the reference default. Strings are null when empty; ports are unset when 0; NumShard
// and ReplicaID are nil when unset. Parse fills the conf fields; Resolve applies the
// environment, the deploy-type rules and port allocation and fills Host.
type AgentConfig struct {
	TFServingConfig

	BZID                         string     `conf:"bzid"`
	BaseName                     string     `conf:"base_name"`
	BasePath                     string     `conf:"base_path"`
	NumPS                        int        `conf:"num_ps"`
	NumShard                     *int       `conf:"num_shard"`
	DeployType                   DeployType `conf:"deploy_type"`
	ReplicaID                    *int       `conf:"replica_id"`
	StandAloneServing            bool       `conf:"stand_alone_serving"`
	ZKServers                    string     `conf:"zk_servers"`
	ProxyPort                    int        `conf:"proxy_port"`
	TFSEntryPort                 int        `conf:"tfs_entry_port"`
	TFSEntryHTTPPort             int        `conf:"tfs_entry_http_port"`
	TFSEntryArchonPort           int        `conf:"tfs_entry_archon_port"`
	TFSPSPort                    int        `conf:"tfs_ps_port"`
	TFSPSHTTPPort                int        `conf:"tfs_ps_http_port"`
	TFSPSArchonPort              int        `conf:"tfs_ps_archon_port"`
	DenseAlone                   bool       `conf:"dense_alone"`
	DenseServiceNum              int        `conf:"dense_service_num"`
	TFSDensePort                 int        `conf:"tfs_dense_port"`
	TFSDenseHTTPPort             int        `conf:"tfs_dense_http_port"`
	TFSDenseArchonPort           int        `conf:"tfs_dense_archon_port"`
	AgentPort                    int        `conf:"agent_port"`
	UpdateModelStatusInterval    int        `conf:"update_model_status_interval"`
	AgentVersion                 int        `conf:"agent_version"`
	MaxWaitingSec                int        `conf:"max_waiting_sec"`  // unused by the reference
	PreloadJemalloc              bool       `conf:"preload_jemalloc"` // unused by the reference
	VersionPolicy                string     `conf:"version_policy"`
	VersionData                  int        `conf:"version_data"`
	FetchPSTimeoutMS             int        `conf:"fetch_ps_timeout_ms"`
	FetchPSLongConnNum           int        `conf:"fetch_ps_long_conn_num"`
	FetchPSLongConnEnable        bool       `conf:"fetch_ps_long_conn_enable"`
	FetchPSRetry                 int        `conf:"fetch_ps_retry"`
	AIOThreadNum                 int        `conf:"aio_thread_num"`
	FileSystemPollWaitSecondsPS  int        `conf:"file_system_poll_wait_seconds_ps"`
	RoughSortModelName           string     `conf:"rough_sort_model_name"`
	RoughSortModelLocalPath      string     `conf:"rough_sort_model_local_path"`
	RoughSortModelLoadedServer   string     `conf:"rough_sort_model_loaded_server"` // none, entry, ps or dense
	RoughSortModelP2PPath        string     `conf:"rough_sort_model_p2p_path"`
	RoughSortResourceConstrained bool       `conf:"rough_sort_resource_constrained"`
	DCAware                      bool       `conf:"dc_aware"`
	LayoutPattern                string     `conf:"layout_pattern"`
	LayoutFilters                []string   `conf:"layout_filters"` // every occurrence, in order
	TFSPortArchon                int        `conf:"tfs_port_archon"`
	TFSPortGRPC                  int        `conf:"tfs_port_grpc"`
	TFSPortHTTP                  int        `conf:"tfs_port_http"`
	UseMetrics                   bool       `conf:"use_metrics"`

	// Host is the environment snapshot taken by Resolve; zero before.
	Host HostEnv `conf:"-"`
}

// Default returns an AgentConfig holding the reference defaults.
func Default() AgentConfig {
	return AgentConfig{
		TFServingConfig:            DefaultTFServingConfig(),
		NumPS:                      1,
		DenseServiceNum:            3,
		UpdateModelStatusInterval:  1,
		AgentVersion:               1,
		MaxWaitingSec:              1200,
		PreloadJemalloc:            true,
		VersionPolicy:              "latest",
		VersionData:                1,
		FetchPSTimeoutMS:           200,
		FetchPSLongConnNum:         100,
		FetchPSLongConnEnable:      true,
		FetchPSRetry:               2,
		AIOThreadNum:               30,
		RoughSortModelLoadedServer: "entry",
		UseMetrics:                 true,
	}
}

// Rough-sort model placements and name prefixes.
const (
	RoughSortNone  = "none"
	RoughSortEntry = "entry"
	RoughSortPS    = "ps"
	RoughSortDense = "dense"
)

// field describes one conf key of AgentConfig.
type field struct {
	name  string
	index []int
	typ   reflect.Type
}

// fieldsOf lists the conf keys of a struct type in declaration order (embedded structs inline).
func fieldsOf(t reflect.Type, prefix []int) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		idx := append(append([]int(nil), prefix...), i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, fieldsOf(f.Type, idx)...)
			continue
		}
		name := f.Tag.Get("conf")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, field{name: name, index: idx, typ: f.Type})
	}
	return out
}

// agentFields and tfsFields are read-only tables built once from the struct tags.
var (
	agentFields = fieldsOf(reflect.TypeFor[AgentConfig](), nil)
	tfsFields   = fieldsOf(reflect.TypeFor[TFServingConfig](), nil)
	fieldByName = func() map[string]field {
		m := make(map[string]field, len(agentFields))
		for _, f := range agentFields {
			m[f.name] = f
		}
		return m
	}()
)

// Keys returns every conf key AgentConfig accepts, in declaration order.
func Keys() []string {
	out := make([]string, len(agentFields))
	for i, f := range agentFields {
		out[i] = f.name
	}
	return out
}

// clone returns a deep copy (pointers and the filter slice are not shared).
func (c AgentConfig) clone() AgentConfig {
	if c.NumShard != nil {
		v := *c.NumShard
		c.NumShard = &v
	}
	if c.ReplicaID != nil {
		v := *c.ReplicaID
		c.ReplicaID = &v
	}
	if c.LayoutFilters != nil {
		c.LayoutFilters = append([]string(nil), c.LayoutFilters...)
	}
	return c
}
