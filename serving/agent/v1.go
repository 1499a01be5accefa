package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/ps/discovery"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/hostutil"
	"github.com/monolith-go/monolith/serving/tfs"
)

// DefaultStartTimeout bounds the v1 agent's waits: the entry process waiting for every PS
// task (and dense) to have an AVAILABLE replica, and each process's port to open (the
// reference's hard-coded 3600 s).
const DefaultStartTimeout = time.Hour

// Replicas is what the v1 agent needs of its replica manager (serving/replica.Manager):
// registration and status updates of its own replicas, the watched view of every replica
// for AgentService, and whether the PS (and dense) tasks are served.
type Replicas interface {
	ReplicaSource
	Start(ctx context.Context) error
	Stop()
	IsPSSetStarted() bool
	IsDenseSetStarted() bool
}

// V1Options configure a v1 agent.
type V1Options struct {
	// Config is the resolved agent configuration with agent_version 1 and a ps, entry,
	// dense or mixed deployment.
	Config config.AgentConfig
	// Getenv reads MONOLITH_TFS_BINARY (nil: os.LookupEnv).
	Getenv func(string) (string, bool)
	// TFSLog names the processes' log files: {dir}/{kind}_{base} for ps, entry and dense;
	// "" sends their output to the logger.
	TFSLog string
	// TFSDir is the processes' working directory ("" = the current one).
	TFSDir string
	// ZK configure the ZooKeeper connection; Servers default to the conf's zk_servers.
	ZK zk.Options
	// NewReplicas makes the replica manager on the agent's ZooKeeper connection
	// (serving/replica.NewManager in the CLI).
	NewReplicas func(client *zk.Client, cfg config.AgentConfig) (Replicas, error)
	// StartTimeout bounds the start-up waits (default DefaultStartTimeout); PollInterval
	// is their period (default update_model_status_interval seconds).
	StartTimeout, PollInterval time.Duration
	// Listen is the AgentService address; default 127.0.0.1:{agent_port}.
	Listen string
	// ReusePort binds the AgentService with SO_REUSEPORT (dense MPS agents).
	ReusePort bool
	// TLS serves the AgentService over TLS (internal/tlsconf; nil: plaintext).
	TLS *tls.Config
	// Logger receives the agent's messages (nil: slog.Default()).
	Logger *slog.Logger
}

// process is one TF Serving process of a v1 agent.
type process struct {
	kind    string // ps, entry or dense
	port    int    // gRPC port
	cfgFile string // its model config file (temporary)
	w       *tfs.Wrapper
}

// V1 is the v1 agent (§1.13): it registers its replicas in ZooKeeper, serves AgentService
// from the watched replicas and supervises its TF Serving processes, stopping all of them
// when one exits (no failover, as in the reference).
type V1 struct {
	opts  V1Options
	cfg   config.AgentConfig
	log   *slog.Logger
	procs []*process

	client   *zk.Client
	replicas Replicas
	service  *Service

	stopOnce sync.Once
	cancel   context.CancelFunc
}

// V1Kinds lists the TF Serving processes of a deployment in start order (the entry, when
// there is one, last).
func V1Kinds(cfg config.AgentConfig) ([]string, error) {
	switch cfg.DeployType {
	case config.DeployMixed:
		if cfg.DenseAlone {
			return []string{config.ServerPS, config.ServerDense, config.ServerEntry}, nil
		}
		return []string{config.ServerPS, config.ServerEntry}, nil
	case config.DeployEntry:
		return []string{config.ServerEntry}, nil
	case config.DeployPS:
		return []string{config.ServerPS}, nil
	case config.DeployDense:
		return []string{config.ServerDense}, nil
	}
	return nil, fmt.Errorf("serving/agent: agent v1 cannot run deploy_type %q", cfg.DeployType)
}

