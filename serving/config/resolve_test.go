package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// seqPorts returns 50001, 50002, ... so that every free port is identifiable.
func seqPorts() PortFinder {
	n := 50000
	return func() (int, error) { n++; return n, nil }
}

func mustParse(t *testing.T, text string) AgentConfig {
	t.Helper()
	c, _, err := parseString(t, text)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type ports struct {
	proxy, entryArchon, entryGRPC, entryHTTP, psArchon, psGRPC, psHTTP, denseArchon, denseGRPC, denseHTTP, agent int
	uArchon, uGRPC, uHTTP                                                                                        int
}

func portsOf(c AgentConfig) ports {
	return ports{c.ProxyPort, c.TFSEntryArchonPort, c.TFSEntryPort, c.TFSEntryHTTPPort,
		c.TFSPSArchonPort, c.TFSPSPort, c.TFSPSHTTPPort, c.TFSDenseArchonPort, c.TFSDensePort, c.TFSDenseHTTPPort,
		c.AgentPort, c.TFSPortArchon, c.TFSPortGRPC, c.TFSPortHTTP}
}

var allPortEnv = map[string]string{
	"PORT": "1000", "PORT2": "1002", "PORT3": "1003", "PORT4": "1004", "PORT5": "1005",
	"PORT6": "1006", "PORT7": "1007", "PORT8": "1008", "PORT9": "1009", "PORT10": "1010",
}

func withEnv(extra map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range allPortEnv {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// §1.7 with every PORTn set: which ports come from the environment and which are free.
func TestPortAllocation(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf string
		env  map[string]string
		want ports
	}{
		{"mixed", "stand_alone_serving true", withEnv(nil),
			ports{proxy: 50001, entryArchon: 1000, entryGRPC: 1003, entryHTTP: 1004, psArchon: 1007, psGRPC: 1005, psHTTP: 1006, agent: 1002}},
		{"mixed dense_alone idx 0", "deploy_type mixed\ndense_alone true", withEnv(nil),
			ports{proxy: 50001, entryArchon: 1000, entryGRPC: 1003, entryHTTP: 1004, psArchon: 1007, psGRPC: 1005, psHTTP: 1006,
				denseArchon: 1010, denseGRPC: 1008, denseHTTP: 1009, agent: 1002}},
		{"mixed dense_alone idx 1", "deploy_type mixed\ndense_alone true", withEnv(map[string]string{"DENSE_SERVICE_IDX": "1"}),
			ports{proxy: 50001, entryArchon: 1000, entryGRPC: 1003, entryHTTP: 1004, psArchon: 1007, psGRPC: 1005, psHTTP: 1006,
				denseArchon: 50002, denseGRPC: 50003, denseHTTP: 50004, agent: 1002}},
		{"entry", "deploy_type entry", withEnv(nil),
			ports{proxy: 50001, psArchon: 50002, psGRPC: 50003, psHTTP: 50004, entryArchon: 1000, entryGRPC: 1003, entryHTTP: 1004, agent: 1002}},
		{"entry dense_alone", "deploy_type entry\ndense_alone true", withEnv(nil),
			ports{proxy: 50001, psArchon: 50002, psGRPC: 50003, psHTTP: 50004, denseGRPC: 50005, denseHTTP: 50006, denseArchon: 50007,
				entryArchon: 1000, entryGRPC: 1003, entryHTTP: 1004, agent: 1002}},
		{"ps", "deploy_type ps", withEnv(nil),
			ports{proxy: 50001, entryArchon: 50002, entryGRPC: 50003, entryHTTP: 50004, psArchon: 1000, psGRPC: 1003, psHTTP: 1004, agent: 1002}},
		{"dense idx 0", "deploy_type dense\ndense_alone true", withEnv(nil),
			ports{proxy: 50001, entryArchon: 50002, entryGRPC: 50003, entryHTTP: 50004, psArchon: 50005, psGRPC: 50006, psHTTP: 50007,
				denseArchon: 1000, denseGRPC: 1003, denseHTTP: 1004, agent: 1002}},
		{"dense idx 2", "deploy_type dense\ndense_alone true", withEnv(map[string]string{"DENSE_SERVICE_IDX": "2"}),
			ports{proxy: 50001, entryArchon: 50002, entryGRPC: 50003, entryHTTP: 50004, psArchon: 50005, psGRPC: 50006, psHTTP: 50007,
				denseArchon: 50008, denseGRPC: 50009, denseHTTP: 50010, agent: 1002}},
		{"unified", "deploy_type unified", withEnv(nil), ports{uArchon: 1000, uGRPC: 1003, uHTTP: 1004, agent: 1002}},
		{"unified no env", "deploy_type unified", nil, ports{uArchon: 50001, uGRPC: 50002, uHTTP: 50003, agent: 50004}},
		{"agent_port from conf", "deploy_type unified\nagent_port 9999", withEnv(nil), ports{uArchon: 1000, uGRPC: 1003, uHTTP: 1004, agent: 9999}},
		{"conf ports overwritten", "deploy_type ps\ntfs_ps_port 7\nproxy_port 8", withEnv(nil),
			ports{proxy: 50001, entryArchon: 50002, entryGRPC: 50003, entryHTTP: 50004, psArchon: 1000, psGRPC: 1003, psHTTP: 1004, agent: 1002}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := mustParse(t, tc.conf).Resolve(MapEnv(tc.env), seqPorts())
			if err != nil {
				t.Fatal(err)
			}
			if got := portsOf(c); got != tc.want {
				t.Errorf("ports\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestResolveRules(t *testing.T) {
	hash := ReplicaIDFromPodName("pod-a")
	for _, tc := range []struct {
		name, conf string
		env        map[string]string
		check      func(AgentConfig) string // "" when fine
		err        string
	}{
		{"stand_alone forces mixed", "deploy_type ps\nstand_alone_serving true", nil, func(c AgentConfig) string {
			return ifNot(c.DeployType == DeployMixed, "deploy %q", c.DeployType)
		}, ""},
		{"deploy_type required", "bzid x", nil, nil, "deploy_type is not set"},
		{"dense requires dense_alone", "deploy_type dense", nil, nil, "dense requires dense_alone"},
		{"num_shard from env", "deploy_type ps", map[string]string{"MONOLITH_HOST_SHARD_N": "4"}, func(c AgentConfig) string {
			return ifNot(*c.NumShard == 4 && c.Host.NumTCEShard == 4, "num_shard %d", *c.NumShard)
		}, ""},
		{"num_shard default 1", "deploy_type ps", nil, func(c AgentConfig) string { return ifNot(*c.NumShard == 1, "num_shard %d", *c.NumShard) }, ""},
		{"num_shard mismatch", "deploy_type ps\nnum_shard 2", map[string]string{"MONOLITH_HOST_SHARD_N": "3"}, nil, "num_shard 2 differs from MONOLITH_HOST_SHARD_N=3"},
		{"bad env int", "deploy_type ps", map[string]string{"PORT": "80a"}, nil, `environment PORT="80a": not an integer`},
		{"bad shard env", "deploy_type ps", map[string]string{"SHARD_ID": "x"}, nil, "SHARD_ID"},
		// S3: the conf value wins (the reference ignored it).
		{"replica conf", "deploy_type ps\nreplica_id 5", map[string]string{"REPLICA_ID": "7", "MY_POD_NAME": "pod-a"}, func(c AgentConfig) string {
			return ifNot(*c.ReplicaID == 5, "replica %d", *c.ReplicaID)
		}, ""},
		{"replica env", "deploy_type ps", map[string]string{"REPLICA_ID": "7", "MY_POD_NAME": "pod-a"}, func(c AgentConfig) string {
			return ifNot(*c.ReplicaID == 7, "replica %d", *c.ReplicaID)
		}, ""},
		{"replica env -1 falls to hash", "deploy_type ps\nagent_version 1", map[string]string{"REPLICA_ID": "-1", "MY_POD_NAME": "pod-a"}, func(c AgentConfig) string {
			return ifNot(*c.ReplicaID == hash, "replica %d want %d", *c.ReplicaID, hash)
		}, ""},
		{"replica nothing", "deploy_type ps", nil, func(c AgentConfig) string { return ifNot(*c.ReplicaID == -1, "replica %d", *c.ReplicaID) }, ""},
		{"platform file default", "deploy_type ps", nil, func(c AgentConfig) string {
			return ifNot(c.PlatformConfigFile == "/opt/tiger/monolith_serving/conf/platform_config_file.cfg", "%q", c.PlatformConfigFile)
		}, ""},
		{"platform file kept", "deploy_type ps\nplatform_config_file /p.cfg", nil, func(c AgentConfig) string {
			return ifNot(c.PlatformConfigFile == "/p.cfg", "%q", c.PlatformConfigFile)
		}, ""},
		{"ipv6-only with ipv4 zk", "deploy_type ps\nzk_servers 10.0.0.1:2181", map[string]string{"MY_HOST_IPV6": "fdbd::1"}, nil, "IPv6-only"},
		{"ipv6-only with ipv6 zk", "deploy_type ps\nzk_servers [fdbd::2]:2181", map[string]string{"MY_HOST_IPV6": "fdbd::1"}, func(c AgentConfig) string {
			return ifNot(c.Host.IPv6Only, "not ipv6-only")
		}, ""},
		{"dual stack with ipv4 zk", "deploy_type ps\nzk_servers 10.0.0.1:2181", map[string]string{"MY_HOST_IPV6": "fdbd::1", "MY_POD_IP": "10.1.1.1"}, nil, ""},
		{"host env", "deploy_type ps\nbzid b\nbase_name m\ndc_aware true", map[string]string{
			"TCE_INTERNAL_IDC": "LF", "TCE_CLUSTER": "Default", "TCE_PHYSICAL_CLUSTER": "phys", "SHARD_ID": "3", "TCE_PSM": "p.s.m",
		}, func(c AgentConfig) string {
			h := c.Host
			if h.IDC != "lf" || h.Cluster != "default" || h.ShardID != 3 || h.PSM != "p.s.m" || h.TCECluster != "Default" {
				return fmt.Sprintf("host %+v", h)
			}
			if p, err := c.PathPrefix(); c.Location() != "lf:default" || p != "/b/service/m/lf:default" || err != nil || c.ContainerCluster() != "p.s.m;lf;default" {
				return fmt.Sprintf("%q %q %v %q", c.Location(), p, err, c.ContainerCluster())
			}
			return ""
		}, ""},
		{"dc_aware without a data centre", "deploy_type ps\nbzid b\nbase_name m\ndc_aware true", map[string]string{"TCE_CLUSTER": "c"}, func(c AgentConfig) string {
			p, err := c.PathPrefix()
			return ifNot(err != nil && strings.Contains(err.Error(), "dc_aware needs the data centre: set TCE_INTERNAL_IDC"), "%q, %v", p, err)
		}, ""},
		{"logical cluster first", "deploy_type ps\nbzid b\nbase_name m", map[string]string{"TCE_LOGICAL_CLUSTER": "Lc", "TCE_CLUSTER": "c"}, func(c AgentConfig) string {
			p, err := c.PathPrefix()
			return ifNot(c.Host.Cluster == "lc" && p == "/b/service/m" && err == nil && c.ContainerCluster() == "unknown;None;lc", "%q %v %q", p, err, c.ContainerCluster())
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := mustParse(t, tc.conf).Resolve(MapEnv(tc.env), seqPorts())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				if msg := tc.check(c); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

func ifNot(ok bool, format string, args ...any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

func TestResolveDoesNotAlias(t *testing.T) {
	c := mustParse(t, "deploy_type ps\nnum_shard 1\nlayout_filters a")
	r, err := c.Resolve(MapEnv(nil), seqPorts())
	if err != nil {
		t.Fatal(err)
	}
	*r.NumShard = 9
	r.LayoutFilters[0] = "z"
	if *c.NumShard != 1 || c.LayoutFilters[0] != "a" || c.TFSPSPort != 0 {
		t.Error("Resolve modified or shares its receiver")
	}
}

func TestPortFinderError(t *testing.T) {
	boom := errors.New("boom")
	_, err := mustParse(t, "deploy_type ps").Resolve(MapEnv(nil), func() (int, error) { return 0, boom })
	if !errors.Is(err, boom) {
		t.Errorf("error %v does not wrap the finder's", err)
	}
}

func TestFreePort(t *testing.T) {
	p, err := FreePort()
	if err != nil || p <= 0 || p > 65535 {
		t.Errorf("FreePort() = %d, %v", p, err)
	}
}

func TestReplicaIDFromPodName(t *testing.T) {
	// md5("pod-a") = 978ca343fc 35b99b8b56 81874fd1b0aa; hex digits [10:20] in base 16.
	if got := ReplicaIDFromPodName("pod-a"); got != 230747245398 {
		t.Errorf("pod-a: %d", got)
	}
	if got := ReplicaIDFromPodName(""); got != -1 {
		t.Errorf("empty pod name: %d", got)
	}
	got := ReplicaIDFromPodName("monolith-serving-0")
	if got < 0 || got >= 1<<40 {
		t.Errorf("hash %d out of 40-bit range", got)
	}
	if !reflect.DeepEqual(ReplicaIDFromPodName("x"), ReplicaIDFromPodName("x")) {
		t.Error("not deterministic")
	}
}

func TestLayoutPath(t *testing.T) {
	c := Default()
	c.BZID = "gip"
	if _, err := c.LayoutPath(); err == nil {
		t.Error("unset layout_pattern must be an error (the reference crashed)")
	}
	c.LayoutPattern = "test_layout"
	if p, _ := c.LayoutPath(); p != "/gip/layouts/test_layout" {
		t.Errorf("relative: %q", p)
	}
	c.LayoutPattern = "/gip/layout"
	if p, _ := c.LayoutPath(); p != "/gip/layout" {
		t.Errorf("absolute: %q", p)
	}
}

func TestTCEReplicaID(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int
		err  bool
	}{
		{map[string]string{"REPLICA_ID": "7"}, 7, false},
		{map[string]string{"REPLICA_ID": " 7 "}, 7, false},
		{map[string]string{"REPLICA_ID": "-1"}, -1, false},
		{map[string]string{}, -1, false},
		{map[string]string{"REPLICA_ID": "-1", "MY_POD_NAME": "pod-a"}, ReplicaIDFromPodName("pod-a"), false},
		{map[string]string{"MY_POD_NAME": "pod-a"}, ReplicaIDFromPodName("pod-a"), false},
		{map[string]string{"REPLICA_ID": "x"}, 0, true},
	} {
		got, err := TCEReplicaID(MapEnv(tc.env))
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("TCEReplicaID(%v) = %d, %v; want %d (error %v)", tc.env, got, err, tc.want, tc.err)
		}
	}
}
