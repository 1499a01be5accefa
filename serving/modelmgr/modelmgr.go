package modelmgr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// File name suffixes of the p2p root.
const (
	WriteDoneSuffix = ".write.done"
	ReadLockSuffix  = ".read.lock"
)

// ErrNotReady is returned by Start when no finished model appeared in the
// source root within Options.WaitTimeout.
var ErrNotReady = errors.New("serving/modelmgr: no ready model in the source path")

// maxCopyDepth bounds the directory depth copied (and symlink cycles).
const maxCopyDepth = 64

// Options configures a Manager. DefaultOptions gives the reference values.
type Options struct {
	// ModelName selects the models to copy: root entries whose name starts
	// with it. Empty disables the Manager: Start returns nil at once.
	ModelName string
	// SourcePath is the p2p root holding {model}@{version}/ directories and
	// {model}@{version}.write.done markers.
	SourcePath string
	// ReceivePath receives {model}/{sub_model}/{version}; Start deletes it.
	ReceivePath string
	// WaitTimeout bounds Start's waiting for the source root and a
	// .write.done marker and its retries of the first pass (1200 s).
	WaitTimeout time.Duration
	// PollInterval is Start's polling and retry period (10 s).
	PollInterval time.Duration
	// LoopInterval is the background loop's period (30 s).
	LoopInterval time.Duration
	// KeepVersions is how many copied versions per model are kept (5).
	KeepVersions int
}

// DefaultOptions returns the reference parameters with no paths set.
func DefaultOptions() Options {
	return Options{
		WaitTimeout:  1200 * time.Second,
		PollInterval: 10 * time.Second,
		LoopInterval: 30 * time.Second,
		KeepVersions: 5,
	}
}

