package pathutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes the folders dirs (slash-separated, relative to root) and the empty files files.
func tree(t *testing.T, root string, dirs, files []string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestFindMain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dirs  []string
		files []string
		exe   string            // relative to the temp root
		env   map[string]string // "$ROOT" is replaced by the temp root
		want  string            // relative to the temp root; "" = an error
		inErr []string          // substrings of the error ("$ROOT" replaced)
	}{
		{
			name: "bazel __main__ marker",
			dirs: []string{"b.runfiles/__main__/monolith"},
			exe:  "b.runfiles/__main__/cmd/monolith/monolith",
			want: "b.runfiles/__main__",
		},
		{
			name: "__main__ wins over a later /monolith/ marker",
			dirs: []string{"x/__main__/monolith", "x/__main__/monolith/y/monolith"},
			exe:  "x/__main__/monolith/y/monolith/bin",
			want: "x/__main__",
		},
		{
			name: "site-packages marker",
			dirs: []string{"py/site-packages/monolith"},
			exe:  "py/site-packages/monolith/bin/run",
			want: "py/site-packages",
		},
		{
			name: "monolith marker splits at its last occurrence",
			dirs: []string{"a/monolith/b/monolith"},
			exe:  "a/monolith/b/monolith/bin/run",
			want: "a/monolith/b",
		},
		{
			name:  "no marker: the executable's folder",
			dirs:  []string{"opt/app/monolith"},
			files: []string{"opt/app/run"},
			exe:   "opt/app/run",
			want:  "opt/app",
		},
		{
			name: "no marker: a folder above",
			dirs: []string{"opt/monolith", "opt/app/bin"},
			exe:  "opt/app/bin/run",
			want: "opt",
		},
		{
			name:  "a file named monolith is not the base",
			files: []string{"usr/bin/monolith"},
			exe:   "usr/bin/monolith",
			inErr: []string{"MONOLITH_BASE_DIR is unset", "$ROOT/usr/bin/monolith", "$ROOT/usr/bin and every folder above it up to $ROOT"},
		},
		{
			name:  "marker base without monolith/: error names it",
			dirs:  []string{"r/__main__/cmd"},
			exe:   "r/__main__/cmd/run",
			inErr: []string{"marker /__main__/ gives $ROOT/r/__main__", "$ROOT/r/__main__/cmd and every folder above it up to $ROOT"},
		},
		{
			name: "marker base without monolith/: the walk still finds one above",
			dirs: []string{"monolith", "r/__main__/cmd"},
			exe:  "r/__main__/cmd/run",
			want: "",
			// the walk reaches the temp root, which has monolith/
		},
		{
			name: "environment override",
			dirs: []string{"base/monolith", "elsewhere/monolith"},
			exe:  "elsewhere/run",
			env:  map[string]string{EnvBaseDir: "$ROOT/base"},
			want: "base",
		},
		{
			name:  "environment override without monolith/",
			dirs:  []string{"base", "elsewhere/monolith"},
			exe:   "elsewhere/run",
			env:   map[string]string{EnvBaseDir: "$ROOT/base"},
			inErr: []string{"MONOLITH_BASE_DIR=$ROOT/base has no monolith/ folder"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tree(t, root, tc.dirs, tc.files)
			kv := map[string]string{}
			for k, v := range tc.env {
				kv[k] = strings.ReplaceAll(v, "$ROOT", root)
			}
			l := Locator{Executable: filepath.Join(root, filepath.FromSlash(tc.exe)), Getenv: env(kv), StopAt: root}
			got, err := l.FindMain()
			if tc.inErr != nil {
				if !errors.Is(err, ErrNoBase) {
					t.Fatalf("FindMain = %q, %v; want an error wrapping ErrNoBase", got, err)
				}
				for _, s := range tc.inErr {
					if s = strings.ReplaceAll(s, "$ROOT", root); !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, filepath.FromSlash(tc.want)); got != want {
				t.Errorf("FindMain = %q, want %q", got, want)
			}
		})
	}
}

