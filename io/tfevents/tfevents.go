package tfevents

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

const (
	// FilePrefix starts the base name of every event file.
	FilePrefix = "events.out.tfevents."
	// FileVersion is the file_version of the first record, TensorFlow's current one.
	FileVersion = "brain.Event:2"
)

// ErrNotEventFile is returned by Files for a path that is neither a directory nor a file.
var ErrNotEventFile = errors.New("io/tfevents: not an event file or directory")

// FileName is TensorFlow's event file name: "events.out.tfevents.%010d.%s%s" (unix
// seconds of t, host, suffix).
func FileName(t time.Time, host, suffix string) string {
	return fmt.Sprintf("%s%010d.%s%s", FilePrefix, t.Unix(), host, suffix)
}

// IsEventFile reports whether the base name of path starts with FilePrefix.
func IsEventFile(path string) bool {
	return strings.HasPrefix(filepath.Base(path), FilePrefix)
}

// Files lists the event files (base names starting with FilePrefix) directly in the
// directory path, sorted by name, which for one writer host is the order they were
// created in; subdirectories (TensorBoard's separate runs) are not searched. A path that
// is a file is returned as itself, whatever its name. A directory without event files
// gives an empty list and no error.
func Files(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("io/tfevents: %w", err)
	}
	if st.Mode().IsRegular() {
		return []string{path}, nil
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrNotEventFile, path)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("io/tfevents: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), FilePrefix) && !e.IsDir() {
			out = append(out, filepath.Join(path, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// wallTime converts t to TensorFlow's wall_time: seconds since the epoch as a double.
func wallTime(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}
