package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/ps/export"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// exportTables builds two trained tables ("user", "item/v2") holding the fids of fids
// that keep selects, with NaNs and fids at and above 2^63.
func exportTables(t *testing.T, keep func(uint64) bool) []*table.Table {
	t.Helper()
	mk := func(name, cfg string) *table.Table {
		c := &hashtablepb.EmbeddingHashTableConfig{}
		if err := prototext.Unmarshal([]byte(cfg), c); err != nil {
			t.Fatal(err)
		}
		tb, err := table.New(table.Options{Name: name, Config: c, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		var fids []int64
		for i := range uint64(100) {
			if f := i*0x9e3779b97f4a7c15 + 1; keep(f) {
				fids = append(fids, int64(f))
			}
		}
		if keep(math.MaxUint64) {
			fids = append(fids, -1)
		}
		rows := make([]float32, len(fids)*tb.Dim())
		for i := range rows {
			rows[i] = float32(i) / 8
		}
		rows[0] = float32(math.NaN())
		if _, err := tb.Assign(fids, rows, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Apply(fids, rows, nil, 1, 200); err != nil {
			t.Fatal(err)
		}
		return tb
	}
	return []*table.Table{
		mk("user", `entry_config { segments { dim_size: 3 init_config { zeros {} } opt_config { adagrad {} } } }`),
		mk("item/v2", `entry_config {
		  segments { dim_size: 1 init_config { zeros {} } opt_config { ftrl {} } }
		  segments { dim_size: 2 init_config { zeros {} } opt_config { adam {} } } }`),
	}
}

func exportCheckpoint(t *testing.T, dir string, meta checkpoint.Meta, keep func(uint64) bool) []*table.Table {
	t.Helper()
	tables := exportTables(t, keep)
	if _, err := checkpoint.Save(context.Background(), dir, meta, tables); err != nil {
		t.Fatal(err)
	}
	return tables
}

var tableLine = regexp.MustCompile(`(?m)^table "([^"]+)": (\d+) entries, dim (\d+) -> (\S+) \((\d+) bytes\), (verified|not verified)$`)

// TestExportCommand exports a checkpoint root in every format and checks the summary
// lines and the files.
func TestExportCommand(t *testing.T) {
	root := t.TempDir()
	tables := exportCheckpoint(t, root, checkpoint.Meta{Step: 5}, func(uint64) bool { return true })
	for _, to := range []string{"entrydump", "avro", "parquet"} {
		t.Run(to, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "export")
			var stdout, stderr bytes.Buffer
			if err := runExport(context.Background(), []string{"--checkpoint", root, "--to", to, "--output", out}, &stdout, &stderr); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			t.Logf("\n%s", stdout.String())
			if !strings.Contains(stdout.String(), "(step 5): 2 table(s)") {
				t.Errorf("no checkpoint line in %q", stdout.String())
			}
			lines := tableLine.FindAllStringSubmatch(stdout.String(), -1)
			if len(lines) != 2 {
				t.Fatalf("want 2 table lines in %q", stdout.String())
			}
			f, _ := export.ParseFormat(to)
			for i, m := range lines {
				tb := tables[i]
				want := filepath.Join(out, export.FileName(tb.Name(), f))
				if m[1] != tb.Name() || m[2] != fmt.Sprint(tb.Size()) || m[3] != fmt.Sprint(tb.Dim()) || m[4] != want || m[6] != "verified" {
					t.Errorf("line %q: want table %s, %d entries, dim %d, file %s, verified", m[0], tb.Name(), tb.Size(), tb.Dim(), want)
				}
				st, err := os.Stat(want)
				if err != nil || fmt.Sprint(st.Size()) != m[5] {
					t.Errorf("%s: %v (size %s in the summary)", want, err, m[5])
				}
			}
		})
	}
}

// TestExportCommandShardsAndTables exports one table of a multi-shard root without
// verifying.
func TestExportCommandShardsAndTables(t *testing.T) {
	root := t.TempDir()
	var want int64
	for i := range 2 {
		tables := exportCheckpoint(t, filepath.Join(root, fmt.Sprintf("shard-%d-of-2", i)),
			checkpoint.Meta{Step: int64(7 + i), Shard: i, NumShards: 2}, func(f uint64) bool { return f%2 == uint64(i) })
		want += tables[1].Size()
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := runExport(context.Background(), []string{"--checkpoint", root, "--to", "parquet", "--output", out,
		"--tables", " item/v2 ,", "--verify=false"}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s%s", stdout.String(), stderr.String())
	lines := tableLine.FindAllStringSubmatch(stdout.String(), -1)
	if len(lines) != 1 || lines[0][1] != "item/v2" || lines[0][2] != fmt.Sprint(want) || lines[0][6] != "not verified" {
		t.Fatalf("summary %q, want item/v2 with %d entries, not verified", stdout.String(), want)
	}
	if !strings.Contains(stdout.String(), "2 shards, 1 table(s)") || !strings.Contains(stderr.String(), "different steps [7 8]") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 || ents[0].Name() != "item_v2.parquet" {
		t.Errorf("output folder: %v", ents)
	}
	// The file verifies on its own too.
	src, err := export.Resolve(root)
	if err == nil {
		src, err = src.Only([]string{"item/v2"})
	}
	if err == nil {
		_, err = export.Verify(context.Background(), src, export.Parquet, out)
	}
	if err != nil {
		t.Error(err)
	}
}

// TestExportCommandErrors: usage mistakes exit 2, bad checkpoints fail naming the problem.
func TestExportCommandErrors(t *testing.T) {
	root := t.TempDir()
	ckpt := t.TempDir()
	exportCheckpoint(t, ckpt, checkpoint.Meta{Step: 1}, func(uint64) bool { return true })
	out := t.TempDir()
	for _, tc := range []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"no flags", nil, true, "needs --checkpoint, --to and --output"},
		{"no output", []string{"--checkpoint", ckpt, "--to", "avro"}, true, "needs"},
		{"bad format", []string{"--checkpoint", ckpt, "--to", "csv", "--output", out}, true, `unknown format "csv"`},
		{"extra argument", []string{"--checkpoint", ckpt, "--to", "avro", "--output", out, "x"}, true, "no arguments"},
		{"bad flag", []string{"--nope"}, true, "nope"},
		{"not a checkpoint", []string{"--checkpoint", root, "--to", "avro", "--output", out}, false, "is not a checkpoint"},
		{"unknown table", []string{"--checkpoint", ckpt, "--to", "avro", "--output", out, "--tables", "user,nope"}, false, `no table "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runExport(context.Background(), tc.args, &stdout, &stderr)
			if err == nil || errors.Is(err, errUsage) != tc.usage || !strings.Contains(err.Error()+stderr.String(), tc.want) {
				t.Fatalf("runExport(%q) = %v (usage %v), want an error with %q", tc.args, err, errors.Is(err, errUsage), tc.want)
			}
		})
	}
	// A damaged checkpoint fails and leaves no file.
	path, err := checkpoint.Latest(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(path, "t000-user.entries")
	b, _ := os.ReadFile(file)
	b[len(b)/2] ^= 1
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	err = runExport(context.Background(), []string{"--checkpoint", ckpt, "--to", "avro", "--output", dst}, new(bytes.Buffer), new(bytes.Buffer))
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), file) {
		t.Errorf("export of a damaged checkpoint: %v", err)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Errorf("the failed export left %v", ents)
	}
}

// trainedFM writes planted FM data (rows training rows, evalRows eval rows, generated with
// seed) and a config over it with two PS shards and the model directory ckpt under dir,
// trains one epoch, and returns the config's path.
func trainedFM(t *testing.T, dir, seed string, rows, evalRows int) string {
	t.Helper()
	runGenCLI(t, "--planted", "fm", "--seed", seed, "--out", filepath.Join(dir, "data"), "--rows", strconv.Itoa(rows), "--files", "2",
		"--vocab", "50", "--eval-rows", strconv.Itoa(evalRows))
	cfg := filepath.Join(dir, "fm.yaml")
	if err := os.WriteFile(cfg, []byte("model: fm\ndata: data\nbatch_size: 128\nps: {shards: 2}\ncheckpoint: {dir: ckpt}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var so, se bytes.Buffer
	if err := run(context.Background(), []string{"train", "--config", cfg, "--progress", "never"}, &so, &se); err != nil {
		t.Fatalf("train: %v\n%s", err, se.String())
	}
	return cfg
}

// TestExportModelCommand: `monolith export --model` writes a trained checkpoint as a
// served version with its marker, reads it back, and refuses a second write of the version
// and missing flags.
func TestExportModelCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := trainedFM(t, dir, "3", 2000, 500)
	var so, se bytes.Buffer
	base := filepath.Join(dir, "serving")
	args := []string{"export", "--model", "--config", cfg, "--output", base, "--name", "planted", "--version", "7"}
	so.Reset()
	if err := run(context.Background(), args, &so, &se); err != nil {
		t.Fatalf("export --model: %v\n%s", err, se.String())
	}
	if !regexp.MustCompile(`^model "planted" version 7 from \S+model\.ckpt-\d+: \d+ tables, \d+ rows \(0 all-zero rows skipped\), \d+ bytes -> \S+, verified\n$`).MatchString(so.String()) {
		t.Errorf("summary %q", so.String())
	}
	for _, p := range []string{"planted/7/MANIFEST.json", "planted/7.write.done"} {
		if _, err := os.Stat(filepath.Join(base, p)); err != nil {
			t.Error(err)
		}
	}
	if err := run(context.Background(), args, &so, &se); err == nil || !strings.Contains(err.Error(), "written once") {
		t.Errorf("second export of version 7: %v", err)
	}
	for _, bad := range [][]string{
		{"export", "--model", "--config", cfg, "--output", base},
		{"export", "--model", "--output", base, "--name", "x"},
		{"export", "--model", "--config", cfg, "--output", base, "--name", "x", "extra"},
	} {
		if err := run(context.Background(), bad, &so, &se); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}
