package zk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// DefaultSessionTimeout is the session timeout Connect asks for when Options leaves it
// zero; the server may grant less.
const DefaultSessionTimeout = 10 * time.Second

// Errors. ZooKeeper's own errors (gozk.ErrNoNode, …) are wrapped, never replaced, so
// errors.Is works with the aliases below.
var (
	// ErrClosed reports an operation on a closed Client.
	ErrClosed = errors.New("zk: client closed")
	// ErrInvalidArgument reports an unusable server list, path or name.
	ErrInvalidArgument = errors.New("zk: invalid argument")
	// ErrNoNode is ZooKeeper's "node does not exist".
	ErrNoNode = gozk.ErrNoNode
	// ErrNodeExists is ZooKeeper's "node already exists".
	ErrNodeExists = gozk.ErrNodeExists
)

// Stat is a znode's metadata.
type Stat = gozk.Stat

// Options configure Connect.
type Options struct {
	// Servers are "host:port" addresses (at least one).
	Servers []string
	// SessionTimeout is the session timeout to ask for; zero means DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Auth, when not empty, is added as digest credentials ("user:password"), as the
	// reference does with the ZK_AUTH environment variable; the caller reads the variable.
	Auth string
	// Logger receives the client's messages; nil discards them.
	Logger *slog.Logger
	// ConnectTimeout bounds Connect's wait for the first session (kazoo's start() gives up
	// after 15 s); zero means DefaultConnectTimeout, negative waits until ctx ends.
	ConnectTimeout time.Duration
	// Metrics counts the session events, reconnects and re-registrations (nil: none).
	Metrics *Metrics
	// ACL is the ACL of every node the client creates (nil: open to everyone, kazoo's
	// OPEN_ACL_UNSAFE). DigestACL gives a node to the Auth user alone.
	ACL []gozk.ACL
}

// DigestACL is the ACL that gives every right to the digest user of auth ("user:password",
// the form of Options.Auth and ZK_AUTH) and none to anyone else.
func DigestACL(auth string) ([]gozk.ACL, error) {
	user, password, ok := strings.Cut(auth, ":")
	if !ok || user == "" {
		return nil, fmt.Errorf("%w: zk auth %q is not user:password", ErrInvalidArgument, redact(auth))
	}
	return gozk.DigestACL(gozk.PermAll, user, password), nil
}

// redact keeps the user of a user:password pair.
func redact(auth string) string {
	if user, _, ok := strings.Cut(auth, ":"); ok {
		return user + ":***"
	}
	return "***"
}

// DefaultConnectTimeout is how long Connect waits for a first session by default.
const DefaultConnectTimeout = 15 * time.Second

// Client is one ZooKeeper connection with kazoo's semantics (serving spec §1.5):
// operations take a context and retry connection losses until it ends, makepath creates
// missing parents as persistent empty nodes, watches re-arm (WatchChildren, WatchData), and
// the ephemeral nodes it owns (SetEphemeral, CreateEphemeralSequential) are re-created after
// a session expiry. Its methods are safe for concurrent use.
//
// Decisions (serving S7): owned nodes are re-created by a goroutine of the Client as soon as
// a new session exists, in the order they were first created, and Lost clears after that.
// Departures from kazoo: children come in name order, not the server's; there is no client
// restart on LOST; an owned ephemeral found under another session (or persistent) is
// replaced, with a warning.
type Client struct {
	conn    *gozk.Conn
	zlog    *zkLogger // the library's logger, stopped by Close
	aclList []gozk.ACL
	logger  *slog.Logger
	metrics *Metrics

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // keeper and watch goroutines
	kick   chan struct{}  // session events, coalesced
	// lost is (expiries << 1) | lost bit: the bit is set at every session expiry and
	// cleared after a re-registration only if no expiry came during it (S7).
	lost   atomic.Uint64
	closed sync.Once

	// ephMu serialises the I/O on owned ephemeral nodes, so a re-registration can never
	// resurrect a node that DeleteEphemeral removed.
	ephMu sync.Mutex

	mu      sync.Mutex
	owned   map[string]ownedNode // owned ephemeral nodes by path
	seq     uint64               // creation counter of owned nodes
	session int64                // session the owned nodes were last asserted in (keeper)
	regCh   chan struct{}        // closed at the next completed re-registration
	regs    int                  // completed re-registrations after a session change
}

