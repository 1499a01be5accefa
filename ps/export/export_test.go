package export

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

const userCfg = `entry_config {
  segments { dim_size: 1 init_config { zeros {} } opt_config { ftrl { initial_accumulator_value: 1e-6 beta: 1 } } }
  segments { dim_size: 4 init_config { random_uniform {} } opt_config { adagrad { initial_accumulator_value: 1 } } }
}`

const itemCfg = `entry_config {
  segments { dim_size: 2 init_config { ones {} } opt_config { adam {} } }
  segments { dim_size: 1 init_config { zeros {} } opt_config { momentum {} } }
  segments { dim_size: 1 init_config { zeros {} } opt_config { rmsprop {} } }
  segments { dim_size: 1 init_config { zeros {} } opt_config { amsgrad {} } }
  segments { dim_size: 1 init_config { zeros {} } opt_config { adadelta {} } }
  segments { dim_size: 1 init_config { zeros {} } opt_config { sgd {} } }
}`

func newTable(t testing.TB, name, cfg string) *table.Table {
	t.Helper()
	c := &hashtablepb.EmbeddingHashTableConfig{}
	if err := prototext.Unmarshal([]byte(cfg), c); err != nil {
		t.Fatal(err)
	}
	tb, err := table.New(table.Options{Name: name, Config: c, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// testFids are the fids of the test tables: edges (0, 2^63, 2^64-1) and a spread, keeping
// those where keep is true.
func testFids(keep func(uint64) bool) []int64 {
	var out []int64
	for _, f := range []uint64{0, 1, 1 << 63, math.MaxUint64, 1<<63 - 1, 0x9e3779b97f4a7c15} {
		if keep(f) {
			out = append(out, int64(f))
		}
	}
	for i := range uint64(300) {
		if f := i*0x9e3779b97f4a7c15 + 12345; keep(f) {
			out = append(out, int64(f))
		}
	}
	return out
}

// fill assigns every fid a row holding special floats, then trains half of them so the
// optimizer state is not the initial one.
func fill(t testing.TB, tb *table.Table, fids []int64) {
	t.Helper()
	dim := tb.Dim()
	rows := make([]float32, len(fids)*dim)
	for i := range rows {
		rows[i] = float32(i%97) * 0.25
		if i%11 == 0 {
			rows[i] = special[i%len(special)]
		}
	}
	if _, err := tb.Assign(fids, rows, 1000); err != nil {
		t.Fatal(err)
	}
	half := fids[:len(fids)/2]
	grads := make([]float32, len(half)*dim)
	for i := range grads {
		grads[i] = float32(math.Sin(float64(i)))
	}
	if _, err := tb.Apply(half, grads, nil, 3, 2000); err != nil {
		t.Fatal(err)
	}
}

// buildShard makes the two tables of one shard holding the fids keep selects.
func buildShard(t testing.TB, keep func(uint64) bool) []*table.Table {
	t.Helper()
	user, item := newTable(t, "user", userCfg), newTable(t, "item/v2", itemCfg)
	fill(t, user, testFids(keep))
	fill(t, item, testFids(func(f uint64) bool { return keep(f) && f%3 != 1 }))
	return []*table.Table{user, item}
}

func all(uint64) bool { return true }

func save(t testing.TB, dir string, meta checkpoint.Meta, tables []*table.Table) string {
	t.Helper()
	res, err := checkpoint.Save(context.Background(), dir, meta, tables)
	if err != nil {
		t.Fatal(err)
	}
	return res.Path
}

// snapshot is every entry of tables[i] in fid order.
func snapshot(t testing.TB, tb *table.Table) []*hashtablepb.EntryDump {
	t.Helper()
	var out []*hashtablepb.EntryDump
	if err := tb.Snapshot(func(d *hashtablepb.EntryDump) error {
		out = append(out, proto.Clone(d).(*hashtablepb.EntryDump))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return byFid(out)
}

func byFid(ds []*hashtablepb.EntryDump) []*hashtablepb.EntryDump {
	sort.Slice(ds, func(i, j int) bool { return uint64(ds[i].GetId()) < uint64(ds[j].GetId()) })
	return ds
}

// readFile reads an export file back.
func readFile(t testing.TB, path string, f Format) []*hashtablepb.EntryDump {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := readEntries(f, data)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestExportVerify exports a real two-table checkpoint in every format, verifies it, and
// checks the files against the tables themselves.
func TestExportVerify(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	tables := buildShard(t, all)
	save(t, root, checkpoint.Meta{Step: 7}, tables)
	src, err := Resolve(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Shards) != 1 || src.Shards[0].Step != 7 || len(src.Tables) != 2 {
		t.Fatalf("resolved %+v", src)
	}
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out", "nested")
			sum, err := Export(ctx, src, f, out)
			if err != nil {
				t.Fatal(err)
			}
			vsum, err := Verify(ctx, src, f, out)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sum.Tables, vsum.Tables) {
				t.Errorf("Export summary %+v, Verify summary %+v", sum.Tables, vsum.Tables)
			}
			for i, tb := range tables {
				ts := sum.Tables[i]
				want := snapshot(t, tb)
				if ts.Table != tb.Name() || ts.Dim != tb.Dim() || ts.Entries != int64(len(want)) || ts.Bytes <= 0 ||
					ts.Path != filepath.Join(out, FileName(tb.Name(), f)) {
					t.Errorf("table %d summary %+v", i, ts)
				}
				sameEntries(t, byFid(readFile(t, ts.Path, f)), want)
			}
			if _, err := os.Stat(filepath.Join(out, "item_v2"+f.Ext())); err != nil {
				t.Errorf("item/v2 file: %v", err)
			}
			ents, _ := os.ReadDir(out)
			if len(ents) != 2 {
				t.Errorf("output folder holds %d files, want 2 (no temporary files)", len(ents))
			}
		})
	}
}

// rewrite replaces the export file at path with the entries edit returns.
func rewrite(t *testing.T, path string, f Format, table string, edit func([]*hashtablepb.EntryDump) []*hashtablepb.EntryDump) {
	t.Helper()
	entries := edit(readFile(t, path, f))
	if err := os.WriteFile(path, writeEntries(t, f, TableInfo{Name: table}, entries), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyFindsMismatch: Verify names the table, file, fid and field of the first
// difference, for a changed float, missing and extra entries and a wrong table name.
func TestVerifyFindsMismatch(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	save(t, root, checkpoint.Meta{Step: 1}, buildShard(t, all))
	src, err := Resolve(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range formats {
		for _, tc := range []struct {
			name  string
			table string // the table name written into the file
			edit  func([]*hashtablepb.EntryDump) []*hashtablepb.EntryDump
			field string
		}{
			{"nan payload", "user", func(ds []*hashtablepb.EntryDump) []*hashtablepb.EntryDump {
				ds[5].Num[2] = f32(math.Float32bits(ds[5].Num[2]) ^ 1)
				return ds
			}, "embedding[2]"},
			{"optimizer state", "user", func(ds []*hashtablepb.EntryDump) []*hashtablepb.EntryDump {
				ds[3].Opt.Dump[1].GetAdagrad().Norm[0] = -ds[3].Opt.Dump[1].GetAdagrad().Norm[0]
				return ds
			}, "opt[1].adagrad.norm[0]"},
			{"time", "user", func(ds []*hashtablepb.EntryDump) []*hashtablepb.EntryDump {
				ds[4].LastUpdateTsSec = nil
				return ds
			}, "last_update_ts_sec"},
			{"missing entry", "user", func(ds []*hashtablepb.EntryDump) []*hashtablepb.EntryDump { return ds[:len(ds)-1] }, "entry"},
			{"extra entry", "user", func(ds []*hashtablepb.EntryDump) []*hashtablepb.EntryDump { return append(ds, ds[0]) }, "entry"},
			{"swapped entries", "user", func(ds []*hashtablepb.EntryDump) []*hashtablepb.EntryDump {
				ds[1], ds[2] = ds[2], ds[1]
				return ds
			}, "id"},
			{"table name", "other", func(ds []*hashtablepb.EntryDump) []*hashtablepb.EntryDump { return ds }, "table"},
		} {
			if f == EntryDump && tc.table != "user" {
				continue // EntryDump files do not name their table
			}
			t.Run(f.String()+" "+tc.name, func(t *testing.T) {
				out := t.TempDir()
				if _, err := Export(ctx, src, f, out); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(out, "user"+f.Ext())
				rewrite(t, path, f, tc.table, tc.edit)
				_, err := Verify(ctx, src, f, out)
				var me *MismatchError
				if !errors.As(err, &me) || !errors.Is(err, ErrMismatch) {
					t.Fatalf("Verify = %v, want a *MismatchError", err)
				}
				if me.Table != "user" || me.File != path || !strings.HasPrefix(me.Field, tc.field) {
					t.Errorf("mismatch %+v, want table user, file %s, field %s", me, path, tc.field)
				}
				t.Logf("%v", err)
			})
		}
	}
}

// TestExportDamagedCheckpoint: damage in the checkpoint fails the export with an error
// naming the checkpoint file, and leaves no export file behind.
func TestExportDamagedCheckpoint(t *testing.T) {
	ctx := context.Background()
	for _, f := range formats {
		for _, damage := range []string{"flip", "truncate"} {
			t.Run(f.String()+" "+damage, func(t *testing.T) {
				root := t.TempDir()
				path := save(t, root, checkpoint.Meta{Step: 1}, buildShard(t, all))
				src, err := Resolve(root)
				if err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(path, "t000-user.entries")
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if damage == "flip" {
					b[len(b)*3/4] ^= 0x10
				} else {
					b = b[:len(b)/2]
				}
				if err := os.WriteFile(file, b, 0o644); err != nil {
					t.Fatal(err)
				}
				out := t.TempDir()
				_, err = Export(ctx, src, f, out)
				if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), file) {
					t.Fatalf("Export = %v, want ErrCorrupt naming %s", err, file)
				}
				t.Logf("%v", err)
				if ents, _ := os.ReadDir(out); len(ents) != 0 {
					t.Errorf("the failed export left %d files, e.g. %s", len(ents), ents[0].Name())
				}
			})
		}
	}
}

// TestResolve covers the resolution rules and their errors.
func TestResolve(t *testing.T) {
	root := t.TempDir()
	first := save(t, root, checkpoint.Meta{Step: 1}, buildShard(t, all))
	tables := buildShard(t, func(f uint64) bool { return f%2 == 0 })
	second := save(t, root, checkpoint.Meta{Step: 2, Shard: 1, NumShards: 4}, tables)
	for _, tc := range []struct {
		dir, want string
		step      int64
	}{
		{root, second, 2},
		{first, first, 1},
		{second, second, 2},
	} {
		src, err := Resolve(tc.dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(src.Shards) != 1 || src.Shards[0].Checkpoint != tc.want || src.Shards[0].Step != tc.step || src.Path != tc.dir {
			t.Errorf("Resolve(%s) = %+v", tc.dir, src.Shards)
		}
	}
	src, _ := Resolve(second)
	if s := src.Shards[0]; s.Index != 1 || s.Count != 4 {
		t.Errorf("shard of a lone shard checkpoint: %+v", s)
	}
	if got := src.Table("user").Entries; got != uint64(tables[0].Size()) {
		t.Errorf("user entries %d, table holds %d", got, tables[0].Size())
	}

	only, err := src.Only([]string{"item/v2"})
	if err != nil || len(only.Tables) != 1 || only.Tables[0].Name != "item/v2" || len(src.Tables) != 2 {
		t.Errorf("Only: %v %+v", err, only)
	}
	if _, err := src.Only([]string{"nope"}); err == nil || !strings.Contains(err.Error(), `"user"`) {
		t.Errorf("Only(unknown) = %v, want the tables listed", err)
	}
	if _, err := src.Only([]string{"user", "user"}); err == nil {
		t.Error("Only with a repeated table succeeded")
	}

	bad := t.TempDir()
	for _, tc := range []struct {
		name, want string
		setup      func(dir string)
	}{
		{"empty folder", "is not a checkpoint", func(string) {}},
		{"missing folder", "no such file", func(dir string) { os.Remove(dir) }},
		{"LATEST names a missing checkpoint", "MANIFEST.json", func(dir string) {
			os.WriteFile(filepath.Join(dir, "LATEST"), []byte("ckpt-00000009-step-9\n"), 0o644)
		}},
		{"LATEST names no checkpoint", "not a checkpoint folder", func(dir string) {
			os.WriteFile(filepath.Join(dir, "LATEST"), []byte("../../etc\n"), 0o644)
		}},
		{"bad manifest", "MANIFEST.json", func(dir string) { os.WriteFile(filepath.Join(dir, "MANIFEST.json"), []byte("{"), 0o644) }},
	} {
		dir := filepath.Join(bad, strings.ReplaceAll(tc.name, " ", "_"))
		os.Mkdir(dir, 0o755)
		tc.setup(dir)
		if _, err := Resolve(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Resolve = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func shardDir(root string, i, n int) string {
	return filepath.Join(root, fmt.Sprintf("shard-%d-of-%d", i, n))
}

// saveShards saves the checkpoint of every shard of n into root (fid f on shard f % n),
// at step 10+i, and returns the tables by shard.
func saveShards(t *testing.T, root string, n int) [][]*table.Table {
	var out [][]*table.Table
	for i := range n {
		tables := buildShard(t, func(f uint64) bool { return f%uint64(n) == uint64(i) })
		save(t, shardDir(root, i, n), checkpoint.Meta{Step: int64(10 + i), Shard: i, NumShards: n}, tables)
		out = append(out, tables)
	}
	return out
}

// TestMultiShard exports a three-shard root: each table merges the shards in order.
func TestMultiShard(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	shards := saveShards(t, root, 3)
	src, err := Resolve(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Shards) != 3 || !slices.Equal(src.Steps(), []int64{10, 11, 12}) {
		t.Fatalf("shards %+v, steps %v", src.Shards, src.Steps())
	}
	for i, s := range src.Shards {
		if s.Index != i || s.Count != 3 || filepath.Dir(filepath.Dir(s.Checkpoint)) != root {
			t.Errorf("shard %d: %+v", i, s)
		}
	}
	if files := src.Table("user").Files(); len(files) != 3 {
		t.Errorf("user files %v", files)
	}
	for _, f := range formats {
		out := t.TempDir()
		if _, err := Export(ctx, src, f, out); err != nil {
			t.Fatal(err)
		}
		sum, err := Verify(ctx, src, f, out)
		if err != nil {
			t.Fatal(err)
		}
		for ti, ts := range sum.Tables {
			got := readFile(t, ts.Path, f)
			// Shard 0's entries first, then shard 1's, then shard 2's.
			var want []*hashtablepb.EntryDump
			for si := range shards {
				part := snapshot(t, shards[si][ti])
				sameEntries(t, byFid(slices.Clone(got[len(want):len(want)+len(part)])), part)
				want = append(want, part...)
			}
			if len(got) != len(want) || ts.Entries != int64(len(want)) {
				t.Errorf("%v table %s: %d entries, shards hold %d", f, ts.Table, len(got), len(want))
			}
		}
	}
}

// TestMultiShardErrors: a multi-shard root must be complete and consistent.
func TestMultiShardErrors(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		setup      func(t *testing.T, root string)
	}{
		{"missing shard", "shard(s) 1 of 3 are missing", func(t *testing.T, root string) {
			os.RemoveAll(shardDir(root, 1, 3))
		}},
		{"disagreeing count", "disagree on the number of shards", func(t *testing.T, root string) {
			os.Mkdir(shardDir(root, 0, 2), 0o755)
		}},
		{"shard out of range", "out of range", func(t *testing.T, root string) {
			os.Mkdir(shardDir(root, 3, 3), 0o755)
		}},
		{"shard without checkpoint", "shard 2 of 3", func(t *testing.T, root string) {
			os.RemoveAll(shardDir(root, 2, 3)) // (a lost LATEST alone is found by scanning)
			os.Mkdir(shardDir(root, 2, 3), 0o755)
		}},
		{"manifest of another shard", "the manifest says shard 0 of 3", func(t *testing.T, root string) {
			save(t, shardDir(root, 1, 3), checkpoint.Meta{Step: 20, Shard: 0, NumShards: 3}, buildShard(t, all))
		}},
		{"table missing in a shard", `shard 2 has no table "item/v2"`, func(t *testing.T, root string) {
			save(t, shardDir(root, 2, 3), checkpoint.Meta{Step: 20, Shard: 2, NumShards: 3}, buildShard(t, all)[:1])
		}},
		{"extra table in a shard", `shard 1 has table "extra"`, func(t *testing.T, root string) {
			tables := append(buildShard(t, all), newTable(t, "extra", userCfg))
			save(t, shardDir(root, 1, 3), checkpoint.Meta{Step: 20, Shard: 1, NumShards: 3}, tables)
		}},
		{"dim mismatch", `table "item/v2" has dim 5 in shard 1`, func(t *testing.T, root string) {
			tables := []*table.Table{newTable(t, "user", userCfg), newTable(t, "item/v2", userCfg)}
			save(t, shardDir(root, 1, 3), checkpoint.Meta{Step: 20, Shard: 1, NumShards: 3}, tables)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			saveShards(t, root, 3)
			tc.setup(t, root)
			_, err := Resolve(root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Resolve = %v, want an error with %q", err, tc.want)
			}
			t.Logf("%v", err)
		})
	}
}

// TestFileNameCollision: two tables that map to one file cannot be exported together.
func TestFileNameCollision(t *testing.T) {
	root := t.TempDir()
	save(t, root, checkpoint.Meta{Step: 1}, []*table.Table{newTable(t, "a/b", userCfg), newTable(t, "a_b", userCfg)})
	src, err := Resolve(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Export(context.Background(), src, Avro, t.TempDir()); err == nil || !strings.Contains(err.Error(), "a_b.avro") {
		t.Errorf("Export = %v, want a collision on a_b.avro", err)
	}
	one, err := src.Only([]string{"a/b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Export(context.Background(), one, Avro, t.TempDir()); err != nil {
		t.Errorf("Export of one of them: %v", err)
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range formats {
		if g, err := ParseFormat(strings.ToUpper(f.String())); err != nil || g != f {
			t.Errorf("ParseFormat(%s) = %v, %v", f, g, err)
		}
	}
	if _, err := ParseFormat("csv"); err == nil {
		t.Error("ParseFormat(csv) succeeded")
	}
	if got := FileName("item/v2:x", Parquet); got != "item_v2_x.parquet" {
		t.Errorf("FileName = %q", got)
	}
}
