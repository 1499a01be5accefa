package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/internal/zk"
	tfspb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/agent"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/hostutil"
	"github.com/monolith-go/monolith/serving/modelmgr"
	"github.com/monolith-go/monolith/serving/replica"
	"github.com/monolith-go/monolith/serving/tfs"
)

// envMPSChild marks an agent started by an MPS parent (dense_service_num processes).
const envMPSChild = "MONOLITH_AGENT_MPS_CHILD"

// runAgent is `monolith agent`: the serving agent of spec §1.1 (agent.py/run_agent). It
// loads and resolves the conf, writes the platform config, runs the rough-sort model
// manager when configured, and then the agent of agent_version (1 or 3) until SIGTERM or
// SIGINT, which stop its TF Serving processes and close its ZooKeeper session (removing
// its ephemeral nodes) before it exits 0.
func runAgent(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlagSet("agent", stderr)
	conf := fs.String("conf", "", "agent conf file (required)")
	tfsLog := fs.String("tfs_log", "", "TF Serving log file (v1: {dir}/{ps,entry,dense}_{name}); empty: the agent's log")
	host := fs.String("agent_host", "127.0.0.1", "address AgentService binds, and `monolith serve` when the agent runs it (the reference binds every interface: use ::); a loopback address is also the one advertised unless MY_HOST_IP is set")
	tfsDir := fs.String("tfs_dir", "", "TF Serving's working directory (relative conf/ paths); empty: the current one")
	verbose := fs.Bool("v", false, "verbose logging")
	tlsc := tlsconf.AddFlags(fs) // the AgentService's
	metricsListen := fs.String("metrics-listen", "", "serve Prometheus metrics at http://`ADDR`/metrics (default off; a bare port binds 127.0.0.1; dense MPS child i serves port+1+i)")
	grace := fs.Duration("stop-grace", 10*time.Second, "dense MPS mode: how long the agents get to stop after SIGTERM before SIGKILL")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith agent --conf FILE [flags]\n\n"+
			"Runs the serving agent of the conf's agent_version: 1 supervises the ps/entry/dense TF Serving\n"+
			"processes and registers their replicas; 3 (deploy_type unified) loads the sub-graphs of its\n"+
			"ZooKeeper layout. TF Serving is MONOLITH_TFS_BINARY (\"/path/to/monolith fake-tfserving\" for the double).")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *conf == "" {
		return fmt.Errorf("%w: agent needs --conf and takes no arguments", errUsage)
	}
	log := loggerAt(stderr, *verbose, slog.LevelInfo)
	cfg, err := config.Parser{Warn: func(w config.Warning) { log.Warn("conf", "warning", w.String()) }}.Load(*conf)
	if err != nil {
		return err
	}
	env := config.OSEnv()
	mpsChild := os.Getenv(envMPSChild) != ""
	if mpsChild {
		// An MPS child re-reads its parent's conf; the REPLICA_ID its parent computed
		// (replica_id × dense_service_num + i) must beat the conf's replica_id (S3).
		cfg.ReplicaID = nil
	}
	if cfg, err = cfg.Resolve(env, config.FreePort); err != nil {
		return err
	}
	if !mpsChild { // the MPS parent writes it once for its children
		writePlatformConfig(cfg, log)
	}

	// Metrics: bound before anything starts, so that an address in use fails here.
	var am *agent.Metrics
	var zm *zk.Metrics
	if *metricsListen != "" {
		reg := metricsrv.NewRegistry()
		if am, err = agent.NewMetrics(reg); err != nil {
			return err
		}
		if zm, err = zk.NewMetrics(reg); err != nil {
			return err
		}
		srv, err := metricsrv.Listen(*metricsListen, reg, log)
		if err != nil {
			return err
		}
		defer srv.Close()
		log.Info("agent metrics at http://"+srv.Addr()+"/metrics", "metrics", srv.Addr())
	}

	if cfg.DeployType == config.DeployDense && cfg.DenseServiceNum > 1 && !mpsChild {
		// Every flag the user set goes to the children, but the ones given per child.
		var inherit []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "conf", "tfs_log", "metrics-listen":
			default:
				inherit = append(inherit, "--"+f.Name+"="+f.Value.String())
			}
		})
		return runAgentMPS(ctx, cfg, *conf, *tfsLog, *metricsListen, inherit, *grace, log)
	}
	mo := modelmgr.DefaultOptions()
	mo.ModelName, mo.SourcePath, mo.ReceivePath = cfg.RoughSortModelName, cfg.RoughSortModelP2PPath, cfg.RoughSortModelLocalPath
	mm, err := modelmgr.New(mo, log)
	if err != nil {
		return fmt.Errorf("rough-sort model manager: %w", err)
	}
	if err := mm.Start(ctx); err != nil {
		return fmt.Errorf("rough-sort model manager: %w", err)
	}
	defer mm.Stop()
	serveTLS, err := tlsServer(tlsc)
	if err != nil {
		return err
	}
	zkOpts := zk.Options{Auth: os.Getenv("ZK_AUTH"), Logger: log, Metrics: zm}
	getenv, selfServe, err := tfsBinaryEnv(*host, *tlsc)
	if err != nil {
		return err
	}
	// The agent's own `monolith serve` serves TLS with the agent's files, so the agent
	// dials it with them; another TF Serving binary is dialled as before (plaintext).
	var tfsDial []grpc.DialOption
	if selfServe && tlsc.Enabled() {
		ct, err := tlsClient(tlsc)
		if err != nil {
			return err
		}
		tfsDial = append(tfsDial, tlsconf.DialOption(ct))
	}
	listen := net.JoinHostPort(*host, strconv.Itoa(cfg.AgentPort))
	switch cfg.AgentVersion {
	case 1:
		a, err := agent.NewV1(agent.V1Options{
			Config: cfg, TFSLog: *tfsLog, TFSDir: *tfsDir, ZK: zkOpts, Logger: log, Getenv: getenv,
			NewReplicas: func(c *zk.Client, cfg config.AgentConfig) (agent.Replicas, error) {
				mon, err := replica.NewTFSMonitor(cfg, "127.0.0.1", tfsDial...)
				if err != nil {
					return nil, err
				}
				m, err := replica.NewManager(c, cfg, mon, replica.Options{Env: env, Logger: log,
					OnReport: func(path string, st datadef.ModelState) { am.Report(path, tfspb.ModelVersionStatus_State(st).String()) }})
				if err != nil {
					mon.Close()
					return nil, err
				}
				return v1Replicas{m, mon}, nil
			},
			Listen: listen, ReusePort: mpsChild, TLS: serveTLS,
		})
		if err != nil {
			return err
		}
		return a.Run(ctx)
	case 2:
		return errors.New("agent_version v2 is not support")
	case 3:
		a, err := agent.NewV3(agent.V3Options{
			Config: cfg, TFSLog: *tfsLog, TFSDir: *tfsDir, ZK: zkOpts, Logger: log, Getenv: getenv,
			LocalIP: advertisedIP(env, *host), AvailableMemory: hostutil.AvailableMemory, Listen: listen, Metrics: am, TLS: serveTLS, TFSDial: tfsDial,
		})
		if err != nil {
			return err
		}
		return a.Run(ctx)
	}
	return fmt.Errorf("agent_version %d is not 1, 2 or 3", cfg.AgentVersion)
}

