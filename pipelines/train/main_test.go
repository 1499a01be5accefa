package train

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/ps/server"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/runners/beamtest"
)

// The environment of a PS child process (TestMain re-executes the test binary as one).
const (
	envPSTables = "MONOLITH_TRAIN_TEST_PS_TABLES"
	envPSShard  = "MONOLITH_TRAIN_TEST_PS_SHARD" // "i/n"
)

func TestMain(m *testing.M) {
	if os.Getenv(envPSTables) != "" {
		os.Exit(psChild())
	}
	// Pipelines run on the embedded prism runner; its job server is ignored (IgnorePrism).
	beamtest.VerifyMain(m)
}

// psChild serves one PS shard until SIGTERM, printing "ADDR <host:port>" first.
func psChild() int {
	tc, err := table.LoadTablesConfig(os.Getenv(envPSTables))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var i, n int
	if _, err := fmt.Sscanf(os.Getenv(envPSShard), "%d/%d", &i, &n); err != nil {
		fmt.Fprintln(os.Stderr, "bad", envPSShard, err)
		return 1
	}
	o := server.DefaultOptions()
	o.Shard, o.NumShards, o.Tables = i, n, tc
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := server.New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// Stop by ourselves if the parent forgets us.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	fmt.Printf("ADDR %s\n", s.Addr())
	if err := s.Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startChildPS starts n PS shards as child processes serving tablesFile and returns their
// addresses; they are stopped with SIGTERM when the test ends.
func startChildPS(t *testing.T, tablesFile string, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range n {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), envPSTables+"="+tablesFile, envPSShard+"="+strconv.Itoa(i)+"/"+strconv.Itoa(n))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "ADDR ") {
			t.Fatalf("PS child %d: %q, %v", i, line, err)
		}
		addrs[i] = strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
	}
	return addrs
}

// writeFile writes b to dir/name and returns the path.
func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