// NewV1 checks the configuration and prepares the processes' command lines and model
// config files. Nothing runs before Start.
func NewV1(opts V1Options) (*V1, error) {
	cfg := opts.Config
	if cfg.AgentVersion != 1 {
		return nil, fmt.Errorf("serving/agent: agent v1 needs agent_version 1, not %d", cfg.AgentVersion)
	}
	if opts.NewReplicas == nil {
		return nil, errors.New("serving/agent: agent v1 needs a replica manager")
	}
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Duration(max(cfg.UpdateModelStatusInterval, 1)) * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := zkServers(&opts.ZK, cfg, opts.Logger); err != nil {
		return nil, err
	}
	kinds, err := V1Kinds(cfg)
	if err != nil {
		return nil, err
	}
	bin, _, err := tfs.BinaryFromEnv(opts.Getenv)
	if err != nil {
		return nil, fmt.Errorf("serving/agent: %w", err)
	}
	a := &V1{opts: opts, cfg: cfg, log: opts.Logger}
	for _, kind := range kinds {
		p, err := a.newProcess(bin, kind)
		if err != nil {
			a.removeFiles()
			return nil, err
		}
		a.procs = append(a.procs, p)
	}
	return a, nil
}

func (a *V1) newProcess(bin, kind string) (*process, error) {
	models, err := a.cfg.ModelServerConfig(kind)
	if err != nil {
		return nil, fmt.Errorf("serving/agent: %s process: %w", kind, err)
	}
	f, err := os.CreateTemp("", "monolith-agent-"+kind+"-*.cfg")
	if err != nil {
		return nil, fmt.Errorf("serving/agent: %s model config: %w", kind, err)
	}
	p := &process{kind: kind, cfgFile: f.Name()}
	_ = f.Close()
	if err := atomicfile.WriteFile(p.cfgFile, []byte(config.ModelServerConfigText(models))); err != nil {
		_ = os.Remove(p.cfgFile)
		return nil, err
	}
	args, port, err := a.cfg.Command(bin, kind, p.cfgFile)
	if err != nil {
		_ = os.Remove(p.cfgFile)
		return nil, fmt.Errorf("serving/agent: %s process: %w", kind, err)
	}
	p.port = port
	wo := tfs.WrapperOptions{Dir: a.opts.TFSDir, Logger: a.log.With("process", kind)}
	if a.opts.TFSLog != "" {
		wo.LogFile = filepath.Join(filepath.Dir(a.opts.TFSLog), kind+"_"+filepath.Base(a.opts.TFSLog))
		wo.AppendLog = true // a restarted agent keeps the earlier log, as the reference's ServingLog
	}
	if kind == config.ServerEntry {
		// The entry graph's HeartBeat op dials localhost:$PORT2, the agent.
		wo.Env = append(os.Environ(), "PORT2="+strconv.Itoa(a.cfg.AgentPort))
	}
	if p.w, err = tfs.NewWrapperFromEnv(a.opts.Getenv, args[1:], wo); err != nil {
		_ = os.Remove(p.cfgFile)
		return nil, fmt.Errorf("serving/agent: %s process: %w", kind, err)
	}
	return p, nil
}

// Kinds lists the agent's processes in start order.
func (a *V1) Kinds() []string {
	k := make([]string, len(a.procs))
	for i, p := range a.procs {
		k[i] = p.kind
	}
	return k
}

// AgentAddr is the AgentService address (after Start).
func (a *V1) AgentAddr() string { return a.service.Addr() }

// Pids lists the running processes' ids by kind.
func (a *V1) Pids() map[string]int {
	m := map[string]int{}
	for _, p := range a.procs {
		m[p.kind] = p.w.Pid()
	}
	return m
}

