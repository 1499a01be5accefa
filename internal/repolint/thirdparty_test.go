package repolint

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/monolith-go/monolith/internal/fixtures"
)

// TestZooKeeperClientIsPatched pins the go.mod replace of go-zookeeper by the copy in
// third_party/go-zookeeper/zk, and the patch in it (PATCHES.md there): every access of
// Conn.lastZxid goes through sync/atomic, since the connection loop reads it while the
// receive loop writes it. A build against the plain v1.0.4 brings that data race back.
func TestZooKeeperClientIsPatched(t *testing.T) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	type module struct {
		Version string
		Replace *struct{ Path, Dir string }
	}
	ms := listJSON[module](t, root, "-m", "github.com/go-zookeeper/zk")
	if len(ms) != 1 {
		t.Fatalf("go list -m github.com/go-zookeeper/zk: %d modules", len(ms))
	}
	m := ms[0]
	want := filepath.Join(root, "third_party", "go-zookeeper", "zk")
	if m.Replace == nil || filepath.Clean(m.Replace.Dir) != want {
		t.Fatalf("github.com/go-zookeeper/zk %s is built from %+v, want the patched copy in %s", m.Version, m.Replace, want)
	}
	src, err := os.ReadFile(filepath.Join(want, "conn.go"))
	if err != nil {
		t.Fatal(err)
	}
	all := regexp.MustCompile(`c\.lastZxid\b`).FindAllIndex(src, -1)
	atomic := regexp.MustCompile(`atomic\.(Load|Store)Int64\(&c\.lastZxid\b`).FindAllIndex(src, -1)
	if len(all) != 4 || len(atomic) != len(all) {
		t.Errorf("conn.go accesses c.lastZxid %d times, %d of them atomically; want 4, all atomic", len(all), len(atomic))
	}
}
