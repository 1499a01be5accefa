package discovery

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MLP is the MLP backend: roles, counts and addresses come from the MLP_* environment
// (MLP_ROLE, MLP_ROLE_INDEX, MLP_{ROLE}_NUM, MLP_{ROLE}_{i}_PRIMARY_HOST,
// MLP_{ROLE}_{i}_PORT; an MPI worker takes its index from OMPI_COMM_WORLD_RANK and its
// port from worker 0's plus the index). Register and Deregister only hide or show an
// index after checking the address against the environment. Departure: bad input is an
// error, not an assert, and the wait for a PS port is bounded by PSWait.
type MLP struct {
	env   func(string) (string, bool)
	role  string
	index int
	mpi   bool
	// PSWait bounds Query("ps")'s wait for every PS port to accept connections (default
	// one hour, as Monolith).
	PSWait time.Duration

	mu     sync.Mutex
	hidden map[string]bool
}

// NewMLP reads the environment.
func NewMLP(env func(string) (string, bool)) (*MLP, error) {
	m := &MLP{env: env, hidden: map[string]bool{}, PSWait: time.Hour}
	m.role = strings.ToUpper(m.get("MLP_ROLE"))
	if m.role == "" {
		return nil, fmt.Errorf("%w: mlp discovery: MLP_ROLE is not set", ErrInvalidArgument)
	}
	_, m.mpi = env("OMPI_COMM_WORLD_RANK")
	m.mpi = m.mpi && m.role == "WORKER"
	var err error
	if m.mpi {
		m.index, err = m.intEnv("OMPI_COMM_WORLD_RANK", 0)
	} else {
		m.index, err = m.intEnv("MLP_ROLE_INDEX", 0)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// get reads a variable with blanks and quotes trimmed, as MLPEnv does.
func (m *MLP) get(k string) string {
	v, _ := m.env(k)
	return strings.Trim(strings.TrimSpace(v), `"'`)
}

func (m *MLP) intEnv(k string, def int) (int, error) {
	v := m.get(k)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: mlp discovery: %s=%q is not a non-negative integer", ErrInvalidArgument, k, v)
	}
	return n, nil
}

// Identity is this process's role (lower case), index and address.
func (m *MLP) Identity() Identity {
	addr, _ := m.addr(m.role, m.index)
	return Identity{ServerType: strings.ToLower(m.role), Index: m.index, Addr: addr}
}

// replicas is the number of processes of role.
func (m *MLP) replicas(role string) (int, error) {
	if m.mpi && role == "WORKER" {
		return m.intEnv("OMPI_COMM_WORLD_SIZE", 0)
	}
	return m.intEnv("MLP_"+role+"_NUM", 0)
}

// addr is the address of process index of role.
func (m *MLP) addr(role string, index int) (string, error) {
	hostIndex, portKey, portAdd := index, fmt.Sprintf("MLP_%s_%d_PORT", role, index), 0
	if m.mpi && role == "WORKER" {
		local, err := m.intEnv("OMPI_COMM_WORLD_LOCAL_SIZE", 1)
		if err != nil {
			return "", err
		}
		hostIndex, portKey, portAdd = index/max(1, local), "MLP_WORKER_0_PORT", index
	}
	host := m.get(fmt.Sprintf("MLP_%s_%d_PRIMARY_HOST", role, hostIndex))
	port, err := m.intEnv(portKey, -1)
	if err != nil {
		return "", err
	}
	if host == "" || port < 0 {
		return "", fmt.Errorf("%w: mlp discovery: no address for %s %d (MLP_%s_%d_PRIMARY_HOST, %s)", ErrInvalidArgument, role, index, role, hostIndex, portKey)
	}
	return net.JoinHostPort(host, strconv.Itoa(port+portAdd)), nil
}

// check verifies that addr is what the environment says of name and index.
func (m *MLP) check(name string, index int, addr string) error {
	role := strings.ToUpper(name)
	n, err := m.replicas(role)
	if err != nil {
		return err
	}
	if index < 0 || index >= n {
		return fmt.Errorf("%w: mlp discovery: %s %d out of %d", ErrInvalidArgument, name, index, n)
	}
	want, err := m.addr(role, index)
	if err != nil {
		return err
	}
	wh, wp, _ := net.SplitHostPort(want)
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: mlp discovery: address %q: %v", ErrInvalidArgument, addr, err)
	}
	switch h {
	case "local", "localhost", "127.0.0.1", "0.0.0.0", wh:
	default:
		return fmt.Errorf("%w: mlp discovery: %s %d registers host %s, the environment says %s", ErrInvalidArgument, name, index, h, wh)
	}
	if p != wp {
		return fmt.Errorf("%w: mlp discovery: %s %d registers port %s, the environment says %s", ErrInvalidArgument, name, index, p, wp)
	}
	return nil
}

// Register shows index of name again.
func (m *MLP) Register(_ context.Context, name string, index int, addr string) error {
	if err := m.check(name, index, addr); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.hidden, nodeKey(strings.ToLower(name), index))
	return nil
}

// Deregister hides index of name from Query.
func (m *MLP) Deregister(_ context.Context, name string, index int, addr string) error {
	if err := m.check(name, index, addr); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hidden[nodeKey(strings.ToLower(name), index)] = true
	return nil
}

// Query lists the shown processes of name; for "ps" it first waits (PSWait, ctx) until each
// port accepts connections.
func (m *MLP) Query(ctx context.Context, name string) (map[int]string, error) {
	role := strings.ToUpper(name)
	n, err := m.replicas(role)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for i := range n {
		m.mu.Lock()
		hidden := m.hidden[nodeKey(strings.ToLower(name), i)]
		m.mu.Unlock()
		if hidden {
			continue
		}
		a, err := m.addr(role, i)
		if err != nil {
			return nil, err
		}
		if strings.EqualFold(name, "ps") {
			if err := waitPort(ctx, a, m.PSWait); err != nil {
				return nil, err
			}
		}
		out[i] = a
	}
	return out, nil
}

// waitPort waits until addr accepts a TCP connection.
func waitPort(ctx context.Context, addr string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ps/discovery: mlp: %s did not accept connections within %v: %w", addr, limit, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close does nothing.
func (*MLP) Close() error { return nil }
