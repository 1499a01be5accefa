package export

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// TestCheckRecord: the check of the records the EntryDump export copies.
func TestCheckRecord(t *testing.T) {
	fd := (&hashtablepb.EntryDump{}).ProtoReflect().Descriptor().Fields().ByName("id")
	if fd.Number() != entryIDField || fd.Kind() != protoreflect.Sfixed64Kind {
		t.Fatalf("EntryDump.id is field %d of kind %v; checkRecord expects field %d, sfixed64", fd.Number(), fd.Kind(), entryIDField)
	}
	marshal := func(d *hashtablepb.EntryDump) []byte {
		b, err := proto.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	withUnknown := &hashtablepb.EntryDump{Id: proto.Int64(5), Num: []float32{1}}
	withUnknown.ProtoReflect().SetUnknown(protoreflect.RawFields{0xa8, 0x01, 0x07}) // field 21, varint 7
	full := marshal(benchEntry(3))
	for _, tc := range []struct {
		name string
		rec  []byte
		want error // nil: accepted
	}{
		{"entry", full, nil},
		{"id 0", marshal(&hashtablepb.EntryDump{Id: proto.Int64(0)}), nil},
		{"unknown fields", marshal(withUnknown), nil},
		{"no id", marshal(&hashtablepb.EntryDump{Num: []float32{1, 2}}), ErrUnsupported},
		{"empty", nil, ErrUnsupported},
		{"id as a varint", protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 5), ErrUnsupported},
		{"truncated", full[:len(full)-1], checkpoint.ErrCorrupt},
		{"bad tag", []byte{0x80}, checkpoint.ErrCorrupt},
		{"field 0", []byte{0x00, 0x01}, checkpoint.ErrCorrupt},
	} {
		if err := checkRecord(tc.rec); tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: checkRecord = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestEntryDumpExportCopies: the EntryDump export of a one-shard checkpoint is its entries
// files byte for byte (records are copied, not re-encoded).
func TestEntryDumpExportCopies(t *testing.T) {
	root := t.TempDir()
	path := save(t, root, checkpoint.Meta{Step: 1}, buildShard(t, all))
	src, err := Resolve(root)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	sum, err := Export(context.Background(), src, EntryDump, out)
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range sum.Tables {
		want, err := os.ReadFile(filepath.Join(path, src.Tables[i].parts[0].ct.GetFile()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(ts.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("table %q: the export (%d bytes) differs from the checkpoint's file (%d bytes)", ts.Table, len(got), len(want))
		}
	}
}
