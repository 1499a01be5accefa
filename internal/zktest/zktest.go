// Package zktest runs a real ZooKeeper server for tests (decision S15): the Debian
// `zookeeper` package's jars started as a standalone server on 127.0.0.1, with a free port,
// a temporary data directory and short timeouts so session-expiry tests are fast.
//
// The server has tickTime 200 ms and grants sessions of 400 ms to 1 s whatever the client
// asks for (SessionTimeout). A missing installation fails the test with instructions; it
// is never skipped.
//
// Forcing a session expiry: go-zookeeper v1.0.4 has no way to open a second connection on
// an existing session (its password is private), so the classic "close a clone of the
// session" trick is not available. Instead a Proxy stands between a client and the server;
// Proxy.ExpireSessions cuts it until the server has expired the sessions behind it, which
// is what a real network partition does. Connections made directly to Server.Addr are not
// affected, so a test can watch the expiry from outside.
package zktest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/internal/zkserver"
)

// Server timing (the zoo.cfg written for every server).
const (
	TickTime          = 200 * time.Millisecond
	MinSessionTimeout = 2 * TickTime
	// SessionTimeout is the longest session the server grants; longer requests are cut to it.
	SessionTimeout = 5 * TickTime
)

// Server is a running standalone ZooKeeper (internal/zkserver). It is stopped by the
// test's cleanup.
type Server struct {
	*zkserver.Server
}

// Start starts a server and waits until it serves requests. It fails t (never skips) when
// ZooKeeper or Java is not installed. The server, its process group and its data directory
// are removed by t.Cleanup; when t failed, the tail of the server log is logged first.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := zkserver.Installed(); err != nil {
		t.Fatalf("zktest: %v", err)
	}
	s, err := zkserver.Start(context.Background(), zkserver.Options{Dir: t.TempDir(), TickTime: TickTime,
		MinSessionTimeout: MinSessionTimeout, MaxSessionTimeout: SessionTimeout})
	if err != nil {
		t.Fatalf("zktest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("zktest: server %s log tail:\n%s", s.Addr(), s.LogTail(40))
		}
		s.Stop()
	})
	return &Server{s}
}

// Restart kills the server (as a crash would) and starts it again on the same port and
// data directory after down: persistent nodes survive, and sessions survive when down is
// shorter than their timeout and their clients reconnect in time. It fails t when the
// server does not come back within a minute.
func (s *Server) Restart(t testing.TB, down time.Duration) {
	t.Helper()
	if err := s.Server.Restart(context.Background(), down); err != nil {
		t.Fatalf("zktest: %v", err)
	}
}

// Servers is Addr as the server list clients take.
func (s *Server) Servers() []string { return []string{s.Addr()} }

// FourLetter sends a four-letter-word command ("srvr", "dump", "ruok", …) and returns the
// reply.
func (s *Server) FourLetter(t testing.TB, cmd string) string {
	t.Helper()
	out, err := s.Server.FourLetter(cmd, 5*time.Second)
	if err != nil {
		t.Fatalf("zktest: %s: %v", cmd, err)
	}
	return out
}

// HasSession reports whether the server still tracks session id (from the "dump" command).
func (s *Server) HasSession(t testing.TB, id int64) bool {
	t.Helper()
	want := "0x" + strconv.FormatInt(id, 16)
	sc := bufio.NewScanner(strings.NewReader(s.FourLetter(t, "dump")))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if strings.TrimSuffix(f, ",") == want {
				return true
			}
		}
	}
	return false
}

// Connect opens a client connection and waits for its session; it is closed by t.Cleanup.
func (s *Server) Connect(t testing.TB) *zk.Conn {
	t.Helper()
	return connect(t, s.Servers())
}

func connect(t testing.TB, servers []string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(servers, SessionTimeout, zk.WithLogInfo(false), zk.WithLogger(NewLogger(t)))
	if err != nil {
		t.Fatalf("zktest: connect: %v", err)
	}
	t.Cleanup(conn.Close)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-timeout:
			t.Fatalf("zktest: no session from %v after 30s", servers)
		}
	}
}

// Logger is a zk.Logger and slog.Handler that writes to the test log until the test's
// cleanup starts, and drops messages after that (client goroutines may still log while
// they wind down, and logging after a test has completed panics).
type Logger struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

// NewLogger returns a Logger for t.
func NewLogger(t testing.TB) *Logger {
	l := &Logger{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	})
	return l
}

// Printf implements zk.Logger.
func (l *Logger) Printf(format string, args ...any) { l.log("zk: " + fmt.Sprintf(format, args...)) }

func (l *Logger) log(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(msg)
	}
}

// Slog returns a *slog.Logger (debug level and up) writing to the test log the same way.
func (l *Logger) Slog() *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{l}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type logWriter struct{ l *Logger }

func (w logWriter) Write(b []byte) (int, error) {
	w.l.log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// Proxy is a TCP proxy in front of a Server that a test can cut. Clients that connect
// through Addr lose their connections on Cut and cannot reconnect until Heal.
type Proxy struct {
	srv *Server
	ln  net.Listener
	wg  sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
}

// NewProxy starts a proxy to s on a free 127.0.0.1 port; it is closed by t.Cleanup.
func (s *Server) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("zktest: proxy: %v", err)
	}
	p := &Proxy{srv: s, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, to give clients instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Servers is Addr as the server list clients take.
func (p *Proxy) Servers() []string { return []string{p.Addr()} }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.cut || p.closed
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.srv.Addr(), 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut || p.closed {
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies from src to dst; when either side ends, both are closed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
	dst.Close()
	src.Close()
}

// Cut closes every proxied connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal accepts connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// ExpireSessions forces the expiry of sessions behind the proxy: it cuts the proxy, waits
// until the server has dropped every session in ids (or, with no ids, for SessionTimeout
// plus two ticks and a margin), and heals. A client that reconnects then learns that its
// session expired (zk.StateExpired).
func (p *Proxy) ExpireSessions(t testing.TB, ids ...int64) {
	t.Helper()
	p.Cut()
	defer p.Heal()
	if len(ids) == 0 {
		time.Sleep(SessionTimeout + 2*TickTime + 200*time.Millisecond)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*SessionTimeout)
	defer cancel()
	for _, id := range ids {
		for p.srv.HasSession(t, id) {
			select {
			case <-ctx.Done():
				t.Fatalf("zktest: session %#x still alive %v after the cut", id, 10*SessionTimeout)
			case <-time.After(TickTime / 2):
			}
		}
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// Eventually polls cond every 20 ms until it holds, failing t with msg() when within
// passes first: the bounded wait of the ZooKeeper tests.
func Eventually(t testing.TB, within time.Duration, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
