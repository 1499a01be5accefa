package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/monolith-go/monolith/internal/zk"
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
	TypeConsul   = "consul"
	TypeZK       = "zk"
	TypeTFConfig = "tf_config"
	TypePrimus   = "primus" // Monolith's name of TypeTFConfig
	TypeMLP      = "mlp"
	TypeStatic   = "static" // a fixed list (Config.Static)
)

// Types lists the discovery types New accepts.
var Types = []string{TypeStatic, TypeZK, TypeConsul, TypeTFConfig, TypePrimus, TypeMLP}

// Config selects and configures a backend (runner_utils.get_discovery).
type Config struct {
	Type    string // one of Types ("" = TypeZK)
	IsLocal bool   // a local job: no discovery
	// TFConfig is the TF_CONFIG JSON (TypePrimus).
	TFConfig string
	// PSM names the job in Consul (generate_psm_from_uuid: the uuid itself).
	PSM string
	// JobName (deep_insight_name) and ZKServers configure TypeZK.
	JobName   string
	ZKServers string
	// Static are the PS addresses by shard (TypeStatic), and StaticWorkers the workers'
	// (optional).
	Static, StaticWorkers []string
	Logger                *slog.Logger
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
	case TypeStatic:
		b, err := NewStatic(c.Static, c.StaticWorkers)
		return b, none, err
	case TypePrimus, TypeTFConfig:
		if c.TFConfig == "" {
			return nil, none, fmt.Errorf("%w: discovery %s needs a TF_CONFIG", ErrInvalidArgument, TypeTFConfig)
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
		auth, _ := env("ZK_AUTH")
		b, err := NewZK(ctx, c.JobName, c.ZKServers, auth, c.Logger)
		return b, none, err
	}
	return nil, none, fmt.Errorf("%w: discovery type %q (want one of %s)", ErrInvalidArgument, c.Type, strings.Join(Types, ", "))
}

// Name is the discovery type of b, for messages.
func Name(b Backend) string {
	switch b.(type) {
	case *StaticList:
		return TypeStatic
	case *ZK:
		return TypeZK
	case *Consul:
		return TypeConsul
	case *TFConfig:
		return TypeTFConfig
	case *MLP:
		return TypeMLP
	}
	return fmt.Sprintf("%T", b)
}

// StaticList is the static backend: fixed PS (and worker) addresses. Register and
// Deregister do nothing.
type StaticList struct {
	ps, workers []string
}

// NewStatic validates the lists (ps must not be empty).
func NewStatic(ps, workers []string) (*StaticList, error) {
	p, err := Static(ps)
	if err != nil {
		return nil, err
	}
	var w []string
	if len(workers) > 0 {
		if w, err = Static(workers); err != nil {
			return nil, err
		}
	}
	return &StaticList{ps: p, workers: w}, nil
}

// Register does nothing: the list is fixed.
func (*StaticList) Register(context.Context, string, int, string) error { return nil }

// Deregister does nothing.
func (*StaticList) Deregister(context.Context, string, int, string) error { return nil }

// Query returns the list of "ps" or "worker" by index (empty for another name).
func (s *StaticList) Query(_ context.Context, name string) (map[int]string, error) {
	var l []string
	switch name {
	case "ps":
		l = s.ps
	case "worker":
		l = s.workers
	}
	out := make(map[int]string, len(l))
	for i, a := range l {
		out[i] = a
	}
	return out, nil
}

// Close does nothing.
func (*StaticList) Close() error { return nil }

// ZK is the ZooKeeper backend: the ephemeral node /monolith/{job}/{name}.{index} holds
// "host:port". Registrations are nodes owned by the backend's Client, so they survive
// session expiries (re-created in the new session at once, where Monolith re-registered
// every 30 minutes); Query reads the nodes (no cache to go stale).
type ZK struct {
	prefix string
	c      *zk.Client
}

