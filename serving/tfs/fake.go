package tfs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	pb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/hostutil"
)

// ErrClosed is returned by Fake.Serve on a Fake that was closed.
var ErrClosed = errors.New("serving/tfs: fake closed")

// ErrInvalidOptions is wrapped by the errors of FakeOptions.Validate and WrapperOptions
// checks.
var ErrInvalidOptions = errors.New("serving/tfs: invalid options")

// Defaults of FakeOptions.
const (
	DefaultFakeListen         = "127.0.0.1:0"
	DefaultStep               = 100 * time.Millisecond
	DefaultFileSystemPollWait = time.Second // TF Serving's --file_system_poll_wait_seconds
	// SignatureDefMapURL is the type URL of the "signature_def" metadata Any.
	SignatureDefMapURL = "type.googleapis.com/tensorflow.serving.SignatureDefMap"
)

// fakeGracePeriod bounds how long a graceful stop waits for in-flight RPCs.
const fakeGracePeriod = 5 * time.Second

// FakeOptions configure a Fake.
type FakeOptions struct {
	// Listen is the gRPC address (default "127.0.0.1:0": an ephemeral port on loopback).
	Listen string
	// ReusePort binds with SO_REUSEPORT, as TF Serving's gRPC server does (the dense MPS
	// processes of one host share the TF Serving port).
	ReusePort bool
	// ModelConfigFile is the text-format ModelServerConfig (--model_config_file). When
	// empty, Config is the initial config.
	ModelConfigFile string
	// Config is the initial config when ModelConfigFile is empty (nil: no models).
	Config *pb.ModelServerConfig
	// ConfigPollWait re-reads ModelConfigFile at this period
	// (--model_config_file_poll_wait_seconds); 0 reads it once.
	ConfigPollWait time.Duration
	// FileSystemPollWait rescans the base paths at this period
	// (--file_system_poll_wait_seconds); 0 scans only when a config is applied.
	// DefaultFakeOptions sets TF Serving's 1 s.
	FileSystemPollWait time.Duration
	// Step is the time between two states of a version (default 100 ms).
	Step time.Duration
	// Logger receives lifecycle and state-change logs (default slog.Default()).
	Logger *slog.Logger
	// TLS serves gRPC over TLS (internal/tlsconf; nil: plaintext).
	TLS *tls.Config
	// Loader, when set, loads each version as it leaves LOADING, and the loaded servable
	// answers Predict: the Fake is then a model server (monolith serve). Nil keeps it a
	// double whose versions hold nothing and whose Predict is UNIMPLEMENTED.
	Loader Loader
}

// Loader loads the versions a model server serves.
type Loader interface {
	// Load loads version v of model name from its folder dir ({base_path}/{v}). An error
	// ends the version (END, with the error in its status) until a later scan tries again.
	Load(ctx context.Context, name, dir string, v int64) (Servable, error)
}

// Servable is a loaded version.
type Servable interface {
	// Predict answers a request resolved to this version.
	Predict(ctx context.Context, req *pb.PredictRequest) (*pb.PredictResponse, error)
}

// DefaultFakeOptions returns the defaults: loopback ephemeral port, 100 ms steps, a
// base-path rescan every second, no config re-reads.
func DefaultFakeOptions() FakeOptions {
	return FakeOptions{Listen: DefaultFakeListen, Step: DefaultStep, FileSystemPollWait: DefaultFileSystemPollWait}
}

