// Package metricsrv serves a Prometheus registry over HTTP (GET /metrics) for monolith-go's
// processes: monolith ps, train and agent. It binds a bare port to 127.0.0.1, fails at start
// on an address in use (naming it), and builds registries with the Go and process collectors.
package metricsrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the Go runtime collector (go_goroutines,
// go_memstats_*, …) and the process collector (process_cpu_seconds_total,
// process_resident_memory_bytes, …): what one process serves.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Addr binds an address given without a host ("9100", ":9100") to 127.0.0.1; other
// addresses are returned as they are.
func Addr(a string) string {
	switch {
	case a == "":
		return ""
	case !strings.Contains(a, ":"):
		return "127.0.0.1:" + a
	case strings.HasPrefix(a, ":"):
		return "127.0.0.1" + a
	}
	return a
}

// Validate checks that a (after Addr) is host:port.
func Validate(a string) error {
	if _, _, err := net.SplitHostPort(Addr(a)); err != nil {
		return fmt.Errorf("metrics address %q: %w", a, err)
	}
	return nil
}

// Server serves GET /metrics of one gatherer. Its methods are safe for concurrent use.
type Server struct {
	lis  net.Listener
	http *http.Server
	log  *slog.Logger
	done chan struct{}
	once sync.Once
}

// Listen binds addr (see Addr) and starts serving g in a goroutine until Close. An
// address that cannot be bound (in use, no such host) is an error naming it. log receives
// serving errors (nil: discarded).
func Listen(addr string, g prometheus.Gatherer, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := Addr(addr)
	if err := Validate(a); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", a)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", a, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}, Timeout: 10 * time.Second}))
	s := &Server{lis: lis, log: log, done: make(chan struct{}),
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "addr", a, "err", err)
		}
	}()
	return s, nil
}

// Addr is the bound address (host:port).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops serving (scrapes in flight get up to 2 s) and waits for the serving
// goroutine. It is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err = s.http.Shutdown(ctx); err != nil {
			err = errors.Join(err, s.http.Close())
		}
		<-s.done
	})
	return err
}

// slogPrinter adapts a logger to promhttp's ErrorLog.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics", "err", fmt.Sprint(v...)) }

// Register registers c on reg, or returns the collector registered before with the same
// descriptors (prometheus.AlreadyRegisteredError), so that the runs of one process add
// up in the same series. Any other conflict is an error.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	var zero T
	return zero, err
}
