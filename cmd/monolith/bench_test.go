//go:build !race

// The race phase of make test skips this file (its child processes and pipelines gain
// nothing from -race in the test binary, which costs a minute); the non-race phase runs
// its tests (Makefile, NORACE_RUN).

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBench runs one section of the quick suite through the CLI and checks the report,
// then the flag errors.
func TestBench(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, err := runCLI(t, "bench", "--suite", "quick", "--only", "decode", "--out", out)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	// The decode section has issue 22's six targets: three against memcpy, three on 2
	// goroutines.
	if !strings.Contains(stdout, " of 6 targets met") || !strings.Contains(stdout, filepath.Join(out, "RESULTS.md")) {
		t.Errorf("stdout %q", stdout)
	}
	doc, err := os.ReadFile(filepath.Join(out, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--only decode", "decode ExampleBatch file → Arrow batches vs reading the file", "÷ memcpy",
		"decode Instance file → Arrow batches, 2 goroutines", "≥ 0.08× memcpy, one goroutine"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	for _, tc := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"bench", "--suite", "huge"}, `--suite "huge"`, true},
		{[]string{"bench", "extra"}, "unexpected arguments", true},
		{[]string{"bench", "--only", "gpu", "--out", t.TempDir()}, `unknown section "gpu"`, false},
	} {
		_, _, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, errUsage) != tc.usage {
			t.Errorf("%v: %v, want %q (usage error %v)", tc.args, err, tc.want, tc.usage)
		}
	}
}
