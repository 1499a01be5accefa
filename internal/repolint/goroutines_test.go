package repolint

import (
	"bufio"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fixtures"
)

// pkg is what `go list -json` says of a package, as far as these checks need.
type pkg struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
}

// listPackages runs `go list -json ./...` at the module root.
func listPackages(t *testing.T, root string) []pkg {
	return listJSON[pkg](t, root, "./...")
}

// listJSON runs `go list -json args...` at the module root and decodes each package (or
// module, with -m) as T.
func listJSON[T any](t *testing.T, root string, args ...string) []T {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	var pkgs []T
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p T
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// goroutineStarts lists where a file starts goroutines: go statements and calls of a
// method or function named Go (sync.WaitGroup.Go, errgroup) or AfterFunc (time,
// context).
func goroutineStarts(fset *token.FileSet, f *ast.File) []string {
	var at []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			at = append(at, fset.Position(n.Pos()).String())
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Go" || sel.Sel.Name == "AfterFunc") {
				at = append(at, fset.Position(n.Pos()).String())
			}
		}
		return true
	})
	return at
}

// racePatterns reads RACE_PKGS from the Makefile (its continuation lines included).
func racePatterns(t *testing.T, root string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var val strings.Builder
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !in {
			rest, ok := strings.CutPrefix(line, "RACE_PKGS")
			if !ok {
				continue
			}
			_, line, ok = strings.Cut(rest, "=")
			if !ok {
				continue
			}
			in = true
		}
		cont := strings.HasSuffix(strings.TrimSpace(line), `\`)
		val.WriteString(strings.TrimSuffix(strings.TrimSpace(line), `\`) + " ")
		if !cont {
			break
		}
	}
	if !in {
		t.Fatal("Makefile: no RACE_PKGS")
	}
	return strings.Fields(val.String())
}

// matches reports whether the package at rel (a slash path relative to the module root)
// is matched by one of the go-list patterns ("./a/b" or "./a/...").
func matches(patterns []string, rel string) bool {
	for _, p := range patterns {
		p = strings.TrimPrefix(p, "./")
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if rel == base || strings.HasPrefix(rel, base+"/") {
				return true
			}
		} else if rel == p {
			return true
		}
	}
	return false
}

// noRace are packages that start goroutines but run without -race, and why.
var noRace = map[string]string{
	"benchmarks/pipeline": "benchmark harness: its tests run measurement pipelines, 8× slower under -race; the code it measures runs under -race in its own packages",
	"benchmarks/suite":    "benchmark harness, as benchmarks/pipeline",
}

var leakCheck = regexp.MustCompile(`goleak\.VerifyTestMain\(|beamtest\.VerifyMain\(`)

// TestGoroutinePackagesCheckLeaks: every package whose own (non-test) code starts a
// goroutine has a TestMain with goleak (goleak.VerifyTestMain or beamtest.VerifyMain)
// and runs under -race in make test (RACE_PKGS), but for the exemptions of noRace.
func TestGoroutinePackagesCheckLeaks(t *testing.T) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	race := racePatterns(t, root)
	fset := token.NewFileSet()
	checked := 0
	for _, p := range listPackages(t, root) {
		var starts []string
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			starts = append(starts, goroutineStarts(fset, f)...)
		}
		if len(starts) == 0 {
			continue
		}
		checked++
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if _, ok := noRace[rel]; !ok && !matches(race, rel) {
			t.Errorf("%s starts goroutines (%s) but is not in the Makefile's RACE_PKGS", p.ImportPath, starts[0])
		}
		leak := false
		for _, name := range slices.Concat(p.TestGoFiles, p.XTestGoFiles) {
			b, err := os.ReadFile(filepath.Join(p.Dir, name))
			if err != nil {
				t.Fatal(err)
			}
			leak = leak || leakCheck.Match(b)
		}
		if !leak {
			t.Errorf("%s starts goroutines (%s) but its tests do not check for leaks (goleak.VerifyTestMain or beamtest.VerifyMain in TestMain)", p.ImportPath, starts[0])
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages start goroutines: the scan is broken", checked)
	}
}

func TestMatches(t *testing.T) {
	pats := []string{"./ps/...", "./io/synth", "./cmd/..."}
	for rel, want := range map[string]bool{
		"ps": true, "ps/server": true, "psx": false, "io/synth": true, "io/synth/x": false, "io": false, "cmd/monolith": true,
	} {
		if got := matches(pats, rel); got != want {
			t.Errorf("matches(%q) = %v, want %v", rel, got, want)
		}
	}
}
