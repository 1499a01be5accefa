package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/monolith-go/monolith/internal/tlsconf"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/modelserver"
	"github.com/monolith-go/monolith/serving/tfs"
)

// tfsIgnoredFlags are the tensorflow_model_server flags (and the ByteDance/archon ones the
// agent passes, §1.8) that the fake accepts and ignores, with a value or boolean. Any other
// flag is a usage error, as it is for TF Serving.
func tfsIgnoredFlags() (values, bools []string) {
	values = []string{
		"rest_api_port", "rest_api_num_threads", "rest_api_timeout_in_ms", "grpc_socket_path",
		"grpc_channel_arguments", "grpc_max_threads", "batching_parameters_file",
		"num_load_threads", "num_unload_threads", "max_num_load_retries", "load_retry_interval_micros",
		"tensorflow_session_parallelism", "tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism",
		"ssl_config_file", "platform_config_file", "per_process_gpu_memory_fraction", "saved_model_tags",
		"monitoring_config_file", "version",
		"archon_port", "archon_rpc_psm", "archon_rpc_cluster", "metrics_namespace_prefix", "log_conf", "conf_file",
		"archon_entry_to_ps_rpc_timeout", "archon_entry_to_ps_long_conn_num", "archon_entry_to_ps_rpc_retry",
		"archon_async_dispatcher_threads",
	}
	bools = []string{
		"enable_batching", "allow_version_labels_for_unavailable_models", "flush_filesystem_caches",
		"allow_growth", "enable_model_warmup", "remove_unused_fields_from_bundle_metagraph",
		"enable_signature_method_name_check", "xla_cpu_compilation_enabled", "enable_profiler",
		"archon_entry_to_ps_long_conn_enable",
	}
	return values, bools
}

// runFakeTFServing is `monolith fake-tfserving`: the TF Serving double of package
// serving/tfs (decision S15) behind tensorflow_model_server's command line, serving until
// the context ends (SIGINT, SIGTERM). It binds --fake_host (127.0.0.1), not every
// interface, and logs "fake-tfserving listening on ADDR" once it accepts connections.
func runFakeTFServing(ctx context.Context, args []string, _, stderr io.Writer) error {
	return runTFServing(ctx, "fake-tfserving", args, stderr, nil)
}

// runServe is `monolith serve`: a model server for the versions `monolith export --model`
// writes, with TF Serving's gRPC API (ModelService, PredictionService GetModelMetadata and
// Predict) and command line, so that the agent runs it as its TF Serving binary.
func runServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	return runTFServing(ctx, "serve", args, stderr, &modelserver.Loader{})
}

// runTFServing is the command line both share; loader nil is the double.
func runTFServing(ctx context.Context, cmd string, args []string, stderr io.Writer, loader *modelserver.Loader) error {
	fs := newFlagSet(cmd, stderr)
	hostFlag, stepFlag := "fake_host", "fake_step"
	if loader != nil {
		hostFlag, stepFlag = "host", "state_step"
		fs.IntVar(&loader.MaxRows, "max_rows", modelserver.DefaultMaxRows, "most rows of one Predict request; more is INVALID_ARGUMENT")
		fs.IntVar(&loader.Workers, "workers", 0, "requests one model version runs at once (0: GOMAXPROCS)")
	}
	port := fs.Int("port", 8500, "gRPC port (0: an ephemeral port, logged)")
	cfgFile := fs.String("model_config_file", "", "text-format ModelServerConfig to serve")
	cfgPoll := fs.Int("model_config_file_poll_wait_seconds", 0, "re-read --model_config_file every N seconds (0: once)")
	fsPoll := fs.Int("file_system_poll_wait_seconds", 1, "rescan the model base paths every N seconds (0: only when a config is applied)")
	modelName := fs.String("model_name", "default", "model name when --model_config_file is not given")
	basePath := fs.String("model_base_path", "", "base path of the one model served without --model_config_file")
	host := fs.String(hostFlag, "127.0.0.1", "address to bind (TF Serving binds every interface)")
	step := fs.Duration(stepFlag, tfs.DefaultStep, "time between two states of a model version")
	verbose := fs.Bool("v", false, "verbose logging (every version state change)")
	tlsc := tlsconf.AddFlags(fs)
	values, bools := tfsIgnoredFlags()
	for _, n := range values {
		fs.String(n, "", "accepted and ignored (TF Serving flag)")
	}
	for _, n := range bools {
		fs.Bool(n, false, "accepted and ignored (TF Serving flag)")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: %s takes no arguments (got %q)", errUsage, cmd, fs.Args())
	}
	if *cfgFile != "" && *basePath != "" {
		return fmt.Errorf("%w: %s: --model_config_file and --model_base_path exclude each other", errUsage, cmd)
	}
	if *cfgPoll < 0 || *fsPoll < 0 || *port < 0 || *port > 65535 {
		return fmt.Errorf("%w: %s: negative poll period or bad port", errUsage, cmd)
	}
	log := loggerAt(stderr, *verbose, slog.LevelInfo)
	opts := tfs.FakeOptions{
		Listen:             net.JoinHostPort(*host, strconv.Itoa(*port)),
		ReusePort:          true, // as TF Serving (gRPC) binds
		ModelConfigFile:    *cfgFile,
		ConfigPollWait:     time.Duration(*cfgPoll) * time.Second,
		FileSystemPollWait: time.Duration(*fsPoll) * time.Second,
		Step:               *step,
		Logger:             log,
	}
	if loader != nil {
		loader.Log = log
		opts.Loader = *loader
	}
	if *basePath != "" {
		opts.Config = &pb.ModelServerConfig{Config: &pb.ModelServerConfig_ModelConfigList{ModelConfigList: &pb.ModelConfigList{
			Config: []*pb.ModelConfig{{Name: *modelName, BasePath: *basePath, ModelPlatform: "tensorflow"}},
		}}}
	}
	var err error
	if opts.TLS, err = tlsServer(tlsc); err != nil {
		return err
	}
	f, err := tfs.NewFake(opts)
	if errors.Is(err, tfs.ErrInvalidOptions) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	log.Info(cmd+" listening on "+f.Addr(), "addr", f.Addr(), "model_config_file", *cfgFile)
	if err := f.Serve(ctx); err != nil && !errors.Is(err, tfs.ErrClosed) {
		return err
	}
	return nil
}