// Validate reports inconsistent options in an error matching ErrInvalidOptions.
func (o FakeOptions) Validate() error {
	var errs []error
	if o.Listen != "" {
		if _, _, err := net.SplitHostPort(o.Listen); err != nil {
			errs = append(errs, fmt.Errorf("listen address %q: %v", o.Listen, err))
		}
	}
	if o.Step < 0 {
		errs = append(errs, fmt.Errorf("step %v is negative", o.Step))
	}
	if o.ConfigPollWait < 0 {
		errs = append(errs, fmt.Errorf("config poll wait %v is negative", o.ConfigPollWait))
	}
	if o.FileSystemPollWait < 0 {
		errs = append(errs, fmt.Errorf("file system poll wait %v is negative", o.FileSystemPollWait))
	}
	if o.ConfigPollWait > 0 && o.ModelConfigFile == "" {
		errs = append(errs, errors.New("config poll wait needs a model config file"))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
}

// Fake is the in-process TF Serving double of decision S15 (see the package doc). Its
// methods are safe for concurrent use; the handlers may also be called directly.
type Fake struct {
	pb.UnimplementedModelServiceServer

	opts FakeOptions
	log  *slog.Logger

	reloadMu sync.Mutex // one config application (scan + apply) at a time
	mu       struct {
		sync.Mutex
		config *pb.ModelServerConfig
		models map[string]*fakeModel
	}

	grpc      *grpc.Server
	lis       net.Listener
	loads     sync.WaitGroup // loads in flight
	loadCtx   context.Context
	stopLoads context.CancelFunc
	serving   atomic.Bool
	closed    chan struct{}
	closeOnce sync.Once
}

var (
	_ pb.ModelServiceServer      = (*Fake)(nil)
	_ pb.PredictionServiceServer = predictionServer{}
)

// fakeModel is one model the Fake knows, configured or not any more.
type fakeModel struct {
	config   *pb.ModelConfig
	wanted   map[int64]bool // versions the policy selects; empty when unconfigured
	versions map[int64]pb.ModelVersionStatus_State
	// With a Loader: the loaded versions, the ones loading, and the last load failure of
	// each version that failed.
	servables map[int64]Servable
	loading   map[int64]bool
	failed    map[int64]error
}

// predictionServer serves PredictionService for a Fake.
type predictionServer struct {
	pb.UnimplementedPredictionServiceServer
	f *Fake
}

func (p predictionServer) GetModelMetadata(ctx context.Context, req *pb.GetModelMetadataRequest) (*pb.GetModelMetadataResponse, error) {
	return p.f.GetModelMetadata(ctx, req)
}

func (p predictionServer) Predict(ctx context.Context, req *pb.PredictRequest) (*pb.PredictResponse, error) {
	return p.f.Predict(ctx, req)
}

// NewFake reads the initial config, scans the base paths (every version starts at
// START) and listens. Serve starts serving and moving states; Close releases everything.
func NewFake(opts FakeOptions) (*Fake, error) {
	if opts.Listen == "" {
		opts.Listen = DefaultFakeListen
	}
	if opts.Step == 0 {
		opts.Step = DefaultStep
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	f := &Fake{opts: opts, log: opts.Logger, closed: make(chan struct{})}
	f.loadCtx, f.stopLoads = context.WithCancel(context.Background())
	f.mu.models = make(map[string]*fakeModel)
	f.mu.config = &pb.ModelServerConfig{}
	cfg := opts.Config
	if opts.ModelConfigFile != "" {
		var err error
		if cfg, err = ReadModelServerConfig(opts.ModelConfigFile); err != nil {
			return nil, err
		}
	}
	if cfg != nil {
		if err := f.apply(cfg); err != nil {
			return nil, fmt.Errorf("serving/tfs: fake: initial config: %w", err)
		}
	}
	lis, err := hostutil.Listen(context.Background(), opts.Listen, opts.ReusePort)
	if err != nil {
		return nil, fmt.Errorf("serving/tfs: fake: listen: %w", err)
	}
	f.lis = lis
	f.grpc = grpc.NewServer(tlsconf.ServerOption(opts.TLS))
	pb.RegisterModelServiceServer(f.grpc, f)
	pb.RegisterPredictionServiceServer(f.grpc, predictionServer{f: f})
	return f, nil
}

// Addr is the address the Fake listens on.
func (f *Fake) Addr() string { return f.lis.Addr().String() }

// Serve serves gRPC and moves version states until ctx ends (then it stops gracefully
// and returns nil) or Close is called (ErrClosed). Serve may be called once.
func (f *Fake) Serve(ctx context.Context) error {
	if !f.serving.CompareAndSwap(false, true) {
		return errors.New("serving/tfs: fake: Serve called twice")
	}
	select {
	case <-f.closed:
		return ErrClosed
	default:
	}
	loopCtx, stopLoop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { f.loop(loopCtx) })
	defer func() { stopLoop(); wg.Wait(); f.stopLoads(); f.loads.Wait() }()
	served := make(chan error, 1)
	go func() { served <- f.grpc.Serve(f.lis) }()
	f.log.Info("fake TF Serving serving", "addr", f.Addr())
	select {
	case err := <-served:
		select {
		case <-f.closed:
			return ErrClosed
		default:
		}
		return fmt.Errorf("serving/tfs: fake: serve: %w", err)
	case <-f.closed:
		<-served
		return ErrClosed
	case <-ctx.Done():
	}
	f.log.Info("fake TF Serving stopping", "addr", f.Addr())
	stopped := make(chan struct{})
	go func() { f.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(fakeGracePeriod):
		f.grpc.Stop()
		<-stopped
	}
	<-served
	return nil
}

// Close stops the Fake at once. It is idempotent.
func (f *Fake) Close() error {
	f.closeOnce.Do(func() {
		close(f.closed)
		f.stopLoads()
		f.grpc.Stop()
		f.lis.Close() // Stop closes it only when Serve ran; a second close is harmless.
	})
	return nil
}

// loop is the Fake's clock: state steps, config re-reads and base-path rescans.
func (f *Fake) loop(ctx context.Context) {
	step := time.NewTicker(f.opts.Step)
	defer step.Stop()
	var cfgC, fsC <-chan time.Time
	if f.opts.ConfigPollWait > 0 {
		t := time.NewTicker(f.opts.ConfigPollWait)
		defer t.Stop()
		cfgC = t.C
	}
	if f.opts.FileSystemPollWait > 0 {
		t := time.NewTicker(f.opts.FileSystemPollWait)
		defer t.Stop()
		fsC = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-step.C:
			f.advance()
		case <-cfgC:
			cfg, err := ReadModelServerConfig(f.opts.ModelConfigFile)
			if err == nil {
				err = f.apply(cfg)
			}
			if err != nil {
				f.log.Warn("fake TF Serving: keeping the previous model config", "file", f.opts.ModelConfigFile, "err", err)
			}
		case <-fsC:
			if err := f.rescan(); err != nil {
				f.log.Warn("fake TF Serving: rescan base paths", "err", err)
			}
		}
	}
}

