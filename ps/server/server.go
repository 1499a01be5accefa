package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolith-go/monolith/internal/metricsrv"
	"github.com/monolith-go/monolith/internal/mix"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/ps/paramsync"
	"github.com/monolith-go/monolith/ps/pause"
	"github.com/monolith-go/monolith/ps/server/codec"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
	"github.com/monolith-go/monolith/schemas/trainingpb"
)

// ErrClosed is returned by Serve on a server that was closed.
var ErrClosed = errors.New("ps/server: server closed")

// Server is one PS shard: its tables, the ParameterServer gRPC service, the standard gRPC
// health service and the optional /metrics endpoint. Its methods are safe for concurrent
// use. The gRPC handlers may also be called directly (tests, in-process use).
type Server struct {
	pspb.UnimplementedParameterServerServer

	opts    Options
	log     *slog.Logger
	tables  []*table.Table
	byName  map[string]*table.Table
	evict   []time.Duration // per table; 0 when eviction is off
	ckptDir string          // this shard's checkpoint folder; "" without CheckpointDir
	// restored is the checkpoint this shard started from: retention keeps it for the
	// process's lifetime, so that the shutdown saves of failed runs never prune the
	// checkpoint the job restarts from.
	restored string

	// step is the global step: GlobalStep adds to it, ApplyGradients raises it to the
	// largest global_step seen, checkpoints save it and restore sets it.
	step     atomic.Int64
	dedup    *dedupSet // recent request ids per requester; nil when disabled
	barriers *barriers
	pause    *pause.Barrier // the training barrier (TrainingBarrier)
	readRSS  func() (int64, error)
	sync     *paramsync.Pusher // nil without Options.Sync
	// beforeSub, when set (tests), runs before each sub-request of a batch RPC.
	beforeSub func(op string, i int)
	saveMu    sync.Mutex // one save at a time

	grpc       *grpc.Server
	health     *health.Server
	lis        net.Listener
	metrics    *metrics
	registry   *prometheus.Registry  // where metrics are registered (Options.Registry or the server's own)
	registered prometheus.Registerer // registry with the shard's constant labels
	metricsSrv *metricsrv.Server     // GET /metrics when Options.MetricsListen is set
	unregister sync.Once

	stopping  chan struct{} // closed at shutdown: barrier waiters give up
	stopOnce  sync.Once
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
	serving   atomic.Bool   // Serve was called
	served    chan struct{} // closed when Serve returns
}

var _ pspb.ParameterServerServer = (*Server)(nil)

// gracePeriod bounds how long a graceful stop waits for in-flight RPCs.
const gracePeriod = 10 * time.Second

// New builds the tables of opts, restores the newest checkpoint of this shard when
// CheckpointDir holds one, and listens on opts.Listen (and opts.MetricsListen). A
// checkpoint that cannot be restored is an error naming its path: the server never starts
// empty over a damaged checkpoint. Serve starts serving; Close releases everything.
func New(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		opts:     opts,
		log:      opts.Logger.With("shard", opts.Shard, "num_shards", opts.NumShards),
		byName:   make(map[string]*table.Table),
		readRSS:  readRSS,
		dedup:    newDedupSet(opts.DedupWindow, opts.DedupRequesters),
		stopping: make(chan struct{}),
		closed:   make(chan struct{}),
		served:   make(chan struct{}),
	}
	s.barriers = newBarriers(s.stopping)
	s.pause = pause.New()
	s.metrics = newMetrics(s)
	for i, spec := range opts.Tables.GetTables() {
		t, err := table.FromSpec(spec, tableSeed(opts.Seed, opts.Shard, i))
		if err != nil {
			return nil, fmt.Errorf("ps/server: table %q: %w", spec.GetName(), err)
		}
		s.tables = append(s.tables, t)
		s.byName[t.Name()] = t
		var every time.Duration
		if c := spec.GetConfig(); c.GetEnableFeatureEviction() {
			every = time.Duration(max(c.GetFeatureEvictEveryNHours(), 1)) * time.Hour
		}
		s.evict = append(s.evict, every)
	}
	if opts.CheckpointDir != "" {
		s.ckptDir = ShardDir(opts.CheckpointDir, opts.Shard, opts.NumShards)
		if opts.RestoreFrom == "" {
			if err := checkShardCount(opts.CheckpointDir, opts.NumShards); err != nil {
				return nil, err
			}
		}
	}
	if opts.CheckpointDir != "" || opts.RestoreFrom != "" {
		if err := s.restore(); err != nil {
			return nil, err
		}
	}
	if opts.Sync != nil {
		so := *opts.Sync
		if so.Log == nil {
			so.Log = s.log
		}
		var err error
		if s.sync, err = paramsync.New(so, s.tables); err != nil {
			return nil, fmt.Errorf("ps/server: %w", err)
		}
	}

	s.registry = opts.Registry
	if s.registry == nil {
		s.registry = metricsrv.NewRegistry()
	}
	s.registered = prometheus.WrapRegistererWith(shardLabels(opts.Shard, opts.NumShards), s.registry)
	if err := s.metrics.register(s.registered); err != nil {
		return nil, fmt.Errorf("ps/server: shard %d: register metrics: %w", opts.Shard, err)
	}
	lis, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		s.metrics.unregister(s.registered)
		return nil, fmt.Errorf("ps/server: shard %d: listen: %w", opts.Shard, err)
	}
	s.lis = lis
	if opts.MetricsListen != "" {
		if s.metricsSrv, err = metricsrv.Listen(opts.MetricsListen, s.registry, s.log); err != nil {
			lis.Close()
			s.metrics.unregister(s.registered)
			return nil, fmt.Errorf("ps/server: shard %d: %w", opts.Shard, err)
		}
	}
	// Last: the gRPC server starts its stream workers at once, and only Serve's end or
	// Close stops them; no failure may come after it (TestNewFailsClean).
	s.grpc = grpc.NewServer(append(codec.ServerOptions(opts.MaxMessageBytes),
		grpc.ChainUnaryInterceptor(s.recoverInterceptor), tlsconf.ServerOption(opts.TLS))...)
	pspb.RegisterParameterServerServer(s.grpc, s)
	s.health = health.NewServer()
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(pspb.ParameterServer_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	return s, nil
}

