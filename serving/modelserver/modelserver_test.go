package modelserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/ps/servingmodel"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
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
// read back by fid through the table's codecs, kept in their stored form (an fp16 row takes
// half an fp32 row's bytes); an absent fid reads as zeros, and a synced row is stored as
// the table stores it.
func TestSortedRows(t *testing.T) {
	fp16 := &hashtablepb.FloatCompressorConfig{Type: &hashtablepb.FloatCompressorConfig_Fp16_{Fp16: &hashtablepb.FloatCompressorConfig_Fp16{}}}
	for _, tc := range []struct {
		name    string
		comp    *hashtablepb.FloatCompressorConfig
		rowSize int
		synced  float32 // 1/3 as stored
	}{
		{"fp32", nil, 8, 1.0 / 3},
		{"fp16", fp16, 4, 0.333251953125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{{DimSize: proto.Int32(2), CompConfig: tc.comp}}}}
			meta, err := servingmodel.NewTable("t", 2, cfg)
			if err != nil {
				t.Fatal(err)
			}
			fids := []uint64{9, 3, 7, 1, 5, 2}
			st := &servedTable{Table: meta, fids: slices.Clone(fids)}
			for _, f := range fids {
				row := make([]byte, meta.ValueBytes())
				meta.EncodeValues(row, []float32{float32(f), -float32(f)})
				st.enc = append(st.enc, row...)
			}
			if len(st.enc) != len(fids)*tc.rowSize {
				t.Errorf("%d bytes stored for %d rows, want %d each", len(st.enc), len(fids), tc.rowSize)
			}
			st.sortRows()
			if !slices.IsSorted(st.fids) {
				t.Fatalf("fids %v not sorted", st.fids)
			}
			got := st.rowsOf([]uint64{5, 4, 9, 1}, nil)
			if want := []float32{5, -5, 0, 0, 9, -9, 1, -1}; !slices.Equal(got, want) {
				t.Errorf("rows %v, want %v", got, want)
			}
			st.assign([]int64{4, 9}, []float32{1.0 / 3, 2, -1.0 / 3, 0})
			got = st.rowsOf([]uint64{4, 9}, got[:0])
			if want := []float32{tc.synced, 2, -tc.synced, 0}; !slices.Equal(got, want) {
				t.Errorf("synced rows %v, want %v", got, want)
			}
		})
	}
}