// apply validates cfg, scans its base paths and makes it the config: new wanted versions
// enter START, the others will unload on the following steps.
//
// A config without model_config_list (an empty file, a reload request without a config)
// changes nothing, as in TF Serving ("Taking no action for empty config"); an empty
// model_config_list {} unloads every model.
func (f *Fake) apply(cfg *pb.ModelServerConfig) error {
	if cfg.GetConfig() == nil {
		f.log.Debug("fake TF Serving: empty config, no action")
		return nil
	}
	if err := ValidateModelServerConfig(cfg); err != nil {
		return err
	}
	f.reloadMu.Lock()
	defer f.reloadMu.Unlock()
	return f.installReloadLocked(cfg)
}

// rescan applies the current config again: versions that appeared or went away in the
// base paths are loaded or unloaded.
func (f *Fake) rescan() error {
	f.reloadMu.Lock()
	defer f.reloadMu.Unlock()
	f.mu.Lock()
	cfg := f.mu.config
	f.mu.Unlock()
	return f.installReloadLocked(cfg)
}

// installReloadLocked scans the base paths of cfg (no state lock held) and installs it.
// The caller holds reloadMu.
func (f *Fake) installReloadLocked(cfg *pb.ModelServerConfig) error {
	wanted := make(map[string][]int64)
	for _, m := range cfg.GetModelConfigList().GetConfig() {
		found, err := ScanVersions(m.GetBasePath())
		if err != nil {
			return fmt.Errorf("model %q: %w", m.GetName(), err)
		}
		wanted[m.GetName()] = SelectVersions(m.GetModelVersionPolicy(), found)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.config = proto.Clone(cfg).(*pb.ModelServerConfig)
	for _, m := range f.mu.models {
		m.wanted = nil
	}
	for _, mc := range f.mu.config.GetModelConfigList().GetConfig() {
		m := f.mu.models[mc.GetName()]
		if m == nil {
			m = &fakeModel{versions: make(map[int64]pb.ModelVersionStatus_State),
				servables: map[int64]Servable{}, loading: map[int64]bool{}, failed: map[int64]error{}}
			f.mu.models[mc.GetName()] = m
		}
		m.config = mc
		m.wanted = make(map[int64]bool)
		for _, v := range wanted[mc.GetName()] {
			m.wanted[v] = true
			if s, ok := m.versions[v]; !ok || s == pb.ModelVersionStatus_END {
				f.setLocked(mc.GetName(), m, v, pb.ModelVersionStatus_START)
			}
		}
	}
	return nil
}

// setLocked moves a version to state s and logs it.
func (f *Fake) setLocked(name string, m *fakeModel, v int64, s pb.ModelVersionStatus_State) {
	m.versions[v] = s
	f.log.Debug("fake TF Serving: version state", "model", name, "version", v, "state", s.String())
}

// advance moves every version in transit by one state (see the package doc).
func (f *Fake) advance() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, m := range f.mu.models {
		loading := false
		for v := range m.wanted {
			if s := m.versions[v]; s == pb.ModelVersionStatus_START || s == pb.ModelVersionStatus_LOADING {
				loading = true
			}
		}
		for _, v := range slices.Sorted(maps.Keys(m.versions)) {
			s, next := m.versions[v], pb.ModelVersionStatus_State(-1)
			if m.wanted[v] {
				switch s {
				case pb.ModelVersionStatus_START:
					next = pb.ModelVersionStatus_LOADING
				case pb.ModelVersionStatus_LOADING:
					if f.opts.Loader != nil && m.servables[v] == nil {
						f.startLoadLocked(name, m, v) // AVAILABLE once loaded
						break
					}
					next = pb.ModelVersionStatus_AVAILABLE
				case pb.ModelVersionStatus_UNLOADING:
					next = pb.ModelVersionStatus_END
				case pb.ModelVersionStatus_END:
					next = pb.ModelVersionStatus_START
				}
			} else {
				switch s {
				case pb.ModelVersionStatus_START, pb.ModelVersionStatus_LOADING:
					next = pb.ModelVersionStatus_UNLOADING
				case pb.ModelVersionStatus_AVAILABLE:
					if !loading {
						next = pb.ModelVersionStatus_UNLOADING
					}
				case pb.ModelVersionStatus_UNLOADING:
					next = pb.ModelVersionStatus_END
				}
			}
			if next == pb.ModelVersionStatus_END {
				// Requests in flight keep their reference to the servable.
				delete(m.servables, v)
			}
			if next >= 0 {
				f.setLocked(name, m, v, next)
			}
		}
	}
}

