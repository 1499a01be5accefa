package ckptstate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/tfcorepb"
	"github.com/monolith-go/monolith/schemas/trainingpb"
)

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseState: the fields of a state Python wrote, the clamp of slot counts, and parse
// errors naming the file. (TestPythonGoldens checks the printed bytes.)
func TestParseState(t *testing.T) {
	s, err := ParseState("python_checkpoint.golden", readGolden(t, "python_checkpoint.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if s.GetModelCheckpointPath() != "/tmp/m/model.ckpt-61" || len(s.GetAllModelCheckpointPaths()) != 3 ||
		s.GetAllModelCheckpointTimestamps()[2] != 1650000200 || s.GetLastPreservedTimestamp() != 1649999999.25 {
		t.Fatalf("parsed %v", s)
	}
	ms, err := ParseMonolithState("python_monolith_checkpoint.golden", readGolden(t, "python_monolith_checkpoint.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ms.GetExemptModelCheckpointPaths(), []string{"/r/model.ckpt-30", "model.ckpt-0"}) ||
		ms.GetLastCheckpointSaveTimestamp() != 1650000000 || ms.GetBuiltinHashTableType() != trainingpb.MonolithCheckpointState_MULTI_CUCKOO_HASH_MAP {
		t.Fatalf("parsed %v", ms)
	}
	if got := string(FormatCkptInfo(map[int32]int64{200000: 3, 102399: 2})); got != "slot_counts {\n  key: 102399\n  value: 5\n}\n" {
		t.Errorf("slots above 102399 are not clamped into it: %q", got)
	}
	for _, bad := range []string{`model_checkpoint_path: 3`, `nope: "x"`, `model_checkpoint_path: "unterminated`} {
		if _, err := ParseState("bad", []byte(bad)); err == nil || !strings.Contains(err.Error(), "bad") {
			t.Errorf("ParseState(%q) = %v, want an error naming the file", bad, err)
		}
	}
}

// writeRestoreDir writes a restore_dir whose state is model.ckpt-61 with [61, 30, 0], as in
// runner_utils_test.py.
func writeRestoreDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := &tfcorepb.CheckpointState{ModelCheckpointPath: "model.ckpt-61", AllModelCheckpointPaths: []string{"model.ckpt-61", "model.ckpt-30", "model.ckpt-0"}}
	if err := WriteState(dir, "", s); err != nil {
		t.Fatal(err)
	}
	if err := WriteMonolithState(dir, &trainingpb.MonolithCheckpointState{ExemptModelCheckpointPaths: []string{"old"}, LastCheckpointSaveTimestamp: proto.Int64(5)}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRestoreCkptRunner ports runner_utils_test.py: the chief points model_dir at
// restore_dir's model.ckpt-30, writes monolith_checkpoint (exempt list cleared, then the
// chosen path), training applies restore_ckpt once (marker), and a later non-chief passes
// without waiting.
func TestRestoreCkptRunner(t *testing.T) {
	restore := writeRestoreDir(t)
	model := filepath.Join(t.TempDir(), "model")
	ctx := context.Background()
	if err := SyncRestore(ctx, SyncConfig{RestoreDir: restore, RestoreCkpt: "model.ckpt-30", ModelDir: model, IsChief: IsChief(false, "worker", 0)}); err != nil {
		t.Fatal(err)
	}
	s, err := GetState(model, "", Options{Mode: ModeTrain, RestoreCkpt: "model.ckpt-30"})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(restore, "model.ckpt-30")
	if s.GetModelCheckpointPath() != want || filepath.Base(s.GetModelCheckpointPath()) != "model.ckpt-30" {
		t.Errorf("latest %q, want %q", s.GetModelCheckpointPath(), want)
	}
	ms, err := ReadMonolithState(model)
	if err != nil || ms == nil {
		t.Fatalf("monolith_checkpoint: %v, %v", ms, err)
	}
	if !slices.Equal(ms.GetExemptModelCheckpointPaths(), []string{want}) || ms.GetLastCheckpointSaveTimestamp() != 5 {
		t.Errorf("monolith_checkpoint %v: want exempt [%s] and restore_dir's timestamp", ms, want)
	}
	if b, err := os.ReadFile(filepath.Join(model, RestoreCkptName)); err != nil || string(b) != want {
		t.Errorf("marker %q, %v", b, err)
	}
	if err := SyncRestore(ctx, SyncConfig{RestoreDir: restore, ModelDir: model, IsChief: IsChief(false, "ps", 0), Timeout: time.Millisecond}); err != nil {
		t.Errorf("non-chief after the chief: %v", err)
	}
}

// TestGetStateOverride: the restore_ckpt rules by mode, marker and listing.
func TestGetStateOverride(t *testing.T) {
	for _, tc := range []struct {
		name, mode, ckpt string
		marker           bool
		want             string // basename of the latest
		wantMarker       bool
	}{
		{"train switches once", ModeTrain, "model.ckpt-30", false, "model.ckpt-30", true},
		{"train after the marker keeps the latest", ModeTrain, "model.ckpt-30", true, "model.ckpt-61", true},
		{"eval always uses it, no marker", ModeEval, "model.ckpt-30", true, "model.ckpt-30", true},
		{"infer without marker", ModeInfer, "model.ckpt-0", false, "model.ckpt-0", false},
		{"unknown checkpoint: latest kept, no marker (departure)", ModeTrain, "model.ckpt-99", false, "model.ckpt-61", false},
		{"the latest itself: marker written", ModeTrain, "x/model.ckpt-61", false, "model.ckpt-61", true},
		{"no restore_ckpt", ModeTrain, "", false, "model.ckpt-61", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeRestoreDir(t)
			if tc.marker {
				if err := os.WriteFile(filepath.Join(dir, RestoreCkptName), []byte("earlier"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s, err := GetState(dir, "", Options{Mode: tc.mode, RestoreCkpt: tc.ckpt})
			if err != nil {
				t.Fatal(err)
			}
			if got := filepath.Base(s.GetModelCheckpointPath()); got != tc.want {
				t.Errorf("latest %s, want %s", got, tc.want)
			}
			_, err = os.Stat(filepath.Join(dir, RestoreCkptName))
			if (err == nil) != tc.wantMarker {
				t.Errorf("marker exists %v, want %v", err == nil, tc.wantMarker)
			}
			// What training decided is persisted in the state file.
			again, _ := ReadState(dir, "")
			if tc.mode == ModeTrain && filepath.Base(again.GetModelCheckpointPath()) != tc.want {
				t.Errorf("state file says %s, want %s", again.GetModelCheckpointPath(), tc.want)
			}
		})
	}
	if s, err := GetState(t.TempDir(), "", Options{RestoreCkpt: "model.ckpt-1"}); s != nil || err != nil {
		t.Errorf("no state file: %v, %v", s, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateName), []byte("garbage {"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := GetState(dir, "", Options{Retries: 2}); err == nil || !strings.Contains(err.Error(), "read ckpt error!") {
		t.Errorf("unreadable state: %v", err)
	}
}

// TestSyncRestoreC1: the chief writes the marker also when it has nothing to restore or
// model_dir has a state of its own (C1); a non-chief times out with an error naming the
// marker; hdfs restore dirs are ErrHDFSUnavailable (C4).
func TestSyncRestoreC1(t *testing.T) {
	ctx := context.Background()
	// Nothing in restore_dir.
	model := t.TempDir()
	if err := SyncRestore(ctx, SyncConfig{RestoreDir: t.TempDir(), ModelDir: model, IsChief: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(model, MonolithStateName)); err != nil {
		t.Errorf("no marker after an empty restore_dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(model, StateName)); !os.IsNotExist(err) {
		t.Errorf("a state was written for an empty restore_dir: %v", err)
	}
	// model_dir has its own state: it is kept.
	model = t.TempDir()
	own := &tfcorepb.CheckpointState{ModelCheckpointPath: "model.ckpt-7", AllModelCheckpointPaths: []string{"model.ckpt-7"}}
	if err := WriteState(model, "", own); err != nil {
		t.Fatal(err)
	}
	if err := SyncRestore(ctx, SyncConfig{RestoreDir: writeRestoreDir(t), ModelDir: model, IsChief: true}); err != nil {
		t.Fatal(err)
	}
	if s, _ := ReadState(model, ""); filepath.Base(s.GetModelCheckpointPath()) != "model.ckpt-7" {
		t.Errorf("own state replaced: %v", s)
	}
	if ms, _ := ReadMonolithState(model); ms == nil || len(ms.GetExemptModelCheckpointPaths()) != 0 {
		t.Errorf("marker %v: want one with nothing exempt", ms)
	}
	// A non-chief without a chief.
	start := time.Now()
	err := SyncRestore(ctx, SyncConfig{RestoreDir: "r", ModelDir: t.TempDir(), Timeout: 60 * time.Millisecond, Poll: 10 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), MonolithStateName) || time.Since(start) > 5*time.Second {
		t.Errorf("non-chief without a chief: %v after %v", err, time.Since(start))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := SyncRestore(cctx, SyncConfig{RestoreDir: "r", ModelDir: t.TempDir(), Poll: time.Hour}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled non-chief: %v", err)
	}
	// HDFS.
	if !IsAbs("hdfs:/a/b") || IsAbs("a/b") || !IsAbs("/a") {
		t.Error("IsAbs")
	}
	if err := SyncRestore(ctx, SyncConfig{RestoreDir: "hdfs://nn/x", ModelDir: t.TempDir(), IsChief: true}); !errors.Is(err, ErrHDFSUnavailable) {
		t.Errorf("hdfs restore_dir: %v", err)
	}
	// An hdfs path inside a state stays as it is (absolute).
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateName), []byte(`model_checkpoint_path: "hdfs:/r/model.ckpt-3"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadState(dir, ""); err != nil || s.GetModelCheckpointPath() != "hdfs:/r/model.ckpt-3" {
		t.Errorf("hdfs path in a state: %v, %v", s, err)
	}
}

// TestRecordInconsistent: a checkpoint saved while workers ran is listed in
// monolith_checkpoint until a consistent save of the same step replaces it or retention
// drops it; the exempt paths stay.
func TestRecordInconsistent(t *testing.T) {
	dir := t.TempDir()
	exempt := []string{filepath.Join(dir, "model.ckpt-1")}
	if err := WriteMonolithState(dir, &trainingpb.MonolithCheckpointState{ExemptModelCheckpointPaths: exempt}); err != nil {
		t.Fatal(err)
	}
	marks := func() []string {
		ms, err := ReadMonolithState(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ms.GetExemptModelCheckpointPaths(), exempt) {
			t.Fatalf("exempt paths became %v", ms.GetExemptModelCheckpointPaths())
		}
		return ms.GetInconsistentModelCheckpointPaths()
	}
	for _, tc := range []struct {
		step         int64
		inconsistent bool
		want         []string
	}{
		{2, true, []string{"model.ckpt-2"}},
		{3, false, []string{"model.ckpt-2"}},
		{4, true, []string{"model.ckpt-4"}}, // keep 2 (and the exempt 1): model.ckpt-2 is dropped
		{4, false, nil},                     // saved again, consistently
		{5, true, []string{"model.ckpt-5"}},
	} {
		if _, err := Record(dir, tc.step, 2, tc.inconsistent); err != nil {
			t.Fatal(err)
		}
		if got := marks(); !slices.Equal(got, tc.want) {
			t.Errorf("after step %d (inconsistent %v): %v, want %v", tc.step, tc.inconsistent, got, tc.want)
		}
	}
}

// TestRecord: retention keeps the newest, never the exempt ones, stores relative paths.
func TestRecord(t *testing.T) {
	dir := t.TempDir()
	if err := WriteMonolithState(dir, &trainingpb.MonolithCheckpointState{ExemptModelCheckpointPaths: []string{filepath.Join(dir, "model.ckpt-1")}}); err != nil {
		t.Fatal(err)
	}
	var dropped []string
	for _, step := range []int64{1, 2, 3, 4, 4} {
		d, err := Record(dir, step, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		dropped = append(dropped, d...)
	}
	b, _ := os.ReadFile(filepath.Join(dir, StateName))
	want := "model_checkpoint_path: \"model.ckpt-4\"\nall_model_checkpoint_paths: \"model.ckpt-1\"\nall_model_checkpoint_paths: \"model.ckpt-3\"\nall_model_checkpoint_paths: \"model.ckpt-4\"\n"
	if string(b) != want {
		t.Errorf("state:\n%s\nwant\n%s", b, want)
	}
	if !slices.Equal(dropped, []string{filepath.Join(dir, "model.ckpt-2")}) {
		t.Errorf("dropped %v", dropped)
	}
	if n, err := StepOf("x/model.ckpt-42"); n != 42 || err != nil {
		t.Errorf("StepOf = %d, %v", n, err)
	}
	for _, bad := range []string{"ckpt-1", "model.ckpt-", "model.ckpt--3", "model.ckpt-x"} {
		if _, err := StepOf(bad); err == nil {
			t.Errorf("StepOf(%q) succeeded", bad)
		}
	}
	if err := WriteCkptInfo(dir, 4, map[int32]int64{3: 2}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ckpt.info-4")); string(b) != "slot_counts {\n  key: 3\n  value: 2\n}\n" {
		t.Errorf("ckpt.info-4 = %q", b)
	}
}

func FuzzParseState(f *testing.F) {
	f.Add([]byte("model_checkpoint_path: \"a\"\nall_model_checkpoint_paths: \"a\"\n"))
	f.Add([]byte("all_model_checkpoint_timestamps: 1.5\nlast_preserved_timestamp: 2"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseState("fuzz", b)
		if err != nil {
			return
		}
		// What we print parses back to the same message.
		s2, err := ParseState("again", FormatState(s))
		if err != nil || !proto.Equal(s, s2) {
			t.Fatalf("round trip of %q: %v, %v vs %v", b, err, s, s2)
		}
	})
}

func FuzzParseMonolithState(f *testing.F) {
	f.Add([]byte("exempt_model_checkpoint_paths: \"a\"\nlast_checkpoint_save_timestamp: 3\nbuiltin_hash_table_type: MULTI_CUCKOO_HASH_MAP\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseMonolithState("fuzz", b)
		if err != nil {
			return
		}
		s2, err := ParseMonolithState("again", FormatMonolithState(s))
		if err != nil || !proto.Equal(s, s2) {
			t.Fatalf("round trip of %q: %v, %v vs %v", b, err, s, s2)
		}
	})
}

// TestPythonGoldens: files printed by Python's protobuf text_format (python3-protobuf,
// written once by a helper session) parse and print back byte for byte.
func TestPythonGoldens(t *testing.T) {
	for _, name := range []string{"python_checkpoint.golden", "python_checkpoint_escapes.golden", "python_checkpoint_relative.golden"} {
		b := readGolden(t, name)
		s, err := ParseState(name, b)
		if err != nil {
			t.Fatal(err)
		}
		if got := FormatState(s); string(got) != string(b) {
			t.Errorf("%s:\n%s\nwant\n%s", name, got, b)
		}
	}
	b := readGolden(t, "python_monolith_checkpoint.golden")
	ms, err := ParseMonolithState("python_monolith_checkpoint.golden", b)
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatMonolithState(ms); string(got) != string(b) {
		t.Errorf("monolith_checkpoint:\n%s\nwant\n%s", got, b)
	}
	want := readGolden(t, "python_ckpt_info.golden")
	if got := FormatCkptInfo(map[int32]int64{17: 1000000000000, 0: 1, 102399: 7, 5: 3, 9: 0}); string(got) != string(want) {
		t.Errorf("ckpt.info:\n%s\nwant\n%s", got, want)
	}
}
