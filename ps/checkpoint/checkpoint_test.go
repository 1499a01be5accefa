package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/ps/filter"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

const userCfg = `entry_config {
  segments { dim_size: 1 init_config { zeros {} } opt_config { ftrl { initial_accumulator_value: 1e-6 beta: 1 } } }
  segments { dim_size: 4 init_config { random_uniform {} } opt_config { adagrad { initial_accumulator_value: 1 } } }
}`

const itemCfg = `entry_config { segments { dim_size: 2 init_config { ones {} } opt_config { adam {} } } }`

// build makes the two tables of a shard: "user" with a frequency filter (threshold 1) and
// "item" without.
func build(t testing.TB) []*table.Table {
	t.Helper()
	mk := func(name, text string, threshold uint32) *table.Table {
		c := &hashtablepb.EmbeddingHashTableConfig{}
		if err := prototext.Unmarshal([]byte(text), c); err != nil {
			t.Fatal(err)
		}
		f, err := filter.New(&pspb.FilterConfig{Capacity: 4096}, &hashtablepb.SlotOccurrenceThresholdConfig{DefaultOccurrenceThreshold: proto.Uint32(threshold)})
		if err != nil {
			t.Fatal(err)
		}
		if threshold == 0 {
			f = nil
		}
		tb, err := table.New(table.Options{Name: name, Config: c, Filter: f, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	return []*table.Table{mk("user", userCfg, 1), mk("item/v2", itemCfg, 0)}
}

// train applies round r of a deterministic workload.
func train(t testing.TB, tables []*table.Table, r, n int) {
	t.Helper()
	for _, tb := range tables {
		fids := make([]int64, n)
		grads := make([]float32, n*tb.Dim())
		for i := range fids {
			fids[i] = int64((i*7919 + r*31) % (n / 2))
		}
		for i := range grads {
			grads[i] = float32(math.Sin(float64(i + r)))
		}
		if _, err := tb.Apply(fids, grads, nil, int64(r), int64(1000+r)); err != nil {
			t.Fatal(err)
		}
	}
}

// values looks up fids 0..n-1 of every table.
func values(t testing.TB, tables []*table.Table, n int) [][]float32 {
	t.Helper()
	fids := make([]int64, n)
	for i := range fids {
		fids[i] = int64(i)
	}
	var out [][]float32
	for _, tb := range tables {
		v := make([]float32, n*tb.Dim())
		if _, err := tb.Lookup(fids, v, nil); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func sameValues(t *testing.T, what string, a, b [][]float32) {
	t.Helper()
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				t.Fatalf("%s: table %d value %d: %v vs %v", what, i, j, a[i][j], b[i][j])
			}
		}
	}
}

func TestSaveRestore(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	src := build(t)
	train(t, src, 1, 2000)
	train(t, src, 2, 2000)
	res, err := Save(ctx, dir, Meta{Step: 2, Shard: 1, NumShards: 3}, src)
	if err != nil {
		t.Fatal(err)
	}
	if want := src[0].Size() + src[1].Size(); res.Entries != want {
		t.Errorf("saved %d entries, tables hold %d", res.Entries, want)
	}
	latest, err := Latest(dir)
	if err != nil || latest != res.Path || filepath.Base(latest) != "ckpt-00000001-step-2" {
		t.Fatalf("Latest = %q, %v; saved %q", latest, err, res.Path)
	}
	dst := build(t)
	m, err := Restore(ctx, latest, dst)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetStep() != 2 || m.GetShard() != 1 || m.GetNumShards() != 3 || len(m.GetTables()) != 2 {
		t.Errorf("manifest %v", m)
	}
	sameValues(t, "restored", values(t, src, 1000), values(t, dst, 1000))
	// Filter state and optimizer state came back too: training on continues identically,
	// including which new fids the filter admits.
	train(t, src, 3, 4000)
	train(t, dst, 3, 4000)
	sameValues(t, "after another round", values(t, src, 2000), values(t, dst, 2000))
	for i := range src {
		if src[i].Size() != dst[i].Size() || src[i].MaxUpdateTime() != dst[i].MaxUpdateTime() {
			t.Errorf("table %s: size %d/%d, max time %d/%d", src[i].Name(), src[i].Size(), dst[i].Size(), src[i].MaxUpdateTime(), dst[i].MaxUpdateTime())
		}
	}
}

func TestLatestAndPrune(t *testing.T) {
	dir := t.TempDir()
	if _, err := Latest(dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Latest of an empty dir: %v", err)
	}
	tables := build(t)
	for step := int64(1); step <= 5; step++ {
		train(t, tables, int(step), 200)
		if _, err := Save(context.Background(), dir, Meta{Step: step}, tables); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, tmpPrefix+"9-leftover"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Prune(dir, 2); err != nil {
		t.Fatal(err)
	}
	all, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range all {
		names = append(names, filepath.Base(p))
	}
	if strings.Join(names, ",") != "ckpt-00000004-step-4,ckpt-00000005-step-5" {
		t.Errorf("after Prune(2): %v", names)
	}
	if _, err := os.Stat(filepath.Join(dir, tmpPrefix+"9-leftover")); !os.IsNotExist(err) {
		t.Errorf("leftover temporary folder survived Prune: %v", err)
	}
	// A lost LATEST: the newest complete checkpoint is found by scanning, never "none".
	rm(t, filepath.Join(dir, LatestName))
	if got, err := Latest(dir); err != nil || filepath.Base(got) != "ckpt-00000005-step-5" {
		t.Errorf("Latest without LATEST: %q, %v; want the newest complete checkpoint", got, err)
	}
	rm(t, filepath.Join(dir, "ckpt-00000005-step-5", ManifestName)) // incomplete: skipped
	if got, err := Latest(dir); err != nil || filepath.Base(got) != "ckpt-00000004-step-4" {
		t.Errorf("Latest without LATEST, newest incomplete: %q, %v", got, err)
	}
}

// TestRestoreRejectsDamage damages the newest checkpoint in every way a crash or a bad
// disk can and expects a loud error that names the file, while the previous checkpoint
// still restores.
func TestRestoreRejectsDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		want   string
	}{
		{"missing manifest", func(t *testing.T, p string) { rm(t, filepath.Join(p, ManifestName)) }, ManifestName},
		{"missing entries file", func(t *testing.T, p string) { rm(t, glob(t, p, "*user.entries")) }, "user.entries"},
		{"truncated entries", func(t *testing.T, p string) { truncate(t, glob(t, p, "*user.entries"), 0.5) }, "user.entries"},
		{"truncated at a record boundary", func(t *testing.T, p string) { truncate(t, glob(t, p, "*item_v2.entries"), 0) }, "item_v2.entries"},
		{"flipped byte", func(t *testing.T, p string) { flip(t, glob(t, p, "*user.entries")) }, "user.entries"},
		{"flipped filter byte", func(t *testing.T, p string) { flip(t, glob(t, p, "*user.filter")) }, "user.filter"},
		{"bad manifest", func(t *testing.T, p string) { writeText(t, filepath.Join(p, ManifestName), "{") }, ManifestName},
		{"file outside", func(t *testing.T, p string) {
			b, _ := os.ReadFile(filepath.Join(p, ManifestName))
			writeText(t, filepath.Join(p, ManifestName), strings.Replace(string(b), `"t000-user.entries"`, `"../x"`, 1))
		}, "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			src := build(t)
			train(t, src, 1, 1000)
			first, err := Save(ctx, dir, Meta{Step: 1}, src)
			if err != nil {
				t.Fatal(err)
			}
			want := values(t, src, 500)
			train(t, src, 2, 1000)
			res, err := Save(ctx, dir, Meta{Step: 2}, src)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, res.Path)
			_, err = Restore(ctx, res.Path, build(t))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore of a damaged checkpoint = %v, want ErrCorrupt naming %q", err, tc.want)
			}
			t.Logf("error: %v", err)
			prev := build(t)
			if _, err := Restore(ctx, first.Path, prev); err != nil {
				t.Fatalf("previous checkpoint: %v", err)
			}
			sameValues(t, "previous checkpoint", want, values(t, prev, 500))
		})
	}
}