// startLoadLocked loads version v of model name in the background (once at a time): on
// success the version becomes AVAILABLE if it is still wanted; on failure it ends, with the
// error in its status. f.mu is held.
func (f *Fake) startLoadLocked(name string, m *fakeModel, v int64) {
	if m.loading[v] {
		return
	}
	m.loading[v] = true
	dir := filepath.Join(m.config.GetBasePath(), strconv.FormatInt(v, 10))
	f.loads.Go(func() {
		sv, err := f.opts.Loader.Load(f.loadCtx, name, dir, v)
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(m.loading, v)
		switch {
		case err != nil:
			if prev := m.failed[v]; prev == nil || prev.Error() != err.Error() {
				f.log.Warn("model server: version not loaded", "model", name, "version", v, "err", err)
			}
			m.failed[v] = err
			f.setLocked(name, m, v, pb.ModelVersionStatus_END)
		case !m.wanted[v] || m.versions[v] != pb.ModelVersionStatus_LOADING:
			f.setLocked(name, m, v, pb.ModelVersionStatus_END) // dropped while it loaded
		default:
			delete(m.failed, v)
			m.servables[v] = sv
			f.setLocked(name, m, v, pb.ModelVersionStatus_AVAILABLE)
			f.log.Info("model server: version available", "model", name, "version", v)
		}
	})
}

