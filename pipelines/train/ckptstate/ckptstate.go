// Package ckptstate reads and writes a model directory's checkpoint-state files — TF's
// `checkpoint`, Monolith's `monolith_checkpoint`, the `restore_ckpt` marker and
// `ckpt.info-{step}` — and implements restore synchronisation (spec §3.4–3.5, §2.5).
//
// Departures, settled by decisions.md: a non-chief waits for the chief's marker with a
// timeout (C1, default 3600 s) and the chief always writes the marker, also when it has
// nothing to restore, so nobody waits forever; `hdfs:/` paths count as absolute and
// reading one is ErrHDFSUnavailable (C4); "read ckpt error!" is returned only when every
// re-read failed (the reference raised after the fifth re-read even when it succeeded);
// the restore_ckpt override in train mode switches only to a checkpoint the state lists
// (the reference switched to any name, existing or not); failures are returned, not logged.
package ckptstate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/internal/pytext"
	"github.com/monolith-go/monolith/io/fileops"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	"github.com/monolith-go/monolith/schemas/trainingpb"
)

// The files of a model directory.
const (
	StateName         = "checkpoint"
	MonolithStateName = "monolith_checkpoint"
	RestoreCkptName   = "restore_ckpt"
)

// ErrHDFSUnavailable is wrapped by every access to an `hdfs:/` path (C4).
var ErrHDFSUnavailable = fileops.ErrHDFSUnavailable

// IsAbs reports whether p is absolute; `hdfs:/…` counts as absolute (C4).
func IsAbs(p string) bool { return IsHDFS(p) || filepath.IsAbs(p) }

// IsHDFS reports whether p is an `hdfs:/` path.
func IsHDFS(p string) bool { return fileops.IsHDFS(p) }

// CheckLocal returns an error wrapping ErrHDFSUnavailable for an `hdfs:/` path.
func CheckLocal(p string) error { return fileops.CheckLocal(p) }

// join joins a directory and a name, keeping `hdfs:/` prefixes intact.
func join(dir, name string) string {
	if IsHDFS(dir) {
		return strings.TrimSuffix(dir, "/") + "/" + name
	}
	return filepath.Join(dir, name)
}

// dirname is os.path.dirname: `hdfs:/` paths keep their scheme.
func dirname(p string) string {
	if IsHDFS(p) {
		return p[:strings.LastIndexByte(p, '/')]
	}
	return filepath.Dir(p)
}

// readFile reads a local file; (nil, nil) when it does not exist.
func readFile(p string) ([]byte, error) {
	if err := CheckLocal(p); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// ParseState parses TF's checkpoint-state text; name is for errors.
func ParseState(name string, b []byte) (*tfcorepb.CheckpointState, error) {
	var s tfcorepb.CheckpointState
	if err := prototext.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("ckptstate: %s: %w", name, err)
	}
	return &s, nil
}

// FormatState prints s as Python's text_format does.
func FormatState(s *tfcorepb.CheckpointState) []byte {
	var b strings.Builder
	if p := s.GetModelCheckpointPath(); p != "" {
		fmt.Fprintf(&b, "model_checkpoint_path: %s\n", pytext.Quote(p))
	}
	for _, p := range s.GetAllModelCheckpointPaths() {
		fmt.Fprintf(&b, "all_model_checkpoint_paths: %s\n", pytext.Quote(p))
	}
	for _, t := range s.GetAllModelCheckpointTimestamps() {
		fmt.Fprintf(&b, "all_model_checkpoint_timestamps: %s\n", pytext.Float(t))
	}
	if t := s.GetLastPreservedTimestamp(); t != 0 {
		fmt.Fprintf(&b, "last_preserved_timestamp: %s\n", pytext.Float(t))
	}
	return []byte(b.String())
}

