package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrBlacklisted is Monolith's "This machine is blacklisted by consul.": a registration
// that never became visible in lookups.
//
//lint:ignore ST1005 Monolith's exact message.
var ErrBlacklisted = errors.New("This machine is blacklisted by consul.")

// consulSocket is the agent's unix socket used when no host is configured.
const consulSocket = "/opt/tmp/sock/consul.sock"

// Consul is an HTTP client of the Consul agent API Monolith's ByteDance Consul uses:
// lookups by PSM (GET /v1/lookup/name), service registration with a TTL check passed every
// 30 s, and deregistration. The agent is CONSUL_HTTP_HOST or TCE_HOST_IP, else the unix
// socket /opt/tmp/sock/consul.sock when present, else 127.0.0.1; the port is
// CONSUL_HTTP_PORT or 2280. No Consul server runs here: the tests use a local HTTP server
// implementing exactly these endpoints.
type Consul struct {
	psm    string
	base   string
	client *http.Client
	// Timings (Monolith's defaults): Retries HTTP attempts on connection errors with a
	// random 0–RetryBackoff wait; DedupeWait between deregistrations of an older entry;
	// VisiblePoll × VisibleTries for a registration to show in lookups; TTLPass.
	Retries                  int
	RetryBackoff, DedupeWait time.Duration
	VisiblePoll, TTLPass     time.Duration
	VisibleTries             int

	mu     sync.Mutex
	passes map[string]context.CancelFunc // service id → its TTL pass loop
	wg     sync.WaitGroup
}

// NewConsul returns a client for psm with the agent found in env.
func NewConsul(psm string, env func(string) (string, bool)) (*Consul, error) {
	if psm == "" {
		return nil, fmt.Errorf("%w: consul discovery needs a psm (uuid)", ErrInvalidArgument)
	}
	get := func(k string) string { v, _ := env(k); return v }
	port := get("CONSUL_HTTP_PORT")
	if port == "" {
		port = "2280"
	}
	host := get("CONSUL_HTTP_HOST")
	if host == "" {
		host = get("TCE_HOST_IP")
	}
	c := newConsul(psm, "", http.DefaultClient)
	switch {
	case host != "":
		c.base = "http://" + net.JoinHostPort(host, port)
	case fileExists(consulSocket):
		c.base = "http://consul"
		c.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", consulSocket)
		}}}
	default:
		c.base = "http://" + net.JoinHostPort("127.0.0.1", port)
	}
	return c, nil
}

// NewConsulAt returns a client of the agent at base ("http://host:port").
func NewConsulAt(psm, base string, client *http.Client) *Consul { return newConsul(psm, base, client) }

func newConsul(psm, base string, client *http.Client) *Consul {
	return &Consul{psm: psm, base: strings.TrimSuffix(base, "/"), client: client, Retries: 5, RetryBackoff: 5 * time.Second,
		DedupeWait: 3 * time.Second, VisiblePoll: 5 * time.Second, VisibleTries: 36, TTLPass: 30 * time.Second,
		passes: map[string]context.CancelFunc{}}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// entry is one lookup result.
type entry struct {
	Port int `json:"Port"`
	Tags struct {
		Name  string `json:"name"`
		IP    string `json:"ip"`
		Index string `json:"index"`
	} `json:"Tags"`
}

// do sends one request, retrying connection errors; non-2xx answers are errors.
func (c *Consul) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	var last error
	for attempt := 0; attempt < max(1, c.Retries); attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, errors.Join(last, context.Cause(ctx))
			case <-time.After(time.Duration(rand.Int64N(int64(c.RetryBackoff) + 1))):
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(payload))
		if err != nil {
			return nil, err
		}
		resp, err := c.client.Do(req)
		if err != nil {
			last = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("ps/discovery: consul %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
		}
		return b, nil
	}
	return nil, fmt.Errorf("ps/discovery: consul %s %s: %w", method, path, last)
}

