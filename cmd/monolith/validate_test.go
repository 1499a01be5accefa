package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/pipelines/validate"
	"github.com/monolith-go/monolith/runners/beamtest"
)

const (
	goodConfigs   = "../../testdata/example_batch.feature_configs.pbtxt"
	brokenConfigs = "../../testdata/example_batch.broken.feature_configs.pbtxt"
	featureList   = "../../testdata/example_batch.feature_list.conf"
)

// runValidateCLI runs `monolith validate` through the CLI's dispatcher.
func runValidateCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var so, se bytes.Buffer
	err = run(context.Background(), append([]string{"validate"}, args...), &so, &se)
	return so.String(), se.String(), err
}

// checkReports fails unless dir holds the three reports, the JSON one with status want.
func checkReports(t *testing.T, dir string, want validate.Status) {
	t.Helper()
	jp, tp, hp := validate.Files(dir)
	for _, p := range []string{jp, tp, hp} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Fatalf("report %s missing or empty: %v", p, err)
		}
	}
	b, _ := os.ReadFile(jp)
	if !strings.Contains(string(b), fmt.Sprintf(`"status": %q`, want)) {
		t.Errorf("%s does not have status %q", jp, want)
	}
	h, _ := os.ReadFile(hp)
	if !strings.HasPrefix(strings.TrimSpace(string(h)), "<!DOCTYPE html>") || !strings.Contains(string(h), "</html>") {
		t.Errorf("%s is not a complete HTML document", hp)
	}
}

func TestValidateGood(t *testing.T) {
	dir := t.TempDir()
	out, _, err := runValidateCLI(t, "--input", fixtures.Path(t, "example_batch.pbtxt"),
		"--feature-configs", goodConfigs, "--feature-list", featureList, "--ps-num", "2", "--out", dir)
	if err != nil {
		t.Fatalf("validate of the good config failed: %v\n%s", err, out)
	}
	if !strings.HasPrefix(out, "monolith validate: PASS") {
		t.Errorf("summary does not start with PASS:\n%s", out)
	}
	checkReports(t, dir, validate.Pass)
}

// TestValidateBroken runs the committed broken config, whose header lists the planted
// problems, and checks that the run fails and names each of them.
func TestValidateBroken(t *testing.T) {
	dir := t.TempDir()
	out, _, err := runValidateCLI(t, "--input", fixtures.Path(t, "example_batch.pbtxt"),
		"--feature-configs", brokenConfigs, "--feature-list", featureList, "--out", dir)
	if !errors.Is(err, errChecksFailed) || exitCode(err) != 1 {
		t.Fatalf("err = %v (exit %d), want a failed validation with exit 1\n%s", err, exitCode(err), out)
	}
	planted := []struct{ check, names string }{
		{"unknown-feature", `"f_user_agee"`},
		{"table", `"f_goods_cate_1" has no table`},
		{"slice-bounds", `"broken_bounds"`},
		{"addn-firstn", `"broken_addn_firstn"`},
		{"equal-widths", `"broken_stack"`},
		{"shape", `"broken_shape"`},
		{"feature-config", `"f_goods_tags" pools with FIRSTN`},
		{"feature-list", `"f_not_in_data" is not in the feature list`},
		{"slot-name", `"fc_slot_7"`},
		{"slot-conflict", `"f_user_region" and "f_user_register_time_year"`},
		{"occurrence", `"f_not_in_data" never occurs`},
		{"occurrence", `"fc_slot_7" never occurs`},
		{"occurrence", `"f_user_region" never occurs`},
		{"slot-mismatch", `"f_goods_brand"`},
	}
	lines := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "FAIL ") {
			id, _, _ := strings.Cut(strings.TrimPrefix(l, "FAIL "), ":")
			lines[id] = append(lines[id], l)
		}
	}
	for _, p := range planted {
		found := false
		for _, l := range lines[p.check] {
			found = found || strings.Contains(l, p.names)
		}
		if !found {
			t.Errorf("no FAIL %s line naming %s in:\n%s", p.check, p.names, out)
		}
	}
	checkReports(t, dir, validate.Fail)
}

func TestValidateUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no input", []string{"--feature-configs", goodConfigs}, "--input and --feature-configs are required"},
		{"bad runner", []string{"--input", "x", "--feature-configs", goodConfigs, "--runner", "flink"}, "universal"},
		{"universal without endpoint", []string{"--input", "x", "--feature-configs", goodConfigs, "--runner", "universal"}, "endpoint"},
		{"bad version", []string{"--input", "x", "--feature-configs", goodConfigs, "--version", "7"}, "version"},
		{"missing config", []string{"--input", "x", "--feature-configs", "nope.pbtxt"}, "nope.pbtxt"},
		{"bad progress", []string{"--input", "x", "--feature-configs", goodConfigs, "--progress", "sometimes"}, "--progress"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runValidateCLI(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestValidatePortableJob builds Beam's prism job server from the SDK this module pins,
// starts it on a loopback port, and submits the validation pipeline to it through the
// universal runner with LOOPBACK workers (this process).
func TestValidatePortableJob(t *testing.T) {
	js := beamtest.StartJobServer(t)
	endpoint := js.Endpoint

	dir := t.TempDir()
	out, _, err := runValidateCLI(t, "--runner=universal", "--endpoint="+endpoint, "--environment_type=LOOPBACK",
		"--input", fixtures.Path(t, "example_batch.pbtxt"), "--feature-configs", goodConfigs, "--out", dir)
	if err != nil {
		t.Fatalf("validate on the job server failed: %v\n%s", err, out)
	}
	checkReports(t, dir, validate.Pass)
	// The same run with the broken config fails on the job server too.
	_, _, err = runValidateCLI(t, "--runner=universal", "--endpoint="+endpoint, "--environment_type=LOOPBACK",
		"--input", fixtures.Path(t, "example_batch.pbtxt"), "--feature-configs", brokenConfigs, "--out", filepath.Join(dir, "broken"))
	if !errors.Is(err, errChecksFailed) {
		t.Fatalf("broken config on the job server: err = %v, want a failed validation", err)
	}
	// Control: with the job server gone, the same submission fails and names the endpoint,
	// so the runs above did go through it.
	js.Stop()
	gone, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	err = run(gone, []string{"validate", "--runner=universal", "--endpoint=" + endpoint, "--environment_type=LOOPBACK",
		"--input", fixtures.Path(t, "example_batch.pbtxt"), "--feature-configs", goodConfigs, "--out", filepath.Join(dir, "gone")}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), endpoint) {
		t.Fatalf("submission without a job server: err = %v, want one naming %s", err, endpoint)
	}
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
