package repolint

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fixtures"
)

// pkgUse is what `go list -json` says of a package's files and imports.
type pkgUse struct {
	ImportPath   string
	GoFiles      []string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// orphans lists the packages of pkgs that cmd/monolith does not reach and that are neither
// documentation (doc.go alone) nor test helpers: reached from a test file's imports, and
// named as such — under internal/, or with Go's …test name (httptest, iotest).
func orphans(pkgs []pkgUse, main string) []string {
	imports := map[string][]string{}
	for _, p := range pkgs {
		imports[p.ImportPath] = p.Imports
	}
	reach := map[string]bool{}
	var visit func(string)
	visit = func(path string) {
		if reach[path] {
			return
		}
		reach[path] = true
		for _, imp := range imports[path] {
			visit(imp)
		}
	}
	visit(main)
	fromMain := maps.Clone(reach)
	for _, p := range pkgs {
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if imp != p.ImportPath { // a package's external test imports the package
				visit(imp)
			}
		}
	}
	var bad []string
	for _, p := range pkgs {
		switch {
		case fromMain[p.ImportPath]:
		case len(p.GoFiles) == 0 || slices.Equal(p.GoFiles, []string{"doc.go"}):
		case reach[p.ImportPath] && (strings.HasSuffix(p.ImportPath, "test") || strings.HasPrefix(p.ImportPath, module+"/internal/")):
		default:
			bad = append(bad, fmt.Sprintf("%s: %s does not reach it and it is no test helper (reached by tests, under internal/ or named …test): wire it in, rename it or delete it", p.ImportPath, main))
		}
	}
	return bad
}

// TestNoOrphans checks that the command or a test reaches every package (README,
// "Layout"): code no command runs is wired in or deleted.
func TestNoOrphans(t *testing.T) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs := listJSON[pkgUse](t, root, "./...")
	main := module + "/cmd/monolith"
	if !slices.ContainsFunc(pkgs, func(p pkgUse) bool { return p.ImportPath == main && len(p.Imports) > 20 }) {
		t.Fatalf("go list has no %s with its imports: the check would prove nothing", main)
	}
	for _, o := range orphans(pkgs, main) {
		t.Error(o)
	}
}

// TestOrphanRules proves that the check tells an orphan from a helper.
func TestOrphanRules(t *testing.T) {
	main := module + "/cmd/monolith"
	pkgs := []pkgUse{
		{ImportPath: main, GoFiles: []string{"main.go"}, Imports: []string{module + "/used"}},
		{ImportPath: module + "/used", GoFiles: []string{"u.go"}, TestImports: []string{module + "/helpertest", module + "/gen"}},
		{ImportPath: module + "/helpertest", GoFiles: []string{"h.go"}, Imports: []string{module + "/internal/helperlib"}},
		{ImportPath: module + "/internal/helperlib", GoFiles: []string{"h.go"}},
		{ImportPath: module + "/gen", GoFiles: []string{"g.go"}},
		{ImportPath: module + "/docs", GoFiles: []string{"doc.go"}},
		{ImportPath: module + "/orphan", GoFiles: []string{"o.go"}, TestImports: []string{module + "/orphanlib"}},
		{ImportPath: module + "/orphanlib", GoFiles: []string{"l.go"}},
		{ImportPath: module + "/lib", GoFiles: []string{"l.go"}},
		{ImportPath: module + "/libuser", GoFiles: []string{"u.go"}, Imports: []string{module + "/lib"}},
		{ImportPath: module + "/selftested", GoFiles: []string{"s.go"}, XTestImports: []string{module + "/selftested"}},
	}
	got := orphans(pkgs, main)
	// gen and orphanlib: test helpers without a test helper's name
	want := []string{"/gen:", "/orphan:", "/orphanlib:", "/lib:", "/libuser:", "/selftested:"}
	if len(got) != len(want) {
		t.Fatalf("orphans %q, want %d of them (%q)", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("orphan %d = %q, want %q", i, got[i], w)
		}
	}
}
