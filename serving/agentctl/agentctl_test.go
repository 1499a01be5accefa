package agentctl

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	izk "github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/internal/zktest"
	"github.com/monolith-go/monolith/serving/savedmodel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open starts a ZooKeeper and returns a Controller of bzid "gip" on it and a fake export
// of test_ffm_model with entry, ps_0 and ps_1.
func open(t *testing.T) (*Controller, string, context.Context) {
	t.Helper()
	srv := zktest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	c, err := Open(ctx, "gip", izk.Options{Servers: srv.Servers(), SessionTimeout: zktest.SessionTimeout, Logger: zktest.NewLogger(t).Slog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	export := t.TempDir()
	if err := savedmodel.WriteFakeExport(export, "test_ffm_model", 2, 1); err != nil {
		t.Fatal(err)
	}
	return c, export, ctx
}

// nodeData reads a node through the Controller's connection ("" when missing).
func nodeData(t *testing.T, ctx context.Context, c *Controller, path string) string {
	t.Helper()
	data, _, err := c.b.Client().Get(ctx, path)
	if errors.Is(err, izk.ErrNoNode) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestDeclare: every entry of the export is declared with the reference's deploy config
// bytes; a second declaration needs overwrite; a given model name wins (S5); an export
// without remote-predict nodes needs one.
func TestDeclare(t *testing.T) {
	c, export, ctx := open(t)
	name, err := c.Declare(ctx, export, "", false)
	if err != nil || name != "test_ffm_model" {
		t.Fatalf("Declare = %q, %v", name, err)
	}
	for sub, policy := range map[string]string{"entry": "latest", "ps_0": "latest_once", "ps_1": "latest_once"} {
		want := `{"model_base_path": "` + filepath.Join(export, sub) + `", "version_policy": "` + policy + `"}`
		if got := nodeData(t, ctx, c, "/gip/saved_models/test_ffm_model/"+sub); got != want {
			t.Errorf("%s: %s, want %s", sub, got, want)
		}
	}
	if _, err := c.Declare(ctx, export, "", false); err == nil || !strings.Contains(err.Error(), "overwrite") {
		t.Errorf("Declare twice without overwrite = %v", err)
	}
	// S14: the base path is joined as os.path.join does, uncleaned.
	if _, err := c.Declare(ctx, export+"/", "", true); err != nil {
		t.Fatal(err)
	}
	if got, want := nodeData(t, ctx, c, "/gip/saved_models/test_ffm_model/entry"), export+"/entry"; !strings.Contains(got, `"`+want+`"`) {
		t.Errorf("after overwrite from %s/: %s", export, got)
	}
	if name, err := c.Declare(ctx, export, "renamed", false); err != nil || name != "renamed" {
		t.Errorf("Declare with a model name = %q, %v", name, err)
	}
	if got := nodeData(t, ctx, c, "/gip/saved_models/renamed/ps_1"); !strings.Contains(got, "latest_once") {
		t.Errorf("renamed/ps_1: %q", got)
	}
	noRemote := t.TempDir()
	if err := savedmodel.WriteFakeExport(noRemote, "x", 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Declare(ctx, noRemote, "", false); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "--model_name") {
		t.Errorf("Declare of an export without remote-predict nodes = %v", err)
	}
	if _, err := c.Declare(ctx, filepath.Join(export, "missing"), "", false); err == nil {
		t.Error("Declare of a missing export succeeded")
	}
}

// TestPublish: pub and unpub add and remove the matching declared sub-graphs (and report
// them), unpublishing what is not in the layout is no error, and bzid_info shows the
// layout.
func TestPublish(t *testing.T) {
	c, export, ctx := open(t)
	if _, err := c.Declare(ctx, export, "", false); err != nil {
		t.Fatal(err)
	}
	layout := func() []string {
		kids, err := c.b.Client().Children(ctx, "/gip/layouts/mixed")
		if err != nil && !errors.Is(err, izk.ErrNoNode) {
			t.Fatal(err)
		}
		return kids
	}
	type op func(context.Context, string, Pattern) ([]string, error)
	for _, step := range []struct {
		name    string
		do      op
		pattern string
		matched []string
		layout  []string
	}{
		{"pub", c.Publish, "test_ffm_model:ps_[!1]", []string{"ps_0"}, []string{"test_ffm_model:ps_0"}},
		{"pub", c.Publish, "test_ffm_model:*", []string{"entry", "ps_0", "ps_1"}, []string{"test_ffm_model:entry", "test_ffm_model:ps_0", "test_ffm_model:ps_1"}},
		{"unpub", c.Unpublish, "test_ffm_model:ps_?", []string{"ps_0", "ps_1"}, []string{"test_ffm_model:entry"}},
		{"unpub", c.Unpublish, "test_ffm_model:*", []string{"entry", "ps_0", "ps_1"}, nil},
		{"pub", c.Publish, "undeclared:*", nil, nil},
	} {
		p, err := ParsePattern(step.pattern)
		if err != nil {
			t.Fatal(err)
		}
		matched, err := step.do(ctx, "mixed", p)
		if err != nil || !slices.Equal(matched, step.matched) {
			t.Errorf("%s %s = %q, %v; want %q", step.name, p, matched, err, step.matched)
		}
		if got := layout(); !slices.Equal(got, step.layout) {
			t.Errorf("after %s %s the layout is %q, want %q", step.name, p, got, step.layout)
		}
	}
	p, _ := ParsePattern("test_ffm_model:entry")
	if _, err := c.Publish(ctx, "mixed", p); err != nil {
		t.Fatal(err)
	}
	info, err := c.BzidInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Layouts["mixed"]; !slices.Equal(got, []string{"test_ffm_model:entry"}) {
		t.Errorf("bzid_info layout %q", got)
	}
	if n, _ := info.Models["test_ffm_model"].SubGraphsTotal.Get(); n != 3 {
		t.Errorf("bzid_info sub_graphs_total %d, want 3", n)
	}
	if _, err := c.Publish(ctx, "", p); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Publish to an empty layout name = %v", err)
	}
	if _, err := c.Unpublish(ctx, "mixed", Pattern{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Unpublish with a zero Pattern = %v", err)
	}
}

func TestParsePattern(t *testing.T) {
	for _, bad := range []string{"nocolon", ":entry", ""} {
		if _, err := ParsePattern(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParsePattern(%q) = %v", bad, err)
		}
	}
	p, err := ParsePattern("m:ps_*:x")
	if err != nil || p.Model != "m" || p.Glob != "ps_*:x" || !p.Match("ps_1:x") || p.String() != "m:ps_*:x" {
		t.Errorf("ParsePattern(m:ps_*:x) = %+v, %v", p, err)
	}
}

func TestFnmatchRegexp(t *testing.T) {
	for _, tc := range []struct {
		glob string
		yes  []string
		no   []string
	}{
		{"ps_*", []string{"ps_0", "ps_12", "ps_"}, []string{"entry", "xps_0"}},
		{"ps_?", []string{"ps_1"}, []string{"ps_12"}},
		{"ps_[!0-2]", []string{"ps_3"}, []string{"ps_0", "ps_2"}},
		{"ps_[0-1]", []string{"ps_0", "ps_1"}, []string{"ps_2"}},
		{"a.b[", []string{"a.b["}, []string{"axb["}},
		{"*", []string{"", "anything"}, nil},
		{"[^x]", []string{"^", "x"}, []string{"y"}},
	} {
		re, err := fnmatchRegexp(tc.glob)
		if err != nil {
			t.Fatalf("%q: %v", tc.glob, err)
		}
		for _, s := range tc.yes {
			if !re.MatchString(s) {
				t.Errorf("%q does not match %q", tc.glob, s)
			}
		}
		for _, s := range tc.no {
			if re.MatchString(s) {
				t.Errorf("%q matches %q", tc.glob, s)
			}
		}
	}
}