// ReadState reads {dir}/{name} (name "" is StateName) with its relative paths made
// absolute against dir, as TF's get_checkpoint_state does; (nil, nil) when the file does
// not exist.
func ReadState(dir, name string) (*tfcorepb.CheckpointState, error) {
	if name == "" {
		name = StateName
	}
	p := join(dir, name)
	b, err := readFile(p)
	if err != nil || b == nil {
		if err != nil {
			err = fmt.Errorf("ckptstate: %w", err)
		}
		return nil, err
	}
	s, err := ParseState(p, b)
	if err != nil {
		return nil, err
	}
	abs := func(q string) string {
		if q == "" || IsAbs(q) {
			return q
		}
		return join(dir, q)
	}
	s.ModelCheckpointPath = abs(s.ModelCheckpointPath)
	for i, q := range s.AllModelCheckpointPaths {
		s.AllModelCheckpointPaths[i] = abs(q)
	}
	return s, nil
}

// WriteState writes s to {dir}/{name} (name "" is StateName) atomically.
func WriteState(dir, name string, s *tfcorepb.CheckpointState) error {
	if name == "" {
		name = StateName
	}
	return writeFile(join(dir, name), FormatState(s))
}

func writeFile(p string, b []byte) error {
	if err := CheckLocal(p); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("ckptstate: %w", err)
	}
	if err := atomicfile.WriteFile(p, b); err != nil {
		return fmt.Errorf("ckptstate: %w", err)
	}
	return nil
}

// ParseMonolithState parses a monolith_checkpoint text; name is for errors.
func ParseMonolithState(name string, b []byte) (*trainingpb.MonolithCheckpointState, error) {
	var s trainingpb.MonolithCheckpointState
	if err := prototext.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("ckptstate: %s: %w", name, err)
	}
	return &s, nil
}

// FormatMonolithState prints s as Python's text_format does.
func FormatMonolithState(s *trainingpb.MonolithCheckpointState) []byte {
	var b strings.Builder
	for _, p := range s.GetExemptModelCheckpointPaths() {
		fmt.Fprintf(&b, "exempt_model_checkpoint_paths: %s\n", pytext.Quote(p))
	}
	if s.LastCheckpointSaveTimestamp != nil {
		fmt.Fprintf(&b, "last_checkpoint_save_timestamp: %d\n", s.GetLastCheckpointSaveTimestamp())
	}
	if s.BuiltinHashTableType != nil {
		fmt.Fprintf(&b, "builtin_hash_table_type: %s\n", s.GetBuiltinHashTableType())
	}
	for _, p := range s.GetInconsistentModelCheckpointPaths() {
		fmt.Fprintf(&b, "inconsistent_model_checkpoint_paths: %s\n", pytext.Quote(p))
	}
	return []byte(b.String())
}

// ReadMonolithState reads {dir}/monolith_checkpoint; (nil, nil) when it does not exist.
func ReadMonolithState(dir string) (*trainingpb.MonolithCheckpointState, error) {
	p := join(dir, MonolithStateName)
	b, err := readFile(p)
	if err != nil || b == nil {
		if err != nil {
			err = fmt.Errorf("ckptstate: %w", err)
		}
		return nil, err
	}
	return ParseMonolithState(p, b)
}

// WriteMonolithState writes {dir}/monolith_checkpoint atomically.
func WriteMonolithState(dir string, s *trainingpb.MonolithCheckpointState) error {
	return writeFile(join(dir, MonolithStateName), FormatMonolithState(s))
}

// Modes of GetState.
const (
	ModeTrain = "train"
	ModeEval  = "eval"
	ModeInfer = "infer"
)

// Options of GetState.
type Options struct {
	// Mode is ModeTrain, ModeEval or ModeInfer ("" is ModeTrain).
	Mode string
	// RestoreCkpt is the --restore_ckpt value: the basename of the checkpoint to start
	// from ("" = none).
	RestoreCkpt string
	// Retries is how often an unreadable state file is read again (default 5).
	Retries int
	Log     *slog.Logger
}

