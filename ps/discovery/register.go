package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/monolith-go/monolith/internal/zk"
)

// Registration is a shard's ephemeral node, kept alive across session expiries by its own
// Client. Its methods are safe for concurrent use.
type Registration struct {
	path string
	c    *zk.Client
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
	c, err := connect(ctx, servers, orDiscard(logger).With("znode", path))
	if err != nil {
		return nil, fmt.Errorf("ps/discovery: register %s: %w", path, err)
	}
	if err := c.SetEphemeral(ctx, path, data); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("ps/discovery: register %s: %w", path, err)
	}
	return &Registration{path: path, c: c}, nil
}

// Path is the node's path.
func (r *Registration) Path() string { return r.path }

// Registered returns a channel closed at the next re-registration after the call: the node
// was created in a new session.
func (r *Registration) Registered() <-chan struct{} { return r.c.Reregistered() }

// Registrations is the number of successful (re-)registrations so far (1 after Register
// returns; one more after each session expiry).
func (r *Registration) Registrations() int { return 1 + r.c.Reregistrations() }

// Close ends the session, which deletes the node, and stops the Client. It is idempotent
// and returns nil.
func (r *Registration) Close() error { return r.c.Close() }
