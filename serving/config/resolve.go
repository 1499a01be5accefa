package config

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
)

// Env looks up an environment variable; it has the signature of os.LookupEnv.
type Env func(key string) (string, bool)

// MapEnv returns an Env reading from m (for tests and embedding).
func MapEnv(m map[string]string) Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// OSEnv returns the process environment as an Env.
func OSEnv() Env { return os.LookupEnv }

// PortFinder returns a currently free TCP port. It is racy by nature: the port may be taken
// between the call and its use.
type PortFinder func() (int, error)

// FreePort binds 127.0.0.1:0, reads the port the kernel chose and closes the listener.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("serving/config: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Environment variables read by Resolve and ReadHostEnv.
const (
	EnvHostShardN       = "MONOLITH_HOST_SHARD_N"
	EnvShardID          = "SHARD_ID"
	EnvReplicaID        = "REPLICA_ID"
	EnvDenseServiceIdx  = "DENSE_SERVICE_IDX"
	EnvPodName          = "MY_POD_NAME"
	EnvCPULimit         = "MY_CPU_LIMIT"
	EnvHostIP           = "MY_HOST_IP"
	EnvHostIPv6         = "MY_HOST_IPV6"
	EnvPodIP            = "MY_POD_IP"
	EnvPSM              = "TCE_PSM"
	EnvTCECluster       = "TCE_CLUSTER"
	EnvLogicalCluster   = "TCE_LOGICAL_CLUSTER"
	EnvPhysicalCluster  = "TCE_PHYSICAL_CLUSTER"
	EnvInternalIDC      = "TCE_INTERNAL_IDC"
	defaultNumTCEShards = 1
)

// HostEnv is the part of the environment the agent's configuration depends on, read once.
type HostEnv struct {
	NumTCEShard int    // MONOLITH_HOST_SHARD_N, default 1
	ShardID     int    // SHARD_ID, default -1
	IDC         string // lower-cased TCE_INTERNAL_IDC; "" when unset
	Cluster     string // lower-cased first set of TCE_LOGICAL_CLUSTER, TCE_CLUSTER, TCE_PHYSICAL_CLUSTER
	PSM         string // TCE_PSM as is; "" when unset
	TCECluster  string // TCE_CLUSTER as is; "" when unset
	CPULimit    int    // MY_CPU_LIMIT, 0 when unset or not an integer
	// CPULimitErr is why MY_CPU_LIMIT was not read. Only the platform config needs the
	// value (and only without explicit thread counts), so it fails there, not in Resolve.
	CPULimitErr error
	PodName     string // MY_POD_NAME
	IPv6Only    bool   // see ReadHostEnv
}

// ReadHostEnv snapshots the environment. IPv6Only follows the reference's is_ipv6_only when
// one of MY_HOST_IP, MY_POD_IP, MY_HOST_IPV6 is set (IPv6-only ⇔ neither MY_HOST_IP nor
// MY_POD_IP); without them it is false (the reference resolves the host name instead).
func ReadHostEnv(env Env) (HostEnv, error) {
	get := func(k string) string { v, _ := env(k); return v }
	h := HostEnv{
		IDC:        strings.ToLower(get(EnvInternalIDC)),
		PSM:        get(EnvPSM),
		TCECluster: get(EnvTCECluster),
		PodName:    get(EnvPodName),
	}
	for _, k := range []string{EnvLogicalCluster, EnvTCECluster, EnvPhysicalCluster} {
		if v := get(k); v != "" {
			h.Cluster = strings.ToLower(v)
			break
		}
	}
	var err error
	if h.NumTCEShard, err = envInt(env, EnvHostShardN, defaultNumTCEShards); err != nil {
		return HostEnv{}, err
	}
	if h.ShardID, err = envInt(env, EnvShardID, -1); err != nil {
		return HostEnv{}, err
	}
	if h.CPULimit, err = envInt(env, EnvCPULimit, 0); err != nil {
		h.CPULimit, h.CPULimitErr = 0, err
	}
	if get(EnvHostIP) != "" || get(EnvPodIP) != "" || get(EnvHostIPv6) != "" {
		h.IPv6Only = get(EnvHostIP) == "" && get(EnvPodIP) == ""
	}
	return h, nil
}

// envInt reads an integer variable; def when unset.
func envInt(env Env, key string, def int) (int, error) {
	v, ok := env(key)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("serving/config: environment %s=%q: not an integer", key, v)
	}
	return n, nil
}

// TCEReplicaID is the reference's tce_replica_id: REPLICA_ID unless absent or -1, else the
// pod-name hash (-1 without MY_POD_NAME). A REPLICA_ID that is not an integer is an error.
func TCEReplicaID(env Env) (int, error) {
	id, err := envInt(env, EnvReplicaID, -1)
	if err != nil || id != -1 {
		return id, err
	}
	pod, _ := env(EnvPodName)
	return ReplicaIDFromPodName(pod), nil
}

