package checkpoint

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// snapshotOf collects a table's Snapshot by fid.
func snapshotOf(t *testing.T, fn func(func(*hashtablepb.EntryDump) error) error) map[int64]*hashtablepb.EntryDump {
	t.Helper()
	out := map[int64]*hashtablepb.EntryDump{}
	if err := fn(func(d *hashtablepb.EntryDump) error {
		if _, dup := out[d.GetId()]; dup {
			t.Errorf("fid %d seen twice", d.GetId())
		}
		out[d.GetId()] = proto.Clone(d).(*hashtablepb.EntryDump)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadTable: ReadTable streams exactly the entries Save wrote, table by table.
func TestReadTable(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	src := build(t)
	train(t, src, 1, 2000)
	res, err := Save(ctx, dir, Meta{Step: 1}, src)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	for i, ct := range m.GetTables() {
		want := snapshotOf(t, src[i].Snapshot)
		got := snapshotOf(t, func(fn func(*hashtablepb.EntryDump) error) error { return ReadTable(ctx, res.Path, ct, fn) })
		if len(got) != len(want) || uint64(len(got)) != ct.GetEntries() {
			t.Fatalf("table %q: read %d entries, snapshot %d, manifest %d", ct.GetName(), len(got), len(want), ct.GetEntries())
		}
		for fid, w := range want {
			if !proto.Equal(got[fid], w) {
				t.Fatalf("table %q fid %d: read %v, want %v", ct.GetName(), fid, got[fid], w)
			}
		}
	}
}

// TestReadTableErrors: damage is ErrCorrupt naming the file (and record); errors of fn and
// ctx come back as they are, without ErrCorrupt.
func TestReadTableErrors(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (string, *pspb.CheckpointTable) {
		src := build(t)
		train(t, src, 1, 1000)
		res, err := Save(ctx, t.TempDir(), Meta{Step: 1}, src)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(res.Path)
		if err != nil {
			t.Fatal(err)
		}
		return res.Path, m.GetTables()[0]
	}
	nop := func(*hashtablepb.EntryDump) error { return nil }
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, path string, ct *pspb.CheckpointTable)
		corrupt bool
		want    string
	}{
		{"flipped byte", func(t *testing.T, p string, _ *pspb.CheckpointTable) { flip(t, glob(t, p, "*user.entries")) }, true, "user.entries"},
		{"truncated", func(t *testing.T, p string, _ *pspb.CheckpointTable) { truncate(t, glob(t, p, "*user.entries"), 0.5) }, true, "user.entries"},
		{"missing", func(t *testing.T, p string, _ *pspb.CheckpointTable) { rm(t, glob(t, p, "*user.entries")) }, true, "user.entries"},
		{"wrong count", func(_ *testing.T, _ string, ct *pspb.CheckpointTable) { ct.Entries++ }, true, "the manifest says"},
		{"wrong crc", func(_ *testing.T, _ string, ct *pspb.CheckpointTable) { ct.Crc32C ^= 1 }, true, "CRC-32C"},
		{"file outside", func(_ *testing.T, _ string, ct *pspb.CheckpointTable) { ct.File = "../x" }, true, "outside"},
		{"no file", func(_ *testing.T, _ string, ct *pspb.CheckpointTable) { ct.File = "" }, true, "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, ct := setup(t)
			tc.damage(t, path, ct)
			err := ReadTable(ctx, path, ct, nop)
			if errors.Is(err, ErrCorrupt) != tc.corrupt || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadTable = %v, want an error naming %q (ErrCorrupt %v)", err, tc.want, tc.corrupt)
			}
			t.Logf("error: %v", err)
		})
	}
	t.Run("fn error", func(t *testing.T) {
		path, ct := setup(t)
		stop := errors.New("stop here")
		n := 0
		err := ReadTable(ctx, path, ct, func(*hashtablepb.EntryDump) error {
			if n++; n == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "record 2 at offset") {
			t.Fatalf("ReadTable with a failing fn = %v", err)
		}
		if !strings.Contains(err.Error(), filepath.Join(path, ct.GetFile())) {
			t.Errorf("error %v does not name the file", err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		path, ct := setup(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := ReadTable(cctx, path, ct, nop)
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("ReadTable with a canceled context = %v", err)
		}
	})
}
