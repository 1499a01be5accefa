package config

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fixtures"
)

func intp(v int) *int { return &v }

// parseString parses text, collecting warnings; includes are refused.
func parseString(t *testing.T, text string) (AgentConfig, []Warning, error) {
	t.Helper()
	var ws []Warning
	p := Parser{
		Open: func(string) (io.ReadCloser, error) { return nil, fs.ErrNotExist },
		Warn: func(w Warning) { ws = append(ws, w) },
	}
	c, err := p.Parse(strings.NewReader(text), "t.conf")
	return c, ws, err
}

// The keys and values of the reference.s test conf (monolith/agent_service/agent.conf), a test vector.
func TestAgentConf(t *testing.T) {
	var ws []Warning
	c, err := Parser{Warn: func(w Warning) { ws = append(ws, w) }}.Load("testdata/agent.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.BZID, want.BaseName, want.BasePath = "predict_ctr", "predict_ctr", "hdfs:///test/data"
	want.NumPS = 10
	want.DeployType = DeployEntry // from the legacy server_type key
	want.ZKServers = "127.0.0.1:12345"
	want.MaxWaitingSec = 600
	want.LayoutFilters = []string{"ps_0", "ps_1"}
	want.StandAloneServing = true
	want.UpdateModelStatusInterval = 10
	want.NumShard = intp(1)
	want.DCAware = true
	if !reflect.DeepEqual(c, want) {
		t.Errorf("agent.conf:\n got %+v\nwant %+v", c, want)
	}
	if len(ws) != 0 {
		t.Errorf("warnings: %v", ws)
	}
}

// A standalone conf in the style of the reference serving doc.s example, whose inline comments broke the
// reference parser (§5.1): S1 strips them.
func TestDemoConfInlineComments(t *testing.T) {
	c, err := Load("testdata/demo.conf")
	if err != nil {
		t.Fatal(err)
	}
	if c.DeployType != DeployUnified || c.BZID != "monolith_serving_test" || c.AgentVersion != 3 {
		t.Errorf("deploy %q bzid %q agent_version %d", c.DeployType, c.BZID, c.AgentVersion)
	}
	if got, want := c.LayoutFilters, []string{"entry; True", "ps_{i}; True"}; !reflect.DeepEqual(got, want) {
		t.Errorf("layout_filters %q, want %q", got, want)
	}
	if c.ZKServers != "127.0.0.1:2181,127.0.0.1:2182" {
		t.Errorf("zk_servers %q keeps its trailing blank", c.ZKServers)
	}
	if c.FetchPSTimeoutMS != 10000 || c.FileSystemPollWaitSeconds != 60 || c.LoadRetryIntervalMicros != 60000000 {
		t.Errorf("numbers: %d %d %d", c.FetchPSTimeoutMS, c.FileSystemPollWaitSeconds, c.LoadRetryIntervalMicros)
	}
	if c.SavedModelTags != "" || c.GRPCChannelArguments != "" {
		t.Errorf("none must be null: %q %q", c.SavedModelTags, c.GRPCChannelArguments)
	}
}

// S1: include is relative to the including file; list keys collect across files, scalars
// take the last occurrence.
func TestInclude(t *testing.T) {
	c, err := Load("testdata/include/main.conf")
	if err != nil {
		t.Fatal(err)
	}
	if c.BZID != "gip" || c.DeployType != DeployUnified || c.AgentVersion != 3 {
		t.Errorf("bzid %q deploy %q agent_version %d (want last wins = 3)", c.BZID, c.DeployType, c.AgentVersion)
	}
	if want := []string{"entry; True", "ps_{i}; i % 2 == 0"}; !reflect.DeepEqual(c.LayoutFilters, want) {
		t.Errorf("layout_filters %q, want %q", c.LayoutFilters, want)
	}
}

func TestIncludeErrors(t *testing.T) {
	files := map[string]string{
		"a.conf":   "include b.conf\n",
		"b.conf":   "include a.conf\n",
		"m.conf":   "bzid x\n\ninclude missing.conf\n",
		"e.conf":   "include\n",
		"bad.conf": "ok.conf\n",
	}
	p := Parser{Open: func(name string) (io.ReadCloser, error) {
		s, ok := files[name]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return io.NopCloser(strings.NewReader(s)), nil
	}}
	for name, want := range map[string]string{
		"a.conf": "include cycle: a.conf -> b.conf -> a.conf",
		"m.conf": "m.conf:3: include: open missing.conf",
		"e.conf": "e.conf:1: include: include without a path",
	} {
		_, err := p.Load(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
	if _, err := p.Load("m.conf"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing include: %v does not wrap fs.ErrNotExist", err)
	}
	// A missing top-level file is an error too (the reference silently used defaults).
	if _, err := Load("testdata/no-such.conf"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing conf: %v", err)
	}
}

func TestSyntax(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		check      func(AgentConfig) bool
		warnings   []string
	}{
		{"space", "bzid a b", func(c AgentConfig) bool { return c.BZID == "a b" }, nil},
		{"equals", "bzid=x", func(c AgentConfig) bool { return c.BZID == "x" }, nil},
		{"spaced equals", "bzid = x", func(c AgentConfig) bool { return c.BZID == "x" }, nil},
		{"tab", "bzid\t\tx", func(c AgentConfig) bool { return c.BZID == "x" }, nil},
		{"crlf", "bzid x\r\nnum_ps 3\r\n", func(c AgentConfig) bool { return c.BZID == "x" && c.NumPS == 3 }, nil},
		{"cr only", "bzid x\rnum_ps 3", func(c AgentConfig) bool { return c.BZID == "x" && c.NumPS == 3 }, nil},
		{"comment lines", "# bzid y\n   # x\nbzid x", func(c AgentConfig) bool { return c.BZID == "x" }, nil},
		{"inline comment trimmed", "deploy_type ps   # the role", func(c AgentConfig) bool { return c.DeployType == DeployPS }, nil},
		{"scalar last wins", "num_ps 2\nnum_ps 3\nnum_ps 4", func(c AgentConfig) bool { return c.NumPS == 4 }, nil},
		{"three filters kept", "layout_filters a\nlayout_filters b\nlayout_filters c", func(c AgentConfig) bool {
			return reflect.DeepEqual(c.LayoutFilters, []string{"a", "b", "c"})
		}, nil},
		{"none is null", "bzid x\nbzid NONE", func(c AgentConfig) bool { return c.BZID == "" }, nil},
		{"include_x is a key", "include_x y", func(AgentConfig) bool { return true }, []string{"t.conf:1: include_x: unknown key"}},
		{"no value", "bzid\nnum_ps  # c", func(c AgentConfig) bool { return c.BZID == "" && c.NumPS == 1 }, []string{"t.conf:1: bzid: no value", "t.conf:2: num_ps: no value"}},
		{"unknown", "\nfoo 1\nmodel_config_file x", func(AgentConfig) bool { return true }, []string{"t.conf:2: foo: unknown key", "t.conf:3: model_config_file: unknown key"}},
		{"server_type legacy", "server_type PS", func(c AgentConfig) bool { return c.DeployType == DeployPS }, nil},
		{"deploy_type wins over server_type", "server_type ps\ndeploy_type Dense", func(c AgentConfig) bool { return c.DeployType == DeployDense }, nil},
		{"pointer fields", "num_shard 0\nreplica_id 7", func(c AgentConfig) bool { return *c.NumShard == 0 && *c.ReplicaID == 7 }, nil},
		{"float", "per_process_gpu_memory_fraction 1/4", func(c AgentConfig) bool { return c.PerProcessGPUMemoryFraction == 0.25 }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ws, err := parseString(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("unexpected config %+v", c)
			}
			var got []string
			for _, w := range ws {
				got = append(got, w.String())
			}
			if !reflect.DeepEqual(got, tc.warnings) {
				t.Errorf("warnings %q, want %q", got, tc.warnings)
			}
		})
	}
}

// S2: booleans and numbers.
func TestTypedValues(t *testing.T) {
	for _, tc := range []struct {
		line string
		want any // bool, int, or error substring (string)
	}{
		{"dc_aware true", true}, {"dc_aware YES", true}, {"dc_aware 1", true},
		{"dc_aware False", false}, {"dc_aware no", false}, {"dc_aware 0", false},
		// The reference also accepted y/t/n/f and took any other text as true.
		{"dc_aware t", "t.conf:1: dc_aware: invalid boolean"},
		{"dc_aware y", "invalid boolean"},
		{"dc_aware maybe", "invalid boolean"},
		{"num_ps 60 * 1000 * 1000", 60000000},
		{"num_ps (1 + 2) * 3", 9},
		{"num_ps -4", -4},
		{"num_ps 7 / 2", 3},   // int(3.5)
		{"num_ps -7 / 2", -3}, // truncation toward zero, as Python's int()
		{"num_ps 1.9", 1},
		{"num_ps 2e3", 2000},
		{"num_ps 1 / 0", "t.conf:1: num_ps: invalid number expression \"1 / 0\": division by zero"},
		{"num_ps __import__('os')", "invalid number expression"},
		{"num_ps 2 ** 3", "invalid number expression"},
		{"num_ps 99999999999999999999", "out of range"},
		{"num_ps (1", "missing )"},
		{"deploy_type cloud", "t.conf:1: deploy_type: serving/config: unknown deploy type"},
	} {
		c, _, err := parseString(t, tc.line)
		switch want := tc.want.(type) {
		case string:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %v, want %q", tc.line, err, want)
			}
			var pe *ParseError
			if err != nil && !errors.As(err, &pe) {
				t.Errorf("%q: %T is not a *ParseError", tc.line, err)
			}
		case bool:
			if err != nil || c.DCAware != want {
				t.Errorf("%q: %v, %v", tc.line, c.DCAware, err)
			}
		case int:
			if err != nil || c.NumPS != want {
				t.Errorf("%q: %v, %v; want %d", tc.line, c.NumPS, err, want)
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	c, _, err := parseString(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("empty conf is not the default")
	}
	d := Default()
	for _, tc := range []struct {
		key  string
		got  any
		want any
	}{
		{"max_num_load_retries", d.MaxNumLoadRetries, 5},
		{"load_retry_interval_micros", d.LoadRetryIntervalMicros, 60000000},
		{"file_system_poll_wait_seconds", d.FileSystemPollWaitSeconds, 1},
		{"flush_filesystem_caches", d.FlushFilesystemCaches, true},
		{"allow_growth", d.AllowGrowth, true},
		{"enable_model_warmup", d.EnableModelWarmup, true},
		{"remove_unused_fields_from_bundle_metagraph", d.RemoveUnusedFieldsFromBundleMetagraph, true},
		{"enable_profiler", d.EnableProfiler, true},
		{"num_ps", d.NumPS, 1},
		{"dense_service_num", d.DenseServiceNum, 3},
		{"update_model_status_interval", d.UpdateModelStatusInterval, 1},
		{"agent_version", d.AgentVersion, 1},
		{"max_waiting_sec", d.MaxWaitingSec, 1200},
		{"preload_jemalloc", d.PreloadJemalloc, true},
		{"version_policy", d.VersionPolicy, "latest"},
		{"version_data", d.VersionData, 1},
		{"fetch_ps_timeout_ms", d.FetchPSTimeoutMS, 200},
		{"fetch_ps_long_conn_num", d.FetchPSLongConnNum, 100},
		{"fetch_ps_long_conn_enable", d.FetchPSLongConnEnable, true},
		{"fetch_ps_retry", d.FetchPSRetry, 2},
		{"aio_thread_num", d.AIOThreadNum, 30},
		{"rough_sort_model_loaded_server", d.RoughSortModelLoadedServer, "entry"},
		{"use_metrics", d.UseMetrics, true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s default %v, want %v", tc.key, tc.got, tc.want)
		}
	}
	if n := len(Keys()); n != 25+46 {
		t.Errorf("%d conf keys, want 71 (25 TF Serving + 46 agent)", n)
	}
}

// The golden feature-list conf (mhy.conf) is not an agent conf: every line is an unknown key
// and is reported with its file and line; nothing is set and nothing fails.
func TestGoldenMhyConfWarnsPerLine(t *testing.T) {
	path := fixtures.Path(t, "mhy.conf")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ws []Warning
	c, err := Parser{Warn: func(w Warning) { ws = append(ws, w) }}.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("mhy.conf changed the config")
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	lines, nonBlank := len(all), 0
	for _, l := range all {
		if strings.TrimSpace(l) != "" {
			nonBlank++
		}
	}
	if len(ws) != nonBlank {
		t.Fatalf("%d warnings for %d non-blank lines", len(ws), nonBlank)
	}
	if w := ws[0]; w.File != path || w.Line != 1 || w.Key != "feed_name" || w.Msg != "unknown key" {
		t.Errorf("first warning %+v", w)
	}
	if w := ws[len(ws)-1]; w.Line != lines {
		t.Errorf("last warning on line %d, want %d", w.Line, lines)
	}
}