// ReplicaIDFromPodName is the reference's replica_id_from_pod_name: hex digits 10–19 of the
// MD5 of the pod name, base 16; -1 without a pod name.
func ReplicaIDFromPodName(podName string) int {
	if podName == "" {
		return -1
	}
	sum := md5.Sum([]byte(podName))
	n, err := strconv.ParseInt(hex.EncodeToString(sum[:])[10:20], 16, 64)
	if err != nil {
		return -1
	}
	return int(n)
}

// Resolve applies the reference's post-init to a parsed config and returns the result; c is
// not modified. In order: the IPv6 zk_servers check, the deploy type (stand_alone_serving ⇒
// mixed, else required; dense requires dense_alone), num_shard against MONOLITH_HOST_SHARD_N,
// port allocation (§1.7, free ports from free), agent_port (conf, else PORT2, else free),
// replica_id (S3: conf, else REPLICA_ID unless -1, else the pod-name hash) and the default
// platform_config_file. It writes no file: see PlatformConfigText.
func (c AgentConfig) Resolve(env Env, free PortFinder) (AgentConfig, error) {
	c = c.clone()
	host, err := ReadHostEnv(env)
	if err != nil {
		return AgentConfig{}, err
	}
	c.Host = host
	if host.IPv6Only && hasIPv4Host(c.ZKServers) {
		// The reference swaps in its built-in IPv6 list only when zk_servers equals its
		// built-in IPv4 list; both are empty in the open-source build, so this always fails.
		return AgentConfig{}, fmt.Errorf("serving/config: zk_servers %q lists IPv4 hosts but the host is IPv6-only", c.ZKServers)
	}
	if c.StandAloneServing {
		c.DeployType = DeployMixed
	} else if c.DeployType == "" {
		return AgentConfig{}, errors.New("serving/config: deploy_type is not set (and stand_alone_serving is false)")
	}
	if c.NumShard == nil {
		n := host.NumTCEShard
		c.NumShard = &n
	} else if *c.NumShard != host.NumTCEShard {
		return AgentConfig{}, fmt.Errorf("serving/config: num_shard %d differs from %s=%d", *c.NumShard, EnvHostShardN, host.NumTCEShard)
	}
	if err := c.allocatePorts(env, free); err != nil {
		return AgentConfig{}, err
	}
	if c.ReplicaID == nil || *c.ReplicaID == -1 {
		id, err := TCEReplicaID(env)
		if err != nil {
			return AgentConfig{}, err
		}
		c.ReplicaID = &id
	}
	if c.PlatformConfigFile == "" {
		c.PlatformConfigFile = DefaultPlatformConfigFile
	}
	return c, nil
}

// hasIPv4Host reports whether a comma-separated host:port list names a dotted-quad host.
func hasIPv4Host(servers string) bool {
	if servers == "" {
		return false
	}
	for _, addr := range strings.Split(servers, ",") {
		i := strings.LastIndexByte(addr, ':')
		if i < 0 {
			continue
		}
		parts := strings.Split(addr[:i], ".")
		if len(parts) != 4 {
			continue
		}
		all := true
		for _, p := range parts {
			if p == "" || strings.TrimLeft(p, "0123456789") != "" {
				all = false
			}
		}
		if all {
			return true
		}
	}
	return false
}

