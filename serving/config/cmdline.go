package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/internal/pytext"
)

// Server types of a TF Serving process.
const (
	ServerPS    = "ps"
	ServerEntry = "entry"
	ServerDense = "dense"
)

// maxNumPS bounds num_ps when listing a PS process's models.
const maxNumPS = 1 << 16

// joinPath joins like Python's os.path.join for two parts.
func joinPath(a, b string) string {
	switch {
	case strings.HasPrefix(b, "/"):
		return b
	case a == "" || strings.HasSuffix(a, "/"):
		return a + b
	}
	return a + "/" + b
}

// ModelServerConfig lists the models a v1 TF Serving process of serverType loads (§1.8;
// reference _gen_model_server_config). serverType "" means the deploy type's own. Unified
// deployments have no v1 process and are an error.
func (c AgentConfig) ModelServerConfig(serverType string) ([]ModelConfig, error) {
	st, err := c.DeployType.CompatServerType(serverType)
	if err != nil {
		return nil, err
	}
	if c.BasePath == "" {
		return nil, errors.New("serving/config: base_path is not set")
	}
	gen := func(name, base string) (ModelConfig, error) {
		return GenModelConfig(name, base, c.VersionPolicy, int64(c.VersionData))
	}
	roughPath := func(name string) (string, error) {
		if c.RoughSortModelLocalPath == "" {
			return "", errors.New("serving/config: rough_sort_model_name is set but rough_sort_model_local_path is not")
		}
		return joinPath(joinPath(c.RoughSortModelLocalPath, c.RoughSortModelName), name), nil
	}
	var out []ModelConfig
	add := func(name, base string) error {
		m, err := gen(name, base)
		if err == nil {
			out = append(out, m)
		}
		return err
	}
	switch st {
	case ServerPS:
		numShard := 1
		if c.NumShard != nil {
			numShard = *c.NumShard
		}
		if numShard <= 0 {
			return nil, fmt.Errorf("serving/config: num_shard %d must be positive", numShard)
		}
		if c.NumPS > maxNumPS {
			return nil, fmt.Errorf("serving/config: num_ps %d exceeds %d", c.NumPS, maxNumPS)
		}
		for i := max(c.Host.ShardID, 0); i < c.NumPS; i += numShard {
			if i%numShard != c.Host.ShardID {
				continue
			}
			name := fmt.Sprintf("ps_%d", i)
			if err := add(name, joinPath(c.BasePath, name)); err != nil {
				return nil, err
			}
			if c.RoughSortModelName != "" && c.RoughSortModelLoadedServer == RoughSortPS {
				name := fmt.Sprintf("ps_item_embedding_%d", i)
				p, err := roughPath(name)
				if err != nil {
					return nil, err
				}
				if err := add(name, p); err != nil {
					return nil, err
				}
			}
		}
	case ServerEntry, ServerDense:
		name := ServerEntry
		if st == ServerDense {
			name = "dense_0"
		}
		if err := add(name, joinPath(c.BasePath, name)); err != nil {
			return nil, err
		}
		ls := c.RoughSortModelLoadedServer
		switch {
		case c.RoughSortResourceConstrained && ls == RoughSortEntry:
			if err := add("entry_item_embedding_0", joinPath(c.BasePath, "entry_item_embedding_0")); err != nil {
				return nil, err
			}
		case c.RoughSortModelName != "" && (ls == RoughSortEntry || ls == RoughSortDense):
			name := ls + "_item_embedding_0"
			p, err := roughPath(name)
			if err != nil {
				return nil, err
			}
			if err := add(name, p); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("serving/config: no v1 TF Serving process for server type %q", st)
	}
	return out, nil
}

// Command returns the v1 agent's TF Serving command line for serverType ("" = the deploy
// type's own) with modelConfigFile as --model_config_file (write ModelServerConfigText
// there first), and the process's gRPC port. args[0] is binary; flags follow in the
// reference's order (§1.8). Run it on a resolved config.
func (c AgentConfig) Command(binary, serverType, modelConfigFile string) (args []string, grpcPort int, err error) {
	st, err := c.DeployType.CompatServerType(serverType)
	if err != nil {
		return nil, 0, err
	}
	if st != ServerPS && st != ServerEntry && st != ServerDense {
		return nil, 0, fmt.Errorf("serving/config: no v1 TF Serving process for server type %q", st)
	}
	args = []string{binary, "--model_config_file=" + modelConfigFile}
	psm, logConf := c.Host.PSM, "../conf/log4j.properties"
	if c.DeployType == DeployMixed && st != ServerEntry {
		psm += "_" + st
		logConf = "../conf/log4j_" + st + ".properties"
	}
	args = append(args, "--archon_rpc_psm="+psm, "--archon_rpc_cluster="+c.Host.TCECluster,
		"--metrics_namespace_prefix="+psm, "--log_conf="+logConf)
	ports := func(grpc, http, archon int) {
		args = append(args, "--port="+strconv.Itoa(grpc), "--rest_api_port="+strconv.Itoa(http),
			"--archon_port="+strconv.Itoa(archon))
		grpcPort = grpc
	}
	entryToPS := func() {
		args = append(args,
			"--archon_entry_to_ps_rpc_timeout="+strconv.Itoa(c.FetchPSTimeoutMS),
			"--archon_entry_to_ps_long_conn_num="+strconv.Itoa(c.FetchPSLongConnNum),
			"--archon_entry_to_ps_rpc_retry="+strconv.Itoa(c.FetchPSRetry),
			"--archon_async_dispatcher_threads="+strconv.Itoa(c.AIOThreadNum))
		if !c.FetchPSLongConnEnable {
			args = append(args, "--archon_entry_to_ps_long_conn_enable=false")
		}
	}
	switch st {
	case ServerPS:
		ports(c.TFSPSPort, c.TFSPSHTTPPort, c.TFSPSArchonPort)
	case ServerDense:
		ports(c.TFSDensePort, c.TFSDenseHTTPPort, c.TFSDenseArchonPort)
		if c.EnableBatching {
			args = append(args, "--enable_batching=true") // repeated below, as the reference does
		}
		entryToPS()
	default:
		ports(c.TFSEntryPort, c.TFSEntryHTTPPort, c.TFSEntryArchonPort)
		entryToPS()
	}
	if c.AgentVersion != 1 {
		args = append(args, "--model_config_file_poll_wait_seconds=0")
	}
	args = append(args, tfsFlags(c.TFServingConfig, func(name string, v reflect.Value) (string, bool, bool) {
		if name != "file_system_poll_wait_seconds" {
			return "", false, false
		}
		switch {
		case c.AgentVersion != 1:
			return "", false, true
		case st == ServerPS:
			return strconv.Itoa(c.FileSystemPollWaitSecondsPS), true, true
		}
		return "", false, false
	})...)
	return args, grpcPort, nil
}

// TFSWrapperOptions are the inputs of the v3 (unified) TF Serving command line.
type TFSWrapperOptions struct {
	Binary          string // the TF Serving binary (tfs.BinaryFromEnv)
	ArchonPort      int
	GRPCPort        int
	HTTPPort        int
	ModelConfigFile string
	// GRPCRemoteOp is whether the binary is gRPC-remote-op capable (see tfs.ScanGRPCRemoteOp).
	GRPCRemoteOp bool
	PSM          string // TCE_PSM
	TCECluster   string // TCE_CLUSTER
}

// WrapperCommand returns the v3 TFSWrapper command line (§1.8) for the TF Serving settings
// of c: args[0] is the binary.
func (c AgentConfig) WrapperCommand(o TFSWrapperOptions) []string {
	args := []string{o.Binary,
		"--model_config_file=" + o.ModelConfigFile,
		"--port=" + strconv.Itoa(o.GRPCPort),
		"--rest_api_port=" + strconv.Itoa(o.HTTPPort),
		"--model_config_file_poll_wait_seconds=60",
		"--archon_port=" + strconv.Itoa(o.ArchonPort),
		"--archon_rpc_psm=" + o.PSM,
		"--archon_rpc_cluster=" + o.TCECluster,
		"--metrics_namespace_prefix=" + o.PSM,
	}
	if !o.GRPCRemoteOp {
		args = append(args, "--archon_entry_to_ps_rpc_timeout="+strconv.Itoa(c.FetchPSTimeoutMS))
	}
	args = append(args, "--conf_file=conf/service.conf", "--log_conf=conf/log4j.properties")
	return append(args, tfsFlags(c.TFServingConfig, func(name string, v reflect.Value) (string, bool, bool) {
		if name != "platform_config_file" {
			return "", false, false
		}
		if p := v.String(); p != "" {
			return p, true, true
		}
		return "conf/platform_config_file.cfg", true, true
	})...)
}

// tfsFlags renders the TFServingConfig fields that differ from their defaults, in
// declaration order, as --name=value (bools lower case, floats as Python prints them).
// special may override a field: it returns (value, emit, handled).
func tfsFlags(t TFServingConfig, special func(name string, v reflect.Value) (string, bool, bool)) []string {
	var out []string
	cur, def := reflect.ValueOf(t), reflect.ValueOf(DefaultTFServingConfig())
	for _, f := range tfsFields {
		v := cur.FieldByIndex(f.index)
		if s, emit, handled := special(f.name, v); handled {
			if emit {
				out = append(out, "--"+f.name+"="+s)
			}
			continue
		}
		if v.Equal(def.FieldByIndex(f.index)) {
			continue
		}
		out = append(out, "--"+f.name+"="+formatValue(v))
	}
	return out
}

func formatValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64:
		return pytext.Float(v.Float())
	}
	return v.String()
}
