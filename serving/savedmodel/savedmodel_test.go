package savedmodel

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestFakeExportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFakeExport(dir, "test_ffm_model", 3, 1234); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"entry", "ps_0", "ps_1", "ps_2"} {
		if _, err := os.Stat(filepath.Join(dir, sub, "1234", "saved_model.pb")); err != nil {
			t.Error(err)
		}
	}
	name, ok, err := FindModelName(dir)
	if err != nil || !ok || name != "test_ffm_model" {
		t.Fatalf("FindModelName = %q, %v, %v", name, ok, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "entry", "1234", "saved_model.pb"))
	names, err := RemotePredictModelNames(b)
	if want := []string{"test_ffm_model:ps_0", "test_ffm_model:ps_1", "test_ffm_model:ps_2"}; err != nil || !slices.Equal(names, want) {
		t.Errorf("RemotePredictModelNames = %q, %v; want %q", names, err, want)
	}
}

// TestNewestVersionNumeric pins S5: "10" is newer than "9" (Python took the first name).
func TestNewestVersionNumeric(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"9", "10", "2", "tmp", "10.bak"} {
		if err := os.MkdirAll(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := NewestVersion(dir); err != nil || v != "10" {
		t.Errorf("NewestVersion = %q, %v; want 10", v, err)
	}
	if _, err := NewestVersion(filepath.Join(dir, "tmp")); err == nil {
		t.Error("NewestVersion of a folder without versions succeeded")
	}
}

// TestOtherNodesAndFields: nodes of other ops, other attributes and non-bytes fields are
// skipped; a remote-predict node without model_name contributes nothing.
func TestOtherNodesAndFields(t *testing.T) {
	node := func(op string, attrs ...[2]string) []byte {
		var n []byte
		n = protowire.AppendTag(n, 2, protowire.BytesType)
		n = protowire.AppendString(n, op)
		n = protowire.AppendTag(n, 3, protowire.BytesType)
		n = protowire.AppendString(n, "input:0")
		for _, kv := range attrs {
			var av []byte
			av = protowire.AppendTag(av, 3, protowire.VarintType) // AttrValue.i
			av = protowire.AppendVarint(av, 7)
			av = protowire.AppendTag(av, 2, protowire.BytesType)
			av = protowire.AppendString(av, kv[1])
			var e []byte
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, kv[0])
			e = protowire.AppendTag(e, 2, protowire.BytesType)
			e = protowire.AppendBytes(e, av)
			n = protowire.AppendTag(n, 5, protowire.BytesType)
			n = protowire.AppendBytes(n, e)
		}
		return n
	}
	var g []byte
	for _, n := range [][]byte{
		node("Const", [2]string{"model_name", "decoy:ps_9"}),
		node(RemotePredictOp, [2]string{"dtype", "x"}),
		node(RemotePredictOp, [2]string{"old_model_name", "ps_1"}, [2]string{"model_name", "m:ps_1"}),
	} {
		g = protowire.AppendTag(g, 1, protowire.BytesType)
		g = protowire.AppendBytes(g, n)
	}
	var mg, sm []byte
	mg = protowire.AppendTag(mg, 2, protowire.BytesType)
	mg = protowire.AppendBytes(mg, g)
	sm = protowire.AppendTag(sm, 1, protowire.VarintType)
	sm = protowire.AppendVarint(sm, 1)
	sm = protowire.AppendTag(sm, 2, protowire.BytesType)
	sm = protowire.AppendBytes(sm, mg)
	names, err := RemotePredictModelNames(sm)
	if err != nil || !slices.Equal(names, []string{"m:ps_1"}) {
		t.Errorf("RemotePredictModelNames = %q, %v; want [m:ps_1]", names, err)
	}
}

func TestMalformed(t *testing.T) {
	good := EncodeRemotePredictGraph([]string{"m:ps_0"})
	for _, b := range [][]byte{good[:len(good)-3], {0x12, 0x05, 0x01}, {0xff}} {
		if _, err := RemotePredictModelNames(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("RemotePredictModelNames(% x) = %v, want ErrMalformed", b, err)
		}
	}
	if err := WriteFakeExport(t.TempDir(), "a:b", 1, 1); err == nil {
		t.Error("WriteFakeExport accepted a model name with ':'")
	}
}

func FuzzRemotePredictModelNames(f *testing.F) {
	f.Add(EncodeRemotePredictGraph([]string{"m:ps_0", "m:ps_1"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := RemotePredictModelNames(b)
		if err != nil && names != nil {
			t.Fatalf("names %q with error %v", names, err)
		}
		// Names survive a re-encoding.
		if err == nil && len(names) > 0 {
			again, err := RemotePredictModelNames(EncodeRemotePredictGraph(names))
			if err != nil || !slices.Equal(again, names) {
				t.Fatalf("re-encoded %q → %q, %v", names, again, err)
			}
		}
	})
}
