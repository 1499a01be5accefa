package schemas_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fixtures"
)

// TestGeneratedCodeIsCurrent regenerates the protobuf Go code the way `make proto` does
// and compares it with the committed files.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("waits for protoc (Debian protobuf-compiler; .ci/run installs it)")
	}
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	plugin, err := exec.Command("go", "tool", "-n", "protoc-gen-go").Output()
	if err != nil {
		t.Fatalf("go tool -n protoc-gen-go: %v", err)
	}
	grpcPlugin, err := exec.Command("go", "tool", "-n", "protoc-gen-go-grpc").Output()
	if err != nil {
		t.Fatalf("go tool -n protoc-gen-go-grpc: %v", err)
	}
	var protos []string
	err = filepath.WalkDir(filepath.Join(root, "schemas", "proto"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".proto") {
			rel, _ := filepath.Rel(root, p)
			protos = append(protos, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(protos)
	out := t.TempDir()
	args := append([]string{"-I", "schemas/proto", "--plugin=protoc-gen-go=" + strings.TrimSpace(string(plugin)),
		"--plugin=protoc-gen-go-grpc=" + strings.TrimSpace(string(grpcPlugin)),
		"--go_out=" + out, "--go_opt=module=github.com/monolith-go/monolith",
		"--go-grpc_out=" + out, "--go-grpc_opt=module=github.com/monolith-go/monolith"}, protos...)
	cmd := exec.Command(protoc, args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	n := 0
	err = filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("%s is generated but not committed: %v", rel, err)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from `make proto` output; run make proto", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("protoc generated nothing")
	}
}
