package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Backend is Monolith's service discovery (spec §3.2): processes register "host:port"
// under a server type ("ps", "worker", …) and an index, and look each other up. Close is
// idempotent.
type Backend interface {
	Register(ctx context.Context, name string, index int, addr string) error
	Deregister(ctx context.Context, name string, index int, addr string) error
	// Query returns the registered addresses of name by index.
	Query(ctx context.Context, name string) (map[int]string, error)
	Close() error
}

// Discovery types (RunnerConfig.discovery_type).
const (
	TypeConsul = "consul"
	TypeZK     = "zk"
	TypePrimus = "primus" // TF_CONFIG
	TypeMLP    = "mlp"
)

// Config selects and configures a backend (runner_utils.get_discovery).
type Config struct {
	Type    string // TypeConsul, TypeZK, TypePrimus or TypeMLP ("" = TypeZK)
	IsLocal bool   // a local job: no discovery
	// TFConfig is the TF_CONFIG JSON (TypePrimus).
	TFConfig string
	// PSM names the job in Consul (generate_psm_from_uuid: the uuid itself).
	PSM string
	// JobName (deep_insight_name) and ZKServers configure TypeZK.
	JobName   string
	ZKServers string
	Logger    *slog.Logger
}

// Identity is what a backend says about this process: its server type, index and address
// (TF_CONFIG and MLP derive them from the environment; "" and -1 when it does not say).
type Identity struct {
	ServerType string
	Index      int
	Addr       string
}

// New returns the backend c selects; nil for a local job. env looks up environment
// variables (os.LookupEnv in production).
func New(ctx context.Context, c Config, env func(string) (string, bool)) (Backend, Identity, error) {
	none := Identity{Index: -1}
	if c.IsLocal {
		return nil, none, nil
	}
	switch strings.ToLower(c.Type) {
	case TypePrimus:
		if c.TFConfig == "" {
			return nil, none, fmt.Errorf("%w: discovery %s needs tf_config", ErrInvalidArgument, TypePrimus)
		}
		b, err := NewTFConfig(c.TFConfig)
		if err != nil {
			return nil, none, err
		}
		return b, b.Identity(), nil
	case TypeConsul:
		b, err := NewConsul(c.PSM, env)
		return b, none, err
	case TypeMLP:
		b, err := NewMLP(env)
		if err != nil {
			return nil, none, err
		}
		return b, b.Identity(), nil
	case TypeZK, "":
		b, err := NewZK(ctx, c.JobName, c.ZKServers, c.Logger)
		return b, none, err
	}
	return nil, none, fmt.Errorf("%w: discovery type %q (want consul, zk, primus or mlp)", ErrInvalidArgument, c.Type)
}

// ZK is the ZooKeeper backend: the ephemeral node /monolith/{job}/{name}.{index} holds
// "host:port". Registrations survive session expiries (Register's machinery: the node is
// re-created in the new session at once, where Monolith re-registered every 30 minutes);
// Query reads the nodes (no cache to go stale).
type ZK struct {
	servers []string
	prefix  string
	logger  *slog.Logger
	conn    *zk.Conn

	mu     sync.Mutex
	regs   map[string]*Registration
	closed bool
	once   sync.Once
	err    error
}

// NewZK connects to servers (comma-separated) and ensures /monolith/{job}.
func NewZK(ctx context.Context, job, servers string, logger *slog.Logger) (*ZK, error) {
	list, err := ParseServers(servers)
	if err != nil {
		return nil, err
	}
	if job == "" || strings.ContainsAny(job, "/") {
		return nil, fmt.Errorf("%w: zk discovery job name %q", ErrInvalidArgument, job)
	}
	z := &ZK{servers: list, prefix: "/monolith/" + job, logger: orDiscard(logger), regs: map[string]*Registration{}}
	if z.conn, err = connect(list, z.logger, nil); err != nil {
		return nil, fmt.Errorf("ps/discovery: zk %s: %w", z.prefix, err)
	}
	if err := retryZK(ctx, func() error { return createParents(z.conn, z.prefix+"/x") }); err != nil {
		z.conn.Close()
		return nil, fmt.Errorf("ps/discovery: zk %s: %w", z.prefix, err)
	}
	return z, nil
}

// retryZK retries f while ZooKeeper is not connected, until ctx ends.
func retryZK(ctx context.Context, f func() error) error {
	var b backoff
	for {
		err := f()
		if err == nil || !(errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionExpired)) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, context.Cause(ctx))
		case <-time.After(b.next()):
		}
	}
}

func nodeKey(name string, index int) string { return name + "." + strconv.Itoa(index) }

