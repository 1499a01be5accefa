package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Registration is a shard's ephemeral node, kept alive across session expiries. Its
// methods are safe for concurrent use.
type Registration struct {
	path   string
	data   []byte
	logger *slog.Logger
	conn   *zk.Conn
	kick   chan struct{}

	cancel context.CancelFunc
	done   chan struct{} // closed when run has cleaned up
	err    error         // cleanup error, set before done is closed

	mu      sync.Mutex
	regCh   chan struct{} // closed at the next successful registration
	count   int
	lastErr error
	session int64 // session the node was created in; owned by run
}

// Register creates the ephemeral node <root>/shard-<shard:05d> holding
// {"shard":shard,"num_shards":numShards,"addr":addr}, creating root's missing parents as
// persistent nodes, and keeps it registered, across session expiries, until Close. It
// blocks until the node exists, retrying with backoff; ctx bounds that wait only (as in
// net.Dialer.DialContext): when ctx ends first, Register cleans up and fails. Invalid
// arguments fail at once. A nil logger discards.
func Register(ctx context.Context, servers []string, root string, shard, numShards int, addr string, logger *slog.Logger) (*Registration, error) {
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	if err := checkRoot(root); err != nil {
		return nil, err
	}
	if numShards < 1 || numShards > MaxShards || shard < 0 || shard >= numShards {
		return nil, fmt.Errorf("%w: shard %d of %d", ErrInvalidArgument, shard, numShards)
	}
	if err := checkAddr(addr); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	path := root + "/" + NodeName(shard)
	data, err := json.Marshal(Node{Shard: shard, NumShards: numShards, Addr: addr})
	if err != nil {
		return nil, err
	}
	return registerNode(ctx, servers, path, data, logger)
}

// registerNode creates the ephemeral node path holding data and keeps it registered
// across session expiries until Close (Register's contract).
func registerNode(ctx context.Context, servers []string, path string, data []byte, logger *slog.Logger) (*Registration, error) {
	logger = orDiscard(logger)
	r := &Registration{
		path:   path,
		data:   data,
		logger: logger.With("znode", path),
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		regCh:  make(chan struct{}),
	}
	var err error
	if r.conn, err = connect(servers, r.logger, r.kick); err != nil {
		return nil, fmt.Errorf("ps/discovery: register %s: %w", path, err)
	}
	first := r.Registered()
	var runCtx context.Context
	runCtx, r.cancel = context.WithCancel(context.Background())
	go r.run(runCtx)
	select {
	case <-first:
		return r, nil
	case <-ctx.Done():
		r.cancel()
		<-r.done
		r.mu.Lock()
		last := r.lastErr
		r.mu.Unlock()
		return nil, errors.Join(fmt.Errorf("ps/discovery: register %s: %w", path, ctx.Err()), last)
	}
}

// Path is the node's path.
func (r *Registration) Path() string { return r.path }

// Registered returns a channel closed at the next successful (re-)registration after the
// call: the node was created in a new session.
func (r *Registration) Registered() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.regCh
}

// Registrations is the number of successful (re-)registrations so far (1 after Register
// returns; one more after each session expiry).
func (r *Registration) Registrations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Close deletes the node and closes the connection. It waits for both and returns the same
// result on every call.
func (r *Registration) Close() error {
	r.cancel()
	<-r.done
	return r.err
}

// run (re-)registers whenever the Conn has a session the node was not created in, until
// ctx is cancelled (by Close, or by Register giving up); then it cleans up.
func (r *Registration) run(ctx context.Context) {
	defer close(r.done)
	defer func() { r.err = r.cleanup() }()
	var b backoff
	var retry <-chan time.Time
	for {
		if r.conn.State() == zk.StateHasSession && r.conn.SessionID() != r.session {
			sid := r.conn.SessionID()
			if err := r.ensure(sid); err != nil {
				r.mu.Lock()
				r.lastErr = err
				r.mu.Unlock()
				d := b.next()
				r.logger.Warn("registration failed; retrying", "err", err, "retry_in", d)
				retry = time.After(d)
			} else {
				b.reset()
				retry = nil
				r.registered(sid)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-retry:
		}
	}
}

// registered records a registration in session sid and wakes Registered's waiters.
func (r *Registration) registered(sid int64) {
	if r.session != 0 {
		r.logger.Info("re-registered after session loss", "session", fmt.Sprintf("%#x", sid), "previous", fmt.Sprintf("%#x", r.session))
	} else {
		r.logger.Debug("registered", "session", fmt.Sprintf("%#x", sid))
	}
	r.session = sid
	r.mu.Lock()
	r.count++
	close(r.regCh)
	r.regCh = make(chan struct{})
	r.lastErr = nil
	r.mu.Unlock()
}

// ensure makes the node exist as an ephemeral of session sid.
func (r *Registration) ensure(sid int64) error {
	if err := createParents(r.conn, r.path); err != nil {
		return err
	}
	for range 5 {
		_, err := r.conn.Create(r.path, r.data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		data, stat, err := r.conn.Get(r.path)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue
		case err != nil:
			return err
		case stat.EphemeralOwner == sid && string(data) == string(r.data):
			return nil // ours: a create whose reply was lost
		}
		r.logger.Warn("replacing a stale node", "owner_session", fmt.Sprintf("%#x", stat.EphemeralOwner), "data", string(data))
		if err := r.conn.Delete(r.path, stat.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
	}
	return fmt.Errorf("node %s keeps being re-created by another session", r.path)
}

// createParents creates the missing ancestors of path as persistent empty nodes.
func createParents(conn *zk.Conn, path string) error {
	for i := 1; i < len(path); i++ {
		if path[i] != '/' {
			continue
		}
		p := path[:i]
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// cleanup deletes the node if this registration's session owns it, then closes the
// connection (which ends the session and so removes the node in any case).
func (r *Registration) cleanup() error {
	var err error
	if r.session != 0 && r.conn.State() == zk.StateHasSession && r.conn.SessionID() == r.session {
		var stat *zk.Stat
		_, stat, err = r.conn.Get(r.path)
		if err == nil && stat.EphemeralOwner == r.session {
			err = r.conn.Delete(r.path, stat.Version)
		}
		if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("ps/discovery: delete %s: %w", r.path, err)
		}
	}
	r.conn.Close()
	return err
}
