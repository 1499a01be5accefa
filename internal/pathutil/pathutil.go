// Package pathutil finds Monolith's base directory (the folder that holds `monolith/`) and
// paths of bundled libraries under it: path_utils.find_main and get_libops_path of spec §3.7,
// located from the running executable or an environment override instead of a source file.
//
// # Rules
//
// The reference takes its own source file's path and looks for the markers `/__main__/`,
// `/site-packages/` and `/monolith/`, in that order; the first marker present is split at its
// last occurrence: for `/monolith/` the base is the part before it, for the others the part
// before plus the marker's name (`…/__main__`, `…/site-packages`). The base counts only if
// it contains `monolith`. Go has no source file at run time, so a Locator applies:
//
//  1. MONOLITH_BASE_DIR, when set: it must contain a `monolith/` folder.
//  2. The markers, as above, on the executable's absolute path.
//  3. Otherwise each folder from the executable's own upwards (up to Locator.StopAt, when
//     set); the first that contains a `monolith/` folder is the base.
//
// A failure wraps ErrNoBase and names everything searched. Departures from the reference:
// `monolith` must be a directory (the reference accepted any file, and this project's binary
// is itself named monolith), and when a marker's base fails the check the upward walk still
// runs (the reference gave up). LibopsPath(name) is the base joined with name (cleaned); it
// needs a base even for an absolute name, which it returns as it is, as the reference did.
package pathutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvBaseDir overrides the search: the base directory itself.
const EnvBaseDir = "MONOLITH_BASE_DIR"

// ErrNoBase is wrapped by every FindMain failure.
var ErrNoBase = errors.New("unable to find the monolith base directory")

// markers are the reference's split markers, in the order it tries them.
var markers = []string{"/__main__/", "/site-packages/", "/monolith/"}

// Locator holds what FindMain looks at; the zero Getenv reads no environment.
type Locator struct {
	// Executable is the running binary's path (os.Executable); relative paths are made
	// absolute against the working directory.
	Executable string
	// Getenv reads the environment (os.Getenv); nil means an empty environment.
	Getenv func(string) string
	// StopAt ends the upward walk at this folder (included) when the executable is below
	// it; empty: the walk goes up to the filesystem root.
	StopAt string
}

// Process returns the Locator of this process: os.Executable and os.Getenv.
func Process() (Locator, error) {
	exe, err := os.Executable()
	if err != nil {
		return Locator{}, fmt.Errorf("pathutil: %w", err)
	}
	return Locator{Executable: exe, Getenv: os.Getenv}, nil
}

// hasMonolith reports whether dir contains a monolith directory.
func hasMonolith(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "monolith"))
	return err == nil && fi.IsDir()
}

// FindMain returns the base directory: the folder that contains `monolith/`.
func (l Locator) FindMain() (string, error) {
	if l.Getenv != nil {
		if dir := l.Getenv(EnvBaseDir); dir != "" {
			if hasMonolith(dir) {
				return dir, nil
			}
			return "", fmt.Errorf("%w: %s=%s has no monolith/ folder", ErrNoBase, EnvBaseDir, dir)
		}
	}
	if l.Executable == "" {
		return "", fmt.Errorf("%w: %s is unset and no executable path is known", ErrNoBase, EnvBaseDir)
	}
	exe, err := filepath.Abs(l.Executable)
	if err != nil {
		return "", fmt.Errorf("%w: %s is unset; executable %s: %v", ErrNoBase, EnvBaseDir, l.Executable, err)
	}
	var searched []string
	if base, marker, ok := markerBase(exe); ok {
		if hasMonolith(base) {
			return base, nil
		}
		searched = append(searched, fmt.Sprintf("marker %s gives %s", marker, base))
	}
	start := filepath.Dir(exe)
	stop := ""
	if l.StopAt != "" {
		if s, err := filepath.Abs(l.StopAt); err == nil {
			stop = s
		}
	}
	for dir := start; ; {
		if hasMonolith(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir || dir == stop {
			break
		}
		dir = parent
	}
	if stop != "" && (start == stop || strings.HasPrefix(start, stop+string(filepath.Separator))) {
		searched = append(searched, fmt.Sprintf("%s and every folder above it up to %s", start, stop))
	} else {
		searched = append(searched, fmt.Sprintf("%s and every folder above it", start))
	}
	return "", fmt.Errorf("%w: %s is unset; executable %s; no monolith/ folder in: %s",
		ErrNoBase, EnvBaseDir, exe, strings.Join(searched, "; "))
}

// markerBase applies the reference's marker rule to path (slash-separated).
func markerBase(path string) (base, marker string, ok bool) {
	slashed := filepath.ToSlash(path)
	for _, m := range markers {
		end := strings.LastIndex(slashed, m)
		if end < 0 {
			continue
		}
		base = slashed[:end]
		if m != "/monolith/" {
			base += "/" + strings.Trim(m, "/")
		}
		if base == "" {
			base = "/"
		}
		return filepath.FromSlash(base), m, true
	}
	return "", "", false
}

// LibopsPath returns name under the base directory (get_libops_path).
func (l Locator) LibopsPath(name string) (string, error) {
	base, err := l.FindMain()
	if err != nil {
		return "", err
	}
	if filepath.IsAbs(name) {
		return name, nil
	}
	return filepath.Join(base, name), nil
}
