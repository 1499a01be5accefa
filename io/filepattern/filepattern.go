package filepattern

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Stdin is the spec element that stands for standard input; it passes through [Expand].
const Stdin = "-"

var (
	// ErrNoMatch reports a spec element that matched no file.
	ErrNoMatch = errors.New("io/filepattern: no files match")
	// ErrBadTemplate reports a malformed DATE/INT template.
	ErrBadTemplate = errors.New("io/filepattern: bad template")
	// ErrBadSpec reports a malformed spec (empty spec, unsupported list entry, bad glob).
	ErrBadSpec = errors.New("io/filepattern: bad spec")
)

// Error reports the spec element that failed to expand. Err wraps [ErrNoMatch],
// [ErrBadTemplate], [ErrBadSpec], a file-system error or the context's error.
type Error struct {
	Elem string // the element as written (for list entries: as written in the list)
	List string // the list file the element came from, or ""
	Line int    // 1-based line in List, or 0
	Err  error
}

// Error formats the error as "[list:line: ]"elem": cause".
func (e *Error) Error() string {
	if e.List != "" {
		return fmt.Sprintf("@%s:%d: %q: %v", e.List, e.Line, e.Elem, e.Err)
	}
	return fmt.Sprintf("%q: %v", e.Elem, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Expand expands spec (see the package documentation) into a sorted, de-duplicated list
// of files. "-" passes through as an element of the result. The error names the element
// that failed and, for file lists, the list file and line. ctx cancels long searches.
func Expand(ctx context.Context, spec string) ([]string, error) {
	elems, err := SplitSpec(spec)
	if err != nil {
		return nil, err
	}
	return ExpandAll(ctx, elems...)
}

// ExpandAll is like [Expand] for elements that are already split (for example the output
// of [GenPatterns]): each element is expanded as a single element, so it may contain
// commas outside placeholders.
func ExpandAll(ctx context.Context, elems ...string) ([]string, error) {
	if len(elems) == 0 {
		return nil, fmt.Errorf("%w: no elements", ErrBadSpec)
	}
	var out []string
	for _, e := range elems {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		files, err := expandElement(ctx, e)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// SplitSpec splits a comma-separated spec into its elements. Commas inside a `{...}`
// group do not split; blanks around elements are trimmed and empty elements dropped.
// An entirely empty spec is an error.
func SplitSpec(spec string) ([]string, error) {
	var elems []string
	depth, start := 0, 0
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			elems = append(elems, s)
		}
	}
	for i := 0; i < len(spec); i++ {
		switch spec[i] {
		case '{':
			depth++
		case '}':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				add(spec[start:i])
				start = i + 1
			}
		}
	}
	add(spec[start:])
	if len(elems) == 0 {
		return nil, fmt.Errorf("%w: empty spec %q", ErrBadSpec, spec)
	}
	return elems, nil
}

func expandElement(ctx context.Context, e string) ([]string, error) {
	switch {
	case e == Stdin:
		return []string{Stdin}, nil
	case strings.HasPrefix(e, "@"):
		return expandList(ctx, e[1:])
	}
	files, err := expandPattern(ctx, e)
	if err != nil {
		return nil, &Error{Elem: e, Err: err}
	}
	return files, nil
}

// expandPattern expands a template, glob or literal path; errors do not name it.
func expandPattern(ctx context.Context, e string) ([]string, error) {
	if strings.ContainsAny(e, "{}") {
		return expandTemplate(ctx, e)
	}
	files, err := globFiles(ctx, e)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, ErrNoMatch
	}
	return files, nil
}

