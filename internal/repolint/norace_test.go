package repolint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fixtures"
)

// TestNoRaceTestsRun: every test function in a `//go:build !race` file of the Makefile's
// NORACE_PKG is matched by NORACE_RUN. The race phase skips those files, so a test the
// non-race phase does not name would run in no phase of make test.
func TestNoRaceTestsRun(t *testing.T) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var pkgDir, run string
	for line := range strings.SplitSeq(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, "NORACE_PKG"); ok {
			_, pkgDir, _ = strings.Cut(v, "=")
		}
		if v, ok := strings.CutPrefix(line, "NORACE_RUN"); ok {
			_, run, _ = strings.Cut(v, "=")
		}
	}
	pkgDir, run = strings.TrimSpace(pkgDir), strings.ReplaceAll(strings.TrimSpace(run), "$$", "$")
	if pkgDir == "" || run == "" {
		t.Fatal("Makefile: no NORACE_PKG or NORACE_RUN")
	}
	re, err := regexp.Compile(run)
	if err != nil {
		t.Fatalf("Makefile: NORACE_RUN %q: %v", run, err)
	}
	files, err := filepath.Glob(filepath.Join(root, pkgDir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		norace := false
		for _, cg := range f.Comments {
			if cg.Pos() < f.Package {
				for _, c := range cg.List {
					norace = norace || strings.TrimSpace(c.Text) == "//go:build !race"
				}
			}
		}
		if !norace {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil {
				continue
			}
			name := fd.Name.Name
			if !strings.HasPrefix(name, "Test") || name == "TestMain" {
				continue
			}
			checked++
			if !re.MatchString(name) {
				t.Errorf("%s: %s is in a !race file but not in the Makefile's NORACE_RUN: no phase of make test runs it", filepath.Base(path), name)
			}
		}
	}
	if checked == 0 {
		t.Errorf("no test in a !race file of %s: NORACE_RUN names nothing", pkgDir)
	}
}