// tableSeed derives the initializer seed of table i of a shard (splitmix64 finalizer).
func tableSeed(seed uint64, shard, i int) uint64 {
	return mix.Mix64(seed ^ uint64(shard)*0x9e3779b97f4a7c15 ^ uint64(i+1)*0xbf58476d1ce4e5b9)
}

// checkShardCount refuses a checkpoint directory whose shard folders hold checkpoints of
// another shard count: this shard's folder would be new, and it would start empty over
// the job's data.
func checkShardCount(dir string, n int) error {
	dirs, err := checkpoint.ShardDirs(dir)
	if err != nil {
		return nil // a new directory
	}
	for m, byIndex := range dirs {
		if m == n {
			continue
		}
		for _, p := range byIndex {
			if _, err := checkpoint.Latest(p); err == nil {
				return fmt.Errorf("%w: checkpoint directory %s holds checkpoints of %d PS shards (%s), but this job has %d; "+
					"start %d shards, or use another directory", ErrInvalidOptions, dir, m, filepath.Base(p), n, m)
			}
		}
	}
	return nil
}

// restore loads Options.RestoreFrom, else the newest checkpoint of the shard folder, into
// the fresh tables.
func (s *Server) restore() error {
	path, err := s.opts.RestoreFrom, error(nil)
	if path == "" {
		path, err = checkpoint.Latest(s.ckptDir)
	}
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint) || errors.Is(err, fs.ErrNotExist):
		s.log.Info("no checkpoint; starting empty", "dir", s.ckptDir)
		return nil
	case err != nil:
		return fmt.Errorf("ps/server: shard %d: find checkpoint in %s: %w", s.opts.Shard, s.ckptDir, err)
	}
	start := time.Now()
	// RestoreShard refuses another shard's checkpoint before loading anything.
	man, err := checkpoint.RestoreShard(context.Background(), path, s.tables, s.opts.Shard, s.opts.NumShards)
	if err != nil {
		return fmt.Errorf("ps/server: shard %d: restore checkpoint %s (not starting empty over it): %w", s.opts.Shard, path, err)
	}
	s.step.Store(man.GetStep())
	s.restored = path
	var applied int
	if err := checkpoint.ReadApplied(path, man, func(a *pspb.AppliedRequest) error {
		s.dedup.load(a.GetId(), a.GetValue())
		applied++
		return nil
	}); err != nil {
		return fmt.Errorf("ps/server: shard %d: restore checkpoint %s (not starting empty over it): %w", s.opts.Shard, path, err)
	}
	var entries int64
	for _, t := range s.tables {
		entries += t.Stats().Size
	}
	s.log.Info("restored checkpoint", "path", path, "step", man.GetStep(), "entries", entries, "applied_request_ids", applied, "took", time.Since(start))
	return nil
}

// Addr is the gRPC address the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// MetricsAddr is the address of /metrics, "" when it is off.
func (s *Server) MetricsAddr() string {
	if s.metricsSrv == nil {
		return ""
	}
	return s.metricsSrv.Addr()
}

// Registry is the registry holding the server's metrics: Options.Registry, or the
// server's own (with the Go and process collectors) when that is nil.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Tables are the served tables, in configuration order. Callers must not replace them.
func (s *Server) Tables() []*table.Table { return s.tables }