func (c *Consul) lookup(ctx context.Context) ([]entry, error) {
	b, err := c.do(ctx, http.MethodGet, "/v1/lookup/name?name="+url.QueryEscape(c.psm)+"&addr-family=dual-stack", nil)
	if err != nil {
		return nil, err
	}
	var out []entry
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("ps/discovery: consul lookup %s: %w", c.psm, err)
	}
	return out, nil
}

// Query groups the lookup of the psm by tag name: index → "ip:port" of name.
func (c *Consul) Query(ctx context.Context, name string) (map[int]string, error) {
	all, err := c.lookup(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, e := range all {
		i, err := strconv.Atoi(e.Tags.Index)
		if e.Tags.Name != name || err != nil {
			continue
		}
		out[i] = net.JoinHostPort(e.Tags.IP, strconv.Itoa(e.Port))
	}
	return out, nil
}

func (c *Consul) serviceID(port int) string { return c.psm + "-" + strconv.Itoa(port) }

// Register removes an older entry of name and index, registers addr with a TTL check
// passed every TTLPass, and waits for it to show in lookups (ErrBlacklisted otherwise).
func (c *Consul) Register(ctx context.Context, name string, index int, addr string) error {
	host, p, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		return fmt.Errorf("%w: consul register %q: not host:port", ErrInvalidArgument, addr)
	}
	for {
		old, err := c.Query(ctx, name)
		if err != nil {
			return err
		}
		a, ok := old[index]
		if !ok {
			break
		}
		_, op, _ := net.SplitHostPort(a)
		oport, _ := strconv.Atoi(op)
		if _, err := c.do(ctx, http.MethodPut, "/v1/agent/service/deregister/"+c.serviceID(oport), nil); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(c.DedupeWait):
		}
	}
	id := c.serviceID(port)
	body := map[string]any{"id": id, "name": c.psm, "port": port, "check": map[string]string{"ttl": "60s"},
		"tags": []string{"index:" + strconv.Itoa(index), "name:" + name, "ip:" + host}}
	if _, err := c.do(ctx, http.MethodPut, "/v1/agent/service/register", body); err != nil {
		return err
	}
	c.startPass(id)
	for try := 0; try < c.VisibleTries; try++ {
		got, err := c.Query(ctx, name)
		if err != nil {
			return err
		}
		if got[index] == net.JoinHostPort(host, p) {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(c.VisiblePoll):
		}
	}
	return fmt.Errorf("ps/discovery: consul register %s %s %d: %w", c.psm, name, index, ErrBlacklisted)
}

// startPass passes the TTL check of id every TTLPass until Deregister or Close.
func (c *Consul) startPass(id string) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	if old := c.passes[id]; old != nil {
		old()
	}
	c.passes[id] = cancel
	c.mu.Unlock()
	c.wg.Go(func() {
		t := time.NewTicker(c.TTLPass)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// GET, as Monolith's client sends it (a stock Consul agent wants PUT).
				_, _ = c.do(ctx, http.MethodGet, "/v1/agent/check/pass/service:"+id, nil)
			}
		}
	})
}

// Deregister removes the entry of addr's port.
func (c *Consul) Deregister(ctx context.Context, _ string, _ int, addr string) error {
	_, p, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		return fmt.Errorf("%w: consul deregister %q: not host:port", ErrInvalidArgument, addr)
	}
	id := c.serviceID(port)
	c.mu.Lock()
	if cancel := c.passes[id]; cancel != nil {
		cancel()
		delete(c.passes, id)
	}
	c.mu.Unlock()
	_, err = c.do(ctx, http.MethodPut, "/v1/agent/service/deregister/"+id, nil)
	return err
}

// Close stops the TTL loops (the entries expire with their checks); calling it again is
// harmless.
func (c *Consul) Close() error {
	c.mu.Lock()
	for _, cancel := range c.passes {
		cancel()
	}
	c.passes = map[string]context.CancelFunc{}
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}