// Connect opens a connection and waits, bounded by ctx, for its first session.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if len(opts.Servers) == 0 {
		return nil, fmt.Errorf("%w: no ZooKeeper servers", ErrInvalidArgument)
	}
	timeout := opts.SessionTimeout
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		aclList: opts.ACL,
		logger:  logger,
		metrics: opts.Metrics,
		kick:    make(chan struct{}, 1),
		owned:   map[string]ownedNode{},
		regCh:   make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.zlog = &zkLogger{l: logger}
	hasSession := make(chan struct{}, 1)
	var sessions atomic.Int64 // sessions established
	conn, _, err := gozk.Connect(opts.Servers, timeout,
		gozk.WithLogger(c.zlog), gozk.WithLogInfo(false),
		gozk.WithEventCallback(func(ev gozk.Event) {
			// Runs on go-zookeeper's goroutine: flags and non-blocking sends only (S7).
			if ev.Type != gozk.EventSession {
				return
			}
			first := ev.State == gozk.StateHasSession && sessions.Add(1) == 1
			opts.Metrics.session(ev.State, first)
			switch ev.State {
			case gozk.StateExpired:
				c.lost.Add(2) // a new expiry: a re-registration under way may not clear it
				c.lost.Or(1)
			case gozk.StateHasSession:
				select {
				case hasSession <- struct{}{}:
				default:
				}
			}
			select {
			case c.kick <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("zk: connect %v: %w", opts.Servers, err)
	}
	c.conn = conn
	wait, limit := ctx, opts.ConnectTimeout
	if limit == 0 {
		limit = DefaultConnectTimeout
	}
	if limit > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	select {
	case <-hasSession:
	case <-wait.Done():
		c.abandon()
		if ctx.Err() == nil {
			return nil, fmt.Errorf("zk: connect %v: no session within %v (is ZooKeeper running there?)", opts.Servers, limit)
		}
		return nil, fmt.Errorf("zk: connect %v: no session: %w", opts.Servers, ctx.Err())
	}
	if opts.Auth != "" {
		if err := c.do(ctx, "add auth", "", func() error { return conn.AddAuth("digest", []byte(opts.Auth)) }); err != nil {
			c.abandon()
			return nil, err
		}
	}
	c.session = conn.SessionID()
	if c.Lost() {
		// A session expired since the first one: the keeper settles it (and clears Lost)
		// even if the current session is already there.
		c.session = 0
	}
	c.wg.Add(1)
	go c.keep()
	return c, nil
}

// abandon undoes a Connect that fails after the library's connection exists: nothing of
// it runs on, nor logs, once Connect has returned.
func (c *Client) abandon() {
	c.cancel()
	c.conn.Close()
	c.zlog.stop()
}

// Close ends the session (the server then deletes the ephemeral nodes), stops every watch
// and waits for the client's goroutines. It is idempotent and always returns nil.
func (c *Client) Close() error {
	c.closed.Do(func() {
		c.mu.Lock() // startWatch adds to wg under mu only while ctx lives
		c.cancel()
		c.mu.Unlock()
		c.conn.Close()
		c.zlog.stop()
		c.wg.Wait()
	})
	return nil
}

// Logger is the Client's logger (Options.Logger, or one that discards).
func (c *Client) Logger() *slog.Logger { return c.logger }

// SessionID is the current session's id (0 while there is none).
func (c *Client) SessionID() int64 { return c.conn.SessionID() }

// Lost reports whether the session expired and the owned ephemeral nodes have not been
// re-created yet in a new one (kazoo's LOST; cleared after re-registration, S7).
func (c *Client) Lost() bool { return c.lost.Load()&1 != 0 }

// Reregistered returns a channel closed when the owned ephemeral nodes have next been
// re-created after a session change.
func (c *Client) Reregistered() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.regCh
}

// Reregistrations counts the completed re-registrations after session changes.
func (c *Client) Reregistrations() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.regs
}