// Start is AgentV1.start: ZooKeeper, the replica manager, AgentService, then the
// processes in order, the entry after every PS task (and dense, when dense_alone) has an
// AVAILABLE replica, each waited for until its gRPC port accepts connections. On failure
// everything started is stopped.
func (a *V1) Start(ctx context.Context) (err error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	defer func() {
		if err != nil {
			a.Stop(context.WithoutCancel(ctx))
		}
	}()
	if a.client, err = zk.Connect(ctx, a.opts.ZK); err != nil {
		return fmt.Errorf("serving/agent: %w", err)
	}
	if a.replicas, err = a.opts.NewReplicas(a.client, a.cfg); err != nil {
		return fmt.Errorf("serving/agent: replica manager: %w", err)
	}
	if err := a.replicas.Start(ctx); err != nil {
		return fmt.Errorf("serving/agent: replica manager: %w", err)
	}
	listen := a.opts.Listen
	if listen == "" {
		listen = net127(a.cfg.AgentPort)
	}
	a.service, err = NewService(ServiceOptions{
		Version: 1, Replicas: a.replicas, IDC: a.cfg.Host.IDC, Cluster: a.cfg.Host.Cluster,
		DCAware: a.cfg.DCAware, Listen: listen, ReusePort: a.opts.ReusePort, Logger: a.log, TLS: a.opts.TLS,
	})
	if err != nil {
		return err
	}
	a.service.Start()
	a.log.Info("agent v1 serving", "agent", a.service.Addr(), "processes", a.Kinds())

	waitCtx, cancelWait := context.WithTimeout(ctx, a.opts.StartTimeout)
	defer cancelWait()
	for _, p := range a.procs {
		if p.kind == config.ServerEntry {
			if err := a.waitServed(waitCtx); err != nil {
				return err
			}
		}
		if err := p.w.Start(runCtx); err != nil {
			return fmt.Errorf("serving/agent: start %s process: %w", p.kind, err)
		}
		if err := waitPort(waitCtx, p.port, 200*time.Millisecond, p.w.Done()); err != nil {
			return fmt.Errorf("serving/agent: %s process (port %d): %w", p.kind, p.port, err)
		}
		a.log.Info("process serving", "process", p.kind, "pid", p.w.Pid(), "port", p.port)
	}
	return nil
}

// waitServed waits until every PS task (and dense, when dense_alone) has an AVAILABLE
// replica, as the entry process needs them.
func (a *V1) waitServed(ctx context.Context) error {
	t := time.NewTicker(a.opts.PollInterval)
	defer t.Stop()
	for {
		ps := a.replicas.IsPSSetStarted()
		dense := !a.cfg.DenseAlone || a.replicas.IsDenseSetStarted()
		if ps && dense {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("serving/agent: entry waits for PS (served %v) and dense (served %v): %w", ps, dense, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// waitPort waits until 127.0.0.1:port accepts a TCP connection, the process exits (exited
// closes) or ctx ends.
func waitPort(ctx context.Context, port int, every time.Duration, exited <-chan struct{}) error {
	for {
		if hostutil.CheckPortOpen(ctx, port) {
			return nil
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("port not open: %w", context.Cause(ctx))
		case <-exited:
			t.Stop()
			return errors.New("the process exited before opening its port")
		case <-t.C:
		}
	}
}

// Run is Start, then the supervision loop: it returns when ctx ends (SIGTERM in the CLI)
// or a process exits, after stopping everything. A process exit is an error.
func (a *V1) Run(ctx context.Context) error {
	return supervise(ctx, "agent v1", a.log, a.Start, a.Stop, func() error {
		exited := make(chan *process, len(a.procs))
		for _, p := range a.procs {
			go func() {
				<-p.w.Done()
				exited <- p
			}()
		}
		p := <-exited
		code, _ := p.w.Poll()
		return fmt.Errorf("serving/agent: %s process exited with code %d; stopping every process", p.kind, code)
	})
}

// Stop stops the processes (entry first), AgentService, the replica manager and the
// ZooKeeper session (its ephemeral replica nodes go with it), and removes the model config
// files. It is idempotent.
func (a *V1) Stop(ctx context.Context) {
	a.stopOnce.Do(func() {
		for i := len(a.procs) - 1; i >= 0; i-- {
			if err := a.procs[i].w.Stop(ctx); err != nil {
				a.log.Warn("stop process", "process", a.procs[i].kind, "err", err)
			}
		}
		if a.cancel != nil {
			a.cancel()
		}
		if a.service != nil {
			a.service.Stop(ctx)
		}
		if a.replicas != nil {
			a.replicas.Stop()
		}
		if a.client != nil {
			_ = a.client.Close()
		}
		a.removeFiles()
	})
}

func (a *V1) removeFiles() {
	for _, p := range a.procs {
		_ = os.Remove(p.cfgFile)
	}
}

// zkServers fills o.Servers from zk_servers when empty, and the logger.
func zkServers(o *zk.Options, cfg config.AgentConfig, log *slog.Logger) error {
	if len(o.Servers) == 0 {
		servers, err := discovery.ParseServers(cfg.ZKServers)
		if err != nil {
			return fmt.Errorf("serving/agent: zk_servers: %w", err)
		}
		if len(servers) == 0 {
			return errors.New("serving/agent: zk_servers is not set")
		}
		o.Servers = servers
	}
	if o.Logger == nil {
		o.Logger = log
	}
	return nil
}
