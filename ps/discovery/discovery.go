// Package discovery finds the processes of a training job through Monolith's discovery
// backends (Backend: ZooKeeper, Consul, TF_CONFIG, MLP, and a static list), selected by New
// as runner_utils.get_discovery does; WaitFor and Follow turn a backend into PS addresses.
//
// # Decisions
//
//   - One layout. A process registers "host:port" under a server type ("ps", "worker") and
//     an index; in ZooKeeper that is the ephemeral node /monolith/{job}/{name}.{index}, the
//     only layout in the repository (`monolith ps`, `monolith train` and `monolith cluster`
//     use it).
//   - One client stack. Every ZooKeeper connection is an internal/zk Client: operations
//     retry connection losses with capped exponential backoff until their context ends,
//     nodes are ephemerals the Client owns (re-created at once in every new session, where
//     Monolith re-registered every 30 minutes, a retried create adopting its own node), and
//     go-zookeeper's messages go to the slog.Logger. A nil logger discards.
//   - Sessions. Connections ask for a SessionTimeout (10 s) session; the server may grant
//     less. A node of another session at a registration's path (an earlier run of the same
//     process whose session has not expired yet) is replaced.
//   - No cache. Query reads the registrations at every call, so a restarted process's new
//     address shows at the next poll. Follow polls (every second for training) rather
//     than watching, which works the same on every backend.
//   - Bounded waits. WaitFor fails after its wait naming the backend, the missing indexes
//     and the last error; an index at or beyond the expected count is a count mismatch and
//     fails at once. Bad environment or TF_CONFIG input is an error, not an assert.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/internal/zk"
)

// SessionTimeout is the ZooKeeper session timeout the ZK backend asks for.
const SessionTimeout = zk.DefaultSessionTimeout

// MaxShards bounds a static address list.
const MaxShards = 100000

// DefaultPort is the ZooKeeper port ParseServers adds to a host without one.
const DefaultPort = "2181"

// ErrInvalidArgument reports an unusable server list, name, index or address.
var ErrInvalidArgument = errors.New("ps/discovery: invalid argument")

// checkAddr accepts host:port with a non-empty host and a numeric port.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); host == "" || err != nil || p == 0 {
		return fmt.Errorf("address %q is not host:port", addr)
	}
	return nil
}

// ParseServers splits a ZooKeeper connection string ("h1:2181,h2:2181") into addresses,
// adding DefaultPort to hosts without a port and skipping empty elements. A chroot suffix
// ("/path") is not supported: put it in the root path instead.
func ParseServers(s string) ([]string, error) {
	if strings.Contains(s, "/") {
		return nil, fmt.Errorf("%w: ZooKeeper servers %q: chroot suffixes are not supported; include the path in the root", ErrInvalidArgument, s)
	}
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(e); err != nil {
			e = net.JoinHostPort(strings.Trim(e, "[]"), DefaultPort)
		}
		if err := checkAddr(e); err != nil {
			return nil, fmt.Errorf("%w: ZooKeeper server: %w", ErrInvalidArgument, err)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no ZooKeeper servers in %q", ErrInvalidArgument, s)
	}
	return out, nil
}

// Static validates a fixed shard list, element i being the address of shard i: the
// fallback when no ZooKeeper is configured. It returns a copy.
func Static(addrs []string) ([]string, error) {
	if len(addrs) == 0 || len(addrs) > MaxShards {
		return nil, fmt.Errorf("%w: %d static shard addresses", ErrInvalidArgument, len(addrs))
	}
	for i, a := range addrs {
		if err := checkAddr(a); err != nil {
			return nil, fmt.Errorf("%w: shard %d: %w", ErrInvalidArgument, i, err)
		}
	}
	return append([]string(nil), addrs...), nil
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// connect opens a Client on servers, waiting for its first session until ctx ends (there
// is no other bound). With auth ("user:password", ZK_AUTH) it authenticates as that digest
// user and creates its nodes for that user alone.
func connect(ctx context.Context, servers []string, auth string, logger *slog.Logger) (*zk.Client, error) {
	o := zk.Options{Servers: servers, SessionTimeout: SessionTimeout, Logger: orDiscard(logger), ConnectTimeout: -1, Auth: auth}
	if auth != "" {
		acl, err := zk.DigestACL(auth)
		if err != nil {
			return nil, err
		}
		o.ACL = acl
	}
	return zk.Connect(ctx, o)
}
