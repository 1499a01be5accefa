package beamtest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/syncbuf"
)

// JobServer is Beam's prism job server running as its own process for a test.
type JobServer struct {
	Endpoint string // 127.0.0.1:PORT
	cmd      *exec.Cmd
	logs     *syncbuf.Buffer
}

// StartJobServer builds Beam's prism job server from the SDK this module pins (go tool
// prism), starts it on a loopback port and waits, at most 4 minutes in all, until it
// accepts connections. It is stopped at the end of the test, its log printed if the test
// failed.
func StartJobServer(t *testing.T) *JobServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin, err := exec.CommandContext(ctx, "go", "tool", "-n", "prism").Output()
	if err != nil {
		t.Fatalf("building the prism job server (go tool -n prism): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &JobServer{Endpoint: fmt.Sprintf("127.0.0.1:%d", port), logs: &syncbuf.Buffer{}}
	s.cmd = exec.Command(strings.TrimSpace(string(bin)),
		fmt.Sprintf("--job_port=%d", port), "--serve_http=false", "--idle_shutdown_timeout=3m", "--log_level=warn")
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	s.cmd.WaitDelay = 5 * time.Second
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("job server log:\n%s", s.logs.String())
		}
	})
	for {
		c, err := net.DialTimeout("tcp", s.Endpoint, time.Second)
		if err == nil {
			c.Close()
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job server at %s did not start: %v\n%s", s.Endpoint, err, s.logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop kills the job server and waits for it; it is idempotent.
func (s *JobServer) Stop() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}
