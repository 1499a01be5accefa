package fileops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCopyRecursively ports utils_test.py: a two-level tree copied with 2 workers keeps every
// file's content and replaces what dst held; single files, missing sources and hdfs paths.
func TestCopyRecursively(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	files := map[string]string{"a.txt": "a", "d1/b.txt": "bb", "d1/d2/c.txt": "ccc", "d3/e": ""}
	for name, body := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "dst")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "stale"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CopyRecursively(ctx, src, dst, CopyOptions{MaxWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if b, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(b) != body {
			t.Errorf("%s: %q, %v; want %q", name, b, err, body)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "stale")); !os.IsNotExist(err) {
		t.Errorf("dst was not replaced: %v", err)
	}
	one := filepath.Join(t.TempDir(), "one")
	if err := CopyRecursively(ctx, filepath.Join(src, "a.txt"), one, CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(one); string(b) != "a" {
		t.Errorf("single file copy: %q", b)
	}
	missing := filepath.Join(src, "nope")
	if err := CopyRecursively(ctx, missing, one, CopyOptions{SkipNonexist: true}); err != nil {
		t.Errorf("missing src with SkipNonexist: %v", err)
	}
	if err := CopyRecursively(ctx, missing, one, CopyOptions{}); err == nil || !strings.Contains(err.Error(), "doesn't exist") {
		t.Errorf("missing src: %v", err)
	}
	for _, pair := range [][2]string{{"hdfs:/a/b", one}, {src, "hdfs://nn/x"}} {
		if err := CopyRecursively(ctx, pair[0], pair[1], CopyOptions{}); !errors.Is(err, ErrHDFSUnavailable) {
			t.Errorf("%v: %v, want ErrHDFSUnavailable", pair, err)
		}
	}
	// A file that vanished is retried with backoff, then skipped or reported.
	start := time.Now()
	if err := CopyFile(ctx, missing, one, CopyOptions{MaxRetries: 2, Backoff: 5 * time.Millisecond, SkipNonexist: true}); err != nil {
		t.Errorf("CopyFile of a vanished file with SkipNonexist: %v", err)
	}
	if time.Since(start) < 15*time.Millisecond {
		t.Errorf("retries did not back off (%v)", time.Since(start))
	}
	if err := CopyFile(ctx, missing, one, CopyOptions{MaxRetries: 1, Backoff: time.Millisecond}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CopyFile of a vanished file: %v", err)
	}
}

// TestCopyRecursivelyDanglingLinks: dangling symlinks fail to copy (whatever the user, root
// included); with parallel workers both failures are reported, joined (C3), after their
// retries, and the good file is still copied.
func TestCopyRecursivelyDanglingLinks(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "ok"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bad1", "bad2"} {
		if err := os.Symlink(filepath.Join(src, "missing-"+name), filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "d")
	err := CopyRecursively(context.Background(), src, dst, CopyOptions{MaxWorkers: 3, MaxRetries: 1, Backoff: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "bad1") || !strings.Contains(err.Error(), "bad2") {
		t.Errorf("errors of parallel copies: %v; want both links named", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "ok")); string(b) != "ok" {
		t.Errorf("the good file was not copied: %q", b)
	}
}
