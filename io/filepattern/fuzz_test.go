package filepattern

import (
	"errors"
	"strings"
	"testing"
)

// FuzzCandidates checks that template expansion never panics, fails only with
// ErrBadTemplate, and yields placeholder-free candidates.
func FuzzCandidates(f *testing.F) {
	for _, s := range []string{
		"data_{DATE(20201120, 20201210)}/hour_{INT(0, 5)}/part_{INT(0, 3)}",
		"{DATE(2020022822,2020022901)}", "{INT(-1,1)}", "{}", "{INT(1,2)", "x}", "plain*",
		"{DATE(20200101,20200101)}{INT(9,9)}", "{INT(1,2)}}{",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		got, err := candidates(tmpl, 4096)
		if err != nil {
			if !errors.Is(err, ErrBadTemplate) {
				t.Fatalf("candidates(%q): unexpected error kind %v", tmpl, err)
			}
			return
		}
		if len(got) == 0 || len(got) > 4096 {
			t.Fatalf("candidates(%q): %d candidates", tmpl, len(got))
		}
		for _, c := range got {
			if strings.ContainsAny(c, "{} ") {
				t.Fatalf("candidates(%q): candidate %q keeps a brace or space", tmpl, c)
			}
		}
	})
}

// FuzzSplitSpec checks that splitting never panics and yields trimmed, non-empty elements.
func FuzzSplitSpec(f *testing.F) {
	for _, s := range []string{"a,b", "{INT(1,2)},x", ",,", "@l,-", "{,}}{,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		elems, err := SplitSpec(spec)
		if err != nil {
			return
		}
		for _, e := range elems {
			if e == "" || strings.TrimSpace(e) != e {
				t.Fatalf("SplitSpec(%q): element %q is empty or untrimmed", spec, e)
			}
		}
	})
}