// keep re-creates the owned ephemeral nodes whenever the connection holds a session other
// than the one they were last asserted in, retrying with backoff. Session events only
// kick it; it runs on its own goroutine.
func (c *Client) keep() {
	defer c.wg.Done()
	var b Backoff
	var retry <-chan time.Time
	for {
		c.mu.Lock()
		last := c.session
		c.mu.Unlock()
		if sid := c.conn.SessionID(); c.conn.State() == gozk.StateHasSession && sid != last {
			if err := c.reassert(sid); err != nil {
				d := b.Next()
				c.logger.Warn("re-registering ephemeral nodes failed; retrying", "err", err, "retry_in", d)
				retry = time.After(d)
			} else {
				b.Reset()
				retry = nil
				// Clear Lost unless sid expired meanwhile (go-zookeeper zeroes the session
				// id before it reports an expiry): while sid is current, every expiry
				// counted concerned an earlier session. The CAS loses to a new expiry.
				for v := c.lost.Load(); v&1 != 0 && c.conn.SessionID() == sid; v = c.lost.Load() {
					if c.lost.CompareAndSwap(v, v&^1) {
						break
					}
				}
				c.metrics.reregistered()
				c.mu.Lock()
				c.session = sid
				c.regs++
				close(c.regCh)
				c.regCh = make(chan struct{})
				n := len(c.owned)
				c.mu.Unlock()
				c.logger.Info("ephemeral nodes re-registered in a new session", "session", fmt.Sprintf("%#x", sid), "previous", fmt.Sprintf("%#x", last), "nodes", n)
			}
		}
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
		case <-retry:
		}
	}
}

// ownedNode is an owned ephemeral node's data and creation rank.
type ownedNode struct {
	data []byte
	seq  uint64
}

// reassert makes every owned node exist with its data as an ephemeral of the session, in
// the order they were first created (a container's service info before its bindings, so
// that watchers of the bindings find the info).
func (c *Client) reassert(sid int64) error {
	c.mu.Lock()
	paths := make([]string, 0, len(c.owned))
	for p := range c.owned {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, func(a, b string) int { return cmp.Compare(c.owned[a].seq, c.owned[b].seq) })
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	var errs []error
	for _, p := range paths {
		c.ephMu.Lock()
		c.mu.Lock()
		node, ok := c.owned[p]
		c.mu.Unlock()
		var err error
		if ok {
			err = c.assertEphemeral(ctx, p, node.data)
		}
		c.ephMu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		if c.conn.SessionID() != sid {
			errs = append(errs, errors.New("session changed during re-registration"))
			break
		}
	}
	return errors.Join(errs...)
}

// do runs op, retrying connection losses with backoff until ctx ends. A call abandoned
// because ctx ended completes in the background (at the latest when the Client closes).
// Errors name the operation and the path.
func (c *Client) do(ctx context.Context, op, path string, fn func() error) error {
	var b Backoff
	for {
		if err := c.ctx.Err(); err != nil {
			return fmt.Errorf("%w: %s %s", ErrClosed, op, path)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("zk: %s %s: %w", op, path, err)
		}
		done := make(chan error, 1)
		go func() { done <- fn() }()
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
			return fmt.Errorf("zk: %s %s: %w", op, path, ctx.Err())
		}
		if err == nil {
			return nil
		}
		if !transient(err) || c.ctx.Err() != nil {
			if c.ctx.Err() != nil {
				return fmt.Errorf("%w: %s %s: %w", ErrClosed, op, path, err)
			}
			return fmt.Errorf("zk: %s %s: %w", op, path, err)
		}
		select {
		case <-time.After(b.Next()):
		case <-ctx.Done():
			return fmt.Errorf("zk: %s %s: %w (last error: %w)", op, path, ctx.Err(), err)
		case <-c.ctx.Done():
		}
	}
}