// Serve serves until ctx ends or Close is called. On the end of ctx it stops gracefully:
// the health service turns NOT_SERVING, barrier waiters are released with Unavailable,
// in-flight RPCs finish (for at most 10 s), and a final checkpoint is written when
// CheckpointDir is set; it then returns nil, or the error of that save. Close stops at
// once and writes no checkpoint, like a crash after the last save. Serve may be called once.
func (s *Server) Serve(ctx context.Context) error {
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("ps/server: Serve called twice")
	}
	defer close(s.served)
	select {
	case <-s.closed:
		s.stopNow()
		return ErrClosed
	default:
	}
	s.log.Debug("serving", "addr", s.Addr(), "metrics", s.MetricsAddr(), "tables", len(s.tables))

	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() {
		if err := s.grpc.Serve(s.lis); err != nil {
			errc <- fmt.Errorf("ps/server: grpc serve: %w", err)
		}
	})
	bg, stopBG := context.WithCancel(context.Background())
	s.background(bg, &wg)

	var err error
	save := true
	select {
	case <-ctx.Done():
	case <-s.closed:
		save = false
	case err = <-errc:
	}
	s.health.Shutdown()
	s.stopOnce.Do(func() { close(s.stopping) })
	stopBG()
	if save {
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(gracePeriod):
			s.log.Warn("graceful stop timed out; cancelling in-flight RPCs")
			s.grpc.Stop()
			<-done
		}
	}
	s.stopNow()
	wg.Wait()
	if save && s.ckptDir != "" {
		if _, serr := s.save(context.Background(), "shutdown", 0); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	s.log.Info("stopped", "err", err)
	return err
}

// stopNow stops serving at once. Safe to call more than once.
func (s *Server) stopNow() {
	s.health.Shutdown()
	s.stopOnce.Do(func() { close(s.stopping) })
	s.grpc.Stop()
	s.lis.Close()
	s.unregister.Do(func() {
		if s.sync != nil {
			s.sync.Close()
		}
		if s.metricsSrv != nil {
			if err := s.metricsSrv.Close(); err != nil {
				s.log.Debug("close metrics server", "err", err)
			}
		}
		s.metrics.unregister(s.registered)
	})
}

// Close stops the server at once without a final checkpoint (in-flight RPCs are cancelled)
// and waits for Serve to return. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		if s.serving.Load() {
			<-s.served
		}
		s.stopNow()
	})
	return nil
}

// background starts the periodic saver and the per-table evictors.
func (s *Server) background(ctx context.Context, wg *sync.WaitGroup) {
	if s.sync != nil {
		wg.Go(func() { s.sync.Run(ctx) })
	}
	if s.opts.SaveEvery > 0 && s.ckptDir != "" {
		wg.Go(func() {
			tick := time.NewTicker(s.opts.SaveEvery)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					if _, err := s.save(ctx, "periodic", 0); err != nil && ctx.Err() == nil {
						s.log.Error("periodic checkpoint failed", "err", err)
					}
				}
			}
		})
	}
	for i, every := range s.evict {
		if every <= 0 {
			continue
		}
		t := s.tables[i]
		wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					n := t.Evict()
					s.metrics.evicted.Add(float64(n))
					s.log.Info("evicted expired entries", "table", t.Name(), "entries", n)
				}
			}
		})
	}
}

// save writes a checkpoint of every table and prunes old ones.
func (s *Server) save(ctx context.Context, reason string, step int64) (checkpoint.Result, error) {
	if s.ckptDir == "" {
		return checkpoint.Result{}, errors.New("ps/server: no checkpoint directory configured")
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	start := time.Now()
	if step <= 0 {
		step = s.step.Load()
	}
	// The applied ids are taken before the tables: under the consistent saver (workers
	// paused) both agree exactly; an apply landing between the two would be applied again
	// by a retry after a restore, never lost.
	meta := checkpoint.Meta{Step: step, Shard: s.opts.Shard, NumShards: s.opts.NumShards, Applied: s.dedup.snapshot()}
	res, err := checkpoint.Save(ctx, s.ckptDir, meta, s.tables)
	if err != nil {
		s.metrics.saveErrors.Inc()
		return res, fmt.Errorf("ps/server: shard %d: save checkpoint in %s: %w", s.opts.Shard, s.ckptDir, err)
	}
	s.metrics.saves.Inc()
	s.metrics.saveLatency.Observe(time.Since(start).Seconds())
	s.log.Info("saved checkpoint", "reason", reason, "path", res.Path, "entries", res.Entries, "step", meta.Step, "took", time.Since(start))
	if err := checkpoint.Prune(s.ckptDir, s.opts.KeepCheckpoints, s.restored); err != nil {
		s.log.Warn("prune checkpoints", "dir", s.ckptDir, "err", err)
	}
	return res, nil
}

// recoverInterceptor turns a panic in a handler into codes.Internal instead of a crash.
func (s *Server) recoverInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "ps/server: internal error in %s", info.FullMethod)
		}
	}()
	return h(ctx, req)
}