// TestStopAt: without StopAt the walk goes on above the temp root (where a monolith/ folder
// may or may not exist); with it the walk ends there, and a StopAt the executable is not
// under does not stop it.
func TestStopAt(t *testing.T) {
	root := t.TempDir()
	tree(t, root, []string{"monolith", "a/b"}, nil)
	exe := filepath.Join(root, "a/b/run")
	if got, err := (Locator{Executable: exe, StopAt: root}).FindMain(); err != nil || got != root {
		t.Errorf("StopAt=root: %q, %v", got, err)
	}
	if _, err := (Locator{Executable: exe, StopAt: filepath.Join(root, "a")}).FindMain(); !errors.Is(err, ErrNoBase) {
		t.Errorf("StopAt=root/a: %v, want ErrNoBase", err)
	}
	if got, err := (Locator{Executable: exe, StopAt: filepath.Join(root, "elsewhere")}).FindMain(); err != nil || got != root {
		t.Errorf("StopAt elsewhere: %q, %v", got, err)
	}
}

func TestFindMainNoExecutable(t *testing.T) {
	_, err := Locator{}.FindMain()
	if !errors.Is(err, ErrNoBase) || !strings.Contains(err.Error(), "no executable path") {
		t.Fatalf("err = %v", err)
	}
}

// TestUtilsFindMainAndLibopsPath ports utils_test.py testFindMain and testGetLibopsPath: in
// a Bazel layout the base is the __main__ folder, and a path under it resolves to an
// existing file.
func TestUtilsFindMainAndLibopsPath(t *testing.T) {
	root := t.TempDir()
	tree(t, root, nil, []string{"t.runfiles/__main__/monolith/utils_test.py", "t.runfiles/__main__/monolith/utils_test"})
	l := Locator{Executable: filepath.Join(root, "t.runfiles/__main__/monolith/utils_test")}
	base, err := l.FindMain()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(base) != "__main__" {
		t.Errorf("base %q does not end in __main__", base)
	}
	p, err := l.LibopsPath("monolith/utils_test.py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("LibopsPath: %v", err)
	}
}

func TestLibopsPath(t *testing.T) {
	root := t.TempDir()
	tree(t, root, []string{"app/monolith"}, nil)
	l := Locator{Executable: filepath.Join(root, "app/run")}
	for _, tc := range []struct{ name, want string }{
		{"libfoo.so", filepath.Join(root, "app/libfoo.so")},
		{"../gperftools/libtcmalloc/lib/libtcmalloc.so", filepath.Join(root, "gperftools/libtcmalloc/lib/libtcmalloc.so")},
		{"/abs/lib.so", "/abs/lib.so"},
	} {
		got, err := l.LibopsPath(tc.name)
		if err != nil || got != tc.want {
			t.Errorf("LibopsPath(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	// No base: even an absolute name fails, as in the reference.
	other := t.TempDir()
	bad := Locator{Executable: filepath.Join(other, "run"), StopAt: other}
	if _, err := bad.LibopsPath("/abs/lib.so"); !errors.Is(err, ErrNoBase) {
		t.Errorf("LibopsPath without a base: %v", err)
	}
}

func TestMarkerBase(t *testing.T) {
	for _, tc := range []struct {
		path, base, marker string
		ok                 bool
	}{
		{"/a/__main__/b/site-packages/c/monolith/d", "/a/__main__", "/__main__/", true},
		{"/a/site-packages/b/site-packages/c", "/a/site-packages/b/site-packages", "/site-packages/", true},
		{"/monolith/x", "/", "/monolith/", true},
		{"/a/monolith", "", "", false},
		{"/a/__main__", "", "", false},
	} {
		base, marker, ok := markerBase(tc.path)
		if base != filepath.FromSlash(tc.base) || marker != tc.marker || ok != tc.ok {
			t.Errorf("markerBase(%q) = %q, %q, %v; want %q, %q, %v", tc.path, base, marker, ok, tc.base, tc.marker, tc.ok)
		}
	}
}

func TestProcess(t *testing.T) {
	l, err := Process()
	if err != nil {
		t.Fatal(err)
	}
	if l.Executable == "" || l.Getenv == nil {
		t.Fatalf("Process = %+v", l)
	}
}
