package runconfig

import (
	"flag"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFlagPrecedence: code-set non-default values beat flags, flags beat defaults, and a
// value set to its default in code cannot be told from an unset one.
func TestFlagPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  func(*RunnerConfig)
		args  []string
		check func(RunnerConfig) bool
	}{
		{"flag beats default", nil, []string{"--num_ps=4"}, func(c RunnerConfig) bool { return c.NumPS == 4 }},
		{"code beats flag", func(c *RunnerConfig) { c.NumPS = 2 }, []string{"--num_ps=4"}, func(c RunnerConfig) bool { return c.NumPS == 2 }},
		{"code set to the default loses to the flag", func(c *RunnerConfig) { c.NumPS = 0 }, []string{"--num_ps=4"}, func(c RunnerConfig) bool { return c.NumPS == 4 }},
		{"flag equal to the default changes nothing", func(c *RunnerConfig) { c.NumPS = 2 }, []string{"--num_ps=0"}, func(c RunnerConfig) bool { return c.NumPS == 2 }},
		{"string flag", nil, []string{"--discovery_type=mlp", "--zk_server=z:2181"}, func(c RunnerConfig) bool {
			return c.DiscoveryType == "mlp" && c.ZKServer == "z:2181"
		}},
		{"bool flag against a true default", nil, []string{"--disable_native_metrics=false"}, func(c RunnerConfig) bool { return !c.DisableNativeMetrics }},
		{"float and int64 knobs", nil, []string{"--monolith_grpc_worker_service_handler_multiplier=2.5", "--barrier_timeout_ms=500", "--connect_retries=7", "--retry_backoff_ms=20"},
			func(c RunnerConfig) bool {
				r, b := c.Retry()
				return c.GRPCWorkerHandlerMultiple == 2.5 && c.BarrierTimeout() == 500*time.Millisecond && r == 7 && b == 20*time.Millisecond
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			if tc.code != nil {
				tc.code(&c)
			}
			parse(t, tc.args...).Apply(&c)
			if !tc.check(c) {
				t.Errorf("%+v", c)
			}
		})
	}
}