// ---- handlers ----

// checkFids rejects requests over MaxFidsPerRequest with codes.ResourceExhausted.
func (s *Server) checkFids(op string, n int) error {
	if n <= s.opts.MaxFidsPerRequest {
		return nil
	}
	s.metrics.rejected.WithLabelValues(limitFidsPerRequest).Inc()
	return status.Errorf(codes.ResourceExhausted, "ps/server: %s of %d fids exceeds the limit of %d fids per request", op, n, s.opts.MaxFidsPerRequest)
}

// resolve finds the table of a request and checks its dim_size.
func (s *Server) resolve(op, name string, dim int32) (*table.Table, int, string) {
	t := s.byName[name]
	if t == nil {
		names := make([]string, len(s.tables))
		for i, t := range s.tables {
			names[i] = fmt.Sprintf("%q", t.Name())
		}
		return nil, 0, fmt.Sprintf("ps/server: %s: unknown table %q (shard %d of %d serves %s)",
			op, name, s.opts.Shard, s.opts.NumShards, strings.Join(names, ", "))
	}
	if dim <= 0 || int(dim) != t.Dim() {
		return nil, 0, fmt.Sprintf("ps/server: %s table %q: dim_size %d does not match the table dim %d", op, name, dim, t.Dim())
	}
	return t, t.Dim(), ""
}

// Lookup returns the rows of req.fids in request order (spec/ps.md §8.2): read-only with
// zeros for absent fids, or creating them with create_if_missing. A bad table or dim_size is
// status_code 1; more fids than MaxFidsPerRequest is codes.ResourceExhausted.
func (s *Server) Lookup(ctx context.Context, req *pspb.LookupRequest) (*pspb.LookupResponse, error) {
	if err := s.checkFids("lookup", len(req.GetFids())); err != nil {
		s.metrics.observeLookup(time.Now(), 0, true)
		return nil, err
	}
	return s.lookup(ctx, req), nil
}

// lookup answers one lookup; it takes a context only to share apply's shape in runBatch.
func (s *Server) lookup(_ context.Context, req *pspb.LookupRequest) (resp *pspb.LookupResponse) {
	start := time.Now()
	fids := req.GetFids()
	defer func() { s.metrics.observeLookup(start, len(fids), resp.StatusCode != statusOK) }()
	t, dim, msg := s.resolve("lookup", req.GetTable(), req.GetDimSize())
	if msg != "" {
		return &pspb.LookupResponse{StatusCode: statusFailure, ErrorMessage: msg}
	}
	// The reply is checked against the message limit before its embeddings are allocated.
	if reply := int64(len(fids)) * int64(dim) * 4; reply > int64(s.opts.MaxMessageBytes) {
		s.metrics.rejected.WithLabelValues(limitReplyBytes).Inc()
		return &pspb.LookupResponse{StatusCode: statusFailure, ErrorMessage: fmt.Sprintf(
			"ps/server: lookup table %q: a reply of %d fids × dim %d (%d bytes) exceeds the limit of %d message bytes", t.Name(), len(fids), dim, reply, s.opts.MaxMessageBytes)}
	}
	// Every float is written below; ServerCodec takes the buffer back once it is sent.
	out := codec.ReplyFloats(len(fids) * dim)
	var found []bool
	if req.GetWantFound() {
		found = make([]bool, len(fids))
	}
	var nf, ni int
	var err error
	if req.GetCreateIfMissing() {
		nf, ni, err = t.LookupOrCreate(fids, out, found)
	} else {
		nf, err = t.Lookup(fids, out, found)
	}
	if err != nil {
		return &pspb.LookupResponse{StatusCode: statusFailure, ErrorMessage: fmt.Sprintf("ps/server: lookup table %q: %v", t.Name(), err)}
	}
	return &pspb.LookupResponse{Embeddings: out, Found: found, NumFound: int64(nf), NumInitialized: int64(ni)}
}

// ApplyGradients steps every unique fid once with the sum of its gradients (spec/ps.md
// §8.3, P1, P2). Everything is validated before a table is touched; failures are
// status_code 1 and still count as applies in the statistics. A request_id already applied
// on this shard answers duplicate and applies nothing (see the package doc).
func (s *Server) ApplyGradients(ctx context.Context, req *pspb.ApplyGradientsRequest) (*pspb.ApplyGradientsResponse, error) {
	if err := s.checkFids("apply", len(req.GetFids())); err != nil {
		s.metrics.observeApply(time.Now(), 0, true)
		return nil, err
	}
	return s.apply(ctx, req), nil
}