// Register creates (or replaces) the node of name and index.
func (z *ZK) Register(ctx context.Context, name string, index int, addr string) error {
	if name == "" || strings.ContainsAny(name, "/.") || index < 0 {
		return fmt.Errorf("%w: register %q %d", ErrInvalidArgument, name, index)
	}
	if err := checkAddr(addr); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	key := nodeKey(name, index)
	z.mu.Lock()
	if z.closed {
		z.mu.Unlock()
		return fmt.Errorf("ps/discovery: zk %s: closed", z.prefix)
	}
	old := z.regs[key]
	delete(z.regs, key)
	z.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	r, err := registerNode(ctx, z.servers, z.prefix+"/"+key, []byte(addr), z.logger)
	if err != nil {
		return err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		return errors.Join(fmt.Errorf("ps/discovery: zk %s: closed", z.prefix), r.Close())
	}
	z.regs[key] = r
	return nil
}

// Deregister deletes the node of name and index.
func (z *ZK) Deregister(ctx context.Context, name string, index int, _ string) error {
	key := nodeKey(name, index)
	z.mu.Lock()
	r := z.regs[key]
	delete(z.regs, key)
	z.mu.Unlock()
	if r != nil {
		return r.Close()
	}
	return retryZK(ctx, func() error {
		err := z.conn.Delete(z.prefix+"/"+key, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	})
}

// Query lists the nodes of name: index → address. Nodes with empty data are left out.
func (z *ZK) Query(ctx context.Context, name string) (map[int]string, error) {
	out := map[int]string{}
	err := retryZK(ctx, func() error {
		children, _, err := z.conn.Children(z.prefix)
		if err != nil {
			return err
		}
		clear(out)
		sort.Strings(children)
		for _, c := range children {
			n, idx, ok := strings.Cut(c, ".")
			i, err := strconv.Atoi(idx)
			if !ok || n != name || err != nil || i < 0 {
				continue
			}
			data, _, err := z.conn.Get(z.prefix + "/" + c)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return err
			}
			if len(data) > 0 {
				out[i] = string(data)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ps/discovery: zk query %s/%s.*: %w", z.prefix, name, err)
	}
	return out, nil
}

// Close deletes this process's nodes and closes the connections; later calls return the
// first call's result.
func (z *ZK) Close() error {
	z.once.Do(func() {
		z.mu.Lock()
		z.closed = true
		regs := z.regs
		z.regs = nil
		z.mu.Unlock()
		var errs []error
		for _, r := range regs {
			errs = append(errs, r.Close())
		}
		z.conn.Close()
		z.err = errors.Join(errs...)
	})
	return z.err
}

// ClearZKPath removes the children of /monolith not modified for 9 weeks, then
// /monolith/{job} itself: with force it is deleted with its children, otherwise its
// existence is an error listing the children (zk_utils.clear_zk_path).
func ClearZKPath(ctx context.Context, servers, job string, force bool, logger *slog.Logger) error {
	list, err := ParseServers(servers)
	if err != nil {
		return err
	}
	if job == "" || strings.ContainsAny(job, "/") {
		return fmt.Errorf("%w: zk discovery job name %q", ErrInvalidArgument, job)
	}
	conn, err := connect(list, orDiscard(logger), nil)
	if err != nil {
		return fmt.Errorf("ps/discovery: clear /monolith/%s: %w", job, err)
	}
	defer conn.Close()
	return retryZK(ctx, func() error { return clearJob(conn, "/monolith/"+job, force, time.Now().Add(-9*7*24*time.Hour)) })
}

// clearJob is ClearZKPath on a connection: old job folders are deleted, then prefix.
func clearJob(conn *zk.Conn, prefix string, force bool, cutoff time.Time) error {
	children, _, err := conn.Children("/monolith")
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ps/discovery: clear /monolith: %w", err)
	}
	for _, c := range children {
		p := "/monolith/" + c
		if p == prefix {
			continue
		}
		_, st, err := conn.Get(p)
		if err != nil {
			continue
		}
		if time.UnixMilli(st.Mtime).Before(cutoff) {
			if err := deleteRecursive(conn, p); err != nil {
				return err
			}
		}
	}
	kids, _, err := conn.Children(prefix)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ps/discovery: clear %s: %w", prefix, err)
	}
	if !force {
		return fmt.Errorf("ps/discovery: %s exists with children %v (clear it with force)", prefix, kids)
	}
	return deleteRecursive(conn, prefix)
}

// deleteRecursive deletes p and everything under it.
func deleteRecursive(conn *zk.Conn, p string) error {
	kids, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ps/discovery: delete %s: %w", p, err)
	}
	for _, k := range kids {
		if err := deleteRecursive(conn, p+"/"+k); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("ps/discovery: delete %s: %w", p, err)
	}
	return nil
}