// transient reports errors worth retrying: the request may not have been applied and a
// later attempt (on a new connection or session) can succeed. Besides the library's
// connection and session errors, that is a failed write of the request on a connection
// that just broke: the library hands the socket's error (a *net.OpError: broken pipe,
// reset, deadline) to the caller as it is.
func transient(err error) bool {
	var oe *net.OpError
	return errors.Is(err, gozk.ErrConnectionClosed) || errors.Is(err, gozk.ErrNoServer) ||
		errors.Is(err, gozk.ErrSessionExpired) || errors.Is(err, gozk.ErrSessionMoved) ||
		errors.As(err, &oe)
}

// CheckPath accepts an absolute znode path other than "/" with no empty segment and no
// trailing '/'; other paths are an error wrapping ErrInvalidArgument.
func CheckPath(path string) error {
	if !strings.HasPrefix(path, "/") || path == "/" || strings.HasSuffix(path, "/") || strings.Contains(path, "//") {
		return fmt.Errorf("%w: znode path %q", ErrInvalidArgument, path)
	}
	return nil
}

// orEmpty is data, or an empty buffer for nil: ZooKeeper stores a nil buffer as null data,
// which Python's kazoo reads as None, while kazoo itself writes b”. Every node is created
// with the bytes Monolith's client would write.
func orEmpty(data []byte) []byte {
	if data == nil {
		return []byte{}
	}
	return data
}

// acl is the ACL of every node created: Options.ACL, or kazoo's default OPEN_ACL_UNSAFE.
func (c *Client) acl() []gozk.ACL {
	if c.aclList != nil {
		return c.aclList
	}
	return gozk.WorldACL(gozk.PermAll)
}

// EnsurePath creates path and its missing parents as persistent empty nodes; an existing
// node is left alone (kazoo ensure_path).
func (c *Client) EnsurePath(ctx context.Context, path string) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	return c.ensure(ctx, path, true)
}

