package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/internal/atomicfile"
	izk "github.com/monolith-go/monolith/internal/zk"
	pb "github.com/monolith-go/monolith/schemas/agentpb"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	tfspb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/layoutfilter"
	"github.com/monolith-go/monolith/serving/tfs"
	"github.com/monolith-go/monolith/serving/zk"
)

// Defaults of the v3 agent's background loops (the reference's intervals).
const (
	DefaultReportInterval = 60 * time.Second
	DefaultSyncInterval   = 30 * time.Second
	// fastSyncPeriod is the sync period while a layout change has models that are not
	// AVAILABLE yet; fastSyncWindow bounds that phase.
	fastSyncPeriod = time.Second
	fastSyncWindow = 2 * time.Minute
)

// V3Options configure a unified (v3) agent.
type V3Options struct {
	// Config is the resolved agent configuration (config.AgentConfig.Resolve): deploy_type
	// unified, agent_version 3.
	Config config.AgentConfig
	// Getenv reads MONOLITH_TFS_BINARY (nil: os.LookupEnv).
	Getenv func(string) (string, bool)
	// LocalIP is the host address advertised in the service info ("ip" of "ip:port").
	LocalIP string
	// TFSLog receives TF Serving's output ("" = the logger).
	TFSLog string
	// TFSDir is TF Serving's working directory ("" = the current one).
	TFSDir string
	// ModelConfigFile is the model config file TF Serving reads; "" makes a temporary file
	// that Stop removes.
	ModelConfigFile string
	// ZK configure the ZooKeeper connection; Servers default to the conf's zk_servers.
	ZK izk.Options
	// ReportInterval and SyncInterval are the periods of the service-info report and of
	// the available-model sync (defaults 60 s and 30 s).
	ReportInterval, SyncInterval time.Duration
	// Listen is the AgentService address; default 127.0.0.1:{agent_port}.
	Listen string
	// TLS serves the AgentService over TLS (internal/tlsconf; nil: plaintext).
	TLS *tls.Config
	// TFSDial are extra dial options of the agent's connection to its TF Serving (its
	// credentials when TF Serving serves TLS).
	TFSDial []grpc.DialOption
	// AvailableMemory answers GetResource's memory (nil: GetResource fails).
	AvailableMemory func() (int64, error)
	// Metrics records the sub-graphs' states, layout changes and reload requests (nil:
	// none).
	Metrics *Metrics
	// Logger receives the agent's messages (nil: slog.Default()).
	Logger *slog.Logger
}

// V3 is the unified agent (AgentV3, §1.11): it runs TF Serving, loads the sub-graphs of
// its ZooKeeper layout that pass its filters, binds the AVAILABLE ones and answers
// HeartBeat with the bound containers' addresses.
type V3 struct {
	opts      V3Options
	cfg       config.AgentConfig
	log       *slog.Logger
	filters   []layoutfilter.Filter
	container datadef.Container
	info      datadef.ContainerServiceInfo
	layout    string
	grpcRemot bool
	tempCfg   bool

	wrapper *tfs.Wrapper
	monitor *tfs.Monitor
	backend *zk.Backend
	service *Service

	mu       sync.Mutex
	accepted []datadef.SavedModel     // the sub-graphs of the last config written
	lastCfg  *tfspb.ModelServerConfig // that config, re-sent while TF Serving lacks a model
	reported map[string]bool          // sub-graphs whose state the metrics hold
	kick     chan struct{}

	latestOnceLogged atomic.Bool

	stopOnce sync.Once
	cancel   context.CancelFunc
	loops    sync.WaitGroup
}