// Validate checks the options of an enabled Manager.
func (o Options) Validate() error {
	if o.ModelName == "" {
		return nil
	}
	var errs []error
	if strings.ContainsAny(o.ModelName, `/\`) || strings.Contains(o.ModelName, "@") {
		errs = append(errs, fmt.Errorf("model name %q contains '/', '\\' or '@'", o.ModelName))
	}
	if o.SourcePath == "" {
		errs = append(errs, errors.New("source path is empty"))
	}
	recv := filepath.Clean(o.ReceivePath)
	if o.ReceivePath == "" || recv == "/" || recv == "." {
		errs = append(errs, fmt.Errorf("receive path %q would delete too much", o.ReceivePath))
	} else if o.SourcePath != "" && within(filepath.Clean(o.SourcePath), recv) {
		errs = append(errs, fmt.Errorf("receive path %q contains the source path %q", o.ReceivePath, o.SourcePath))
	}
	if o.WaitTimeout <= 0 || o.PollInterval <= 0 || o.LoopInterval <= 0 {
		errs = append(errs, errors.New("wait timeout, poll interval and loop interval must be positive"))
	}
	if o.KeepVersions < 1 {
		errs = append(errs, fmt.Errorf("keep versions %d < 1", o.KeepVersions))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("serving/modelmgr: invalid options: %w", err)
	}
	return nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Status is the state the reference reported as metrics
// (version.delay = now − Version as Unix seconds, update.delay = now − Copied).
type Status struct {
	Version  string    // newest copied version of Options.ModelName; "" before the first copy
	Copied   time.Time // when Version was copied
	Passes   int       // completed passes, startup included
	Failures int       // passes that returned an error
}

type copied struct {
	version string
	dsts    []string
}

// Manager copies the newest finished version of a model from the p2p root
// into the receive path and keeps it current. Its methods are safe for
// concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger

	// models lists the copies per model, oldest first. Passes run one at a
	// time (Start's, then the loop's), so only the running pass touches it.
	models map[string][]copied

	mu struct {
		sync.Mutex
		status  Status
		started bool
		cancel  context.CancelFunc
		done    chan struct{}
	}
}

// New returns a Manager; a nil logger discards logs.
func New(opts Options, logger *slog.Logger) (*Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: opts, log: logger.With("component", "modelmgr", "model", opts.ModelName)}
	m.models = map[string][]copied{}
	return m, nil
}

// Start deletes the receive path, waits for the source root and a
// {ModelName}*.write.done marker, and repeats a pass every PollInterval
// until one succeeds (a pass with nothing to copy succeeds); waiting and
// retrying stop after WaitTimeout, a copy under way is not cut short. Then
// the background loop runs until ctx is done or Stop is called. A disabled
// Manager returns nil at once. Start may be called only once.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.mu.started {
		m.mu.Unlock()
		return errors.New("serving/modelmgr: Start called twice")
	}
	m.mu.started = true
	m.mu.Unlock()
	if m.opts.ModelName == "" {
		m.log.Info("model manager disabled: no model name")
		return nil
	}
	deadline := time.Now().Add(m.opts.WaitTimeout)
	if err := os.RemoveAll(m.opts.ReceivePath); err != nil {
		return fmt.Errorf("serving/modelmgr: clear receive path: %w", err)
	}
	if err := m.waitReady(ctx, deadline); err != nil {
		return err
	}
	for {
		err := m.pass(ctx)
		if err == nil {
			break
		}
		m.log.Warn("first pass failed, retrying", "err", err)
		if time.Now().Add(m.opts.PollInterval).After(deadline) {
			return fmt.Errorf("serving/modelmgr: first copy not done within %v: %w", m.opts.WaitTimeout, err)
		}
		if err := sleep(ctx, m.opts.PollInterval); err != nil {
			return fmt.Errorf("serving/modelmgr: first copy: %w", err)
		}
	}
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	m.mu.Lock()
	m.mu.cancel, m.mu.done = cancel, done
	m.mu.Unlock()
	go func() {
		defer close(done)
		m.loop(loopCtx)
	}()
	return nil
}

// Stop ends the background loop and waits for it; it is idempotent and a
// no-op before Start succeeds. A copy under way stops at the next file.
func (m *Manager) Stop() {
	m.mu.Lock()
	cancel, done := m.mu.cancel, m.mu.done
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Status returns the newest copy of Options.ModelName and pass counts.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.status
}

func (m *Manager) loop(ctx context.Context) {
	for {
		if err := sleep(ctx, m.opts.LoopInterval); err != nil {
			return
		}
		if err := m.pass(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Error("model manager pass failed", "err", err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitReady polls until the source root exists and holds a
// {ModelName}*.write.done marker.
func (m *Manager) waitReady(ctx context.Context, deadline time.Time) error {
	for {
		ok, err := m.markerPresent()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().Add(m.opts.PollInterval).After(deadline) {
			return fmt.Errorf("%w: %s after %v", ErrNotReady, m.opts.SourcePath, m.opts.WaitTimeout)
		}
		m.log.Info("waiting for a ready model", "source", m.opts.SourcePath)
		if err := sleep(ctx, m.opts.PollInterval); err != nil {
			return fmt.Errorf("serving/modelmgr: wait for %s: %w", m.opts.SourcePath, err)
		}
	}
}

func (m *Manager) markerPresent() (bool, error) {
	entries, err := os.ReadDir(m.opts.SourcePath)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("serving/modelmgr: read source path: %w", err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, m.opts.ModelName) && strings.HasSuffix(n, WriteDoneSuffix) {
			return true, nil
		}
	}
	return false, nil
}

// pass is the reference's loop_once, then removal of this pass's read locks
// and pruning of every surplus version.
func (m *Manager) pass(ctx context.Context) error {
	locks, cands, err := m.scan()
	err = errors.Join(err, m.copyNewer(ctx, cands))
	err = errors.Join(err, m.removeLocks(locks), m.prune())
	m.mu.Lock()
	m.mu.status.Passes++
	if err != nil {
		m.mu.status.Failures++
	}
	m.mu.Unlock()
	return err
}

// candidate is the newest finished version of one model in the source root.
type candidate struct {
	model, version string
	subs           []subModel
}

type subModel struct {
	rel string // {sub_model}/{version}
	src string // {root}/{model}@{version}/{model}/{sub_model}/{version}
}

// scan lists the source root, takes a read lock on every directory (only
// locks it creates are returned, so another reader's lock is never
// removed), and picks the numerically newest finished version per model.
func (m *Manager) scan() (locks []string, cands map[string]candidate, err error) {
	root := m.opts.SourcePath
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("source path missing", "source", root)
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("serving/modelmgr: read source path: %w", err)
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	cands = map[string]candidate{}
	for _, e := range entries {
		dir := e.Name()
		if !isDir(filepath.Join(root, dir), e) {
			continue
		}
		lock := filepath.Join(root, dir+ReadLockSuffix)
		switch f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); {
		case err == nil:
			locks = append(locks, lock)
			if err := f.Close(); err != nil {
				m.log.Warn("close read lock", "lock", lock, "err", err)
			}
		case errors.Is(err, fs.ErrExist): // another reader's lock: leave it alone
		default:
			m.log.Error("create read lock", "lock", lock, "err", err)
		}
		if !strings.HasPrefix(dir, m.opts.ModelName) || !names[dir+WriteDoneSuffix] {
			continue
		}
		model, version, ok := strings.Cut(dir, "@")
		if !ok || strings.Contains(version, "@") || !isNumeric(version) {
			m.log.Warn("skipping source entry: want {model}@{decimal version}", "entry", dir)
			continue
		}
		subs, err := versionData(filepath.Join(root, dir, model), version)
		if err != nil {
			m.log.Warn("skipping source entry", "entry", dir, "err", err)
			continue
		}
		if old, ok := cands[model]; !ok || compareVersions(version, old.version) > 0 {
			cands[model] = candidate{model: model, version: version, subs: subs}
		}
	}
	return locks, cands, nil
}

func isDir(path string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// versionData lists {sub_model}/{version} for every sub-model directory of
// path; every one must hold the version directory.
func versionData(path, version string) ([]subModel, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var subs []subModel
	for _, e := range entries {
		if !isDir(filepath.Join(path, e.Name()), e) {
			continue
		}
		src := filepath.Join(path, e.Name(), version)
		if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%s: no version directory", src)
		}
		subs = append(subs, subModel{rel: filepath.Join(e.Name(), version), src: src})
	}
	if len(subs) == 0 {
		return nil, fmt.Errorf("%s: no sub-model directories", path)
	}
	return subs, nil
}

// isNumeric reports whether v is a non-empty string of ASCII digits.
func isNumeric(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// compareVersions compares decimal strings by value, at any length.
func compareVersions(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// copyNewer copies each candidate newer than the model's last copy.
func (m *Manager) copyNewer(ctx context.Context, cands map[string]candidate) error {
	var errs []error
	for model, c := range cands {
		hist := m.models[model]
		if n := len(hist); n > 0 && compareVersions(c.version, hist[n-1].version) <= 0 {
			continue
		}
		dsts, err := m.copyModel(ctx, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("serving/modelmgr: copy %s@%s: %w", model, c.version, err))
			continue
		}
		now := time.Now()
		m.models[model] = append(m.models[model], copied{version: c.version, dsts: dsts})
		m.mu.Lock()
		if model == m.opts.ModelName {
			m.mu.status.Version, m.mu.status.Copied = c.version, now
		}
		m.mu.Unlock()
		m.log.Info("model updated", "copied_model", model, "version", c.version)
	}
	return errors.Join(errs...)
}

// copyModel copies every sub-model to {dst}-temp and then renames all of
// them to {dst}; an existing dst counts as copied. On error the temps of
// this call are removed.
func (m *Manager) copyModel(ctx context.Context, c candidate) ([]string, error) {
	var dsts, temps []string
	fail := func(err error) ([]string, error) {
		for _, t := range temps {
			if rerr := os.RemoveAll(t); rerr != nil {
				err = errors.Join(err, fmt.Errorf("remove %s: %w", t, rerr))
			}
		}
		return nil, err
	}
	for _, s := range c.subs {
		dst := filepath.Join(m.opts.ReceivePath, c.model, s.rel)
		dsts = append(dsts, dst)
		if _, err := os.Stat(dst); err == nil {
			m.log.Warn("destination exists, keeping it", "dst", dst)
			continue
		}
		tmp := dst + "-temp"
		// A temp left by an earlier failure may be partial: copy afresh.
		if err := os.RemoveAll(tmp); err != nil {
			return fail(fmt.Errorf("remove stale %s: %w", tmp, err))
		}
		temps = append(temps, tmp)
		if err := copyTree(ctx, s.src, tmp, 0); err != nil {
			return fail(err)
		}
	}
	for _, t := range temps {
		if err := os.Rename(t, strings.TrimSuffix(t, "-temp")); err != nil {
			return fail(fmt.Errorf("rename: %w", err))
		}
	}
	return dsts, nil
}

// copyTree copies the directory src to the new directory dst, following
// symbolic links as shutil.copytree does by default.
func copyTree(ctx context.Context, src, dst string, depth int) error {
	if depth > maxCopyDepth {
		return fmt.Errorf("copy %s: deeper than %d levels", src, maxCopyDepth)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if err := os.MkdirAll(dst, fi.Mode().Perm()|0o700); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		st, err := os.Stat(s)
		if err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		switch {
		case st.IsDir():
			err = copyTree(ctx, s, d, depth+1)
		case st.Mode().IsRegular():
			err = copyFile(s, d, st.Mode().Perm())
		default:
			err = fmt.Errorf("copy %s: not a regular file or directory", s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer func() {
		if cerr := out.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("copy: %w", cerr)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

// removeLocks deletes the read locks this Manager created.
func (m *Manager) removeLocks(locks []string) error {
	var errs []error
	for _, l := range locks {
		if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("serving/modelmgr: remove read lock: %w", err))
		}
	}
	return errors.Join(errs...)
}

// prune deletes the oldest versions of each model until KeepVersions remain;
// a version whose deletion fails stays listed and is retried next pass.
func (m *Manager) prune() error {
	var errs []error
	for model, hist := range m.models {
		for len(hist) > m.opts.KeepVersions {
			var derr error
			for _, d := range hist[0].dsts {
				if err := os.RemoveAll(d); err != nil {
					derr = errors.Join(derr, err)
				}
			}
			if derr != nil {
				errs = append(errs, fmt.Errorf("serving/modelmgr: prune %s@%s: %w", model, hist[0].version, derr))
				break
			}
			m.log.Info("pruned old version", "copied_model", model, "version", hist[0].version)
			hist = hist[1:]
		}
		m.models[model] = hist
	}
	return errors.Join(errs...)
}
