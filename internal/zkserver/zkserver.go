// Package zkserver runs a standalone ZooKeeper server from the Debian `zookeeper`
// package's jars on 127.0.0.1, on a free port with its data in a folder the caller names.
// `monolith cluster` starts one when it is given no ZooKeeper; internal/zktest wraps it for tests.
package zkserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Installation paths of the Debian package.
const (
	// JarDir holds zookeeper.jar and the jars its manifest names.
	JarDir = "/usr/share/java"
	// ZooKeeperJar is the server's jar; its manifest Class-Path brings its dependencies.
	ZooKeeperJar = JarDir + "/zookeeper.jar"
	mainClass    = "org.apache.zookeeper.server.ZooKeeperServerMain"
)

// ErrNotInstalled reports that ZooKeeper or Java is missing.
var ErrNotInstalled = errors.New("zkserver: ZooKeeper is not installed")

// Options configure a server. Zero durations take the defaults.
type Options struct {
	// Dir receives zoo.cfg, the data directory and zookeeper.log (required).
	Dir string
	// TickTime (default 2s, ZooKeeper's), and the session timeouts the server grants
	// (default 2 and 20 ticks).
	TickTime, MinSessionTimeout, MaxSessionTimeout time.Duration
	// StartWait bounds the wait for the server to serve (default 60s).
	StartWait time.Duration
}

// Server is a running standalone ZooKeeper.
type Server struct {
	addr    string
	dir     string
	java    string
	cfgPath string
	wait    time.Duration
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
}

// Installed reports whether ZooKeeper and Java are installed (ErrNotInstalled, saying how
// to install them, when not) and returns the java binary.
func Installed() (string, error) {
	java, err := exec.LookPath("java")
	if _, serr := os.Stat(ZooKeeperJar); serr != nil || err != nil {
		return "", fmt.Errorf("%w (%s: %v; java: %v): run `sudo apt-get install zookeeper` (it brings a Java runtime)", ErrNotInstalled, ZooKeeperJar, serr, err)
	}
	return java, nil
}

// Start starts a server and waits until it serves requests, bounded by ctx and
// o.StartWait. A port taken between probing and binding is retried (three attempts).
func Start(ctx context.Context, o Options) (*Server, error) {
	java, err := Installed()
	if err != nil {
		return nil, err
	}
	if o.Dir == "" {
		return nil, errors.New("zkserver: no directory")
	}
	if o.TickTime <= 0 {
		o.TickTime = 2 * time.Second
	}
	if o.MinSessionTimeout <= 0 {
		o.MinSessionTimeout = 2 * o.TickTime
	}
	if o.MaxSessionTimeout <= 0 {
		o.MaxSessionTimeout = 20 * o.TickTime
	}
	if o.StartWait <= 0 {
		o.StartWait = 60 * time.Second
	}
	var lastErr error
	for attempt := range 3 {
		s, err := launch(ctx, java, filepath.Join(o.Dir, strconv.Itoa(attempt)), o)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("zkserver: %w", lastErr)
}

func launch(ctx context.Context, java, dir string, o Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
minSessionTimeout=%d
maxSessionTimeout=%d
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
`, o.TickTime.Milliseconds(), data, port, o.MinSessionTimeout.Milliseconds(), o.MaxSessionTimeout.Milliseconds())
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, java: java, cfgPath: cfgPath, wait: o.StartWait}
	if err := s.run(ctx, os.O_TRUNC); err != nil {
		return nil, err
	}
	return s, nil
}

// run starts the server process on s's configuration and waits until it serves requests;
// logFlag is os.O_TRUNC for a new server, os.O_APPEND for a restart.
func (s *Server) run(ctx context.Context, logFlag int) error {
	log, err := os.OpenFile(filepath.Join(s.dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|logFlag, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own descriptor

	cp := ZooKeeperJar
	if _, err := os.Stat(JarDir + "/slf4j-simple.jar"); err == nil {
		cp += ":" + JarDir + "/slf4j-simple.jar" // server logs go to zookeeper.log
	}
	cmd := exec.Command(s.java,
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.4lw.commands.whitelist=*",
		"-cp", cp, mainClass, s.cfgPath)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.java, err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	deadline := time.NewTimer(s.wait)
	defer deadline.Stop()
	for {
		if out, err := s.FourLetter("srvr", time.Second); err == nil && strings.Contains(out, "Mode: standalone") {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("server %s exited at start-up:\n%s", s.addr, s.LogTail(40))
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-deadline.C:
			tail := s.LogTail(40)
			s.Stop()
			return fmt.Errorf("server %s not serving after %v:\n%s", s.addr, s.wait, tail)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Restart kills the server (as a crash would) and starts it again on the same port and
// data directory after down: persistent nodes survive, and sessions survive when down is
// shorter than their timeout and their clients reconnect in time.
func (s *Server) Restart(ctx context.Context, down time.Duration) error {
	s.Stop()
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.run(ctx, os.O_APPEND); err != nil {
		return fmt.Errorf("zkserver: restart: %w", err)
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Stop kills the process group and waits (up to 10 s) for the process.
func (s *Server) Stop() {
	killGroup(s.cmd)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
	}
}

// LogTail returns the last n lines of the server log.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.dir, "zookeeper.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Addr is the server's client address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// FourLetter sends a four-letter-word command ("srvr", "dump", "ruok", …) and returns the
// reply.
func (s *Server) FourLetter(cmd string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", s.addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}