func TestRestoreRejectsConfigMismatch(t *testing.T) {
	dir := t.TempDir()
	src := build(t)
	train(t, src, 1, 100)
	res, err := Save(context.Background(), dir, Meta{Step: 1}, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(context.Background(), res.Path, build(t)[:1]); err == nil || !strings.Contains(err.Error(), "item/v2") {
		t.Errorf("restore without a table of the checkpoint: %v", err)
	}
	if _, err := Restore(context.Background(), res.Path, append(build(t), build(t)[0])); err == nil {
		t.Errorf("restore with a duplicate table name succeeded")
	}
	// A table added to the configuration since the save starts empty.
	extra := build(t)[1]
	c := proto.Clone(extra.Config()).(*hashtablepb.EmbeddingHashTableConfig)
	added, err := table.New(table.Options{Name: "added", Config: c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(context.Background(), res.Path, append(build(t), added)); err != nil || added.Size() != 0 {
		t.Errorf("restore with an added table: %v (size %d)", err, added.Size())
	}
}

// TestRestoreChecksConfigFirst: a table of the wrong dim is found before any table is
// read, so no table is filled.
func TestRestoreChecksConfigFirst(t *testing.T) {
	src := build(t)
	train(t, src, 1, 100)
	res, err := Save(context.Background(), t.TempDir(), Meta{Step: 1}, src)
	if err != nil {
		t.Fatal(err)
	}
	c := &hashtablepb.EmbeddingHashTableConfig{}
	if err := prototext.Unmarshal([]byte(userCfg), c); err != nil {
		t.Fatal(err)
	}
	wrongDim, err := table.New(table.Options{Name: "item/v2", Config: c})
	if err != nil {
		t.Fatal(err)
	}
	dst := []*table.Table{build(t)[0], wrongDim}
	if _, err := Restore(context.Background(), res.Path, dst); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "dim") {
		t.Fatalf("restore into a table of another dim: %v", err)
	}
	if dst[0].Size() != 0 {
		t.Errorf("table %q was filled (%d entries) before the dim mismatch was found", dst[0].Name(), dst[0].Size())
	}
}

// TestRestoreShard: RestoreShard restores the checkpoint of its shard, and refuses one of
// another shard or shard count before reading any table.
func TestRestoreShard(t *testing.T) {
	ctx := context.Background()
	src := build(t)
	train(t, src, 1, 1000)
	res, err := Save(ctx, t.TempDir(), Meta{Step: 4, Shard: 1, NumShards: 3}, src)
	if err != nil {
		t.Fatal(err)
	}
	dst := build(t)
	m, err := RestoreShard(ctx, res.Path, dst, 1, 3)
	if err != nil || m.GetStep() != 4 || m.GetShard() != 1 || m.GetNumShards() != 3 {
		t.Fatalf("RestoreShard of its own shard = %v, %v", m, err)
	}
	sameValues(t, "restored", values(t, src, 500), values(t, dst, 500))

	flip(t, glob(t, res.Path, "*user.entries")) // never read: the shard check comes first
	for _, want := range [][2]int{{0, 3}, {1, 2}, {1, 0}} {
		dst := build(t)
		m, err := RestoreShard(ctx, res.Path, dst, want[0], want[1])
		if !errors.Is(err, ErrWrongShard) || errors.Is(err, ErrCorrupt) || m != nil ||
			!strings.Contains(err.Error(), fmt.Sprintf("is shard 1 of 3, want shard %d of %d", want[0], want[1])) {
			t.Errorf("RestoreShard(%d of %d) = %v, want ErrWrongShard", want[0], want[1], err)
		}
		for _, tb := range dst {
			if tb.Size() != 0 {
				t.Errorf("RestoreShard(%d of %d) filled table %q", want[0], want[1], tb.Name())
			}
		}
	}
	if _, err := RestoreShard(ctx, res.Path, build(t), 1, 3); !errors.Is(err, ErrCorrupt) {
		t.Errorf("RestoreShard of its own damaged shard = %v, want ErrCorrupt", err)
	}
}

// TestNames: IsCheckpoint, SafeName, and ReadManifest's check of the file names.
func TestNames(t *testing.T) {
	dir := t.TempDir()
	if IsCheckpoint(dir) {
		t.Error("an empty folder is a checkpoint")
	}
	res, err := Save(context.Background(), dir, Meta{Step: 1}, build(t))
	if err != nil {
		t.Fatal(err)
	}
	if !IsCheckpoint(res.Path) || IsCheckpoint(dir) {
		t.Errorf("IsCheckpoint(checkpoint) = %v, IsCheckpoint(root) = %v", IsCheckpoint(res.Path), IsCheckpoint(dir))
	}
	for in, want := range map[string]string{"user": "user", "item/v2": "item_v2", "a b//c": "a_b_c", "é.x-1_": "_.x-1_", "": ""} {
		if got := SafeName(in); got != want {
			t.Errorf("SafeName(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(res.Path, "t001-item_v2.entries")); err != nil {
		t.Errorf("entries file of item/v2: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(res.Path, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`""`, `".hidden"`, `"a/b"`} {
		writeText(t, filepath.Join(res.Path, ManifestName), strings.Replace(string(b), `"t000-user.entries"`, bad, 1))
		if _, err := ReadManifest(res.Path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "outside the checkpoint") {
			t.Errorf("manifest naming file %s: %v", bad, err)
		}
	}
}

// TestSaveDuringTraining saves while writers and readers run (under -race) and checks
// that lookups are served while the save is in progress.
func TestSaveDuringTraining(t *testing.T) {
	dir := t.TempDir()
	tables := build(t)
	train(t, tables, 1, 20000)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var lookups [2]int
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; ctx.Err() == nil; r++ {
				if w == 0 {
					train(t, tables, 10+r, 2000)
				} else {
					values(t, tables, 100)
				}
				lookups[w]++
			}
		}()
	}
	var last Result
	for step := int64(1); step <= 3; step++ {
		res, err := Save(context.Background(), dir, Meta{Step: step}, tables)
		if err != nil {
			t.Error(err)
		}
		last = res
	}
	cancel()
	wg.Wait()
	if lookups[1] == 0 {
		t.Errorf("no lookup completed during three saves")
	}
	if _, err := Restore(context.Background(), last.Path, build(t)); err != nil {
		t.Fatal(err)
	}
}

// TestCrashDuringSave kills a process with SIGKILL in the middle of a save: LATEST still
// names a complete checkpoint, which restores exactly, and Prune clears the debris.
func TestCrashDuringSave(t *testing.T) {
	if dir := os.Getenv("CKPT_CRASH_DIR"); dir != "" {
		crashChild(t, dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringSave$")
	cmd.Env = append(os.Environ(), "CKPT_CRASH_DIR="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait for the second save's temporary folder, then kill the writer.
	deadline := time.After(60 * time.Second)
	for killed := false; !killed; {
		select {
		case err := <-done:
			t.Fatalf("child exited before the crash: %v", err)
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatal("the child never started its second save")
		case <-time.After(time.Millisecond):
			if m, _ := filepath.Glob(filepath.Join(dir, tmpPrefix+"2-*", "*.entries")); len(m) > 0 {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
	}
	<-done
	if m, _ := filepath.Glob(filepath.Join(dir, tmpPrefix+"2-*")); len(m) == 0 {
		t.Fatal("the kill came after the save finished; nothing was tested")
	}
	// LATEST names a complete checkpoint: step 1, or step 2 if one of the child's earlier
	// saves of step 2 finished before the kill. Either restores to exactly its state.
	latest, err := Latest(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := build(t)
	train(t, want, 1, crashRows)
	m, err := ReadManifest(latest)
	if err != nil {
		t.Fatal(err)
	}
	switch m.GetStep() {
	case 1:
	case 2:
		train(t, want, 2, crashRows)
	default:
		t.Fatalf("Latest after the crash = %q (step %d)", latest, m.GetStep())
	}
	got := build(t)
	if _, err := Restore(context.Background(), latest, got); err != nil {
		t.Fatal(err)
	}
	sameValues(t, filepath.Base(latest)+" after the crash", values(t, want, 1000), values(t, got, 1000))
	if err := Prune(dir, 3); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, tmpPrefix+"*")); len(m) != 0 {
		t.Errorf("debris after Prune: %v", m)
	}
}

const crashRows = 100000

func crashChild(t *testing.T, dir string) {
	tables := build(t)
	train(t, tables, 1, crashRows)
	if _, err := Save(context.Background(), dir, Meta{Step: 1}, tables); err != nil {
		t.Fatal(err)
	}
	train(t, tables, 2, crashRows)
	for { // the parent kills us during one of these saves
		if _, err := Save(context.Background(), dir, Meta{Step: 2}, tables); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(os.Stderr, "child: save 2 finished before the kill; saving again")
	}
}

func rm(t *testing.T, p string) {
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

func glob(t *testing.T, dir, pat string) string {
	m, err := filepath.Glob(filepath.Join(dir, pat))
	if err != nil || len(m) != 1 {
		t.Fatalf("glob %s in %s: %v %v", pat, dir, m, err)
	}
	return m[0]
}

func writeText(t *testing.T, p, s string) {
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// truncate cuts a file to frac of its size, or, for frac 0, after its first record.
func truncate(t *testing.T, p string, frac float64) {
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(float64(st.Size()) * frac)
	if frac == 0 {
		b, _ := os.ReadFile(p)
		n = 12 + int64(binary.LittleEndian.Uint64(b[:8])) + 4 // the first record: header, payload, footer
	}
	if err := os.Truncate(p, n); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, p string) {
	b, err := os.ReadFile(p)
	if err != nil || len(b) == 0 {
		t.Fatalf("%s: %v (%d bytes)", p, err, len(b))
	}
	b[len(b)/2] ^= 0x40
	writeText(t, p, string(b))
}

// TestSameStepKeepsBoth pins that a save never replaces an earlier checkpoint, even at the
// same global step: a crash during the second save must leave the first intact.
func TestSameStepKeepsBoth(t *testing.T) {
	dir := t.TempDir()
	tables := build(t)
	train(t, tables, 1, 200)
	a, err := Save(context.Background(), dir, Meta{Step: 0}, tables)
	if err != nil {
		t.Fatal(err)
	}
	train(t, tables, 2, 200)
	b, err := Save(context.Background(), dir, Meta{Step: 0}, tables)
	if err != nil {
		t.Fatal(err)
	}
	all, err := List(dir)
	if err != nil || len(all) != 2 || all[0] != a.Path || all[1] != b.Path {
		t.Fatalf("List = %v, %v; saved %s then %s", all, err, a.Path, b.Path)
	}
	if latest, _ := Latest(dir); latest != b.Path {
		t.Errorf("Latest = %s, want %s", latest, b.Path)
	}
}
