// Package discovery finds the processes of a training job: PS shards registered in
// ZooKeeper (Register, Watch) and Monolith's service-discovery backends (Backend: ZooKeeper,
// TF_CONFIG, MLP environment, Consul), selected by New as runner_utils.get_discovery does.
//
// Each shard holds an ephemeral znode <root>/shard-<NNNNN> with JSON {"shard",
// "num_shards", "addr"}; Register keeps it alive across session expiries and Watch reports
// the addresses. Without ZooKeeper, callers use a static address list (Static), indexed by
// shard. The Backend ZK uses /monolith/{job}/{name}.{index} nodes holding "host:port" with
// the same registration machinery (re-created at once in a new session, where Monolith
// re-registered every 30 minutes) and reads them at each Query instead of caching them.
// Bad environment or TF_CONFIG input is an error, not an assert; every wait is bounded.
//
// # Decisions
//
//   - One client stack. Every ZooKeeper connection is an internal/zk Client: operations
//     retry connection losses with capped exponential backoff until their context ends,
//     nodes are ephemerals the Client owns (re-created at once in every new session, a
//     retried create adopting its own node), watches re-arm after a session loss, and
//     go-zookeeper's messages go to the slog.Logger (connection failures at Warn, its
//     informational chatter off). A nil logger discards.
//   - Sessions. Connections ask for a SessionTimeout (10 s) session; the server may grant
//     less. go-zookeeper keeps one Conn across a session expiry and opens a new session by
//     itself; the Client then re-creates the node of a Registration, or of a ZK backend's
//     registrations, in the new session.
//   - Stale nodes. A node at the shard's path that belongs to another session (a previous
//     run of this shard whose session has not expired yet, or a persistent node) is deleted
//     and replaced, with a warning naming its owner.
//   - Lifetime. Register's ctx bounds only its wait for the first registration, like
//     net.Dialer.DialContext's; the registration then lasts until Close, which ends the
//     session (so the server deletes the node), stops the Client's goroutines and is
//     idempotent. Watch runs until its ctx is done. A node deleted by someone else while
//     its session lives is not re-created (two processes claiming one shard would
//     otherwise fight forever).
//   - Watching. Watch keeps a data watch on root (a missing root means "no shards" and is
//     waited for), a children watch on root while it exists and a data watch per shard
//     node; each re-arms itself, and after a session expiry reports only what changed
//     meanwhile. Until then the last addresses stay reported.
//   - Reporting. onChange gets a fresh slice of numShards addresses ("" for a missing or
//     ignored shard) after the first complete listing and then whenever the addresses
//     differ from the previous report: never twice in a row with equal contents, never
//     while a new listing's nodes are still being read. It runs on Watch's goroutine.
//   - Ignored nodes. Children not named shard-NNNNN, nodes whose JSON is malformed, lacks a
//     field, names another shard than its node, has a different num_shards or an invalid
//     address are ignored with a warning naming the node (logged again only when the node
//     changes).
package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/internal/zk"
)

// SessionTimeout is the ZooKeeper session timeout Register and Watch ask for.
const SessionTimeout = zk.DefaultSessionTimeout

// MaxShards is the largest shard count (node names have five digits).
const MaxShards = 100000

// DefaultPort is the ZooKeeper port ParseServers adds to a host without one.
const DefaultPort = "2181"

// ErrInvalidArgument reports an unusable server list, root, shard or address.
var ErrInvalidArgument = errors.New("ps/discovery: invalid argument")

// NodeName is the znode name of shard (shard-00007).
func NodeName(shard int) string { return fmt.Sprintf("shard-%05d", shard) }

// parseNodeName returns the shard of a node name, or false for another name.
func parseNodeName(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "shard-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || NodeName(i) != name {
		return 0, false
	}
	return i, true
}

// Node is the JSON data of a shard node.
type Node struct {
	Shard     int    `json:"shard"`
	NumShards int    `json:"num_shards"`
	Addr      string `json:"addr"`
}

// parseNode decodes and validates the data of the node named name for a ring of numShards.
func parseNode(name string, data []byte, numShards int) (Node, error) {
	shard, ok := parseNodeName(name)
	if !ok {
		return Node{}, fmt.Errorf("name is not shard-NNNNN")
	}
	var raw struct {
		Shard     *int    `json:"shard"`
		NumShards *int    `json:"num_shards"`
		Addr      *string `json:"addr"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Node{}, fmt.Errorf("malformed JSON: %w", err)
	}
	switch {
	case raw.Shard == nil || raw.NumShards == nil || raw.Addr == nil:
		return Node{}, fmt.Errorf("JSON %s lacks shard, num_shards or addr", data)
	case *raw.Shard != shard:
		return Node{}, fmt.Errorf("shard %d in the data of node %s", *raw.Shard, name)
	case *raw.NumShards != numShards:
		return Node{}, fmt.Errorf("num_shards %d, this client expects %d", *raw.NumShards, numShards)
	case shard >= numShards:
		return Node{}, fmt.Errorf("shard %d out of range [0, %d)", shard, numShards)
	}
	if err := checkAddr(*raw.Addr); err != nil {
		return Node{}, err
	}
	return Node{Shard: shard, NumShards: numShards, Addr: *raw.Addr}, nil
}

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

// checkRoot accepts an absolute znode path other than "/" without a trailing slash or
// empty segments.
func checkRoot(root string) error {
	if zk.CheckPath(root) != nil {
		return fmt.Errorf("%w: root %q is not an absolute znode path like /monolith/ps", ErrInvalidArgument, root)
	}
	return nil
}

func checkServers(servers []string) error {
	if len(servers) == 0 {
		return fmt.Errorf("%w: no ZooKeeper servers", ErrInvalidArgument)
	}
	return nil
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// connect opens a Client on servers, waiting for its first session until ctx ends (there
// is no other bound).
func connect(ctx context.Context, servers []string, logger *slog.Logger) (*zk.Client, error) {
	return zk.Connect(ctx, zk.Options{Servers: servers, SessionTimeout: SessionTimeout, Logger: orDiscard(logger), ConnectTimeout: -1})
}