// allocatePorts implements §1.7.
func (c *AgentConfig) allocatePorts(env Env, free PortFinder) error {
	var err error
	// fromEnv sets *p from the variable, else a free port; key "" means always free.
	fromEnv := func(p *int, key string) {
		if err != nil {
			return
		}
		if key != "" {
			var n int
			if n, err = envInt(env, key, 0); err != nil {
				return
			}
			if _, ok := env(key); ok {
				*p = n
				return
			}
		}
		var n int
		if n, err = free(); err != nil {
			err = fmt.Errorf("serving/config: allocate a port: %w", err)
			return
		}
		*p = n
	}
	denseIdx := func() int {
		if err != nil {
			return 0
		}
		var n int
		n, err = envInt(env, EnvDenseServiceIdx, 0)
		return n
	}
	allFree := func(ps ...*int) {
		for _, p := range ps {
			fromEnv(p, "")
		}
	}
	switch c.DeployType {
	case DeployMixed:
		fromEnv(&c.ProxyPort, "")
		fromEnv(&c.TFSEntryArchonPort, "PORT")
		fromEnv(&c.TFSEntryPort, "PORT3")
		fromEnv(&c.TFSEntryHTTPPort, "PORT4")
		fromEnv(&c.TFSPSPort, "PORT5")
		fromEnv(&c.TFSPSHTTPPort, "PORT6")
		fromEnv(&c.TFSPSArchonPort, "PORT7")
		if c.DenseAlone {
			if denseIdx() == 0 {
				fromEnv(&c.TFSDensePort, "PORT8")
				fromEnv(&c.TFSDenseHTTPPort, "PORT9")
				fromEnv(&c.TFSDenseArchonPort, "PORT10")
			} else {
				allFree(&c.TFSDenseArchonPort, &c.TFSDensePort, &c.TFSDenseHTTPPort)
			}
		}
	case DeployEntry:
		allFree(&c.ProxyPort, &c.TFSPSArchonPort, &c.TFSPSPort, &c.TFSPSHTTPPort)
		if c.DenseAlone {
			allFree(&c.TFSDensePort, &c.TFSDenseHTTPPort, &c.TFSDenseArchonPort)
		}
		fromEnv(&c.TFSEntryArchonPort, "PORT")
		fromEnv(&c.TFSEntryPort, "PORT3")
		fromEnv(&c.TFSEntryHTTPPort, "PORT4")
	case DeployPS:
		allFree(&c.ProxyPort, &c.TFSEntryArchonPort, &c.TFSEntryPort, &c.TFSEntryHTTPPort)
		if c.DenseAlone {
			allFree(&c.TFSDensePort, &c.TFSDenseHTTPPort, &c.TFSDenseArchonPort)
		}
		fromEnv(&c.TFSPSArchonPort, "PORT")
		fromEnv(&c.TFSPSPort, "PORT3")
		fromEnv(&c.TFSPSHTTPPort, "PORT4")
	case DeployDense:
		if !c.DenseAlone {
			return errors.New("serving/config: deploy_type dense requires dense_alone")
		}
		allFree(&c.ProxyPort, &c.TFSEntryArchonPort, &c.TFSEntryPort, &c.TFSEntryHTTPPort,
			&c.TFSPSArchonPort, &c.TFSPSPort, &c.TFSPSHTTPPort)
		if denseIdx() == 0 {
			fromEnv(&c.TFSDenseArchonPort, "PORT")
			fromEnv(&c.TFSDensePort, "PORT3")
			fromEnv(&c.TFSDenseHTTPPort, "PORT4")
		} else {
			allFree(&c.TFSDenseArchonPort, &c.TFSDensePort, &c.TFSDenseHTTPPort)
		}
	case DeployUnified:
		fromEnv(&c.TFSPortArchon, "PORT")
		fromEnv(&c.TFSPortGRPC, "PORT3")
		fromEnv(&c.TFSPortHTTP, "PORT4")
	default:
		return fmt.Errorf("serving/config: unknown deploy type %q", c.DeployType)
	}
	if c.AgentPort == 0 {
		fromEnv(&c.AgentPort, "PORT2")
	}
	return err
}

// Location is "{idc}:{cluster}" when both are known, else "".
func (c AgentConfig) Location() string {
	if c.Host.IDC == "" || c.Host.Cluster == "" {
		return ""
	}
	return c.Host.IDC + ":" + c.Host.Cluster
}

// PathPrefix is the agent's ZooKeeper service prefix: /{bzid}/service/{base_name}, plus
// /{idc}:{cluster} when dc_aware. dc_aware without a known data centre is an error (the
// reference joins a None location into the path and dies with a TypeError).
func (c AgentConfig) PathPrefix() (string, error) {
	p := path.Join("/", c.BZID, "service", c.BaseName)
	if c.DCAware {
		if c.Location() == "" {
			return "", fmt.Errorf("serving/config: dc_aware needs the data centre: set %s and one of %s, %s, %s", EnvInternalIDC, EnvLogicalCluster, EnvTCECluster, EnvPhysicalCluster)
		}
		p += "/" + c.Location()
	}
	return p, nil
}

// LayoutPath is layout_pattern when absolute, else /{bzid}/layouts/{layout_pattern}.
func (c AgentConfig) LayoutPath() (string, error) {
	switch {
	case c.LayoutPattern == "":
		return "", errors.New("serving/config: layout_pattern is not set")
	case strings.HasPrefix(c.LayoutPattern, "/"):
		return c.LayoutPattern, nil
	}
	return "/" + c.BZID + "/layouts/" + c.LayoutPattern, nil
}

// ContainerCluster is "{psm or unknown};{idc};{cluster}" with unknown parts spelled "None",
// exactly as the reference prints them.
func (c AgentConfig) ContainerCluster() string {
	orNone := func(s string) string {
		if s == "" {
			return "None"
		}
		return s
	}
	psm := c.Host.PSM
	if psm == "" {
		psm = "unknown"
	}
	return psm + ";" + orNone(c.Host.IDC) + ";" + orNone(c.Host.Cluster)
}