// resolveLocked finds the version a spec names: its version, its label, or (neither)
// latest() of the model.
func (f *Fake) resolveLocked(spec *pb.ModelSpec, latest func(*fakeModel) (int64, bool)) (*fakeModel, int64, bool, error) {
	name := spec.GetName()
	m := f.mu.models[name]
	if m == nil || len(m.versions) == 0 {
		return nil, 0, false, status.Errorf(codes.NotFound, "Could not find any versions of model %s", name)
	}
	switch c := spec.GetVersionChoice().(type) {
	case *pb.ModelSpec_Version:
		v := c.Version.GetValue()
		if _, ok := m.versions[v]; !ok {
			return nil, 0, false, status.Errorf(codes.NotFound, "Could not find version %d of model %s", v, name)
		}
		return m, v, true, nil
	case *pb.ModelSpec_VersionLabel:
		v, ok := m.config.GetVersionLabels()[c.VersionLabel]
		if !ok {
			return nil, 0, false, status.Errorf(codes.NotFound, "Unrecognized servable version label %q of model %s", c.VersionLabel, name)
		}
		if _, ok := m.versions[v]; !ok {
			return nil, 0, false, status.Errorf(codes.NotFound, "Could not find version %d (label %q) of model %s", v, c.VersionLabel, name)
		}
		return m, v, true, nil
	}
	if latest == nil {
		return m, 0, false, nil
	}
	v, ok := latest(m)
	if !ok {
		return nil, 0, false, status.Errorf(codes.NotFound, "Servable not found for request: Latest(%s)", name)
	}
	return m, v, true, nil
}

// GetModelStatus implements ModelService: every version of the model in version order, or
// the asked one; unknown models, versions and labels are NOT_FOUND.
func (f *Fake) GetModelStatus(_ context.Context, req *pb.GetModelStatusRequest) (*pb.GetModelStatusResponse, error) {
	if req.GetModelSpec().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "Missing model name in request.")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, v, one, err := f.resolveLocked(req.GetModelSpec(), nil)
	if err != nil {
		return nil, err
	}
	vs := []int64{v}
	if !one {
		vs = slices.Sorted(maps.Keys(m.versions))
	}
	resp := &pb.GetModelStatusResponse{}
	for _, v := range vs {
		st := &pb.StatusProto{ErrorCode: tfcorepb.Code_OK}
		if err := m.failed[v]; err != nil && m.versions[v] == pb.ModelVersionStatus_END {
			st = &pb.StatusProto{ErrorCode: tfcorepb.Code_UNKNOWN, ErrorMessage: err.Error()}
		}
		resp.ModelVersionStatus = append(resp.ModelVersionStatus, &pb.ModelVersionStatus{Version: v, State: m.versions[v], Status: st})
	}
	return resp, nil
}