// NewV3 checks the configuration, compiles the layout filters, writes the empty model
// config file and prepares TF Serving's command line. Nothing runs before Start.
func NewV3(opts V3Options) (*V3, error) {
	cfg := opts.Config
	if cfg.DeployType != config.DeployUnified {
		return nil, fmt.Errorf("serving/agent: agent v3 needs deploy_type unified, not %q", cfg.DeployType)
	}
	if cfg.AgentVersion != 3 {
		return nil, fmt.Errorf("serving/agent: agent v3 needs agent_version 3, not %d", cfg.AgentVersion)
	}
	if cfg.BZID == "" {
		return nil, errors.New("serving/agent: bzid is not set")
	}
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	if opts.ReportInterval <= 0 {
		opts.ReportInterval = DefaultReportInterval
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LocalIP == "" {
		opts.LocalIP = "localhost"
	}
	if err := zkServers(&opts.ZK, cfg, opts.Logger); err != nil {
		return nil, err
	}
	layout, err := cfg.LayoutPath()
	if err != nil {
		return nil, fmt.Errorf("serving/agent: %w", err)
	}
	a := &V3{opts: opts, cfg: cfg, log: opts.Logger, layout: layout, kick: make(chan struct{}, 1)}

	shardID, numShard := cfg.Host.ShardID, 1
	if cfg.NumShard != nil {
		numShard = *cfg.NumShard
	}
	var texts []string
	for _, raw := range cfg.LayoutFilters {
		f, err := layoutfilter.Parse(layoutfilter.Substitute(raw, shardID, numShard))
		if err != nil {
			return nil, fmt.Errorf("serving/agent: layout_filters %q: %w", raw, err)
		}
		a.filters = append(a.filters, f)
		cond, _ := f.Condition()
		texts = append(texts, f.Regex()+";"+cond)
	}

	id := cfg.Host.PodName
	if id == "" {
		id = opts.LocalIP
	}
	a.container = datadef.Container{Cluster: cfg.ContainerCluster(), ID: id}
	hostPort := func(p int) datadef.Null[string] {
		return datadef.Some(net.JoinHostPort(opts.LocalIP, strconv.Itoa(p))) // S6: [v6]:port
	}
	a.info = datadef.ContainerServiceInfo{
		GRPC: hostPort(cfg.TFSPortGRPC), HTTP: hostPort(cfg.TFSPortHTTP),
		Archon: hostPort(cfg.TFSPortArchon), Agent: hostPort(cfg.AgentPort),
		DebugInfo: datadef.Some(datadef.ContainerDebugInfo{LayoutPath: layout, LayoutFilters: texts}.Serialize()),
	}
	if cfg.Host.IDC != "" {
		a.info.IDC = datadef.Some(cfg.Host.IDC)
	}

	if a.opts.ModelConfigFile == "" {
		f, err := os.CreateTemp("", "monolith-agent-model-config-*.cfg")
		if err != nil {
			return nil, fmt.Errorf("serving/agent: model config file: %w", err)
		}
		a.opts.ModelConfigFile = f.Name()
		a.tempCfg = true
		_ = f.Close()
	}
	if err := atomicfile.WriteFile(a.opts.ModelConfigFile, []byte(config.EmptyModelServerConfigText)); err != nil {
		return nil, err
	}

	bin, _, err := tfs.BinaryFromEnv(opts.Getenv)
	if err != nil {
		a.removeTemp()
		return nil, fmt.Errorf("serving/agent: %w", err)
	}
	if p, err := exec.LookPath(bin); err == nil {
		bin = p
	}
	if a.grpcRemot, err = tfs.ScanGRPCRemoteOp(bin); err != nil {
		a.removeTemp()
		return nil, fmt.Errorf("serving/agent: %w", err)
	}
	args := cfg.WrapperCommand(config.TFSWrapperOptions{
		Binary: bin, ArchonPort: cfg.TFSPortArchon, GRPCPort: cfg.TFSPortGRPC, HTTPPort: cfg.TFSPortHTTP,
		ModelConfigFile: a.opts.ModelConfigFile, GRPCRemoteOp: a.grpcRemot,
		PSM: cfg.Host.PSM, TCECluster: cfg.Host.TCECluster,
	})[1:]
	a.wrapper, err = tfs.NewWrapperFromEnv(opts.Getenv, args, tfs.WrapperOptions{
		Dir: opts.TFSDir, LogFile: opts.TFSLog, Logger: opts.Logger,
	})
	if err != nil {
		a.removeTemp()
		return nil, fmt.Errorf("serving/agent: %w", err)
	}
	return a, nil
}

// ModelConfigFile is the model config file TF Serving reads.
func (a *V3) ModelConfigFile() string { return a.opts.ModelConfigFile }

// Container is the container name under which the agent reports and binds.
func (a *V3) Container() datadef.Container { return a.container }

// ServiceInfo is the service info the agent reports.
func (a *V3) ServiceInfo() datadef.ContainerServiceInfo { return a.info }

// AgentAddr is the AgentService address (after Start).
func (a *V3) AgentAddr() string { return a.service.Addr() }

// TFS is the TF Serving process.
func (a *V3) TFS() *tfs.Wrapper { return a.wrapper }

// Start starts TF Serving, connects to ZooKeeper, serves AgentService, starts the report
// and sync loops and registers the layout callback, which writes the first model config.
// On failure everything started is stopped.
func (a *V3) Start(ctx context.Context) (err error) {
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	defer func() {
		if err != nil {
			a.Stop(context.WithoutCancel(ctx))
		}
	}()
	if err := a.wrapper.Start(loopCtx); err != nil {
		return fmt.Errorf("serving/agent: start TF Serving: %w", err)
	}
	if a.monitor, err = tfs.DialMonitor(net127(a.cfg.TFSPortGRPC), a.opts.TFSDial...); err != nil {
		return fmt.Errorf("serving/agent: %w", err)
	}
	if a.backend, err = zk.OpenBackend(ctx, a.cfg.BZID, a.opts.ZK); err != nil {
		return fmt.Errorf("serving/agent: %w", err)
	}
	listen := a.opts.Listen
	if listen == "" {
		listen = net127(a.cfg.AgentPort)
	}
	a.service, err = NewService(ServiceOptions{
		Version: 3, Addrs: a.addrs, Listen: listen, Logger: a.log, TLS: a.opts.TLS,
		Resource: func(context.Context) (*pb.GetResourceResponse, error) { return a.resource() },
	})
	if err != nil {
		return err
	}
	a.service.Start()
	a.log.Info("agent v3 serving", "agent", a.service.Addr(), "container", a.container.String(), "layout", a.layout)

	a.loop(loopCtx, "report service info", a.opts.ReportInterval, nil, func(ctx context.Context) (bool, error) {
		return false, a.backend.ReportServiceInfo(ctx, a.container, a.info)
	})
	a.loop(loopCtx, "sync available saved models", a.opts.SyncInterval, a.kick, a.syncAvailable)
	if err := a.backend.RegisterLayoutCallback(ctx, a.layout, a.onLayout); err != nil {
		return fmt.Errorf("serving/agent: %w", err)
	}
	return nil
}

// Run is Start, then wait_for_termination: it returns when ctx ends (SIGTERM in the CLI)
// or TF Serving exits, after Stop. A TF Serving exit is an error.
func (a *V3) Run(ctx context.Context) error {
	return supervise(ctx, "agent v3", a.log, a.Start, a.Stop, func() error {
		<-a.wrapper.Done()
		code, _ := a.wrapper.Poll()
		return fmt.Errorf("serving/agent: TF Serving exited with code %d", code)
	})
}

// supervise is both agents' Run: start, then wait until ctx ends (nil) or exited returns
// (its error: a child process ended), then stop, bounded by 30 s. A stop requested while
// starting is not an error (start has undone itself).
func supervise(ctx context.Context, name string, log *slog.Logger, start func(context.Context) error, stop func(context.Context), exited func() error) error {
	if err := start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	done := make(chan error, 1)
	go func() { done <- exited() }()
	var err error
	select {
	case <-ctx.Done():
		log.Info(name+" stopping", "reason", context.Cause(ctx))
	case err = <-done:
		log.Error(name+" stopping", "err", err)
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stop(stopCtx)
	return err
}

// Stop ends the loops, the AgentService, the ZooKeeper session (its ephemeral nodes go
// with it) and TF Serving, and removes a temporary model config file. It is idempotent.
func (a *V3) Stop(ctx context.Context) {
	a.stopOnce.Do(func() {
		if a.cancel != nil {
			a.cancel()
		}
		a.loops.Wait()
		if a.service != nil {
			a.service.Stop(ctx)
		}
		if a.backend != nil {
			_ = a.backend.Close()
		}
		if a.monitor != nil {
			_ = a.monitor.Close()
		}
		if err := a.wrapper.Stop(ctx); err != nil {
			a.log.Warn("stop TF Serving", "err", err)
		}
		a.removeTemp()
	})
}

func (a *V3) removeTemp() {
	if a.tempCfg {
		_ = os.Remove(a.opts.ModelConfigFile)
	}
}

// loop runs fn at once and then every period (or when kick fires) until ctx ends, logging
// its errors. While fn answers more=true it runs again every fastSyncPeriod, for at most
// fastSyncWindow.
func (a *V3) loop(ctx context.Context, name string, period time.Duration, kick <-chan struct{}, fn func(context.Context) (more bool, err error)) {
	a.loops.Add(1)
	go func() {
		defer a.loops.Done()
		var fastUntil time.Time
		for {
			more, err := fn(ctx)
			if err != nil && ctx.Err() == nil {
				a.log.Error("agent v3 background loop", "loop", name, "err", err)
			}
			wait := period
			if more && time.Now().Before(fastUntil) {
				wait = fastSyncPeriod
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-kick:
				fastUntil = time.Now().Add(fastSyncWindow)
			case <-t.C:
			}
			t.Stop()
		}
	}()
}

// addrs is the HeartBeat map: "{model}:{sub_graph}" → the gRPC (or archon) address of each
// bound container.
func (a *V3) addrs() map[string][]string {
	m := map[string][]string{}
	for model, subs := range a.backend.ServiceMap() {
		for sub, infos := range subs {
			list := make([]string, 0, len(infos))
			for _, info := range infos {
				addr := info.Archon
				if a.grpcRemot {
					addr = info.GRPC
				}
				if v, ok := addr.Get(); ok {
					list = append(list, v)
				}
			}
			m[model+":"+sub] = list
		}
	}
	return m
}

// resource is GetResource's answer for v2 and v3.
func (a *V3) resource() (*pb.GetResourceResponse, error) {
	if a.opts.AvailableMemory == nil {
		return nil, errors.New("serving/agent: available memory unknown")
	}
	mem, err := a.opts.AvailableMemory()
	if err != nil {
		return nil, err
	}
	replica := -1
	if a.cfg.ReplicaID != nil {
		replica = *a.cfg.ReplicaID
	}
	return &pb.GetResourceResponse{
		Address: net.JoinHostPort(a.opts.LocalIP, strconv.Itoa(a.service.Port())),
		ShardId: int32(a.cfg.Host.ShardID), ReplicaId: int32(replica), Memory: mem,
		Cpu: -1, Network: -1, WorkLoad: -1,
	}, nil
}

// onLayout is the layout callback: the accepted sub-graphs become TF Serving's model
// config (file, then a reload request so the change applies without waiting for TF
// Serving's 60 s poll of the file).
func (a *V3) onLayout(entries []zk.LayoutEntry) bool {
	var models []config.ModelConfig
	var accepted []datadef.SavedModel
	for _, e := range entries {
		name := e.SavedModel.String()
		ok, err := layoutfilter.MatchAny(a.filters, e.SavedModel.SubGraph)
		if err != nil {
			a.log.Error("layout filter", "saved_model", name, "err", err)
			continue
		}
		if !ok {
			continue
		}
		mc, err := config.GenModelConfig(name, e.Config.ModelBasePath.V, e.Config.VersionPolicy.V)
		if err != nil {
			a.log.Error("layout entry skipped", "saved_model", name, "err", err)
			continue
		}
		models = append(models, mc)
		accepted = append(accepted, e.SavedModel)
	}
	if config.UsesLatestOnce(models) && !a.latestOnceLogged.Swap(true) {
		a.log.Info("version policy latest_once is written as latest { num_versions: 1 } for a stock TF Serving (S4)")
	}
	text := config.ModelServerConfigText(models)
	if err := atomicfile.WriteFile(a.opts.ModelConfigFile, []byte(text)); err != nil {
		a.log.Error("layout callback", "err", err)
		return true
	}
	cfg, err := tfs.ParseModelServerConfig([]byte(text))
	if err != nil {
		a.log.Error("layout callback: generated model config does not parse", "err", err)
		cfg = nil
	}
	a.mu.Lock()
	a.accepted, a.lastCfg = accepted, cfg
	a.mu.Unlock()
	a.log.Info("layout changed", "layout", a.layout, "loading", savedModelNames(accepted))
	a.opts.Metrics.layoutChanged()
	if cfg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := a.monitor.ReloadConfig(ctx, cfg)
		a.opts.Metrics.reloaded(err)
		if err != nil {
			a.log.Info("reload request failed; the sync loop retries, TF Serving also reads the file at its next poll", "err", err)
		}
		cancel()
	}
	select {
	case a.kick <- struct{}{}:
	default:
	}
	return true
}

// syncAvailable binds the sub-graphs TF Serving has AVAILABLE; more reports whether some
// accepted sub-graph is not AVAILABLE yet.
func (a *V3) syncAvailable(ctx context.Context) (more bool, err error) {
	a.mu.Lock()
	accepted, cfg := slices.Clone(a.accepted), a.lastCfg
	a.mu.Unlock()
	names := savedModelNames(accepted)
	st, err := a.monitor.ModelsStatus(ctx, names)
	if err != nil {
		return true, err
	}
	var avail []datadef.SavedModel
	unknown := false
	a.forgetUnaccepted(accepted)
	for _, sm := range accepted {
		s := st[sm.String()]
		a.opts.Metrics.Report(sm.String(), s.GetState().String())
		if s != nil && s.GetState() == tfspb.ModelVersionStatus_AVAILABLE {
			avail = append(avail, sm)
		}
		if s != nil && s.GetStatus().GetErrorCode() == tfcorepb.Code_NOT_FOUND {
			unknown = true
		}
	}
	// TF Serving does not know an accepted model: the reload request was lost (TF Serving
	// was starting) or TF Serving restarted; send the config again.
	if unknown && cfg != nil {
		err := a.monitor.ReloadConfig(ctx, cfg)
		a.opts.Metrics.reloaded(err)
		if err != nil {
			a.log.Info("reload request failed", "err", err)
		}
	}
	return len(avail) < len(accepted), a.backend.SyncAvailableSavedModels(ctx, a.container, avail)
}

// forgetUnaccepted drops the state metrics of sub-graphs no longer in the layout.
func (a *V3) forgetUnaccepted(accepted []datadef.SavedModel) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := map[string]bool{}
	for _, sm := range accepted {
		now[sm.String()] = true
	}
	for name := range a.reported {
		if !now[name] {
			a.opts.Metrics.Forget(name)
		}
	}
	a.reported = now
}

func savedModelNames(sms []datadef.SavedModel) []string {
	names := make([]string, len(sms))
	for i, sm := range sms {
		names[i] = sm.String()
	}
	return names
}

// net127 is the loopback address of a port.
func net127(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
