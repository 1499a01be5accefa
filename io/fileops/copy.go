package fileops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrHDFSUnavailable is wrapped by every copy from or to an `hdfs:/` path (decision C4:
// such paths are absolute, and no HDFS client is configured).
var ErrHDFSUnavailable = errors.New("HDFS not available")

// CopyOptions configure CopyFile and CopyRecursively (Monolith's utils.CopyFile and
// CopyRecursively).
type CopyOptions struct {
	// MaxWorkers copy files in parallel (≤ 1: one after the other).
	MaxWorkers int
	// SkipNonexist makes a missing source a no-op instead of an error; a file that vanishes
	// is retried MaxRetries times (default 5), Backoff apart (default 100 ms, doubling),
	// then skipped.
	SkipNonexist bool
	MaxRetries   int
	Backoff      time.Duration
}

// IsHDFS reports whether p is an `hdfs:/` path.
func IsHDFS(p string) bool { return strings.HasPrefix(p, "hdfs:/") }

// CheckLocal returns an error wrapping ErrHDFSUnavailable for an `hdfs:/` path.
func CheckLocal(p string) error {
	if IsHDFS(p) {
		return fmt.Errorf("%w: %s (no HDFS client is configured)", ErrHDFSUnavailable, p)
	}
	return nil
}

// CopyFile copies src over dst (dst's folder must exist). A missing src is retried with
// backoff and then, with SkipNonexist, skipped; other errors are returned at once.
func CopyFile(ctx context.Context, src, dst string, o CopyOptions) error {
	if err := errors.Join(CheckLocal(src), CheckLocal(dst)); err != nil {
		return err
	}
	retries, delay := o.MaxRetries, o.Backoff
	if retries <= 0 {
		retries = 5
	}
	if delay <= 0 {
		delay = 100 * time.Millisecond
	}
	for attempt := 0; ; attempt++ {
		err := copyFile(src, dst)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if attempt >= retries {
			if o.SkipNonexist {
				return nil
			}
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		delay *= 2
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("fileops: copy %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("fileops: copy %s to %s: %w", src, dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("fileops: copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("fileops: copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// CopyRecursively copies src to dst: a file is copied over dst; a folder replaces dst (dst
// is deleted first) with a copy of its tree. A missing src is a no-op with SkipNonexist,
// else an error. With MaxWorkers > 1 the files are copied in parallel and every failure is
// returned, joined (decision C3; Monolith lost them).
func CopyRecursively(ctx context.Context, src, dst string, o CopyOptions) error {
	if err := errors.Join(CheckLocal(src), CheckLocal(dst)); err != nil {
		return err
	}
	st, err := os.Stat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist) && o.SkipNonexist:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("fileops: %s doesn't exist: %w", src, err)
	case err != nil:
		return fmt.Errorf("fileops: %w", err)
	case !st.IsDir():
		return CopyFile(ctx, src, dst, o)
	}
	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("fileops: replace %s: %w", dst, err)
	}
	type job struct{ src, dst string }
	var files []job
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		files = append(files, job{p, target})
		return nil
	})
	if err != nil {
		return fmt.Errorf("fileops: copy %s to %s: %w", src, dst, err)
	}
	workers := max(1, min(o.MaxWorkers, len(files)))
	errs := make([]error, len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				errs[i] = CopyFile(ctx, files[i].src, files[i].dst, o)
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}
