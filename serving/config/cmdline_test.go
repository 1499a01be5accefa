package config

import (
	"fmt"
	"strings"
	"testing"
)

var cmdEnv = map[string]string{
	"PORT": "8600", "PORT2": "8602", "PORT3": "8500", "PORT4": "8501", "PORT5": "8510", "PORT6": "8511", "PORT7": "8610",
	"PORT8": "8520", "PORT9": "8521", "PORT10": "8620", "TCE_PSM": "data.monolith.serving", "TCE_CLUSTER": "default",
	"SHARD_ID": "1", "MONOLITH_HOST_SHARD_N": "2",
}

func resolved(t *testing.T, conf string) AgentConfig {
	t.Helper()
	c, err := mustParse(t, conf).Resolve(MapEnv(cmdEnv), seqPorts())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Command lines for each process type, against testdata/cmdline.golden. Each case also
// writes the model config the process would load.
func TestCommandGolden(t *testing.T) {
	base := "bzid b\nbase_name m\nbase_path hdfs:///x/exported_models\nnum_ps 5\n"
	var sb strings.Builder
	for _, tc := range []struct {
		name, conf, serverType string
		wantPort               int
	}{
		{"entry v1 defaults", base + "deploy_type entry", "", 8500},
		{"entry v1 poll 3, long conn off", base + "deploy_type entry\nfile_system_poll_wait_seconds 3\nfetch_ps_long_conn_enable false", "entry", 8500},
		{"ps v1 (file_system_poll_wait_seconds_ps always)", base + "deploy_type ps\nfile_system_poll_wait_seconds 9\nfile_system_poll_wait_seconds_ps 5", "", 8500},
		{"dense v1 batching (flag twice)", base + "deploy_type dense\ndense_alone true\nenable_batching true\nper_process_gpu_memory_fraction 0.5\nversion v1\nsaved_model_tags serve,gpu", "", 8500},
		{"mixed ps", base + "stand_alone_serving true\nrough_sort_model_name rs\nrough_sort_model_local_path /rs\nrough_sort_model_loaded_server ps", "ps", 8510},
		{"mixed entry", base + "stand_alone_serving true\nrough_sort_resource_constrained true", "entry", 8500},
		{"mixed dense", base + "deploy_type mixed\ndense_alone true\nrough_sort_model_name rs\nrough_sort_model_local_path /rs/\nrough_sort_model_loaded_server dense\nversion_policy specific\nversion_data 7", "dense", 8520},
		{"ps v2", base + "deploy_type ps\nagent_version 2\nfile_system_poll_wait_seconds 9\nload_retry_interval_micros 30 * 1000 * 1000\nallow_growth false", "ps", 8500},
	} {
		c := resolved(t, tc.conf)
		args, port, err := c.Command("/opt/tiger/monolith_serving/bin/tensorflow_model_server", tc.serverType, "/tmp/model.cfg")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if port != tc.wantPort {
			t.Errorf("%s: port %d, want %d", tc.name, port, tc.wantPort)
		}
		models, err := c.ModelServerConfig(tc.serverType)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		fmt.Fprintf(&sb, "## %s\n%s\n%s\n", tc.name, strings.Join(args, " "), ModelServerConfigText(models))
	}
	checkGolden(t, "cmdline.golden", sb.String())
}

// utils_test.test_get_cmd_and_port: agent.conf, agent_version 2, ps.
func TestCommandAgentConf(t *testing.T) {
	c, err := Load("testdata/agent.conf")
	if err != nil {
		t.Fatal(err)
	}
	c, err = c.Resolve(MapEnv(nil), seqPorts())
	if err != nil {
		t.Fatal(err)
	}
	c.AgentVersion = 2
	args, _, err := c.Command("tensorflow_model_server", "ps", "/tmp/m.cfg")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(args, " "), "model_config_file_poll_wait_seconds") {
		t.Errorf("%q", args)
	}
}

func TestCommandErrors(t *testing.T) {
	for _, tc := range []struct{ conf, st, err string }{
		{"stand_alone_serving true", "", "needs an explicit server type"},
		{"deploy_type entry", "ps", `server type "ps" is not compatible with deploy type "entry"`},
		{"deploy_type unified", "", `no v1 TF Serving process for server type "unified"`},
	} {
		c := resolved(t, "base_path /b\n"+tc.conf)
		if _, _, err := c.Command("bin", tc.st, "f"); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s/%s: %v, want %q", tc.conf, tc.st, err, tc.err)
		}
		if _, err := c.ModelServerConfig(tc.st); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("models %s/%s: %v, want %q", tc.conf, tc.st, err, tc.err)
		}
	}
	c := resolved(t, "deploy_type entry\nbase_path /b\nrough_sort_model_name rs")
	if _, err := c.ModelServerConfig(""); err == nil || !strings.Contains(err.Error(), "rough_sort_model_local_path") {
		t.Errorf("rough sort without local path: %v", err)
	}
	c = resolved(t, "deploy_type entry\nbase_path /b\nversion_policy newest")
	if _, err := c.ModelServerConfig(""); err == nil {
		t.Error("bad version policy accepted")
	}
}

// The v3 TFSWrapper command for the serving doc's demo.conf.
func TestWrapperCommandGolden(t *testing.T) {
	c, err := Load("testdata/demo.conf")
	if err != nil {
		t.Fatal(err)
	}
	c, err = c.Resolve(MapEnv(cmdEnv), seqPorts())
	if err != nil {
		t.Fatal(err)
	}
	o := TFSWrapperOptions{Binary: "/bin/tfs", ArchonPort: c.TFSPortArchon, GRPCPort: c.TFSPortGRPC, HTTPPort: c.TFSPortHTTP,
		ModelConfigFile: "/tmp/tmpabc", PSM: c.Host.PSM, TCECluster: c.Host.TCECluster}
	var sb strings.Builder
	sb.WriteString("## archon binary\n" + strings.Join(c.WrapperCommand(o), " ") + "\n")
	o.GRPCRemoteOp = true
	sb.WriteString("## grpc binary\n" + strings.Join(c.WrapperCommand(o), " ") + "\n")
	d := Default() // unresolved: platform_config_file unset
	sb.WriteString("## defaults, unset platform file\n" + strings.Join(d.WrapperCommand(TFSWrapperOptions{Binary: "tfs"}), " ") + "\n")
	checkGolden(t, "wrapper_cmdline.golden", sb.String())
}
