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
//   - Sessions. Connections ask for a SessionTimeout (10 s) session; the server may grant
//     less. go-zookeeper keeps one Conn across a session expiry and opens a new session by
//     itself, so Register re-creates its node whenever the Conn holds a session other than
//     the one its node was created in, retrying failures with capped exponential backoff in
//     its own goroutine (the Conn's event callback only signals; nothing sleeps in it).
//   - Stale nodes. A node at the shard's path that belongs to another session (a previous
//     run of this shard whose session has not expired yet, or a persistent node) is deleted
//     and replaced, with a warning naming its owner.
//   - Lifetime. Register's ctx bounds only its wait for the first registration, like
//     net.Dialer.DialContext's; the registration then lasts until Close, which deletes the
//     node, closes the connection, stops the goroutine and is idempotent. Watch runs until
//     its ctx is done. A node deleted by someone else while its session lives is not
//     re-created (two processes claiming one shard would otherwise fight forever).
//   - Watching. Watch keeps one children watch on root and one data watch per shard node,
//     re-arming only the watch that fired (never piling up watchers on a node). After a
//     session expiry every watch fires with an error and is re-armed on the new session;
//     until then the last addresses stay reported. A missing root is waited for with an
//     exists watch and means "no shards".
//   - Reporting. onChange gets a fresh slice of numShards addresses ("" for a missing or
//     ignored shard) after the first complete listing and then after every complete
//     listing that differs from the previous one: never twice in a row with equal
//     contents, never from a half-updated view. It runs on Watch's goroutine.
//   - Ignored nodes. Children not named shard-NNNNN, nodes whose JSON is malformed, lacks a
//     field, names another shard than its node, has a different num_shards or an invalid
//     address are ignored with a warning naming the node (logged again only when the node
//     changes).
//   - Logging. go-zookeeper's messages go to the slog.Logger (connection failures at Warn,
//     the rest at Info; its informational chatter is off). A nil logger discards.
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
	"time"

	"github.com/go-zookeeper/zk"
)

// SessionTimeout is the ZooKeeper session timeout Register and Watch ask for.
const SessionTimeout = 10 * time.Second

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
	if !strings.HasPrefix(root, "/") || root == "/" || strings.HasSuffix(root, "/") || strings.Contains(root, "//") {
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

// zkLogger adapts slog to zk.Logger.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	level := slog.LevelInfo
	if strings.Contains(msg, "failed") {
		level = slog.LevelWarn
	}
	z.l.Log(context.Background(), level, "zookeeper client: "+msg)
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// connect opens a Conn whose session events kick the caller: a non-blocking send on a
// 1-buffered channel (nil: no kicks), so the callback never blocks and a burst of events
// coalesces into one wake-up.
func connect(servers []string, logger *slog.Logger, kick chan struct{}) (*zk.Conn, error) {
	conn, _, err := zk.Connect(servers, SessionTimeout,
		zk.WithLogger(zkLogger{logger}), zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if kick != nil && ev.Type == zk.EventSession {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}))
	return conn, err
}

// backoff is a capped exponential backoff with jitter.
type backoff struct{ cur time.Duration }

const (
	backoffMin = 50 * time.Millisecond
	backoffMax = 2 * time.Second
)

func (b *backoff) next() time.Duration {
	b.cur = min(max(2*b.cur, backoffMin), backoffMax)
	return b.cur/2 + time.Duration(time.Now().UnixNano()%int64(b.cur/2))
}

func (b *backoff) reset() { b.cur = 0 }
