package main

import (
	"slices"
	"testing"
)

func TestChildEnv(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   []string
		procs int
		want  []string
	}{
		{"share set", []string{"HOME=/h"}, 2, []string{"HOME=/h", "GOMAXPROCS=2"}},
		{"at least one", []string{"HOME=/h"}, 0, []string{"HOME=/h", "GOMAXPROCS=1"}},
		{"the user's stands", []string{"GOMAXPROCS=8", "HOME=/h"}, 1, []string{"GOMAXPROCS=8", "HOME=/h"}},
		{"empty is unset", []string{"GOMAXPROCS="}, 2, []string{"GOMAXPROCS=", "GOMAXPROCS=2"}},
		{"a look-alike is not it", []string{"XGOMAXPROCS=8"}, 3, []string{"XGOMAXPROCS=8", "GOMAXPROCS=3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.env)
			got := childEnv(in, tc.procs)
			if !slices.Equal(got, tc.want) {
				t.Errorf("childEnv(%q, %d) = %q, want %q", tc.env, tc.procs, got, tc.want)
			}
			if !slices.Equal(in, tc.env) {
				t.Errorf("childEnv changed its input to %q", in)
			}
		})
	}
}
