package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/ps/server/codec"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// Defaults of the options.
const (
	DefaultDialTimeout     = 5 * time.Second
	DefaultCallTimeout     = 30 * time.Second
	DefaultSaveTimeout     = 10 * time.Minute
	DefaultRetries         = 3
	DefaultBackoff         = 50 * time.Millisecond
	DefaultMaxBackoff      = 2 * time.Second
	DefaultMaxMessageBytes = codec.DefaultMaxMessageBytes
)

// barrierGrace is added to a barrier's timeout for the RPC deadline, so that the server's
// own timeout answer (status 2) arrives first.
const barrierGrace = 5 * time.Second

type options struct {
	dialTimeout, callTimeout time.Duration
	saveTimeout              time.Duration
	retries                  int
	unavailableWait          time.Duration
	backoff, maxBackoff      time.Duration
	log                      *slog.Logger
	maxMsg                   int
	dialOpts                 []grpc.DialOption
	tls                      *tls.Config
	metrics                  *Metrics
}

// Option configures a Client.
type Option func(*options)

// WithDialTimeout bounds each connection attempt (default 5 s).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithCallTimeout bounds each RPC attempt (default 30 s; 0 means only the caller's
// context). Barriers use their own timeout plus 5 s instead.
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// WithSaveTimeout bounds each Save attempt (default 10 min; 0 means only the caller's
// context): a checkpoint of a large shard, or on a slow disk, outlasts the call timeout.
func WithSaveTimeout(d time.Duration) Option { return func(o *options) { o.saveTimeout = d } }

// WithRetries sets how many times an RPC failing with codes.Unavailable is retried
// (default 3). No other failure is retried.
func WithRetries(n int) Option { return func(o *options) { o.retries = n } }

// WithUnavailableWait keeps retrying a shard that answers codes.Unavailable until d has
// passed since the call's first attempt, however many retries that takes (default 0:
// only the retries of WithRetries). Every retry goes to the shard's current address, so
// a shard restarted elsewhere is reached as soon as SetShards names it (discovery's
// Follow); d bounds how long a call waits for that.
func WithUnavailableWait(d time.Duration) Option { return func(o *options) { o.unavailableWait = d } }

// WithLogger logs what a call waits for: a shard that stopped answering, its new address,
// its recovery (default: no log).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithBackoff sets the first retry delay and its cap; the delay doubles per retry
// (defaults 50 ms and 2 s).
func WithBackoff(initial, maxDelay time.Duration) Option {
	return func(o *options) { o.backoff, o.maxBackoff = initial, maxDelay }
}

// WithMaxMessageBytes bounds gRPC messages both ways (default 64 MiB; match the servers').
func WithMaxMessageBytes(n int) Option { return func(o *options) { o.maxMsg = n } }

// WithTLS dials the shards over TLS with cfg (internal/tlsconf; nil: plaintext, the
// default).
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithDialOptions appends gRPC dial options (credentials, interceptors, ...).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// conn is the connection to one address, shared by the shard sets that name it.
type conn struct {
	addr   string
	cc     *grpc.ClientConn // nil for an empty address
	stub   pspb.ParameterServerClient
	owners atomic.Int32 // shard-set slots referring to it
}

// shardSet is one membership: conns[k] serves shard k. Calls hold a reference while they
// run, so SetShards and Close never cut a call short.
type shardSet struct {
	conns []*conn
	mu    sync.Mutex
	refs  int
	dead  bool
}

// Client talks to the N shards of a parameter server: fid f lives on shard
// uint64(f) % N (P10). It is safe for concurrent use; calls take no client-wide lock.
type Client struct {
	opts  options
	setMu sync.Mutex // serializes SetShards and Close
	cur   atomic.Pointer[shardSet]
}

var errClosed = &InvalidConfigError{Msg: "no PS clients configured (the client is closed)"}

// New connects (lazily) to the shards at addrs, shard k at addrs[k]. An empty list is an
// *InvalidConfigError. An empty address marks a shard as missing: calls routed to it fail
// with codes.Unavailable until SetShards provides one.
func New(addrs []string, opts ...Option) (*Client, error) {
	o := options{
		dialTimeout: DefaultDialTimeout, callTimeout: DefaultCallTimeout, saveTimeout: DefaultSaveTimeout, retries: DefaultRetries,
		backoff: DefaultBackoff, maxBackoff: DefaultMaxBackoff, maxMsg: DefaultMaxMessageBytes,
	}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.dialTimeout < 0, o.callTimeout < 0, o.saveTimeout < 0, o.backoff < 0, o.maxBackoff < 0, o.unavailableWait < 0:
		return nil, &InvalidConfigError{Msg: "negative timeout or backoff"}
	case o.retries < 0:
		return nil, &InvalidConfigError{Msg: fmt.Sprintf("retries %d is negative", o.retries)}
	case o.maxMsg <= 0:
		return nil, &InvalidConfigError{Msg: fmt.Sprintf("max message bytes %d, want > 0", o.maxMsg)}
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	c := &Client{opts: o}
	set, err := c.newSet(addrs, nil)
	if err != nil {
		return nil, err
	}
	c.cur.Store(set)
	return c, nil
}

