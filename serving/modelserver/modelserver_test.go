package modelserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/monolith-go/monolith/ps/servingmodel"
)

// TestLoadRefusesUnfinished: a version folder without its done marker, or with a manifest
// that does not parse, is not loaded, and the error says why.
func TestLoadRefusesUnfinished(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m", "3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := (Loader{}).Load(context.Background(), "m", dir, 3); !errors.Is(err, servingmodel.ErrCorrupt) {
		t.Errorf("no marker: %v, want ErrCorrupt", err)
	}
	if err := os.WriteFile(dir+servingmodel.DoneSuffix, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, servingmodel.ManifestName), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (Loader{}).Load(context.Background(), "m", dir, 3); !errors.Is(err, servingmodel.ErrCorrupt) {
		t.Errorf("bad manifest: %v, want ErrCorrupt", err)
	}
}

// TestSortedRows: rows loaded out of fid order are sorted with their fids, in place, and
// read back by fid; an absent fid reads as zeros.
func TestSortedRows(t *testing.T) {
	fids := []uint64{9, 3, 7, 1, 5, 2}
	st := &servedTable{dim: 2, fids: slices.Clone(fids)}
	for _, f := range fids {
		st.rows = append(st.rows, float32(f), -float32(f))
	}
	st.sortRows()
	if !slices.IsSorted(st.fids) {
		t.Fatalf("fids %v not sorted", st.fids)
	}
	got := st.rowsOf([]uint64{5, 4, 9, 1}, nil)
	if want := []float32{5, -5, 0, 0, 9, -9, 1, -1}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}
