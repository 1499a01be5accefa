package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/tfrecord"
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

// readers are ReadTable and ReadTableRecords with a callback that fails with err on the
// n-th record (never when n is 0).
var readers = []struct {
	name string
	read func(ctx context.Context, dir string, ct *pspb.CheckpointTable, n int, err error) error
}{
	{"ReadTable", func(ctx context.Context, dir string, ct *pspb.CheckpointTable, n int, err error) error {
		i := 0
		return ReadTable(ctx, dir, ct, func(*hashtablepb.EntryDump) error {
			if i++; i == n {
				return err
			}
			return nil
		})
	}},
	{"ReadTableRecords", func(ctx context.Context, dir string, ct *pspb.CheckpointTable, n int, err error) error {
		i := 0
		return ReadTableRecords(ctx, dir, ct, func([]byte) error {
			if i++; i == n {
				return err
			}
			return nil
		})
	}},
}

// TestReadTableRecords: ReadTableRecords streams the records of the entries file byte for
// byte, and they parse to what ReadTable streams.
func TestReadTableRecords(t *testing.T) {
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
	for _, ct := range m.GetTables() {
		f, err := os.Open(filepath.Join(res.Path, ct.GetFile()))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tr := tfrecord.NewReader(f)
		var entries []*hashtablepb.EntryDump
		if err := ReadTable(ctx, res.Path, ct, func(d *hashtablepb.EntryDump) error {
			entries = append(entries, proto.Clone(d).(*hashtablepb.EntryDump))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		i := 0
		if err := ReadTableRecords(ctx, res.Path, ct, func(rec []byte) error {
			want, err := tr.Next()
			if err != nil {
				return err
			}
			if !bytes.Equal(rec, want) {
				return fmt.Errorf("record %d differs from the file's", i)
			}
			d := &hashtablepb.EntryDump{}
			if err := proto.Unmarshal(rec, d); err != nil || i >= len(entries) || !proto.Equal(d, entries[i]) {
				return fmt.Errorf("record %d does not parse to ReadTable's entry (%v)", i, err)
			}
			i++
			return nil
		}); err != nil {
			t.Fatalf("table %q: %v", ct.GetName(), err)
		}
		if _, err := tr.Next(); err != io.EOF || uint64(i) != ct.GetEntries() || i != len(entries) {
			t.Fatalf("table %q: %d records, manifest %d, ReadTable %d, then %v", ct.GetName(), i, ct.GetEntries(), len(entries), err)
		}
	}
}

// TestReadTableErrors: damage is ErrCorrupt naming the file (and record); errors of fn and
// ctx come back as they are, without ErrCorrupt. ReadTableRecords fails as ReadTable does.
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
	for _, rd := range readers {
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
			{"wrong size", func(_ *testing.T, _ string, ct *pspb.CheckpointTable) { ct.Bytes++ }, true, "the manifest says"},
			{"file outside", func(_ *testing.T, _ string, ct *pspb.CheckpointTable) { ct.File = "../x" }, true, "outside"},
			{"no file", func(_ *testing.T, _ string, ct *pspb.CheckpointTable) { ct.File = "" }, true, "outside"},
		} {
			t.Run(rd.name+" "+tc.name, func(t *testing.T) {
				path, ct := setup(t)
				tc.damage(t, path, ct)
				err := rd.read(ctx, path, ct, 0, nil)
				if errors.Is(err, ErrCorrupt) != tc.corrupt || err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s = %v, want an error naming %q (ErrCorrupt %v)", rd.name, err, tc.want, tc.corrupt)
				}
				t.Logf("error: %v", err)
			})
		}
		t.Run(rd.name+" fn error", func(t *testing.T) {
			path, ct := setup(t)
			stop := errors.New("stop here")
			err := rd.read(ctx, path, ct, 3, stop)
			if !errors.Is(err, stop) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "record 2 at offset") {
				t.Fatalf("%s with a failing fn = %v", rd.name, err)
			}
			if !strings.Contains(err.Error(), filepath.Join(path, ct.GetFile())) {
				t.Errorf("error %v does not name the file", err)
			}
		})
		t.Run(rd.name+" canceled", func(t *testing.T) {
			path, ct := setup(t)
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			err := rd.read(cctx, path, ct, 0, nil)
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s with a canceled context = %v", rd.name, err)
			}
		})
	}
}

// TestReadTableUnparsable: a record that does not parse as an EntryDump, in a file whose
// size, CRC-32C and count match the manifest, is ErrCorrupt for ReadTable naming the
// record; ReadTableRecords hands it out as it is.
func TestReadTableUnparsable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bad := []byte{0x12, 0x05, 1} // field 2 (num), packed, length 5 but one byte
	ct := &pspb.CheckpointTable{Name: "t", File: "t000-t.entries", Entries: 2}
	var err error
	ct.Bytes, ct.Crc32C, err = writeFile(filepath.Join(dir, ct.File), records(func(w *tfrecord.Writer) error {
		if err := w.Write(nil); err != nil {
			return err
		}
		return w.Write(bad)
	}))
	if err != nil {
		t.Fatal(err)
	}
	err = ReadTable(ctx, dir, ct, func(*hashtablepb.EntryDump) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "record 1 at offset") {
		t.Errorf("ReadTable = %v, want ErrCorrupt at record 1", err)
	}
	var got [][]byte
	if err := ReadTableRecords(ctx, dir, ct, func(rec []byte) error {
		got = append(got, bytes.Clone(rec))
		return nil
	}); err != nil || len(got) != 2 || len(got[0]) != 0 || !bytes.Equal(got[1], bad) {
		t.Errorf("ReadTableRecords = %v, records %x", err, got)
	}
}
