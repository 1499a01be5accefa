package hostutil

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/serving/config"
)

func TestLocalIP(t *testing.T) {
	if got := LocalIP(config.MapEnv(map[string]string{config.EnvHostIP: "10.1.2.3"})); got != "10.1.2.3" {
		t.Errorf("LocalIP with MY_HOST_IP = %q", got)
	}
	// 127.0.0.1 is never advertised: the fallbacks give another address or "localhost".
	if got := LocalIP(config.MapEnv(map[string]string{config.EnvHostIP: "127.0.0.1"})); got == "127.0.0.1" || got == "" {
		t.Errorf("LocalIP with MY_HOST_IP=127.0.0.1 = %q", got)
	}
}

func TestCheckPortOpen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if !CheckPortOpen(context.Background(), port) {
		t.Error("a listening port counts as closed")
	}
	l.Close()
	if CheckPortOpen(context.Background(), port) {
		t.Error("a closed port counts as open")
	}
}

func TestAvailableMemory(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		text string
		want int64
		err  string
	}{
		{"MemTotal: 100 kB\nMemAvailable:    2048 kB\n", 2048 * 1024, ""},
		{"MemTotal: 100 kB\n", 0, "no MemAvailable"},
		{"MemAvailable: 12 MB\n", 0, "is not"},
		{"MemAvailable: -5 kB\n", 0, "MemAvailable"},
	} {
		p := filepath.Join(dir, "meminfo")
		if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := availableMemory(p)
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("availableMemory(%q) = %d, %v; want %d, error %q", tc.text, got, err, tc.want, tc.err)
		}
	}
	if n, err := AvailableMemory(); err != nil || n <= 0 {
		t.Errorf("AvailableMemory on this host = %d, %v", n, err)
	}
}

func TestParseSubModelName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind string
		idx  int
		bad  bool
	}{
		{"ps_3", "ps", 3, false}, {"entry", "entry", 0, false}, {"dense_0", "dense", 0, false},
		{"ps_x", "", 0, true}, {"ps_-1", "", 0, true},
	} {
		k, i, err := ParseSubModelName(tc.in)
		if (err != nil) != tc.bad || k != tc.kind || i != tc.idx {
			t.Errorf("ParseSubModelName(%q) = %q, %d, %v", tc.in, k, i, err)
		}
	}
}

// Two listeners share a port only when both ask for SO_REUSEPORT.
func TestListenReusePort(t *testing.T) {
	ctx := context.Background()
	a, err := Listen(ctx, "127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Listen(ctx, a.Addr().String(), true)
	if err != nil {
		t.Fatalf("second SO_REUSEPORT listener on %s: %v", a.Addr(), err)
	}
	b.Close()
	if c, err := Listen(ctx, a.Addr().String(), false); err == nil {
		c.Close()
		t.Errorf("a plain listener bound %s beside a SO_REUSEPORT one", a.Addr())
	}
}
