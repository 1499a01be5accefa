// Package atomicfile writes a file so that readers see either the old content or the
// complete new one: data goes to a temporary file beside the target, which Commit fsyncs
// and renames into place and Abort removes. Used by every writer that creates files.
package atomicfile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// File is a temporary file that becomes Path on Commit. Write through the embedded
// *os.File. Not safe for concurrent use.
type File struct {
	*os.File
	Path string // the final path
	done bool
}

// Create creates "<path>.tmp-<random>" exclusively, with mode 0666 minus the umask (like
// os.Create, unlike os.CreateTemp's 0600), so the renamed file gets the usual mode.
func Create(path string) (*File, error) {
	for range 100 {
		name := path + ".tmp-" + strconv.FormatUint(rand.Uint64(), 36)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		return &File{File: f, Path: path}, nil
	}
	return nil, fmt.Errorf("create %s: could not create a unique temporary file", path)
}

// Commit fsyncs and closes the temporary file and renames it to Path, replacing any
// existing file; on failure the temporary file is removed. Commit after Commit or Abort
// returns nil.
func (f *File) Commit() error {
	if f.done {
		return nil
	}
	f.done = true
	name := f.Name()
	err := f.Sync()
	if err != nil {
		err = fmt.Errorf("sync %s: %w", name, err)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", name, cerr)
	}
	if err == nil {
		err = os.Rename(name, f.Path)
	}
	if err != nil {
		return errors.Join(err, remove(name))
	}
	// The data itself is synced; a folder that cannot be synced (some platforms) only
	// delays the rename's durability, so the error is not fatal.
	_ = SyncDir(filepath.Dir(f.Path))
	return nil
}

// Abort closes and removes the temporary file, leaving any existing file at Path as it
// was. Abort after Commit or Abort returns nil.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	f.Close()
	return remove(f.Name())
}

func remove(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove temporary file: %w", err)
	}
	return nil
}

// SyncDir fsyncs a folder, which makes the renames and creations inside it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// WriteFile replaces path with data through a temporary file and a rename, so a reader
// never sees a half-written file.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", path, err), f.Abort())
	}
	return f.Commit()
}