// ensure creates the ancestors of path, and path itself when self is true.
func (c *Client) ensure(ctx context.Context, path string, self bool) error {
	end := len(path)
	if !self {
		end = strings.LastIndexByte(path, '/')
	}
	for i := 1; i <= end; i++ {
		if i < end && path[i] != '/' {
			continue
		}
		p := path[:i]
		if ok, err := c.Exists(ctx, p); err != nil {
			return err
		} else if ok {
			continue
		}
		err := c.do(ctx, "create", p, func() error {
			_, err := c.conn.Create(p, []byte{}, 0, c.acl())
			if errors.Is(err, gozk.ErrNodeExists) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Create creates a persistent node holding data, creating missing parents first when
// makepath is set. An existing node is an error wrapping ErrNodeExists.
func (c *Client) Create(ctx context.Context, path string, data []byte, makepath bool) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	if makepath {
		if err := c.ensure(ctx, path, false); err != nil {
			return err
		}
	}
	attempt := 0
	return c.do(ctx, "create", path, func() error {
		attempt++
		_, err := c.conn.Create(path, orEmpty(data), 0, c.acl())
		if errors.Is(err, gozk.ErrNodeExists) && attempt > 1 {
			// A retried create whose first reply was lost: ours if the data matches.
			if got, _, gerr := c.conn.Get(path); gerr == nil && string(got) == string(data) {
				return nil
			}
		}
		return err
	})
}

// CreateOrSet writes data to the persistent node at path, creating it and its missing
// parents (the reference's create_znode with makepath).
func (c *Client) CreateOrSet(ctx context.Context, path string, data []byte) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	if err := c.ensure(ctx, path, false); err != nil {
		return err
	}
	return c.do(ctx, "create", path, func() error {
		_, err := c.conn.Create(path, orEmpty(data), 0, c.acl())
		if errors.Is(err, gozk.ErrNodeExists) {
			_, err = c.conn.Set(path, orEmpty(data), -1)
		}
		return err
	})
}

// SetEphemeral makes path an ephemeral node of this session holding data, creating missing
// parents as persistent nodes, and remembers it: after a session expiry the node is
// re-created in the new session until DeleteEphemeral or Close. A node already at path
// that belongs to another session (or is persistent) is replaced, with a warning.
func (c *Client) SetEphemeral(ctx context.Context, path string, data []byte) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	data = slices.Clone(data)
	c.ephMu.Lock()
	defer c.ephMu.Unlock()
	c.own(path, data)
	return c.assertEphemeral(ctx, path, data)
}

// own records path as an owned ephemeral node holding data; a node seen for the first time
// takes the next creation rank.
func (c *Client) own(path string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	node, ok := c.owned[path]
	if !ok {
		c.seq++
		node.seq = c.seq
	}
	node.data = data
	c.owned[path] = node
}

// CreateEphemeralSequential creates an ephemeral sequential node: ZooKeeper appends a
// 10-digit counter to path, whose missing parents are created as persistent nodes. It
// returns the created path and owns that node from then on exactly like SetEphemeral (it is
// re-created at the same path after a session expiry). A create retried after a lost reply
// adopts the node of this session holding the same data instead of making a second one.
func (c *Client) CreateEphemeralSequential(ctx context.Context, path string, data []byte) (string, error) {
	if err := CheckPath(path); err != nil {
		return "", err
	}
	data = slices.Clone(data)
	c.ephMu.Lock()
	defer c.ephMu.Unlock()
	if err := c.ensure(ctx, path, false); err != nil {
		return "", err
	}
	i := strings.LastIndexByte(path, '/')
	parent, base := path[:i], path[i+1:]
	if parent == "" {
		parent = "/"
	}
	var created string
	attempt := 0
	err := c.do(ctx, "create ephemeral sequential", path, func() error {
		attempt++
		if attempt > 1 {
			if p, ok := c.findSequential(parent, base, data); ok {
				created = p
				return nil
			}
		}
		p, err := c.conn.Create(path, orEmpty(data), gozk.FlagEphemeral|gozk.FlagSequence, c.acl())
		created = p
		return err
	})
	if err != nil {
		return "", err
	}
	c.own(created, data)
	return created, nil
}

// findSequential looks under parent for a sequential child of base (base plus 10 digits)
// that this session owns and that holds data.
func (c *Client) findSequential(parent, base string, data []byte) (string, bool) {
	children, _, err := c.conn.Children(parent)
	if err != nil {
		return "", false
	}
	for _, name := range children {
		if len(name) != len(base)+10 || !strings.HasPrefix(name, base) {
			continue
		}
		p := strings.TrimSuffix(parent, "/") + "/" + name
		got, stat, err := c.conn.Get(p)
		if err == nil && stat.EphemeralOwner == c.conn.SessionID() && string(got) == string(data) {
			return p, true
		}
	}
	return "", false
}

// DeleteEphemeral forgets an owned node and deletes it; a missing node is not an error.
func (c *Client) DeleteEphemeral(ctx context.Context, path string) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	c.ephMu.Lock()
	defer c.ephMu.Unlock()
	c.mu.Lock()
	delete(c.owned, path)
	c.mu.Unlock()
	err := c.Delete(ctx, path, false)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil
	}
	return err
}

// assertEphemeral makes path an ephemeral of the current session holding data.
func (c *Client) assertEphemeral(ctx context.Context, path string, data []byte) error {
	if err := c.ensure(ctx, path, false); err != nil {
		return err
	}
	return c.do(ctx, "create ephemeral", path, func() error {
		for range 5 {
			_, err := c.conn.Create(path, orEmpty(data), gozk.FlagEphemeral, c.acl())
			if !errors.Is(err, gozk.ErrNodeExists) {
				return err
			}
			got, stat, err := c.conn.Get(path)
			switch {
			case errors.Is(err, gozk.ErrNoNode):
				continue
			case err != nil:
				return err
			case stat.EphemeralOwner == c.conn.SessionID():
				if string(got) == string(data) {
					return nil
				}
				_, err = c.conn.Set(path, orEmpty(data), stat.Version)
				if errors.Is(err, gozk.ErrBadVersion) || errors.Is(err, gozk.ErrNoNode) {
					continue
				}
				return err
			}
			c.logger.Warn("replacing a node owned by another session", "znode", path, "owner_session", fmt.Sprintf("%#x", stat.EphemeralOwner))
			if err := c.conn.Delete(path, stat.Version); err != nil && !errors.Is(err, gozk.ErrNoNode) && !errors.Is(err, gozk.ErrBadVersion) {
				return err
			}
		}
		return errors.New("the node keeps being re-created by another session")
	})
}