// apply validates and applies one request. Its request id is reserved after validation
// and before the table is touched, committed when the table applied it and released when
// it failed, so a retry of a failed request applies.
func (s *Server) apply(ctx context.Context, req *pspb.ApplyGradientsRequest) (resp *pspb.ApplyGradientsResponse) {
	start := time.Now()
	fids, grads, lrs := req.GetFids(), req.GetGradients(), req.GetLearningRates()
	defer func() { s.metrics.observeApply(start, len(fids), resp.StatusCode != statusOK) }()
	fail := func(format string, args ...any) *pspb.ApplyGradientsResponse {
		return &pspb.ApplyGradientsResponse{StatusCode: statusFailure, ErrorMessage: fmt.Sprintf(format, args...)}
	}
	t, dim, msg := s.resolve("apply", req.GetTable(), req.GetDimSize())
	if msg != "" {
		return fail("%s", msg)
	}
	if want := int64(len(fids)) * int64(dim); int64(len(grads)) != want {
		return fail("ps/server: apply table %q: %d gradients for %d fids of dim %d, want %d", t.Name(), len(grads), len(fids), dim, want)
	}
	if n := len(lrs); n != 0 && n != t.Segments() {
		return fail("ps/server: apply table %q: %d learning rates, the table has %d segments (send none for the configured rates)", t.Name(), n, t.Segments())
	}
	if msg := checkClock(req.GetGlobalStep(), req.GetUpdateTime(), time.Now()); msg != "" {
		return fail("ps/server: apply table %q: %s", t.Name(), msg)
	}
	if k := nonFinite(grads); k >= 0 {
		if s.opts.NonFiniteGradients != NonFiniteSkip {
			s.metrics.nonFinite.Inc()
			return fail("ps/server: apply table %q: gradient %d (fid %d) is %v: non-finite gradients are rejected, nothing applied", t.Name(), k, fids[k/dim], grads[k])
		}
		var skipped int
		fids, grads, skipped = finiteRows(fids, grads, dim, k)
		s.metrics.nonFiniteSkipped.Add(float64(skipped))
	}
	if k := nonFinite(lrs); k >= 0 {
		s.metrics.nonFinite.Inc()
		return fail("ps/server: apply table %q: learning rate %d is %v: rejected, nothing applied", t.Name(), k, lrs[k])
	}
	id := req.GetRequestId()
	if len(id) > s.opts.MaxRequestIDBytes {
		s.metrics.rejected.WithLabelValues(limitRequestIDBytes).Inc()
		return fail("ps/server: apply table %q: request id of %d bytes exceeds the limit of %d request id bytes", t.Name(), len(id), s.opts.MaxRequestIDBytes)
	}
	rsv, _, dup, err := s.dedup.begin(ctx, id)
	switch {
	case err != nil:
		return fail("ps/server: apply table %q: request id %q: waiting for its first attempt: %v", t.Name(), id, err)
	case dup:
		s.metrics.duplicates.Inc()
		s.log.Debug("duplicate apply skipped", "table", t.Name(), "request_id", id)
		return &pspb.ApplyGradientsResponse{Duplicate: true}
	}
	defer rsv.release() // unless committed: a failure or a panic lets a retry apply
	table.StoreMax(&s.step, req.GetGlobalStep())
	r, err := t.Apply(fids, grads, lrs, req.GetGlobalStep(), req.GetUpdateTime())
	if err != nil {
		return fail("ps/server: apply table %q: %v", t.Name(), err)
	}
	if s.sync != nil {
		s.sync.Touch(t.Name(), fids)
	}
	rsv.commit(0)
	return &pspb.ApplyGradientsResponse{NumUpdated: int64(r.Updated), NumNotFound: int64(r.NotFound), NumCreated: int64(r.Created)}
}

// MaxGlobalStep bounds the global step an apply may carry: far above any real job, far
// below the overflow of the step arithmetic.
const MaxGlobalStep = int64(1) << 53

// updateTimeSlack is how far in the future an update_time may lie (clock skew).
const updateTimeSlack = 24 * time.Hour

// checkClock checks an apply's global step and update time (Unix seconds) against sane
// bounds; a non-empty message names the value and the bound.
func checkClock(step, updateTime int64, now time.Time) string {
	switch {
	case step < 0 || step > MaxGlobalStep:
		return fmt.Sprintf("global_step %d outside [0, %d]", step, MaxGlobalStep)
	case updateTime < 0 || updateTime > now.Add(updateTimeSlack).Unix():
		return fmt.Sprintf("update_time %d is not Unix seconds up to a day ahead (now %d; milliseconds?)", updateTime, now.Unix())
	}
	return ""
}