// dial opens a lazy connection to addr.
func (c *Client) dial(addr string) (*conn, error) {
	cn := &conn{addr: addr}
	if addr == "" {
		return cn, nil
	}
	bo := backoff.DefaultConfig
	bo.MaxDelay = 5 * time.Second
	dopts := append(codec.DialOptions(c.opts.maxMsg),
		tlsconf.DialOption(c.opts.tls),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: c.opts.dialTimeout}))
	dopts = append(dopts, c.opts.dialOpts...)
	cc, err := grpc.NewClient(addr, dopts...)
	if err != nil {
		return nil, &InvalidConfigError{Msg: fmt.Sprintf("shard address %q: %v", addr, err)}
	}
	cn.cc, cn.stub = cc, pspb.NewParameterServerClient(cc)
	return cn, nil
}

// newSet builds a shard set over addrs, reusing the connections of old to equal addresses.
func (c *Client) newSet(addrs []string, old *shardSet) (*shardSet, error) {
	if len(addrs) == 0 {
		return nil, &InvalidConfigError{Msg: "no PS shard addresses"}
	}
	byAddr := make(map[string]*conn)
	if old != nil {
		for _, cn := range old.conns {
			byAddr[cn.addr] = cn
		}
	}
	set := &shardSet{conns: make([]*conn, len(addrs))}
	for k, a := range addrs {
		cn := byAddr[a]
		if cn == nil {
			var err error
			if cn, err = c.dial(a); err != nil {
				set.conns = set.conns[:k]
				set.free()
				return nil, err
			}
			byAddr[a] = cn
		}
		cn.owners.Add(1)
		set.conns[k] = cn
	}
	return set, nil
}

// free drops the set's references to its connections, closing the unreferenced ones.
func (s *shardSet) free() {
	for _, cn := range s.conns {
		if cn.owners.Add(-1) == 0 && cn.cc != nil {
			cn.cc.Close()
		}
	}
}

// retire marks the set replaced; it is freed when its last call releases it.
func (s *shardSet) retire() {
	s.mu.Lock()
	s.dead = true
	free := s.refs == 0
	s.mu.Unlock()
	if free {
		s.free()
	}
}

func (s *shardSet) release() {
	s.mu.Lock()
	s.refs--
	free := s.dead && s.refs == 0
	s.mu.Unlock()
	if free {
		s.free()
	}
}

// acquire returns the current shard set with a reference held; release it when done.
func (c *Client) acquire() (*shardSet, error) {
	for {
		s := c.cur.Load()
		if s == nil {
			return nil, errClosed
		}
		s.mu.Lock()
		if !s.dead {
			s.refs++
			s.mu.Unlock()
			return s, nil
		}
		s.mu.Unlock() // replaced meanwhile: cur already points to its successor
	}
}

// SetShards replaces the shard addresses (a discovery membership change). Connections to
// unchanged addresses are kept; calls already running finish on the old set, whose other
// connections close when they are done. Changing the number of shards changes routing.
func (c *Client) SetShards(addrs []string) error {
	c.setMu.Lock()
	defer c.setMu.Unlock()
	old := c.cur.Load()
	if old == nil {
		return errClosed
	}
	set, err := c.newSet(addrs, old)
	if err != nil {
		return err
	}
	c.cur.Store(set)
	old.retire()
	return nil
}

// Addrs are the current shard addresses.
func (c *Client) Addrs() []string {
	s, err := c.acquire()
	if err != nil {
		return nil
	}
	defer s.release()
	out := make([]string, len(s.conns))
	for k, cn := range s.conns {
		out[k] = cn.addr
	}
	return out
}

// NumShards is the current number of shards (0 after Close).
func (c *Client) NumShards() int {
	if s := c.cur.Load(); s != nil {
		return len(s.conns)
	}
	return 0
}

// Close closes the connections once running calls finish; later calls fail with an
// *InvalidConfigError. It is idempotent.
func (c *Client) Close() error {
	c.setMu.Lock()
	defer c.setMu.Unlock()
	if old := c.cur.Swap(nil); old != nil {
		old.retire()
	}
	return nil
}

