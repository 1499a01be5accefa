package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("target changed before Commit: %q", b)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("after Commit: %q", b)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm()&0o044 == 0 {
		t.Errorf("mode %v: the file should be readable by others (umask permitting), like os.Create", st.Mode())
	}
	g, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = g.WriteString("aborted")
	if err := g.Abort(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("after Abort: %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if err := g.Commit(); err != nil {
		t.Errorf("Commit after Abort: %v", err)
	}
}