// finiteRows returns the fids whose gradient rows (of dim values) are finite, with those
// rows, in new slices, and how many fids it left out; first is the index of the first
// non-finite gradient.
func finiteRows(fids []int64, grads []float32, dim, first int) ([]int64, []float32, int) {
	keepF := make([]int64, 0, len(fids)-1)
	keepG := make([]float32, 0, len(grads)-dim)
	keepF, keepG = append(keepF, fids[:first/dim]...), append(keepG, grads[:first/dim*dim]...)
	for i := first / dim; i < len(fids); i++ {
		row := grads[i*dim : (i+1)*dim]
		if nonFinite(row) < 0 {
			keepF, keepG = append(keepF, fids[i]), append(keepG, row...)
		}
	}
	return keepF, keepG, len(fids) - len(keepF)
}

// nonFinite returns the index of the first NaN or infinite value of v, or -1.
func nonFinite(v []float32) int {
	for i, x := range v {
		if x-x != 0 { // NaN and ±Inf, without a conversion per element
			return i
		}
	}
	return -1
}

// GlobalStep adds req.increment to the global step and returns the new value; increment 0
// reads it. A negative increment is codes.InvalidArgument, one that would overflow int64
// codes.OutOfRange. A request_id already applied on this shard answers the step its first
// attempt returned, with duplicate set. The counter is the one ApplyGradients raises to the
// largest global_step it sees and checkpoints save, so it survives a restart from a
// checkpoint (increments after the last save are lost with it).
func (s *Server) GlobalStep(ctx context.Context, req *pspb.GlobalStepRequest) (*pspb.GlobalStepResponse, error) {
	s.metrics.globalSteps.Inc()
	inc, id := req.GetIncrement(), req.GetRequestId()
	if inc < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "ps/server: global step increment %d is negative", inc)
	}
	if len(id) > s.opts.MaxRequestIDBytes {
		s.metrics.rejected.WithLabelValues(limitRequestIDBytes).Inc()
		return nil, status.Errorf(codes.InvalidArgument, "ps/server: global step: request id of %d bytes exceeds the limit of %d request id bytes", len(id), s.opts.MaxRequestIDBytes)
	}
	rsv, prev, dup, err := s.dedup.begin(ctx, id)
	switch {
	case err != nil:
		return nil, status.FromContextError(err).Err()
	case dup:
		s.metrics.duplicates.Inc()
		s.log.Debug("duplicate global step skipped", "request_id", id, "step", prev)
		return s.withBarrier(&pspb.GlobalStepResponse{Step: prev, Duplicate: true}), nil
	}
	defer rsv.release() // unless committed
	for {
		cur := s.step.Load()
		if cur > math.MaxInt64-inc {
			return nil, status.Errorf(codes.OutOfRange, "ps/server: global step %d + increment %d overflows int64", cur, inc)
		}
		if s.step.CompareAndSwap(cur, cur+inc) {
			rsv.commit(cur + inc)
			return s.withBarrier(&pspb.GlobalStepResponse{Step: cur + inc}), nil
		}
	}
}

// withBarrier adds the training barrier's state to a GlobalStep response.
func (s *Server) withBarrier(r *pspb.GlobalStepResponse) *pspb.GlobalStepResponse {
	r.BarrierPlaced, r.BarrierAction = s.pause.Placed()
	return r
}

// maxBarrierHold bounds how long a TrainingBarrier WAIT holds the call.
const maxBarrierHold = time.Minute

// TrainingBarrier serves the training barrier (package pause): PLACE answers
// ALREADY_EXISTS when it is placed, LEAVE and WAIT an index that has not joined (a
// worker of the server's previous life, after a restart) FAILED_PRECONDITION; a WAIT holds the call for timeout_ms (at most a minute) or until the
// barrier is removed or the server stops.
func (s *Server) TrainingBarrier(ctx context.Context, req *pspb.TrainingBarrierRequest) (*pspb.TrainingBarrierResponse, error) {
	resp := &pspb.TrainingBarrierResponse{}
	s.metrics.trainingBarrier.WithLabelValues(strings.ToLower(req.GetOp().String())).Inc()
	switch req.GetOp() {
	case pspb.TrainingBarrierRequest_STATUS:
	case pspb.TrainingBarrierRequest_JOIN:
		resp.Index = int32(s.pause.Join())
		s.log.Debug("training barrier: worker joined", "index", resp.Index)
	case pspb.TrainingBarrierRequest_LEAVE:
		if err := s.pause.Leave(int(req.GetIndex())); err != nil {
			return nil, status.Error(codes.FailedPrecondition, "ps/server: "+err.Error())
		}
	case pspb.TrainingBarrierRequest_PLACE:
		if err := s.pause.Place(req.GetAction()); err != nil {
			return nil, status.Error(codes.AlreadyExists, "Barrier is placed already.")
		}
		s.log.Info("training barrier placed", "action", req.GetAction())
	case pspb.TrainingBarrierRequest_REMOVE:
		s.pause.Remove()
		s.log.Info("training barrier removed")
	case pspb.TrainingBarrierRequest_WAIT:
		hold := min(time.Duration(max(0, req.GetTimeoutMs()))*time.Millisecond, maxBarrierHold)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-s.stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
		if _, _, err := s.pause.Wait(ctx, int(req.GetIndex()), hold); err != nil {
			return nil, status.Error(codes.FailedPrecondition, "ps/server: "+err.Error())
		}
	default:
		return nil, status.Errorf(codes.InvalidArgument, "ps/server: unknown training barrier op %d", req.GetOp())
	}
	st := s.pause.Status()
	resp.Placed, resp.Action, resp.BlockedIndices, resp.UnblockedIndices = st.Placed, st.Action, st.Blocked, st.Unblocked
	return resp, nil
}