// v1Replicas is the v1 agent's replica manager with the TF Serving monitor it owns.
type v1Replicas struct {
	*replica.Manager
	mon *replica.TFSMonitor
}

// Stop stops the manager, then closes the monitor's connections.
func (r v1Replicas) Stop() { r.Manager.Stop(); r.mon.Close() }

// tfsBinaryEnv is the agent's environment, where an unset MONOLITH_TFS_BINARY reads as
// "this binary serve --host=HOST" and the agent's TLS flags: the agent runs `monolith
// serve` as its TF Serving, bound where the agent binds and serving TLS when the agent
// does, unless told otherwise. selfServe reports that case.
func tfsBinaryEnv(host string, tlsc tlsconf.Config) (getenv func(string) (string, bool), selfServe bool, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, false, fmt.Errorf("agent: this binary: %w", err)
	}
	cmd := append([]string{self, "serve", "--host=" + host}, tlsc.Args()...)
	for _, a := range cmd {
		// MONOLITH_TFS_BINARY is split at white space (tfs.BinaryFromEnv).
		if strings.ContainsFunc(a, unicode.IsSpace) {
			return nil, false, fmt.Errorf("agent: %q holds white space and cannot be passed to `monolith serve`; set MONOLITH_TFS_BINARY", a)
		}
	}
	v, ok := os.LookupEnv(tfs.EnvBinary)
	selfServe = strings.TrimSpace(v) == ""
	return func(k string) (string, bool) {
		if k == tfs.EnvBinary && selfServe {
			return strings.Join(cmd, " "), true
		}
		if k == tfs.EnvBinary {
			return v, ok
		}
		return os.LookupEnv(k)
	}, selfServe, nil
}