func expandTemplate(ctx context.Context, tmpl string) ([]string, error) {
	cands, err := Candidates(tmpl)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cands {
		files, err := globFiles(ctx, c)
		if err != nil {
			if errors.Is(err, ErrBadSpec) {
				// A candidate the glob cannot parse is skipped, as the reference does.
				continue
			}
			return nil, err
		}
		out = append(out, files...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w (none of %d candidates)", ErrNoMatch, len(cands))
	}
	return out, nil
}

func expandList(ctx context.Context, path string) ([]string, error) {
	if path == "" {
		return nil, &Error{Elem: "@", Err: fmt.Errorf("%w: missing list file name", ErrBadSpec)}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Elem: "@" + path, Err: err}
	}
	dir := filepath.Dir(path)
	var out []string
	for i, text := range strings.Split(string(b), "\n") {
		line := i + 1
		entry := strings.TrimSpace(text)
		if entry == "" || strings.HasPrefix(entry, "#") {
			continue
		}
		if entry == Stdin || strings.HasPrefix(entry, "@") {
			return nil, &Error{Elem: entry, List: path, Line: line,
				Err: fmt.Errorf("%w: stdin and nested lists are not allowed in a list", ErrBadSpec)}
		}
		resolved := entry
		if !filepath.IsAbs(entry) {
			resolved = filepath.Join(dir, entry)
		}
		files, err := expandPattern(ctx, resolved)
		if err != nil {
			return nil, &Error{Elem: entry, List: path, Line: line, Err: err}
		}
		out = append(out, files...)
	}
	if len(out) == 0 {
		return nil, &Error{Elem: "@" + path, Err: fmt.Errorf("%w (the list names no files)", ErrNoMatch)}
	}
	return out, nil
}

// globFiles returns the non-directory paths matching pattern (nil when none match).
// A pattern naming an existing file literally matches that file even if it contains
// glob metacharacters.
func globFiles(ctx context.Context, pattern string) ([]string, error) {
	if fi, err := os.Stat(pattern); err == nil {
		if fi.IsDir() {
			return nil, fmt.Errorf("%w (%s is a directory)", ErrNoMatch, pattern)
		}
		return []string{pattern}, nil
	}
	if !hasMeta(pattern) {
		return nil, nil
	}
	matches, err := glob(ctx, pattern)
	if err != nil {
		return nil, err
	}
	files := matches[:0]
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			continue
		}
		files = append(files, m)
	}
	return files, nil
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// glob is filepath.Glob with "**" path segments matching zero or more directories.
func glob(ctx context.Context, pattern string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sep := string(filepath.Separator)
	segs := strings.Split(pattern, sep)
	i := slices.Index(segs, "**")
	if i < 0 {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSpec, err)
		}
		return m, nil
	}
	prefix, rest := strings.Join(segs[:i], sep), strings.Join(segs[i+1:], sep)
	var bases []string
	switch {
	case prefix == "" && i > 0: // pattern starts with the separator
		bases = []string{sep}
	case prefix == "":
		bases = []string{"."}
	case hasMeta(prefix):
		m, err := glob(ctx, prefix)
		if err != nil {
			return nil, err
		}
		bases = m
	default:
		bases = []string{prefix}
	}
	var out []string
	for _, base := range bases {
		if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
			continue
		}
		err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				// Unreadable subtrees are skipped, like filepath.Glob ignores I/O errors.
				if d != nil && d.IsDir() && p != base {
					return fs.SkipDir
				}
				return nil
			}
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if rest == "" {
				if !d.IsDir() {
					out = append(out, p)
				}
				return nil
			}
			if !d.IsDir() {
				return nil
			}
			m, err := glob(ctx, joinPath(p, rest))
			if err != nil {
				return err
			}
			out = append(out, m...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// joinPath joins dir and a relative pattern without cleaning the pattern part.
func joinPath(dir, rel string) string {
	if dir == "." {
		return rel
	}
	if strings.HasSuffix(dir, string(filepath.Separator)) {
		return dir + rel
	}
	return dir + string(filepath.Separator) + rel
}

// Shard returns every numShards-th file starting at index (files[index],
// files[index+numShards], ...), like tf.data's shard. The result is a new slice. With
// numShards < 1 or index outside [0, numShards) it returns nil; callers validate the
// worker configuration first.
func Shard(files []string, numShards, index int) []string {
	if numShards < 1 || index < 0 || index >= numShards {
		return nil
	}
	out := make([]string, 0, len(files)/numShards+1)
	for i := index; i < len(files); i += numShards {
		out = append(out, files[i])
	}
	return out
}