// Barrier is the generation-numbered barrier of spec/ps.md §8.4: status 0 when this
// worker's generation is released, 1 for an invalid or conflicting request, 2 on timeout
// (the worker then no longer counts as arrived). The end of the RPC context or the server's
// shutdown fails the RPC itself (Canceled, DeadlineExceeded, Unavailable).
func (s *Server) Barrier(ctx context.Context, req *pspb.BarrierRequest) (*pspb.BarrierResponse, error) {
	s.metrics.barriers.Inc()
	start := time.Now()
	resp, err := s.barriers.arrive(ctx, req)
	s.metrics.barrierLatency.Observe(time.Since(start).Seconds())
	switch {
	case errors.Is(err, errStopping):
		s.metrics.barrierErrors.Inc()
		return nil, status.Error(codes.Unavailable, err.Error())
	case err != nil:
		s.metrics.barrierErrors.Inc()
		return nil, status.FromContextError(err).Err()
	case resp.StatusCode == statusTimeout:
		s.metrics.barrierTimeouts.Inc()
	case resp.StatusCode != statusOK:
		s.metrics.barrierErrors.Inc()
	}
	return resp, nil
}

// HealthCheck is Monolith's machine-health check (spec/ps.md §7.7) for the components ""
// and "ps": unhealthy with status 1 (OUT_OF_MEMORY) when the resident set reaches
// MemLimitBytes. Other components are codes.NotFound.
func (s *Server) HealthCheck(_ context.Context, req *pspb.HealthCheckRequest) (*pspb.HealthCheckResponse, error) {
	switch c := req.GetComponent(); c {
	case "", "ps":
	default:
		return nil, status.Errorf(codes.NotFound, `ps/server: unknown health component %q (known: "", "ps")`, c)
	}
	rss, err := s.readRSS()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "ps/server: %v", err)
	}
	healthy, st, msg := memoryHealth(rss, s.opts.MemLimitBytes)
	var result []byte
	if !healthy {
		r := &trainingpb.MachineHealthResult{Status: trainingpb.MachineHealthResult_MachineHealthStatus(st).Enum(), Message: &msg}
		if result, err = proto.Marshal(r); err != nil {
			return nil, status.Errorf(codes.Internal, "ps/server: %v", err)
		}
	}
	return &pspb.HealthCheckResponse{Healthy: healthy, Status: st, Message: msg, RssBytes: rss, MemLimitBytes: s.opts.MemLimitBytes,
		MachineHealthResult: result}, nil
}

// GetStats returns the request counters, average latencies in microseconds (0 before the
// first request) and, when asked, every table's size and memory.
func (s *Server) GetStats(_ context.Context, req *pspb.GetStatsRequest) (*pspb.GetStatsResponse, error) {
	m := s.metrics
	avgLookup, lookups := avgMicros(m.lookupLatency)
	avgApply, applies := avgMicros(m.applyLatency)
	resp := &pspb.GetStatsResponse{
		LookupCount:         lookups,
		ApplyGradientsCount: applies,
		AvgLookupLatencyUs:  avgLookup,
		AvgApplyLatencyUs:   avgApply,
		Shard:               int32(s.opts.Shard),
		NumShards:           int32(s.opts.NumShards),
		DuplicateRequests:   count(m.duplicates),
	}
	if req.GetIncludeTableStats() {
		for _, t := range s.tables {
			st := t.Stats()
			resp.Tables = append(resp.Tables, &pspb.TableStats{
				Name: st.Name, Size: st.Size, Dim: int32(st.Dim), MemoryBytes: st.MemoryBytes,
				RawBytes: st.RawBytes, MaxUpdateTsSec: st.MaxUpdateTime,
			})
		}
	}
	if names := req.GetSlotCountTables(); len(names) > 0 {
		counts, err := s.slotCounts(names)
		if err != nil {
			return nil, err
		}
		resp.SlotCounts = counts
	}
	return resp, nil
}