// HandleReloadConfigRequest implements ModelService: the config replaces the current one.
// A config the Fake refuses is answered in the response status (gRPC OK), as TF Serving
// does.
func (f *Fake) HandleReloadConfigRequest(_ context.Context, req *pb.ReloadConfigRequest) (*pb.ReloadConfigResponse, error) {
	cfg := req.GetConfig()
	if err := f.apply(cfg); err != nil {
		code := tfcorepb.Code_UNKNOWN
		if errors.Is(err, ErrInvalidConfig) {
			code = tfcorepb.Code_INVALID_ARGUMENT
		}
		f.log.Warn("fake TF Serving: reload refused", "err", err)
		return &pb.ReloadConfigResponse{Status: &pb.StatusProto{ErrorCode: code, ErrorMessage: err.Error()}}, nil
	}
	f.log.Info("fake TF Serving: config reloaded", "models", ModelNames(cfg))
	return &pb.ReloadConfigResponse{Status: &pb.StatusProto{ErrorCode: tfcorepb.Code_OK}}, nil
}

// GetModelMetadata implements PredictionService for the field "signature_def": the resolved
// spec (an AVAILABLE version) and an empty SignatureDefMap.
func (f *Fake) GetModelMetadata(_ context.Context, req *pb.GetModelMetadataRequest) (*pb.GetModelMetadataResponse, error) {
	if req.GetModelSpec().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "Missing ModelSpec")
	}
	if len(req.GetMetadataField()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "GetModelMetadataRequest must specify at least one metadata_field")
	}
	for _, field := range req.GetMetadataField() {
		if field != "signature_def" {
			return nil, status.Errorf(codes.InvalidArgument, "Metadata field %s is not supported", field)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, v, _, err := f.resolveLocked(req.GetModelSpec(), newestAvailable)
	if err != nil {
		return nil, err
	}
	if m.versions[v] != pb.ModelVersionStatus_AVAILABLE {
		return nil, status.Errorf(codes.NotFound, "Servable not found for request: Specific(%s, %d)", req.GetModelSpec().GetName(), v)
	}
	return &pb.GetModelMetadataResponse{
		ModelSpec: &pb.ModelSpec{
			Name:          req.GetModelSpec().GetName(),
			VersionChoice: &pb.ModelSpec_Version{Version: wrapperspb.Int64(v)},
			SignatureName: req.GetModelSpec().GetSignatureName(),
		},
		Metadata: map[string]*anypb.Any{"signature_def": {TypeUrl: SignatureDefMapURL}},
	}, nil
}

// newestAvailable is the newest AVAILABLE version of m.
func newestAvailable(m *fakeModel) (int64, bool) {
	best, ok := int64(0), false
	for v, s := range m.versions {
		if s == pb.ModelVersionStatus_AVAILABLE && (!ok || v > best) {
			best, ok = v, true
		}
	}
	return best, ok
}

// Predict implements PredictionService with the Loader's servable of the version the spec
// resolves to (asked, labelled, or the newest AVAILABLE); the response names that version.
// Without a Loader it is UNIMPLEMENTED: the double loads no model.
func (f *Fake) Predict(ctx context.Context, req *pb.PredictRequest) (*pb.PredictResponse, error) {
	if f.opts.Loader == nil {
		return nil, status.Error(codes.Unimplemented, "fake TF Serving loads no model and does not predict: run monolith serve")
	}
	name := req.GetModelSpec().GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "Missing ModelSpec")
	}
	f.mu.Lock()
	m, v, _, err := f.resolveLocked(req.GetModelSpec(), newestAvailable)
	var sv Servable
	if err == nil {
		if sv = m.servables[v]; sv == nil || m.versions[v] != pb.ModelVersionStatus_AVAILABLE {
			err = status.Errorf(codes.NotFound, "Servable not found for request: Specific(%s, %d)", name, v)
		}
	}
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	resp, err := sv.Predict(ctx, req)
	if err != nil {
		return nil, err
	}
	resp.ModelSpec = &pb.ModelSpec{Name: name, VersionChoice: &pb.ModelSpec_Version{Version: wrapperspb.Int64(v)},
		SignatureName: req.GetModelSpec().GetSignatureName()}
	return resp, nil
}