// Set writes data to an existing node (any version).
func (c *Client) Set(ctx context.Context, path string, data []byte) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	return c.do(ctx, "set", path, func() error {
		_, err := c.conn.Set(path, orEmpty(data), -1)
		return err
	})
}

// Get returns a node's data and stat; a missing node is an error wrapping ErrNoNode.
func (c *Client) Get(ctx context.Context, path string) ([]byte, *Stat, error) {
	if err := CheckPath(path); err != nil {
		return nil, nil, err
	}
	var data []byte
	var stat *Stat
	err := c.do(ctx, "get", path, func() error {
		d, s, err := c.conn.Get(path)
		data, stat = d, s
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return data, stat, nil
}

// Exists reports whether a node exists.
func (c *Client) Exists(ctx context.Context, path string) (bool, error) {
	if err := CheckPath(path); err != nil {
		return false, err
	}
	var ok bool
	err := c.do(ctx, "exists", path, func() error {
		e, _, err := c.conn.Exists(path)
		ok = e
		return err
	})
	if err != nil {
		return false, err // ok may still be written by an abandoned call
	}
	return ok, nil
}

// Children returns a node's children, sorted (a server's order is unspecified); a missing
// node is an error wrapping ErrNoNode.
func (c *Client) Children(ctx context.Context, path string) ([]string, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	var children []string
	err := c.do(ctx, "children", path, func() error {
		ch, _, err := c.conn.Children(path)
		children = ch
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(children)
	return children, nil
}

// Delete deletes a node, and with recursive its descendants first (depth first). A
// missing node is an error wrapping ErrNoNode; a missing descendant is not.
func (c *Client) Delete(ctx context.Context, path string, recursive bool) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	if recursive {
		children, err := c.Children(ctx, path)
		if err != nil {
			return err
		}
		for _, ch := range children {
			if err := c.Delete(ctx, path+"/"+ch, true); err != nil && !errors.Is(err, gozk.ErrNoNode) {
				return err
			}
		}
	}
	attempt := 0
	return c.do(ctx, "delete", path, func() error {
		attempt++
		err := c.conn.Delete(path, -1)
		if errors.Is(err, gozk.ErrNoNode) && attempt > 1 {
			return nil // a retried delete whose first reply was lost
		}
		return err
	})
}

// zkLogger adapts slog to go-zookeeper's Logger. The library's connection goroutine
// outlives Conn.Close for a moment and may still log (a reconnect attempt); once stop has
// returned, nothing more reaches the caller's logger.
type zkLogger struct {
	l       *slog.Logger
	mu      sync.RWMutex
	stopped bool
}

// stop ends the logging; it waits for a message being written.
func (z *zkLogger) stop() {
	z.mu.Lock()
	z.stopped = true
	z.mu.Unlock()
}

func (z *zkLogger) Printf(format string, args ...any) {
	z.mu.RLock()
	defer z.mu.RUnlock()
	if z.stopped {
		return
	}
	msg := fmt.Sprintf(format, args...)
	level := slog.LevelInfo
	if strings.Contains(msg, "failed") {
		level = slog.LevelWarn
	}
	z.l.Log(context.Background(), level, "zookeeper client: "+msg)
}

// Backoff is a capped exponential backoff with jitter: Next doubles a ceiling from
// BackoffMin up to BackoffMax and returns a duration between half of it and all of it. The
// zero value is ready; Reset starts over after a success. It is not safe for concurrent
// use.
type Backoff struct{ cur time.Duration }

// Bounds of Backoff's ceiling.
const (
	BackoffMin = 50 * time.Millisecond
	BackoffMax = 2 * time.Second
)

// Next returns the next wait.
func (b *Backoff) Next() time.Duration {
	b.cur = min(max(2*b.cur, BackoffMin), BackoffMax)
	return b.cur/2 + time.Duration(time.Now().UnixNano()%int64(b.cur/2))
}

// Reset makes the next wait the shortest again.
func (b *Backoff) Reset() { b.cur = 0 }