// NewZK connects to servers (comma-separated) and ensures /monolith/{job}; ctx bounds both.
// With auth ("user:password", what New reads from ZK_AUTH) the client authenticates as
// that digest user and the nodes it creates are that user's alone: other clients can
// neither read the membership nor replace a registration.
func NewZK(ctx context.Context, job, servers, auth string, logger *slog.Logger) (*ZK, error) {
	list, err := ParseServers(servers)
	if err != nil {
		return nil, err
	}
	if job == "" || strings.ContainsAny(job, "/") {
		return nil, fmt.Errorf("%w: zk discovery job name %q", ErrInvalidArgument, job)
	}
	z := &ZK{prefix: "/monolith/" + job}
	if z.c, err = connect(ctx, list, auth, logger); err != nil {
		return nil, fmt.Errorf("ps/discovery: zk %s: %w", z.prefix, err)
	}
	if err := z.c.EnsurePath(ctx, z.prefix); err != nil {
		_ = z.c.Close()
		return nil, fmt.Errorf("ps/discovery: zk %s: %w", z.prefix, err)
	}
	return z, nil
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
	if err := z.c.SetEphemeral(ctx, z.prefix+"/"+nodeKey(name, index), []byte(addr)); err != nil {
		return fmt.Errorf("ps/discovery: zk register: %w", err)
	}
	return nil
}

// Deregister deletes the node of name and index; a missing node is not an error.
func (z *ZK) Deregister(ctx context.Context, name string, index int, _ string) error {
	if err := z.c.DeleteEphemeral(ctx, z.prefix+"/"+nodeKey(name, index)); err != nil {
		return fmt.Errorf("ps/discovery: zk deregister: %w", err)
	}
	return nil
}

// Query lists the nodes of name: index → address. Nodes with empty data are left out.
func (z *ZK) Query(ctx context.Context, name string) (map[int]string, error) {
	children, err := z.c.Children(ctx, z.prefix)
	if err != nil {
		return nil, fmt.Errorf("ps/discovery: zk query %s/%s.*: %w", z.prefix, name, err)
	}
	out := map[int]string{}
	for _, c := range children {
		n, idx, ok := strings.Cut(c, ".")
		i, err := strconv.Atoi(idx)
		if !ok || n != name || err != nil || i < 0 {
			continue
		}
		data, _, err := z.c.Get(ctx, z.prefix+"/"+c)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ps/discovery: zk query %s/%s.*: %w", z.prefix, name, err)
		}
		if len(data) > 0 {
			out[i] = string(data)
		}
	}
	return out, nil
}

// Close ends the session, which deletes this process's nodes, and closes the connection.
// It is idempotent and returns nil.
func (z *ZK) Close() error { return z.c.Close() }

// ClearZKPath removes the children of /monolith not modified for 9 weeks, then
// /monolith/{job} itself: with force it is deleted with its children, otherwise its
// existence is an error listing the children (zk_utils.clear_zk_path). ctx bounds it.
func ClearZKPath(ctx context.Context, servers, job string, force bool, logger *slog.Logger) error {
	list, err := ParseServers(servers)
	if err != nil {
		return err
	}
	if job == "" || strings.ContainsAny(job, "/") {
		return fmt.Errorf("%w: zk discovery job name %q", ErrInvalidArgument, job)
	}
	c, err := connect(ctx, list, "", logger)
	if err != nil {
		return fmt.Errorf("ps/discovery: clear /monolith/%s: %w", job, err)
	}
	defer c.Close()
	return clearJob(ctx, c, "/monolith/"+job, force, time.Now().Add(-9*7*24*time.Hour))
}

// clearJob is ClearZKPath on a connection: old job folders are deleted, then prefix.
func clearJob(ctx context.Context, c *zk.Client, prefix string, force bool, cutoff time.Time) error {
	children, err := c.Children(ctx, "/monolith")
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ps/discovery: clear /monolith: %w", err)
	}
	for _, name := range children {
		p := "/monolith/" + name
		if p == prefix {
			continue
		}
		_, st, err := c.Get(ctx, p)
		if err != nil {
			continue
		}
		if time.UnixMilli(st.Mtime).Before(cutoff) {
			if err := c.Delete(ctx, p, true); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return fmt.Errorf("ps/discovery: clear %s: %w", p, err)
			}
		}
	}
	kids, err := c.Children(ctx, prefix)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ps/discovery: clear %s: %w", prefix, err)
	}
	if !force {
		return fmt.Errorf("ps/discovery: %s exists with children %v (clear it with force)", prefix, kids)
	}
	if err := c.Delete(ctx, prefix, true); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("ps/discovery: clear %s: %w", prefix, err)
	}
	return nil
}