// advertisedIP is the host the agent publishes its servers' addresses under: MY_HOST_IP
// when set, else a loopback agent_host as it is (the agent and the `monolith serve` it
// runs bind it, so no other address reaches them), else the reference's local address.
func advertisedIP(env config.Env, host string) string {
	myIP, _ := env(config.EnvHostIP)
	if ip := net.ParseIP(host); myIP == "" && ip != nil && ip.IsLoopback() {
		return host
	}
	return hostutil.LocalIP(env)
}

// writePlatformConfig writes the platform config text to platform_config_file (post-init
// step 6), atomically (a TF Serving starting meanwhile reads the old file or the new one);
// a failure is logged and the file removed, as in the reference.
func writePlatformConfig(cfg config.AgentConfig, log *slog.Logger) {
	p := cfg.PlatformConfigFile
	text, err := cfg.PlatformConfigText()
	if err == nil {
		err = atomicfile.WriteFile(p, []byte(text))
	}
	if err != nil {
		log.Warn("platform config not written; TF Serving gets --platform_config_file anyway", "file", p, "err", err)
		_ = os.Remove(p)
	}
}

// runAgentMPS is the dense MPS mode: dense_service_num agents of this conf, child i with
// REPLICA_ID = replica_id × dense_service_num + i, DENSE_SERVICE_IDX = i, the log
// {tfs_log}.mps{i} and the parent's other flags (inherit). SIGTERM is passed on; the first
// child to fail stops the others; a child still running grace after SIGTERM is killed.
// With metricsListen HOST:PORT (PORT > 0) child i serves its metrics on HOST:PORT+1+i (the
// parent serves its own on PORT); with port 0 every child takes a free port.
func runAgentMPS(ctx context.Context, cfg config.AgentConfig, conf, tfsLog, metricsListen string, inherit []string, grace time.Duration, log *slog.Logger) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("agent MPS mode: %w", err)
	}
	base := 0
	if cfg.ReplicaID != nil {
		base = *cfg.ReplicaID
	}
	n := cfg.DenseServiceNum
	cmds := make([]*exec.Cmd, n)
	for i := 0; i < n; i++ {
		childArgs := append([]string{"agent", "--conf", conf}, inherit...)
		if tfsLog != "" {
			childArgs = append(childArgs, "--tfs_log", tfsLog+".mps"+strconv.Itoa(i))
		}
		if metricsListen != "" {
			a, err := childMetricsAddr(metricsListen, i)
			if err != nil {
				return fmt.Errorf("agent MPS mode: %w", err)
			}
			childArgs = append(childArgs, "--metrics-listen", a)
		}
		cmd := exec.Command(self, childArgs...)
		cmd.Env = append(os.Environ(), envMPSChild+"=1",
			"REPLICA_ID="+strconv.Itoa(base*n+i), "DENSE_SERVICE_IDX="+strconv.Itoa(i))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmds[i] = cmd
	}
	return superviseChildren(ctx, cmds, grace, log)
}

// superviseChildren starts cmds and waits for them. The end of ctx, or the first child to
// exit, sends SIGTERM to the others; a child still running grace later is killed. A
// child's failure (other than its stop) is returned, naming its index.
func superviseChildren(ctx context.Context, cmds []*exec.Cmd, grace time.Duration, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for i, c := range cmds {
		cmd := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
		cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = c.Env, c.Stdout, c.Stderr, c.Dir
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = grace // then SIGKILL
		if err := cmd.Start(); err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("agent MPS mode: start agent %d: %w", i, err)
		}
		log.Info("MPS agent started", "index", i, "pid", cmd.Process.Pid)
		wg.Go(func() {
			if err := cmd.Wait(); err != nil && ctx.Err() == nil {
				errs[i] = fmt.Errorf("MPS agent %d: %w", i, err)
			}
			cancel()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// childMetricsAddr is MPS child i's metrics address: the parent's port + 1 + i, or port 0.
func childMetricsAddr(parent string, i int) (string, error) {
	host, port, err := net.SplitHostPort(metricsrv.Addr(parent))
	if err != nil {
		return "", fmt.Errorf("--metrics-listen %q: %w", parent, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("--metrics-listen %q: bad port", parent)
	}
	if p > 0 {
		p += 1 + i
		if p > 65535 {
			return "", fmt.Errorf("--metrics-listen %q: MPS child %d's port %d is out of range", parent, i, p)
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}
