package fileops

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBasic ports file_ops_test.py test_basic: 1000 appends of "1234", in a folder that
// does not exist yet.
func TestBasic(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "b", "f")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if err := w.Append([]byte("1234")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if string(got) != strings.Repeat("1234", 1000) {
		t.Errorf("content: %d bytes, want 4000 of 1234", len(got))
	}
	if err := w.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("append after close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// TestHook ports test_hook, and Open truncates an existing file.
func TestHook(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	fa, err := Open(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := Open(b)
	if err != nil {
		t.Fatal(err)
	}
	_ = fa.Append([]byte("1234"))
	_ = fb.Append([]byte("5678"))
	if err := NewCloseHook(fa, fb).End(); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{a: "1234", b: "5678"} {
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
}

// TestEntryDumpGolden: the spec's golden vectors (io.md §1.1 and §5) byte for byte, and
// raw appends interleaved with records in call order.
func TestEntryDumpGolden(t *testing.T) {
	if got, want := AppendEntryDumpPayload(nil, -5, 0.25, nil), unhex(t, "09 fbffffffffffffff 15 0000803e"); !bytes.Equal(got, want) {
		t.Errorf("payload(id -5, bias 0.25) = % x, want % x", got, want)
	}
	p := filepath.Join(t.TempDir(), "dump")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte("head\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.AppendEntryDump([]int64{1}, []float32{0.5}, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	want := append([]byte("head\n"), unhex(t, "1800000000000000 a37f4b22 090100000000000000150000003f150000803f1500000040 37170c15")...)
	if !bytes.Equal(got, want) {
		t.Errorf("file\n% x\nwant\n% x", got, want)
	}
}

// TestEntryDumpRows: N rows of D values each decode as EntryDump protos with bias first.
func TestEntryDumpRows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dump")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{7, -8, 1 << 62}
	if err := w.AppendEntryDump(ids, []float32{0.1, 0.2, 0.3, 9}, []float32{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(p)
	defer f.Close()
	r := tfrecord.NewReader(f)
	for i := 0; ; i++ {
		rec, err := r.Next()
		if err == io.EOF {
			if i != 3 {
				t.Errorf("%d records, want 3", i)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var d hashtablepb.EntryDump
		if err := proto.Unmarshal(rec, &d); err != nil {
			t.Fatal(err)
		}
		want := []float32{[]float32{0.1, 0.2, 0.3}[i], float32(2*i + 1), float32(2*i + 2)}
		if d.GetId() != ids[i] || len(d.GetNum()) != 3 || d.GetNum()[0] != want[0] || d.GetNum()[1] != want[1] || d.GetNum()[2] != want[2] {
			t.Errorf("record %d: id %d num %v, want %d %v", i, d.GetId(), d.GetNum(), ids[i], want)
		}
	}
}

func TestEntryDumpShapeErrors(t *testing.T) {
	w, err := Open(filepath.Join(t.TempDir(), "d"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tc := range []struct {
		ids       []int64
		bias, emb []float32
	}{
		{nil, nil, nil},
		{[]int64{1, 2}, []float32{1}, []float32{1, 2}},
		{[]int64{1, 2}, []float32{1, 2}, []float32{1, 2, 3}},
	} {
		if err := w.AppendEntryDump(tc.ids, tc.bias, tc.emb); err == nil || !strings.Contains(err.Error(), "append_entry_dump") {
			t.Errorf("AppendEntryDump(%v, %v, %v) = %v, want a shape error", tc.ids, tc.bias, tc.emb, err)
		}
	}
}

// TestConcurrentAppends: appends from several goroutines are whole and all present.
func TestConcurrentAppends(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 100 {
				_ = w.Append([]byte{'a' + byte(g), '\n'})
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) != 800 {
		t.Errorf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if len(l) != 1 {
			t.Fatalf("torn append %q", l)
		}
	}
}
