package repolint

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fixtures"
)

// module is the repository's module path.
const module = "github.com/monolith-go/monolith"

// floors is the house's layout, from the ground up (README, "Layout"): a package may
// import the packages of its own top-level folder and those of lower floors, never one
// on its floor in another folder nor one above. Test files are not bound: a test may
// reach up for a fixture. Every top-level folder with Go code has a floor here.
var floors = map[string]int{
	"internal":   0, // utilities: the standard library and outside modules only
	"schemas":    1, // protobuf messages, the Arrow batch layout, fid arithmetic
	"io":         2, // formats and files: bytes ↔ messages and batches
	"kernels":    2, // compute over slices and batches: no files, no Beam, no PS
	"transforms": 3, // thin Beam adapters over kernels and io
	"runners":    3, // which Beam runner runs a pipeline
	"ps":         4, // the parameter server, its client, checkpoints and discovery
	"pipelines":  5, // jobs built from transforms that feed the PS
	"serving":    5, // the serving agent, on ZooKeeper and TF Serving
	"benchmarks": 6, // the suite, measuring the floors below
	"cmd":        7, // the monolith command
}

// beamUsers are the only folders whose code imports Beam (tests aside).
var beamUsers = []string{"transforms", "pipelines", "runners"}

// pkgImports is what `go list -json` says of a package's imports.
type pkgImports struct {
	ImportPath string
	Name       string
	Imports    []string
}

// top is the top-level folder of a package path of the module ("" for another module).
func top(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return ""
	}
	first, _, _ := strings.Cut(rest, "/")
	return first
}

// floorViolations lists the imports of pkgs that break the floors, the Beam rule or the
// package-name rule, one line each.
func floorViolations(pkgs []pkgImports) []string {
	var bad []string
	for _, p := range pkgs {
		from := top(p.ImportPath)
		ff, ok := floors[from]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: top-level folder %q has no floor", p.ImportPath, from))
			continue
		}
		if p.Name == "io" {
			bad = append(bad, fmt.Sprintf("%s: a package named io shadows the standard library's", p.ImportPath))
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/apache/beam/") && !slices.Contains(beamUsers, from) {
				bad = append(bad, fmt.Sprintf("%s imports Beam (%s): only %s do", p.ImportPath, imp, strings.Join(beamUsers, ", ")))
			}
			to := top(imp)
			if to == "" || to == from {
				continue
			}
			tf, ok := floors[to]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s → %s: top-level folder %q has no floor", p.ImportPath, imp, to))
			case tf == ff:
				bad = append(bad, fmt.Sprintf("%s → %s: %s and %s share floor %d and stay apart", p.ImportPath, imp, from, to, ff))
			case tf > ff:
				bad = append(bad, fmt.Sprintf("%s → %s: runs up from floor %d (%s) to floor %d (%s)", p.ImportPath, imp, ff, from, tf, to))
			}
		}
	}
	return bad
}

// TestFloors checks every package of the module against the floors.
func TestFloors(t *testing.T) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs := listJSON[pkgImports](t, root, "./...")
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages: the check would prove nothing", len(pkgs))
	}
	for _, v := range floorViolations(pkgs) {
		t.Error(v)
	}
}

// TestFloorRules proves that the check catches each kind of breach.
func TestFloorRules(t *testing.T) {
	p := func(path string, imports ...string) pkgImports {
		name := path[strings.LastIndex(path, "/")+1:]
		for i, imp := range imports {
			first, _, _ := strings.Cut(imp, "/")
			if _, ours := floors[first]; ours {
				imports[i] = module + "/" + imp
			}
		}
		return pkgImports{ImportPath: module + "/" + path, Name: name, Imports: imports}
	}
	for _, tc := range []struct {
		name string
		pkg  pkgImports
		want string // "" = allowed
	}{
		{"down a floor", p("transforms/shard", "kernels/shard", "schemas/batch", "internal/ordered"), ""},
		{"own folder", p("ps/server", "ps/table"), ""},
		{"outside module", p("kernels/model", "fmt", "gonum.org/v1/gonum/mat"), ""},
		{"up a floor", p("schemas/batch", "kernels/fid"), "runs up from floor 1 (schemas) to floor 2 (kernels)"},
		{"utilities stay at the bottom", p("internal/kernelbench", "kernels/layout"), "runs up from floor 0"},
		{"siblings apart", p("kernels/featcfg", "io/pbtext"), "share floor 2"},
		{"Beam outside its floors", p("io/beamio", "github.com/apache/beam/sdks/v2/go/pkg/beam"), "imports Beam"},
		{"Beam in a transform", p("transforms/parse", "github.com/apache/beam/sdks/v2/go/pkg/beam"), ""},
		{"unknown folder", p("tools/x"), "has no floor"},
		{"package io", p("io/io"), "named io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(floorViolations([]pkgImports{tc.pkg}), "\n")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("violations %q, want one containing %q", got, tc.want)
			}
		})
	}
}