// call runs one RPC on shard k of set with the per-attempt timeout, retrying
// codes.Unavailable with exponential backoff: WithRetries times, or for as long as
// WithUnavailableWait allows. A retry goes to shard k's current address when SetShards
// changed it (same number of shards). Timeouts become *TimeoutError (inside an
// *RPCError); other failures *RPCError.
func call[T any](ctx context.Context, c *Client, set *shardSet, op string, k int, timeout time.Duration,
	f func(context.Context, pspb.ParameterServerClient) (T, error),
) (_ T, err error) {
	var zero T
	start := time.Now()
	defer func() { c.opts.metrics.observe(op, start, err) }()
	cn := set.conns[k]
	var held *shardSet // a newer membership a retry moved to
	defer func() {
		if held != nil {
			held.release()
		}
	}()
	delay := c.opts.backoff
	for attempt := 0; ; attempt++ {
		var resp T
		var err error
		if cn.cc == nil {
			err = status.Errorf(codes.Unavailable, "shard %d has no address", k)
		} else {
			actx, cancel := ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				actx, cancel = context.WithTimeout(ctx, timeout)
			}
			resp, err = f(actx, cn.stub)
			cancel()
		}
		if err == nil {
			if attempt > c.opts.retries {
				c.opts.log.Warn("PS shard answers again", "shard", k, "addr", cn.addr, "op", op, "after", time.Since(start).Round(time.Millisecond))
			}
			return resp, nil
		}
		code := status.Code(err)
		if ctx.Err() != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return zero, &RPCError{Op: op, Shard: k, Err: &TimeoutError{Op: op}}
			}
			return zero, &RPCError{Op: op, Shard: k, Err: ctx.Err()}
		}
		if code == codes.DeadlineExceeded {
			return zero, &RPCError{Op: op, Shard: k, Err: &TimeoutError{Op: op, After: timeout}}
		}
		waited := time.Since(start)
		if code != codes.Unavailable || attempt >= c.opts.retries && waited >= c.opts.unavailableWait {
			if code == codes.Unavailable && attempt > 0 {
				err = fmt.Errorf("%w (gave up after %d retries in %v)", err, attempt, waited.Round(time.Millisecond))
			}
			return zero, &RPCError{Op: op, Shard: k, Err: err}
		}
		if attempt == c.opts.retries {
			c.opts.log.Warn("PS shard unavailable: waiting for it to come back or for discovery to name its new address",
				"shard", k, "addr", cn.addr, "op", op, "err", status.Convert(err).Message(), "wait", c.opts.unavailableWait)
		}
		c.opts.metrics.retried(op)
		sleep := delay
		if attempt >= c.opts.retries { // past the retries, waiting: do not sleep past the wait
			sleep = max(min(delay, c.opts.unavailableWait-waited), time.Millisecond)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, &RPCError{Op: op, Shard: k, Err: err}
		case <-t.C:
		}
		delay = min(2*delay, c.opts.maxBackoff)
		// The next attempt goes where the current membership says shard k is.
		if ns, aerr := c.acquire(); aerr == nil {
			if len(ns.conns) == len(set.conns) && ns.conns[k] != cn {
				c.opts.log.Warn("PS shard moved: retrying at its new address", "shard", k, "from", cn.addr, "to", ns.conns[k].addr, "op", op)
				if held != nil {
					held.release()
				}
				held, cn = ns, ns.conns[k]
			} else {
				ns.release()
			}
		}
	}
}

// fanout runs f for every listed shard (or call of a plan) concurrently, the first on the
// calling goroutine, and joins the errors in list order.
func fanout(shards []int, f func(k int) error) error {
	switch len(shards) {
	case 0:
		return nil
	case 1:
		return f(shards[0])
	}
	// The first shard's call runs on the caller's goroutine, whose stack has already
	// grown to what a gRPC call needs; a new goroutine grows its own on every call.
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, k := range shards[1:] {
		wg.Go(func() { errs[i+1] = f(k) })
	}
	errs[0] = f(shards[0])
	wg.Wait()
	return errors.Join(errs...)
}

