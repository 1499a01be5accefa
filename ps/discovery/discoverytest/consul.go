// Package discoverytest serves the Consul agent endpoints that ps/discovery's Consul client
// uses, over real TCP on 127.0.0.1, so tests can run discovery through Consul in this
// process or in child processes (no Consul server can be installed here).
package discoverytest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Consul is an in-memory Consul agent: service registration with a TTL check, check
// passes, deregistration, and lookups by name (ByteDance's /v1/lookup/name).
type Consul struct {
	srv      *httptest.Server
	mu       sync.Mutex
	services map[string]map[string]any // id → register body
	passes   map[string]int
	hidden   bool
}

// NewConsul starts an agent; t.Cleanup stops it.
func NewConsul(t testing.TB) *Consul {
	t.Helper()
	c := &Consul{services: map[string]map[string]any{}, passes: map[string]int{}}
	c.srv = httptest.NewServer(c)
	t.Cleanup(c.srv.Close)
	return c
}

// URL is the agent's base URL.
func (c *Consul) URL() string { return c.srv.URL }

// Client is an HTTP client for the agent.
func (c *Consul) Client() *http.Client { return c.srv.Client() }

// Env is the environment that points ps/discovery's Consul client at the agent
// (CONSUL_HTTP_HOST and CONSUL_HTTP_PORT).
func (c *Consul) Env() []string {
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(c.srv.URL, "http://"))
	return []string{"CONSUL_HTTP_HOST=" + host, "CONSUL_HTTP_PORT=" + port}
}

// Passes is the number of TTL check passes of service id.
func (c *Consul) Passes(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.passes[id]
}

// Hide makes lookups never show registrations (a blacklisted machine).
func (c *Consul) Hide() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hidden = true
}

// ServeHTTP serves the agent endpoints.
func (c *Consul) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/lookup/name":
		if r.URL.Query().Get("addr-family") != "dual-stack" {
			http.Error(w, "addr-family", http.StatusBadRequest)
			return
		}
		out := []map[string]any{}
		for _, s := range c.services {
			if c.hidden || s["name"] != r.URL.Query().Get("name") {
				continue
			}
			tags := map[string]string{}
			for _, tg := range s["tags"].([]any) {
				k, v, _ := strings.Cut(tg.(string), ":")
				tags[k] = v
			}
			out = append(out, map[string]any{"Port": s["port"], "Tags": tags})
		}
		_ = json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodPut && r.URL.Path == "/v1/agent/service/register":
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		check, _ := body["check"].(map[string]any)
		if id, _ := body["id"].(string); id == "" || check["ttl"] != "60s" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if _, ok := body["tags"].([]any); !ok {
			http.Error(w, "no tags", http.StatusBadRequest)
			return
		}
		c.services[body["id"].(string)] = body
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/agent/service/deregister/"):
		delete(c.services, strings.TrimPrefix(r.URL.Path, "/v1/agent/service/deregister/"))
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/agent/check/pass/service:"):
		c.passes[strings.TrimPrefix(r.URL.Path, "/v1/agent/check/pass/service:")]++
	default:
		http.NotFound(w, r)
	}
}