// GetState is Monolith's get_checkpoint_state (§3.5): it reads {dir}/{name} (re-reading an
// unreadable file up to Retries times), then applies the restore_ckpt override: with
// R = dirname(latest)/basename(RestoreCkpt) listed in the state, eval and infer use R, and
// training switches to R once — it writes the marker {dir}/restore_ckpt and rewrites the
// state, so that later restarts resume from newer checkpoints. (nil, nil) when there is no
// state file.
func GetState(dir, name string, o Options) (*tfcorepb.CheckpointState, error) {
	if name == "" {
		name = StateName
	}
	if o.Retries <= 0 {
		o.Retries = 5
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := ReadState(dir, name)
	for i := 0; err != nil && !errors.Is(err, ErrHDFSUnavailable) && i < o.Retries; i++ {
		time.Sleep(time.Duration(i+1) * 10 * time.Millisecond)
		s, err = ReadState(dir, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read ckpt error! %w", err)
	}
	if s == nil || o.RestoreCkpt == "" || name != StateName {
		return s, nil
	}
	r := join(dirname(s.GetModelCheckpointPath()), path.Base(o.RestoreCkpt))
	marker := join(dir, RestoreCkptName)
	m, err := readFile(marker)
	if err != nil {
		return nil, fmt.Errorf("ckptstate: %w", err)
	}
	listed := slices.Contains(s.GetAllModelCheckpointPaths(), r)
	train := o.Mode == "" || o.Mode == ModeTrain
	switch {
	case r == s.GetModelCheckpointPath():
		log.Info("restore_ckpt is the latest checkpoint already", "restore_ckpt", r)
	case !listed:
		log.Warn("restore_ckpt is not a checkpoint of the model dir; keeping the latest", "restore_ckpt", r, "dir", dir)
		return s, nil
	case !train:
		s.ModelCheckpointPath = r
		return s, nil
	}
	switch {
	case !train:
		return s, nil
	case m != nil:
		log.Info("restore_ckpt applied by an earlier run; keeping the latest", "marker", marker, "latest", s.GetModelCheckpointPath())
		return s, nil
	}
	// Training switches once: the marker makes later restarts keep newer checkpoints.
	s.ModelCheckpointPath = r
	if err := writeFile(marker, []byte(r)); err != nil {
		return nil, err
	}
	if err := WriteState(dir, name, s); err != nil {
		return nil, err
	}
	log.Info("restore_ckpt applied", "restore_ckpt", r)
	return s, nil
}

// IsChief is the chief rule of restore synchronisation: a local job, or worker 0.
func IsChief(isLocal bool, serverType string, index int) bool {
	return isLocal || (serverType == "worker" && index == 0)
}

// SyncConfig configures SyncRestore.
type SyncConfig struct {
	RestoreDir, RestoreCkpt, ModelDir string
	IsChief                           bool
	// Timeout bounds a non-chief's wait (C1; default 3600 s); Poll is its period
	// (default 30 s).
	Timeout, Poll time.Duration
	Log           *slog.Logger
}

// SyncRestore is restore synchronisation (§3.4, C1), a no-op without RestoreDir. The chief
// points {model_dir}/checkpoint at restore_dir's chosen checkpoint (its latest, or
// RestoreCkpt's basename when restore_dir lists it) unless model_dir has a state of its own,
// records that checkpoint as exempt in {model_dir}/monolith_checkpoint, and always writes
// that file: it is the marker the others wait for. The others wait for the marker up to
// Timeout.
func SyncRestore(ctx context.Context, c SyncConfig) error {
	if c.RestoreDir == "" {
		return nil
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !c.IsChief {
		return waitMarker(ctx, c, log)
	}
	chosen := ""
	src, err := ReadState(c.RestoreDir, StateName)
	switch {
	case err != nil:
		return err
	case src == nil:
		log.Warn("no checkpoint in restore_dir; starting without it", "restore_dir", c.RestoreDir)
	default:
		chosen = src.GetModelCheckpointPath()
		if c.RestoreCkpt != "" {
			want := join(dirname(chosen), path.Base(c.RestoreCkpt))
			if slices.Contains(src.GetAllModelCheckpointPaths(), want) {
				chosen = want
			} else {
				log.Warn("restore_ckpt is not among restore_dir's checkpoints; using its latest", "restore_ckpt", want, "latest", chosen)
			}
		}
	}
	own, err := ReadState(c.ModelDir, StateName)
	if err != nil {
		return err
	}
	if own != nil {
		log.Info("model_dir has a checkpoint state; restore_dir is not used", "model_dir", c.ModelDir)
		chosen = ""
	}
	if chosen != "" {
		if err := WriteState(c.ModelDir, StateName, &tfcorepb.CheckpointState{ModelCheckpointPath: chosen, AllModelCheckpointPaths: []string{chosen}}); err != nil {
			return err
		}
	}
	// The marker: restore_dir's state without its exempt list, merged with model_dir's own,
	// plus the chosen checkpoint as exempt.
	ms := &trainingpb.MonolithCheckpointState{}
	if chosen != "" {
		rs, err := ReadMonolithState(c.RestoreDir)
		if err != nil {
			return err
		}
		if rs != nil {
			ms = rs
			ms.ExemptModelCheckpointPaths = nil
		}
	}
	mine, err := ReadMonolithState(c.ModelDir)
	if err != nil {
		return err
	}
	if mine != nil {
		mergeMonolith(ms, mine)
	}
	if chosen != "" && !slices.Contains(ms.ExemptModelCheckpointPaths, chosen) {
		ms.ExemptModelCheckpointPaths = append(ms.ExemptModelCheckpointPaths, chosen)
	}
	if err := WriteMonolithState(c.ModelDir, ms); err != nil {
		return err
	}
	log.Info("restore_dir synchronised", "restore_dir", c.RestoreDir, "checkpoint", chosen)
	return nil
}

// mergeMonolith is text_format.Merge of b into a: repeated fields append, set scalars win.
func mergeMonolith(a, b *trainingpb.MonolithCheckpointState) {
	a.ExemptModelCheckpointPaths = append(a.ExemptModelCheckpointPaths, b.ExemptModelCheckpointPaths...)
	if b.LastCheckpointSaveTimestamp != nil {
		a.LastCheckpointSaveTimestamp = b.LastCheckpointSaveTimestamp
	}
	if b.BuiltinHashTableType != nil {
		a.BuiltinHashTableType = b.BuiltinHashTableType
	}
}

// waitMarker polls for {model_dir}/monolith_checkpoint.
func waitMarker(ctx context.Context, c SyncConfig, log *slog.Logger) error {
	timeout, poll := c.Timeout, c.Poll
	if timeout <= 0 {
		timeout = time.Hour
	}
	if poll <= 0 {
		poll = 30 * time.Second
	}
	marker := join(c.ModelDir, MonolithStateName)
	if err := CheckLocal(marker); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(marker); err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("ckptstate: the chief did not write %s within %v (restore_dir %s)", marker, timeout, c.RestoreDir)
		}
		log.Info("waiting for the chief to set up restore_dir", "marker", marker)
		t := time.NewTimer(min(poll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// CheckpointName is the state's name of the checkpoint at step: "model.ckpt-{step}".
func CheckpointName(step int64) string { return "model.ckpt-" + strconv.FormatInt(step, 10) }

// StepOf parses the step of a "…/model.ckpt-{step}" path.
func StepOf(p string) (int64, error) {
	b := path.Base(p)
	s, ok := strings.CutPrefix(b, "model.ckpt-")
	if !ok {
		return 0, fmt.Errorf("ckptstate: %q is not a model.ckpt-{step} checkpoint", p)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("ckptstate: %q is not a model.ckpt-{step} checkpoint", p)
	}
	return n, nil
}

// Record adds the checkpoint at step to {dir}/checkpoint as the newest and keeps the newest
// keep of the listed ones (keep ≤ 0: all) plus the exempt paths of
// {dir}/monolith_checkpoint, which are never dropped. Paths are stored relative to dir, as TF does. It returns the
// dropped paths (absolute); deleting their files is the caller's. A checkpoint saved while
// workers still ran (inconsistent) is listed in monolith_checkpoint's
// inconsistent_model_checkpoint_paths (our extension) until retention drops it.
func Record(dir string, step int64, keep int, inconsistent bool) (dropped []string, err error) {
	s, err := ReadState(dir, StateName)
	if err != nil {
		return nil, err
	}
	if s == nil {
		s = &tfcorepb.CheckpointState{}
	}
	ms, err := ReadMonolithState(dir)
	if err != nil {
		return nil, err
	}
	name := join(dir, CheckpointName(step))
	paths := slices.DeleteFunc(slices.Clone(s.GetAllModelCheckpointPaths()), func(p string) bool { return p == name })
	paths = append(paths, name)
	if keep > 0 {
		exempt := func(p string) bool { return slices.Contains(ms.GetExemptModelCheckpointPaths(), p) }
		var kept []string
		excess := len(paths) - keep // exempt checkpoints do not count against keep
		for _, p := range paths {
			if exempt(p) {
				excess--
			}
		}
		for _, p := range paths {
			if excess > 0 && p != name && !exempt(p) {
				dropped = append(dropped, p)
				excess--
				continue
			}
			kept = append(kept, p)
		}
		paths = kept
	}
	rel := func(p string) string {
		if r, ok := strings.CutPrefix(p, dir+string(filepath.Separator)); ok && !IsHDFS(p) {
			return r
		}
		return p
	}
	out := &tfcorepb.CheckpointState{ModelCheckpointPath: rel(name)}
	for _, p := range paths {
		out.AllModelCheckpointPaths = append(out.AllModelCheckpointPaths, rel(p))
	}
	// The inconsistent list: this checkpoint when it is one, less what is no longer listed.
	old := ms.GetInconsistentModelCheckpointPaths()
	marks := slices.DeleteFunc(slices.Clone(old), func(p string) bool {
		return p == rel(name) || !slices.Contains(out.AllModelCheckpointPaths, p)
	})
	if inconsistent {
		marks = append(marks, rel(name))
	}
	if !slices.Equal(marks, old) {
		if ms == nil {
			ms = &trainingpb.MonolithCheckpointState{}
		}
		ms.InconsistentModelCheckpointPaths = marks
		if err := WriteMonolithState(dir, ms); err != nil {
			return nil, err
		}
	}
	return dropped, WriteState(dir, StateName, out)
}

// maxSlot is the slot clamp of the checkpoint info (Monolith's _MAX_SLOT − 1).
const maxSlot = 102399

// FormatCkptInfo prints a CkptInfo with the non-zero slot counts as Python's str() of the
// message does (map entries in key order).
func FormatCkptInfo(slotCounts map[int32]int64) []byte {
	clamped := map[int32]int64{}
	for s, n := range slotCounts {
		if n != 0 {
			clamped[min(s, maxSlot)] += n
		}
	}
	keys := make([]int32, 0, len(clamped))
	for k := range clamped {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "slot_counts {\n  key: %d\n  value: %d\n}\n", k, clamped[k])
	}
	return []byte(b.String())
}

// WriteCkptInfo writes {model_dir}/ckpt.info-{step}.
func WriteCkptInfo(modelDir string, step int64, slotCounts map[int32]int64) error {
	return writeFile(join(modelDir, "ckpt.info-"+strconv.FormatInt(step, 10)), FormatCkptInfo(slotCounts))
}