// slotCounts counts the entries of the named tables per slot_id_v2 of their fids. It reads
// the tables like a save does (table.Snapshot), so training goes on meanwhile.
func (s *Server) slotCounts(names []string) (map[int32]int64, error) {
	counts := map[int32]int64{}
	for _, name := range names {
		t, ok := s.byName[name]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "ps/server: slot counts: unknown table %q", name)
		}
		err := t.Snapshot(func(d *hashtablepb.EntryDump) error {
			counts[int32(fid.SlotV2(uint64(d.GetId())))]++
			return nil
		})
		if err != nil {
			return nil, status.Errorf(codes.Internal, "ps/server: slot counts of %q: %v", name, err)
		}
	}
	return counts, nil
}

// BatchLookup runs independent Lookup sub-requests, concurrently; a failing one is
// status_code 1 in its own slot. The fid limit applies to their sum.
func (s *Server) BatchLookup(ctx context.Context, req *pspb.BatchLookupRequest) (*pspb.BatchLookupResponse, error) {
	resps, err := runBatch(ctx, s, "batch lookup", req.GetRequests(), s.metrics.observeLookup, s.lookup,
		func(msg string) *pspb.LookupResponse {
			return &pspb.LookupResponse{StatusCode: statusFailure, ErrorMessage: msg}
		})
	if err != nil {
		return nil, err
	}
	return &pspb.BatchLookupResponse{Responses: resps}, nil
}

// BatchApplyGradients runs independent ApplyGradients sub-requests, concurrently; a
// failing one is status_code 1 in its own slot. The fid limit applies to their sum.
// Sub-requests on the same table and fid are applied in an unspecified order. Each
// sub-request's request_id goes through the same window as ApplyGradients'.
func (s *Server) BatchApplyGradients(ctx context.Context, req *pspb.BatchApplyGradientsRequest) (*pspb.BatchApplyGradientsResponse, error) {
	resps, err := runBatch(ctx, s, "batch apply", req.GetRequests(), s.metrics.observeApply, s.apply,
		func(msg string) *pspb.ApplyGradientsResponse {
			return &pspb.ApplyGradientsResponse{StatusCode: statusFailure, ErrorMessage: msg}
		})
	if err != nil {
		return nil, err
	}
	return &pspb.BatchApplyGradientsResponse{Responses: resps}, nil
}

// runBatch checks the summed fids of a batch RPC's sub-requests against the limit (a
// rejection counts once in observe) and runs them concurrently; a nil sub-request gets
// fail's response.
func runBatch[Req interface {
	comparable
	GetFids() []int64
}, Resp any](ctx context.Context, s *Server, op string, reqs []Req, observe func(time.Time, int, bool), run func(context.Context, Req) Resp, fail func(msg string) Resp) ([]Resp, error) {
	if len(reqs) > s.opts.MaxSubRequests {
		s.metrics.rejected.WithLabelValues(limitSubRequests).Inc()
		observe(time.Now(), 0, true)
		return nil, status.Errorf(codes.ResourceExhausted, "ps/server: %s of %d sub-requests exceeds the limit of %d sub-requests per batch", op, len(reqs), s.opts.MaxSubRequests)
	}
	n := 0
	for _, r := range reqs {
		n += len(r.GetFids())
	}
	if err := s.checkFids(op, n); err != nil {
		observe(time.Now(), 0, true)
		return nil, err
	}
	resps := make([]Resp, len(reqs))
	var null Req
	parallel(len(reqs), func(i int) {
		if reqs[i] == null {
			resps[i] = fail(fmt.Sprintf("ps/server: %s: sub-request %d is nil", op, i))
			return
		}
		// The sub-requests run on goroutines of their own, out of the recovery
		// interceptor's reach: a panic fails the sub-request's slot, not the process.
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("panic in a batch sub-request", "op", op, "index", i, "panic", r, "stack", string(debug.Stack()))
				resps[i] = fail(fmt.Sprintf("ps/server: %s: sub-request %d: internal error", op, i))
			}
		}()
		if s.beforeSub != nil {
			s.beforeSub(op, i)
		}
		resps[i] = run(ctx, reqs[i])
	})
	return resps, nil
}

// Save writes a checkpoint of this shard now. Without a checkpoint directory it is
// codes.FailedPrecondition; a failed save is codes.Internal.
func (s *Server) Save(ctx context.Context, req *pspb.SaveRequest) (*pspb.SaveResponse, error) {
	if s.ckptDir == "" {
		return nil, status.Error(codes.FailedPrecondition, "ps/server: no checkpoint directory configured (start the server with a checkpoint directory)")
	}
	if req.GetGlobalStep() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "ps/server: save at global step %d: negative", req.GetGlobalStep())
	}
	res, err := s.save(ctx, "rpc", req.GetGlobalStep())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pspb.SaveResponse{Path: res.Path, Entries: res.Entries, Step: res.Step}, nil
}

// parallel calls f(0..n-1) on up to GOMAXPROCS goroutines and waits.
func parallel(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			f(i)
		}
	}
	// One worker is the calling goroutine, whose stack has grown to what the work needs.
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}
