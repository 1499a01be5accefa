package modelmgr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const model = "test_model"

var subs = []string{"ps_item_embedding_0", "ps_item_embedding_1"}

// addVersion lays out p2p/{model}@{v}/{model}/{sub}/{v}/data for each sub
// and, when done, the {model}@{v}.write.done marker (model_manager_test's
// create_file).
func addVersion(t *testing.T, root, name, version string, done bool) {
	t.Helper()
	for _, sub := range subs {
		dir := filepath.Join(root, name+"@"+version, name, sub, version)
		if err := os.MkdirAll(filepath.Join(dir, "variables"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "variables", "data"), []byte(name+sub+version), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if done {
		markDone(t, root, name, version)
	}
}

func markDone(t *testing.T, root, name, version string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, name+"@"+version+WriteDoneSuffix), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

type fixture struct {
	src, recv string
	opts      Options
}

func newFixture(t *testing.T) *fixture {
	base := t.TempDir()
	f := &fixture{src: filepath.Join(base, "p2p"), recv: filepath.Join(base, "model_data")}
	f.opts = Options{
		ModelName: model, SourcePath: f.src, ReceivePath: f.recv,
		WaitTimeout: 5 * time.Second, PollInterval: 10 * time.Millisecond,
		LoopInterval: 10 * time.Millisecond, KeepVersions: 5,
	}
	if err := os.MkdirAll(f.src, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) manager(t *testing.T) *Manager {
	t.Helper()
	m, err := New(f.opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) start(t *testing.T) *Manager {
	t.Helper()
	m := f.manager(t)
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(m.Stop)
	return m
}

// copiedVersions lists the versions present for every sub-model, checking
// the copied file.
func (f *fixture) copiedVersions(t *testing.T) []string {
	t.Helper()
	var vs []string
	entries, _ := os.ReadDir(filepath.Join(f.recv, model, subs[0]))
	for _, e := range entries {
		v := e.Name()
		for _, sub := range subs {
			got, err := os.ReadFile(filepath.Join(f.recv, model, sub, v, "variables", "data"))
			if err != nil || string(got) != model+sub+v {
				t.Fatalf("copy of %s/%s: %q, %v", sub, v, got, err)
			}
		}
		vs = append(vs, v)
	}
	return vs
}

func (f *fixture) locks(t *testing.T) []string {
	t.Helper()
	ls, err := filepath.Glob(filepath.Join(f.src, "*"+ReadLockSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for i := range ls {
		ls[i] = filepath.Base(ls[i])
	}
	return ls
}

// waitFor polls cond for at most 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// test_start: the newest finished version is copied before Start returns.
func TestStartCopiesNewest(t *testing.T) {
	f := newFixture(t)
	addVersion(t, f.src, model, "1234566", true)
	addVersion(t, f.src, model, "1234567", true)
	addVersion(t, f.src, model, "1234568", false) // no .write.done yet
	m := f.start(t)
	if got := f.copiedVersions(t); !slices.Equal(got, []string{"1234567"}) {
		t.Errorf("copied %v, want [1234567]", got)
	}
	if st := m.Status(); st.Version != "1234567" || st.Copied.IsZero() || st.Passes < 1 {
		t.Errorf("Status = %+v", st)
	}
	if l := f.locks(t); len(l) != 0 {
		t.Errorf("read locks left: %v", l)
	}
	// The loop copies the newer version once it is finished.
	markDone(t, f.src, model, "1234568")
	waitFor(t, "version 1234568", func() bool { return m.Status().Version == "1234568" })
	if got := f.copiedVersions(t); !slices.Equal(got, []string{"1234567", "1234568"}) {
		t.Errorf("copied %v", got)
	}
}

// test_ignore_old: a version older than the copied one, added later, is ignored.
func TestIgnoreOlder(t *testing.T) {
	f := newFixture(t)
	addVersion(t, f.src, model, "1234567", true)
	m := f.start(t)
	addVersion(t, f.src, model, "1234566", true)
	passes := m.Status().Passes
	waitFor(t, "two more passes", func() bool { return m.Status().Passes >= passes+2 })
	if got := f.copiedVersions(t); !slices.Equal(got, []string{"1234567"}) {
		t.Errorf("copied %v, want [1234567]", got)
	}
	if st := m.Status(); st.Version != "1234567" || st.Failures != 0 {
		t.Errorf("Status = %+v", st)
	}
}

func TestStartWaitsForWriteDone(t *testing.T) {
	f := newFixture(t)
	if err := os.Remove(f.src); err != nil {
		t.Fatal(err)
	}
	m := f.manager(t)
	defer m.Stop()
	errc := make(chan error, 1)
	go func() { errc <- m.Start(t.Context()) }()
	time.Sleep(50 * time.Millisecond) // source root missing
	if err := os.MkdirAll(f.src, 0o755); err != nil {
		t.Fatal(err)
	}
	addVersion(t, f.src, model, "7", false)
	addVersion(t, f.src, "other_model", "8", true) // another model's marker does not count
	select {
	case err := <-errc:
		t.Fatalf("Start returned %v before .write.done", err)
	case <-time.After(100 * time.Millisecond):
	}
	markDone(t, f.src, model, "7")
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Start did not return")
	}
	if got := f.copiedVersions(t); !slices.Equal(got, []string{"7"}) {
		t.Errorf("copied %v", got)
	}
	if _, err := os.Stat(filepath.Join(f.recv, "other_model")); err == nil {
		t.Error("other_model copied")
	}
}

func TestStartTimeoutAndCancel(t *testing.T) {
	f := newFixture(t)
	f.opts.WaitTimeout = 100 * time.Millisecond
	start := time.Now()
	if err := f.manager(t).Start(t.Context()); !errors.Is(err, ErrNotReady) {
		t.Errorf("Start = %v, want ErrNotReady", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Start took %v", d)
	}

	f.opts.WaitTimeout = time.Hour
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := f.manager(t).Start(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start = %v, want DeadlineExceeded", err)
	}
}

func TestStartRetriesFirstPassWithinTimeout(t *testing.T) {
	f := newFixture(t)
	f.opts.WaitTimeout = 300 * time.Millisecond
	addVersion(t, f.src, model, "5", true)
	// A dangling symlink in the model makes every copy fail.
	if err := os.Symlink("nowhere", filepath.Join(f.src, model+"@5", model, subs[0], "5", "broken")); err != nil {
		t.Fatal(err)
	}
	m := f.manager(t)
	if err := m.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "first copy") {
		t.Fatalf("Start = %v", err)
	}
	if st := m.Status(); st.Passes < 2 || st.Failures != st.Passes {
		t.Errorf("Status = %+v", st)
	}
}

func TestDisabledAndLifecycle(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(f.recv, 0o755); err != nil {
		t.Fatal(err)
	}
	f.opts.ModelName = ""
	m := f.manager(t)
	m.Stop() // before Start: no-op
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.recv); err != nil {
		t.Errorf("disabled Manager touched the receive path: %v", err)
	}
	if err := m.Start(t.Context()); err == nil {
		t.Error("second Start succeeded")
	}

	// An enabled Manager clears the receive path first; Stop is idempotent.
	f.opts.ModelName = model
	stale := filepath.Join(f.recv, model, subs[0], "1", "stale")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	addVersion(t, f.src, model, "2", true)
	m = f.start(t)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale receive content survived: %v", err)
	}
	m.Stop()
	m.Stop()
	passes := m.Status().Passes
	time.Sleep(50 * time.Millisecond)
	if got := m.Status().Passes; got != passes {
		t.Errorf("passes after Stop: %d -> %d", passes, got)
	}
}

func TestValidate(t *testing.T) {
	base := DefaultOptions()
	base.ModelName, base.SourcePath, base.ReceivePath = model, "/data/p2p", "/data/model"
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Options){
		"empty receive":   func(o *Options) { o.ReceivePath = "" },
		"root receive":    func(o *Options) { o.ReceivePath = "/" },
		"receive has src": func(o *Options) { o.ReceivePath = "/data" },
		"empty source":    func(o *Options) { o.SourcePath = "" },
		"keep 0":          func(o *Options) { o.KeepVersions = 0 },
		"zero interval":   func(o *Options) { o.LoopInterval = 0 },
		"name with @":     func(o *Options) { o.ModelName = "a@b" },
	} {
		o := base
		mod(&o)
		if _, err := New(o, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSkippedEntries(t *testing.T) {
	f := newFixture(t)
	addVersion(t, f.src, model, "10", true)
	addVersion(t, f.src, model, "12", true)
	// 12 lacks the version directory in one sub-model: the whole candidate is skipped.
	if err := os.RemoveAll(filepath.Join(f.src, model+"@12", model, subs[1], "12")); err != nil {
		t.Fatal(err)
	}
	addVersion(t, f.src, model, "abc", true) // not a decimal version
	// A finished directory without '@'.
	if err := os.MkdirAll(filepath.Join(f.src, model), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.src, model+WriteDoneSuffix), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	addVersion(t, f.src, model, "13", false) // not finished
	m := f.manager(t)
	if err := m.pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.copiedVersions(t); !slices.Equal(got, []string{"10"}) {
		t.Errorf("copied %v, want [10]", got)
	}
}

func TestCopyFailureRemovesTemps(t *testing.T) {
	f := newFixture(t)
	addVersion(t, f.src, model, "3", true)
	// The second sub-model's parent is a file: its copy fails after the first succeeded.
	if err := os.MkdirAll(filepath.Join(f.recv, model), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.recv, model, subs[1]), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m := f.manager(t)
	err := m.pass(t.Context())
	if err == nil || !strings.Contains(err.Error(), model+"@3") {
		t.Fatalf("pass = %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.recv, model, subs[0], "3-temp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.recv, model, subs[0], "3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("partial model renamed into place: %v", err)
	}
	if st := m.Status(); st.Failures != 1 || st.Version != "" {
		t.Errorf("Status = %+v", st)
	}
	if l := f.locks(t); len(l) != 0 {
		t.Errorf("read locks left: %v", l)
	}
	// Once the obstacle is gone the next pass copies.
	if err := os.Remove(filepath.Join(f.recv, model, subs[1])); err != nil {
		t.Fatal(err)
	}
	if err := m.pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.copiedVersions(t); !slices.Equal(got, []string{"3"}) {
		t.Errorf("copied %v", got)
	}
}

// TestDepartures pins the package doc's departures from model_manager.py.
func TestDepartures(t *testing.T) {
	t.Run("S10 numeric versions", func(t *testing.T) {
		f := newFixture(t)
		addVersion(t, f.src, model, "9", true)
		addVersion(t, f.src, model, "10", true) // "10" < "9" as strings
		m := f.start(t)
		if st := m.Status(); st.Version != "10" {
			t.Fatalf("Status = %+v, want version 10", st)
		}
		addVersion(t, f.src, model, "099", true) // 99 > 10 although "099" < "10"
		waitFor(t, "version 099", func() bool { return m.Status().Version == "099" })
		if got := f.copiedVersions(t); !slices.Equal(got, []string{"099", "10"}) {
			t.Errorf("copied %v", got)
		}
	})
	t.Run("S10 foreign read lock kept", func(t *testing.T) {
		f := newFixture(t)
		addVersion(t, f.src, model, "1", true)
		addVersion(t, f.src, model, "2", true)
		foreign := filepath.Join(f.src, model+"@1"+ReadLockSuffix)
		if err := os.WriteFile(foreign, []byte("other reader"), 0o644); err != nil {
			t.Fatal(err)
		}
		m := f.manager(t)
		locks, _, err := m.scan()
		if err != nil {
			t.Fatal(err)
		}
		// While the pass reads, a lock exists for every directory ...
		if got := f.locks(t); !slices.Equal(got, []string{model + "@1.read.lock", model + "@2.read.lock"}) {
			t.Errorf("locks during scan: %v", got)
		}
		// ... but only the one this Manager created is its own.
		if !slices.Equal(locks, []string{filepath.Join(f.src, model+"@2"+ReadLockSuffix)}) {
			t.Errorf("own locks %v", locks)
		}
		if err := m.removeLocks(locks); err != nil {
			t.Fatal(err)
		}
		if err := m.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer m.Stop()
		passes := m.Status().Passes
		waitFor(t, "a loop pass", func() bool { return m.Status().Passes > passes })
		if got, err := os.ReadFile(foreign); err != nil || string(got) != "other reader" {
			t.Errorf("foreign lock: %q, %v", got, err)
		}
		if got := f.locks(t); !slices.Equal(got, []string{model + "@1.read.lock"}) {
			t.Errorf("locks after passes: %v", got)
		}
	})
	t.Run("S10 all surplus pruned each pass", func(t *testing.T) {
		f := newFixture(t)
		f.opts.KeepVersions = 2
		m := f.manager(t)
		// Five copies on record (as after earlier prune failures), then one pass.
		for _, v := range []string{"1", "2", "3", "4", "5"} {
			var dsts []string
			for _, sub := range subs {
				d := filepath.Join(f.recv, model, sub, v)
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				dsts = append(dsts, d)
			}
			m.models[model] = append(m.models[model], copied{version: v, dsts: dsts})
		}
		if err := m.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, sub := range subs {
			if got := listDir(t, filepath.Join(f.recv, model, sub)); !slices.Equal(got, []string{"4", "5"}) {
				t.Errorf("%s keeps %v, want [4 5]", sub, got)
			}
		}
		// And in steady state the loop never keeps more than KeepVersions.
		addVersion(t, f.src, model, "6", true)
		if err := m.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, sub := range subs {
			if got := listDir(t, filepath.Join(f.recv, model, sub)); !slices.Equal(got, []string{"5", "6"}) {
				t.Errorf("%s keeps %v, want [5 6]", sub, got)
			}
		}
	})
	t.Run("stale temp recopied", func(t *testing.T) {
		f := newFixture(t)
		addVersion(t, f.src, model, "4", true)
		junk := filepath.Join(f.recv, model, subs[0], "4-temp", "junk")
		if err := os.MkdirAll(junk, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := f.manager(t).pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(f.recv, model, subs[0], "4", "junk")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale temp content renamed into place: %v", err)
		}
		if got := f.copiedVersions(t); !slices.Equal(got, []string{"4"}) {
			t.Errorf("copied %v", got)
		}
	})
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"9", "10", -1}, {"10", "9", 1}, {"10", "10", 0}, {"010", "10", 0},
		{"1234567", "1234566", 1}, {"99999999999999999999999", "1", 1}, {"0", "000", 0},
	} {
		if got := compareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