// TestToRunnerConfig: the merge table of to_runner_config.
func TestToRunnerConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		run   func(*RunConfig)
		args  []string
		check func(RunnerConfig) bool
	}{
		{"defaults: CONSUL becomes ZK, CPU prefetch and postpush", nil, nil, func(c RunnerConfig) bool {
			return c.DiscoveryType == DiscoveryZK && c.EmbeddingPrefetchCapacity == 1 && c.EnableEmbeddingPostpush && !c.EnableRealtimeTraining
		}},
		{"explicit fields carried", func(r *RunConfig) {
			r.ModelDir, r.RestoreDir, r.RestoreCkpt, r.KafkaTopics = "/m", "/r", "model.ckpt-3", "a,b"
		},
			nil, func(c RunnerConfig) bool {
				return c.ModelDir == "/m" && c.RestoreDir == "/r" && c.RestoreCkpt == "model.ckpt-3" && c.KafkaTopics == "a,b"
			}},
		{"flag fills an explicit field left at its default", nil, []string{"--model_dir=/flag"}, func(c RunnerConfig) bool { return c.ModelDir == "/flag" }},
		{"an explicit user value beats the flag", func(r *RunConfig) { r.ModelDir = "/user" }, []string{"--model_dir=/flag"}, func(c RunnerConfig) bool { return c.ModelDir == "/user" }},
		{"shared non-default field copied over the flag", func(r *RunConfig) { r.NumPS = 3 }, []string{"--num_ps=8"}, func(c RunnerConfig) bool { return c.NumPS == 3 }},
		{"shared default field keeps the flag", nil, []string{"--num_ps=8"}, func(c RunnerConfig) bool { return c.NumPS == 8 }},
		{"flagged discovery other than consul stays", nil, []string{"--discovery_type=mlp"}, func(c RunnerConfig) bool { return c.DiscoveryType == DiscoveryMLP }},
		{"GPU training keeps prefetch 0, no postpush", nil, []string{"--enable_gpu_training"}, func(c RunnerConfig) bool {
			return c.EmbeddingPrefetchCapacity == 0 && !c.EnableEmbeddingPostpush
		}},
		{"prefetch flag above 1 kept", nil, []string{"--embedding_prefetch_capacity=4"}, func(c RunnerConfig) bool { return c.EmbeddingPrefetchCapacity == 4 }},
		{"parameter sync turns realtime on", func(r *RunConfig) { r.EnableParameterSync = true }, nil, func(c RunnerConfig) bool { return c.EnableRealtimeTraining }},
		{"distributed knobs", func(r *RunConfig) { r.ConnectRetries, r.RetryBackoffMs, r.BarrierTimeoutMs = 9, 250, 3000 }, nil, func(c RunnerConfig) bool {
			return c.ConnectRetries == 9 && c.RetryBackoffMs == 250 && c.BarrierTimeoutMs == 3000
		}},
		{"disable_native_metrics false carried", func(r *RunConfig) { r.DisableNativeMetrics = false }, nil, func(c RunnerConfig) bool { return !c.DisableNativeMetrics }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := RunDefaults()
			if tc.run != nil {
				tc.run(&r)
			}
			var f *Flags
			if tc.args != nil {
				f = parse(t, tc.args...)
			}
			c := r.ToRunnerConfig(f)
			if !tc.check(c) {
				t.Errorf("%+v", c)
			}
			if err := c.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestUserOverridesEnvPostInit: user-override extraction, the exported environment and the
// post-init side effects.
func TestUserOverridesEnvPostInit(t *testing.T) {
	r := RunDefaults()
	r.NumPS, r.ModelDir, r.BarrierTimeoutMs, r.DisableNativeMetrics = 2, "/m", 5, false
	if got := r.UserOverrides(); !slices.Equal(got, []string{"num_ps", "model_dir", "disable_native_metrics", "barrier_timeout_ms"}) {
		t.Errorf("user overrides %v", got)
	}
	if got := RunDefaults().UserOverrides(); len(got) != 0 {
		t.Errorf("overrides of the defaults: %v", got)
	}
	c := Defaults()
	if got := c.Env(); !slices.Equal(got, []string{"TF_GRPC_WORKER_CACHE_THREADS=16", "MONOLITH_GRPC_WORKER_SERVICE_HANDLER_MULTIPLIER=1.0"}) {
		t.Errorf("env %v", got)
	}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	c.EnableGPUTraining, c.EnablePartialSyncTraining, c.KafkaTopics, c.KafkaServers, c.RestoreCkpt = true, true, "t1,t2", "k:9092", "model.ckpt-5"
	set, err := c.PostInit(parse(t), env(map[string]string{"OMPI_COMM_WORLD_RANK": "3"}))
	if err != nil || c.Index != 3 {
		t.Fatalf("PostInit: index %d, %v", c.Index, err)
	}
	if want := map[string]string{"kafka_topics": "t1,t2", "kafka_servers": "k:9092", "restore_ckpt": "model.ckpt-5"}; !maps.Equal(set, want) {
		t.Errorf("flags set %v, want %v", set, want)
	}
	if set, _ := c.PostInit(parse(t, "--restore_ckpt=other"), env(nil)); set["restore_ckpt"] != "" {
		t.Errorf("restore_ckpt flag already set, but PostInit sets it: %v", set)
	}
	c.Index = 0
	if _, err := c.PostInit(nil, env(map[string]string{"OMPI_COMM_WORLD_RANK": "x"})); err == nil {
		t.Error("bad OMPI rank accepted")
	}
}

// TestDecodeValidate: JSON over the defaults, unknown keys and bad enums name the field.
func TestDecodeValidate(t *testing.T) {
	c, err := Decode([]byte(`{"num_ps": 2, "discovery_type": "mlp", "barrier_timeout_ms": 50}`))
	if err != nil || c.NumPS != 2 || c.DiscoveryType != "mlp" || c.BarrierTimeoutMs != 50 || c.NumWorkers != 1 {
		t.Fatalf("Decode = %+v, %v", c, err)
	}
	for in, want := range map[string]string{
		`{"nope": 1}`:                         "nope",
		`{"discovery_type": "etcd"}`:          "discovery_type",
		`{"zk_watch_address_family": "ipv5"}`: "zk_watch_address_family",
		`{"mode": "serve"}`:                   "mode",
		`{"barrier_timeout_ms": 0}`:           "barrier_timeout_ms",
		`{"num_ps": -1}`:                      "num_ps",
		`{"num_ps": "two"}`:                   "num_ps",
	} {
		if _, err := Decode([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%s) = %v, want an error naming %s", in, err, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"num_ps": 2, "discovery_type": "zk"}`))
	f.Add([]byte(`{"monolith_grpc_worker_service_handler_multiplier": 1e300}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		if c.Validate() != nil || c.BarrierTimeoutMs <= 0 {
			t.Fatalf("Decode accepted an invalid config %+v", c)
		}
		_ = c.Env()
	})
}