func allShards(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func (c *Client) checkShard(set *shardSet, k int) error {
	if k < 0 || k >= len(set.conns) {
		return &InvalidConfigError{Msg: fmt.Sprintf("shard %d out of range [0, %d)", k, len(set.conns))}
	}
	return nil
}

// LookupOptions are the optional parts of a Lookup.
type LookupOptions struct {
	// CreateIfMissing creates absent fids that pass the admission filter.
	CreateIfMissing bool
	// WantFound fills LookupResult.Found.
	WantFound bool
}

// LookupResult is a Lookup's rows and counts (spec/ps.md §8.2, per position).
type LookupResult struct {
	// Embeddings holds len(fids) × dim floats in request order; absent fids are zeros.
	Embeddings []float32
	// Found[i] reports whether fids[i] existed (only with WantFound).
	Found          []bool
	NumFound       int64
	NumInitialized int64
}

// position is where the answer for one request position lives: shard and index in that
// shard's sub-request.
type position struct{ shard, local int32 }

// routing is the split of a request's fids over the shards (uint64(f) % n).
type routing struct {
	// per[k] are shard k's fids in request order; when one shard holds every fid, per[k] is
	// the request's slice itself.
	per [][]int64
	// pos maps each request position to its shard answer; nil when one shard holds every
	// fid (its answer is then already in request order).
	pos []position
	// shards are the involved shards, in increasing order.
	shards []int
}

// route assigns each position of fids (non-empty) to its shard.
func route(fids []int64, n int) routing {
	counts := make([]int, n)
	var r routing
	for _, f := range fids {
		k := int(uint64(f) % uint64(n))
		if counts[k] == 0 {
			r.shards = append(r.shards, k)
		}
		counts[k]++
	}
	r.per = make([][]int64, n)
	if len(r.shards) == 1 {
		r.per[r.shards[0]] = fids
		return r
	}
	slices.Sort(r.shards)
	for _, k := range r.shards {
		r.per[k] = make([]int64, 0, counts[k])
	}
	r.pos = make([]position, len(fids))
	for i, f := range fids {
		k := int(uint64(f) % uint64(n))
		r.pos[i] = position{shard: int32(k), local: int32(len(r.per[k]))}
		r.per[k] = append(r.per[k], f)
	}
	return r
}

// Lookup returns the rows of fids of a table, in request order, asking every involved shard
// concurrently. A shard answering a non-zero status is a *StatusError; a failed RPC an
// *RPCError.
func (c *Client) Lookup(ctx context.Context, table string, dim int, fids []int64, opts LookupOptions) (*LookupResult, error) {
	res, err := c.LookupTables(ctx, []TableLookup{{Table: table, Dim: dim, Fids: fids}}, opts)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// TableLookup is one table's part of a LookupTables call.
type TableLookup struct {
	Table string
	Dim   int // the table's full entry dimension
	Fids  []int64
}

// LookupTables looks up several tables in one round: every involved shard gets one RPC
// holding its part of every request (BatchLookup; a plain Lookup when it holds one), and
// the shards are asked concurrently. The results are in the order of reqs, each as Lookup
// returns it. A shard's parts count together against its per-request fid limit; more
// than maxSubRequests parts go to a shard in several calls.
func (c *Client) LookupTables(ctx context.Context, reqs []TableLookup, opts LookupOptions) ([]*LookupResult, error) {
	for _, q := range reqs {
		if q.Dim <= 0 || q.Dim > math.MaxInt32 {
			return nil, &InvalidConfigError{Msg: fmt.Sprintf("lookup table %q: dim %d, want > 0", q.Table, q.Dim)}
		}
		if len(q.Fids) > math.MaxInt32 {
			return nil, &InvalidConfigError{Msg: fmt.Sprintf("lookup table %q: %d fids", q.Table, len(q.Fids))}
		}
	}
	set, err := c.acquire()
	if err != nil {
		return nil, err
	}
	defer set.release()
	p := makePlan(len(set.conns), len(reqs), func(i int) []int64 { return reqs[i].Fids })
	resps := make([][]*pspb.LookupResponse, len(reqs)) // [request][shard]
	for i := range reqs {
		resps[i] = make([]*pspb.LookupResponse, len(set.conns))
	}
	sub := func(i, k int) *pspb.LookupRequest {
		q := reqs[i]
		return &pspb.LookupRequest{Table: q.Table, DimSize: int32(q.Dim), Fids: p.routes[i].per[k], CreateIfMissing: opts.CreateIfMissing, WantFound: opts.WantFound}
	}
	err = sendRound(ctx, c, set, p, lookupRPCs, sub, func(i, k int, resp *pspb.LookupResponse) error {
		q, n := reqs[i], len(p.routes[i].per[k])
		switch {
		case resp.GetStatusCode() != 0:
			return &StatusError{Op: "Lookup", Shard: k, Code: resp.GetStatusCode(), Msg: resp.GetErrorMessage()}
		case len(resp.GetEmbeddings()) != n*q.Dim || (opts.WantFound && len(resp.GetFound()) != n):
			return &RPCError{Op: "Lookup", Shard: k, Err: fmt.Errorf("malformed response for table %q: %d floats and %d found flags for %d fids of dim %d",
				q.Table, len(resp.GetEmbeddings()), len(resp.GetFound()), n, q.Dim)}
		}
		resps[i][k] = resp
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*LookupResult, len(reqs))
	for i, q := range reqs {
		out[i] = lookupResult(q, p.routes[i], resps[i], opts)
	}
	return out, nil
}

// lookupResult puts one request's shard answers back in request order.
func lookupResult(q TableLookup, r routing, resps []*pspb.LookupResponse, opts LookupOptions) *LookupResult {
	res := &LookupResult{}
	if len(q.Fids) == 0 {
		res.Embeddings = []float32{}
		if opts.WantFound {
			res.Found = []bool{}
		}
		return res
	}
	for _, resp := range resps {
		res.NumFound += resp.GetNumFound()
		res.NumInitialized += resp.GetNumInitialized()
	}
	if r.pos == nil { // one shard: its answer is in request order
		resp := resps[r.shards[0]]
		res.Embeddings = resp.Embeddings
		if opts.WantFound {
			res.Found = resp.Found
		}
		return res
	}
	dim := q.Dim
	res.Embeddings = make([]float32, len(q.Fids)*dim)
	if opts.WantFound {
		res.Found = make([]bool, len(q.Fids))
	}
	for i, p := range r.pos {
		resp, l := resps[p.shard], int(p.local)
		copy(res.Embeddings[i*dim:(i+1)*dim], resp.Embeddings[l*dim:(l+1)*dim])
		if opts.WantFound {
			res.Found[i] = resp.Found[l]
		}
	}
	return res
}

// plan is the split of several requests' fids over the shards.
type plan struct {
	routes []routing   // per request; the zero routing for one without fids
	calls  []shardCall // one RPC each, by shard
}

// shardCall is one RPC of a plan: the requests with fids on shard, in request order.
type shardCall struct {
	shard int
	subs  []int
}

// maxSubRequests is the most requests one batch RPC carries: the server's default limit.
// A shard holding parts of more gets several calls.
const maxSubRequests = codec.DefaultMaxSubRequests

// makePlan routes the fids of each of count requests over n shards.
func makePlan(n, count int, fids func(i int) []int64) plan {
	p := plan{routes: make([]routing, count)}
	subs := make([][]int, n)
	for i := range count {
		f := fids(i)
		if len(f) == 0 {
			continue
		}
		p.routes[i] = route(f, n)
		for _, k := range p.routes[i].shards {
			subs[k] = append(subs[k], i)
		}
	}
	for k, s := range subs {
		for len(s) > 0 {
			m := min(len(s), maxSubRequests)
			p.calls = append(p.calls, shardCall{shard: k, subs: s[:m]})
			s = s[m:]
		}
	}
	return p
}

// callIndexes are 0..len(p.calls)-1, for fanout.
func (p plan) callIndexes() []int { return allShards(len(p.calls)) }

// rpcs are the plain and the batch RPC of one kind of request.
type rpcs[Req, Resp any] struct {
	op, batchOp string
	one         func(pspb.ParameterServerClient, context.Context, Req, ...grpc.CallOption) (Resp, error)
	batch       func(context.Context, pspb.ParameterServerClient, []Req) ([]Resp, error)
}

var lookupRPCs = rpcs[*pspb.LookupRequest, *pspb.LookupResponse]{
	op: "Lookup", batchOp: "BatchLookup", one: pspb.ParameterServerClient.Lookup,
	batch: func(ctx context.Context, s pspb.ParameterServerClient, r []*pspb.LookupRequest) ([]*pspb.LookupResponse, error) {
		resp, err := s.BatchLookup(ctx, &pspb.BatchLookupRequest{Requests: r})
		return resp.GetResponses(), err
	},
}

var applyRPCs = rpcs[*pspb.ApplyGradientsRequest, *pspb.ApplyGradientsResponse]{
	op: "ApplyGradients", batchOp: "BatchApplyGradients", one: pspb.ParameterServerClient.ApplyGradients,
	batch: func(ctx context.Context, s pspb.ParameterServerClient, r []*pspb.ApplyGradientsRequest) ([]*pspb.ApplyGradientsResponse, error) {
		resp, err := s.BatchApplyGradients(ctx, &pspb.BatchApplyGradientsRequest{Requests: r})
		return resp.GetResponses(), err
	},
}

// sendRound sends the calls of p concurrently, each the plain RPC when it carries one
// part and the batch RPC otherwise; sub(i, k) is request i's part for shard k. Every
// part's answer goes to check, whose errors are joined with the failed calls'.
func sendRound[Req, Resp any](ctx context.Context, c *Client, set *shardSet, p plan, r rpcs[Req, Resp],
	sub func(i, k int) Req, check func(i, k int, resp Resp) error,
) error {
	return fanout(p.callIndexes(), func(ci int) error {
		k, subs := p.calls[ci].shard, p.calls[ci].subs
		var got []Resp
		if len(subs) == 1 {
			resp, err := call(ctx, c, set, r.op, k, c.opts.callTimeout, func(ctx context.Context, s pspb.ParameterServerClient) (Resp, error) {
				return r.one(s, ctx, sub(subs[0], k))
			})
			if err != nil {
				return err
			}
			got = []Resp{resp}
		} else {
			reqs := make([]Req, len(subs))
			for j, i := range subs {
				reqs[j] = sub(i, k)
			}
			var err error
			if got, err = call(ctx, c, set, r.batchOp, k, c.opts.callTimeout, func(ctx context.Context, s pspb.ParameterServerClient) ([]Resp, error) {
				return r.batch(ctx, s, reqs)
			}); err != nil {
				return err
			}
			if len(got) != len(subs) {
				return &RPCError{Op: r.batchOp, Shard: k, Err: fmt.Errorf("malformed response: %d answers to %d sub-requests", len(got), len(subs))}
			}
		}
		var errs []error
		for j, i := range subs {
			errs = append(errs, check(i, k, got[j]))
		}
		return errors.Join(errs...)
	})
}

// ApplyResult sums the shards' ApplyGradients counts (unique fids, P2).
type ApplyResult struct {
	NumUpdated  int64 // stepped, created ones included
	NumNotFound int64 // absent and not created
	NumCreated  int64
	// Duplicates is how many shards answered duplicate: they had already applied the
	// request id (a retry whose first answer was lost) and did nothing this time, so their
	// fids are not in the counts above.
	Duplicates int
}

// ApplyRequest is one ApplyGradients call of Apply.
type ApplyRequest struct {
	// Table and Dim name the table and its full entry dimension.
	Table string
	Dim   int
	// Fids and Grads: Grads holds len(Fids) × Dim floats, row i for Fids[i]; duplicate
	// fids are summed by the servers (P2).
	Fids  []int64
	Grads []float32
	// LRs holds one learning rate per segment, or none for the configured ones.
	LRs []float32
	// Step is the global step; UpdateTime the data time in Unix seconds (0: the servers'
	// clock).
	Step, UpdateTime int64
	// RequestID, when set, makes the call idempotent: it is sent to every shard the fids
	// live on, and a shard that already applied it (a retry of this call, by this client or
	// the caller) answers duplicate instead of applying it again. Use a new id per logical
	// update, the same one for its retries. Empty: no deduplication.
	RequestID string
}

// ApplyGradients is Apply without a request id: grads holds len(fids) × dim floats, lrs
// one learning rate per segment or none, updateTime 0 means the servers' clock.
func (c *Client) ApplyGradients(ctx context.Context, table string, dim int, fids []int64, grads, lrs []float32, step, updateTime int64) (*ApplyResult, error) {
	return c.Apply(ctx, ApplyRequest{Table: table, Dim: dim, Fids: fids, Grads: grads, LRs: lrs, Step: step, UpdateTime: updateTime})
}

// Apply sends each shard its fids with their gradients and the learning rates. Shards
// apply independently: when some fail, the others' updates stand and the error joins the
// failures; retrying the whole call with the same req.RequestID then applies it only on
// the shards that did not. A call retried after codes.Unavailable carries the same
// request id, so with one the retry cannot apply twice.
func (c *Client) Apply(ctx context.Context, req ApplyRequest) (*ApplyResult, error) {
	res, err := c.ApplyTables(ctx, []ApplyRequest{req})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// ApplyTables applies several requests in one round, as Apply applies one: every involved
// shard gets one RPC holding its part of every request (BatchApplyGradients; a plain
// ApplyGradients when it holds one), and the shards are asked concurrently. Each part
// carries its request's RequestID, so a retry of the whole call applies only the parts
// that failed. The results are in the order of reqs. A shard's parts count together
// against its per-request fid limit; more than maxSubRequests parts go to a shard in
// several calls.
func (c *Client) ApplyTables(ctx context.Context, reqs []ApplyRequest) ([]*ApplyResult, error) {
	for _, q := range reqs {
		if q.Dim <= 0 || q.Dim > math.MaxInt32 {
			return nil, &InvalidConfigError{Msg: fmt.Sprintf("apply table %q: dim %d, want > 0", q.Table, q.Dim)}
		}
		if len(q.Fids) > math.MaxInt32 || len(q.Grads) != len(q.Fids)*q.Dim {
			return nil, &InvalidConfigError{Msg: fmt.Sprintf("apply table %q: %d gradients for %d fids of dim %d", q.Table, len(q.Grads), len(q.Fids), q.Dim)}
		}
	}
	set, err := c.acquire()
	if err != nil {
		return nil, err
	}
	defer set.release()
	p := makePlan(len(set.conns), len(reqs), func(i int) []int64 { return reqs[i].Fids })
	grads := make([][][]float32, len(reqs)) // [request][shard]
	resps := make([][]*pspb.ApplyGradientsResponse, len(reqs))
	for i, q := range reqs {
		grads[i] = splitGrads(p.routes[i], q.Grads, q.Dim)
		resps[i] = make([]*pspb.ApplyGradientsResponse, len(set.conns))
	}
	sub := func(i, k int) *pspb.ApplyGradientsRequest {
		q := reqs[i]
		return &pspb.ApplyGradientsRequest{
			Table: q.Table, DimSize: int32(q.Dim), Fids: p.routes[i].per[k], Gradients: grads[i][k],
			LearningRates: q.LRs, GlobalStep: q.Step, UpdateTime: q.UpdateTime, RequestId: q.RequestID,
		}
	}
	err = sendRound(ctx, c, set, p, applyRPCs, sub, func(i, k int, resp *pspb.ApplyGradientsResponse) error {
		if resp.GetStatusCode() != 0 {
			return &StatusError{Op: "ApplyGradients", Shard: k, Code: resp.GetStatusCode(), Msg: resp.GetErrorMessage()}
		}
		resps[i][k] = resp
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*ApplyResult, len(reqs))
	for i := range reqs {
		res := &ApplyResult{}
		for _, resp := range resps[i] {
			res.NumUpdated += resp.GetNumUpdated()
			res.NumNotFound += resp.GetNumNotFound()
			res.NumCreated += resp.GetNumCreated()
			if resp.GetDuplicate() {
				res.Duplicates++
			}
		}
		out[i] = res
	}
	return out, nil
}

// splitGrads splits the rows of grads (dim floats per fid) over the shards as r split
// the fids: the slice itself when one shard holds every fid.
func splitGrads(r routing, grads []float32, dim int) [][]float32 {
	per := make([][]float32, len(r.per))
	switch {
	case len(r.shards) == 0:
	case r.pos == nil:
		per[r.shards[0]] = grads
	default:
		for _, k := range r.shards {
			per[k] = make([]float32, 0, len(r.per[k])*dim)
		}
		for i, p := range r.pos {
			per[p.shard] = append(per[p.shard], grads[i*dim:(i+1)*dim]...)
		}
	}
	return per
}

// GlobalStep adds increment (>= 0) to the global step kept by shard 0 (Monolith's
// global_step variable on PS 0) and returns the new value; increment 0 reads it. With a
// requestID the call is idempotent: a repeat of an applied id returns the step that the
// first attempt returned and adds nothing. A negative increment is an
// *InvalidConfigError.
func (c *Client) GlobalStep(ctx context.Context, increment int64, requestID string) (int64, error) {
	resp, err := c.GlobalStepState(ctx, increment, requestID)
	if err != nil {
		return 0, err
	}
	return resp.GetStep(), nil
}

// Barrier waits on barrier id of the coordinator, shard 0, until all numWorkers workers
// arrived (spec/ps.md §8.4). A timeout is a *TimeoutError (after which every worker may
// retry); a mismatched num_workers or a duplicate arrival an *InvalidConfigError.
func (c *Client) Barrier(ctx context.Context, id string, worker, numWorkers int, timeout time.Duration) error {
	return c.BarrierOnShard(ctx, 0, id, worker, numWorkers, timeout)
}

// BarrierOnShard is Barrier with shard k as the coordinator.
func (c *Client) BarrierOnShard(ctx context.Context, k int, id string, worker, numWorkers int, timeout time.Duration) error {
	switch {
	case timeout <= 0:
		return &InvalidConfigError{Msg: fmt.Sprintf("barrier %q: timeout %v, want > 0", id, timeout)}
	case numWorkers <= 0 || numWorkers > math.MaxInt32:
		return &InvalidConfigError{Msg: fmt.Sprintf("barrier %q: num_workers %d, want > 0", id, numWorkers)}
	case worker < 0 || worker >= numWorkers:
		return &InvalidConfigError{Msg: fmt.Sprintf("barrier %q: worker %d out of range [0, %d)", id, worker, numWorkers)}
	}
	set, err := c.acquire()
	if err != nil {
		return err
	}
	defer set.release()
	if err := c.checkShard(set, k); err != nil {
		return err
	}
	ms := (timeout + time.Millisecond - 1) / time.Millisecond
	resp, err := call(ctx, c, set, "Barrier", k, timeout+barrierGrace, func(ctx context.Context, s pspb.ParameterServerClient) (*pspb.BarrierResponse, error) {
		return s.Barrier(ctx, &pspb.BarrierRequest{BarrierId: id, WorkerId: int32(worker), NumWorkers: int32(numWorkers), TimeoutMs: int64(ms)})
	})
	if err != nil {
		return err
	}
	switch resp.GetStatusCode() {
	case 0:
		return nil
	case 2:
		return &TimeoutError{Op: "Barrier", After: timeout}
	case 1:
		return &InvalidConfigError{Msg: resp.GetErrorMessage()}
	default:
		return &RPCError{Op: "Barrier", Shard: k, Err: fmt.Errorf("status %d: %s", resp.GetStatusCode(), resp.GetErrorMessage())}
	}
}

// HealthCheck checks component on shard 0.
func (c *Client) HealthCheck(ctx context.Context, component string) (*pspb.HealthCheckResponse, error) {
	return c.HealthCheckShard(ctx, 0, component)
}

// HealthCheckShard checks component on shard k.
func (c *Client) HealthCheckShard(ctx context.Context, k int, component string) (*pspb.HealthCheckResponse, error) {
	return onShard(ctx, c, "HealthCheck", k, healthCheck(component))
}

// HealthCheckAll checks component on every shard in parallel. Slot k is shard k's answer,
// nil when it failed; err joins the failures.
func (c *Client) HealthCheckAll(ctx context.Context, component string) ([]*pspb.HealthCheckResponse, error) {
	return onAll(ctx, c, "HealthCheck", healthCheck(component))
}

func healthCheck(component string) func(context.Context, pspb.ParameterServerClient) (*pspb.HealthCheckResponse, error) {
	return func(ctx context.Context, s pspb.ParameterServerClient) (*pspb.HealthCheckResponse, error) {
		return s.HealthCheck(ctx, &pspb.HealthCheckRequest{Component: component})
	}
}

// GetStats returns the statistics of shard 0.
func (c *Client) GetStats(ctx context.Context, includeTables bool) (*pspb.GetStatsResponse, error) {
	return c.GetStatsShard(ctx, 0, includeTables)
}

// GetStatsShard returns the statistics of shard k.
func (c *Client) GetStatsShard(ctx context.Context, k int, includeTables bool) (*pspb.GetStatsResponse, error) {
	return onShard(ctx, c, "GetStats", k, getStats(includeTables))
}

// GetStatsAll returns every shard's statistics, fetched in parallel. Slot k is shard k's,
// nil when it failed; err joins the failures.
func (c *Client) GetStatsAll(ctx context.Context, includeTables bool) ([]*pspb.GetStatsResponse, error) {
	return onAll(ctx, c, "GetStats", getStats(includeTables))
}

// SlotCounts sums every shard's entries per slot (slot_id_v2 of the fid) of the named
// tables.
func (c *Client) SlotCounts(ctx context.Context, tables []string) (map[int32]int64, error) {
	resps, err := onAll(ctx, c, "GetStats", func(ctx context.Context, s pspb.ParameterServerClient) (*pspb.GetStatsResponse, error) {
		return s.GetStats(ctx, &pspb.GetStatsRequest{SlotCountTables: tables})
	})
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, r := range resps {
		for slot, n := range r.GetSlotCounts() {
			out[slot] += n
		}
	}
	return out, nil
}

func getStats(includeTables bool) func(context.Context, pspb.ParameterServerClient) (*pspb.GetStatsResponse, error) {
	return func(ctx context.Context, s pspb.ParameterServerClient) (*pspb.GetStatsResponse, error) {
		return s.GetStats(ctx, &pspb.GetStatsRequest{IncludeTableStats: includeTables})
	}
}

// Save makes every shard write a checkpoint now, in parallel. Slot k is shard k's answer,
// nil when it failed; err joins the failures.
func (c *Client) Save(ctx context.Context) ([]*pspb.SaveResponse, error) { return c.SaveAt(ctx, 0) }

// SaveAt is Save with every shard recording step as its checkpoint's step (0: each its
// own counter).
func (c *Client) SaveAt(ctx context.Context, step int64) ([]*pspb.SaveResponse, error) {
	if step < 0 {
		return nil, &InvalidConfigError{Msg: fmt.Sprintf("save at step %d: negative", step)}
	}
	return onAllWithin(ctx, c, "Save", c.opts.saveTimeout, func(ctx context.Context, s pspb.ParameterServerClient) (*pspb.SaveResponse, error) {
		return s.Save(ctx, &pspb.SaveRequest{GlobalStep: step})
	})
}

func onShard[T any](ctx context.Context, c *Client, op string, k int, f func(context.Context, pspb.ParameterServerClient) (T, error)) (T, error) {
	var zero T
	set, err := c.acquire()
	if err != nil {
		return zero, err
	}
	defer set.release()
	if err := c.checkShard(set, k); err != nil {
		return zero, err
	}
	return call(ctx, c, set, op, k, c.opts.callTimeout, f)
}

func onAll[T any](ctx context.Context, c *Client, op string, f func(context.Context, pspb.ParameterServerClient) (T, error)) ([]T, error) {
	return onAllWithin(ctx, c, op, c.opts.callTimeout, f)
}

// onAllWithin is onAll with timeout bounding each attempt.
func onAllWithin[T any](ctx context.Context, c *Client, op string, timeout time.Duration, f func(context.Context, pspb.ParameterServerClient) (T, error)) ([]T, error) {
	set, err := c.acquire()
	if err != nil {
		return nil, err
	}
	defer set.release()
	out := make([]T, len(set.conns))
	err = fanout(allShards(len(set.conns)), func(k int) error {
		r, err := call(ctx, c, set, op, k, timeout, f)
		out[k] = r
		return err
	})
	return out, err
}
