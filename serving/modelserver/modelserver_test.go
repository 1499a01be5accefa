package modelserver

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/synth"
	"github.com/monolith-go/monolith/ps/compress"
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

// writeVersion writes a version folder dir holding one table like meta (its name, dim and
// codecs) of fids in the order given, fid f's row values(f), and returns the table as
// Open reads it.
func writeVersion(t *testing.T, dir string, meta *servingmodel.Table, fids []uint64, values func(f uint64) []float32) *servingmodel.Table {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tb := *meta
	tb.File, tb.Entries = "000-t.serving", uint64(len(fids))
	var file []byte
	row := make([]byte, tb.ValueBytes())
	for _, f := range fids {
		tb.EncodeValues(row, values(f))
		file = binary.LittleEndian.AppendUint64(file, f)
		file = append(file, row...)
	}
	tb.Bytes, tb.CRC32C = uint64(len(file)), crc32.Checksum(file, crc32.MakeTable(crc32.Castagnoli))
	if err := os.WriteFile(filepath.Join(dir, tb.File), file, 0o644); err != nil {
		t.Fatal(err)
	}
	publish(t, dir, &servingmodel.Manifest{FormatVersion: servingmodel.FormatVersion, Name: "m", Version: 1, Tables: []*servingmodel.Table{&tb}})
	m, err := servingmodel.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m.Tables[0]
}

// publish writes the manifest m of the version folder dir, then its done marker.
func publish(t *testing.T, dir string, m *servingmodel.Manifest) {
	t.Helper()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, servingmodel.ManifestName), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+servingmodel.DoneSuffix, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sameTable fails unless a and b hold the same fids and the same stored rows.
func sameTable(t *testing.T, a, b *servedTable) {
	t.Helper()
	if a.idx.n != b.idx.n || !slices.Equal(a.enc, b.enc) {
		t.Fatalf("%d fids and %d row bytes, and %d and %d; or the rows differ", a.idx.n, len(a.enc), b.idx.n, len(b.enc))
	}
	for i := range a.idx.n {
		if a.idx.at(i) != b.idx.at(i) {
			t.Fatalf("fid %d: %#x and %#x", i, a.idx.at(i), b.idx.at(i))
		}
	}
}

// TestLoadSortedUnsorted: a table file in fid order (as Write writes them) and the same
// rows shuffled (an older export) load to the same served table, which reads every row
// back by fid through the table's codecs (absent fids as zeros); a fid stored twice is
// ErrCorrupt naming the folder, table and fid, in either order.
func TestLoadSortedUnsorted(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{
		{DimSize: proto.Int32(1), CompConfig: fp16Config()}, {DimSize: proto.Int32(2)}}}}
	meta, err := servingmodel.NewTable("t", 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	values := func(f uint64) []float32 { return []float32{float32(f % 1000), -float32(f % 77), float32(f >> 60)} }
	var fids []uint64
	for range 5000 {
		fids = append(fids, synth.Fid(1, 1+rng.IntN(8), 1+rng.Uint64N(1<<20)))
	}
	fids = append(fids, 0, math.MaxUint64, 1<<63)
	fids = sortedSet(fids)
	shuffled := slices.Clone(fids)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	base := t.TempDir()
	var tables []*servedTable
	for k, order := range [][]uint64{fids, shuffled} {
		dir := filepath.Join(base, "m", strconv.Itoa(k))
		st, err := loadTable(ctx, dir, writeVersion(t, dir, meta, order, values))
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, st)
	}
	sameTable(t, tables[0], tables[1])
	st := tables[0]
	if per := float64(st.idx.bytes()) / float64(st.idx.n); per > 7 {
		t.Errorf("%.2f index bytes per fid, want at most 7", per)
	}
	probe := append(slices.Clone(fids[:100]), 1, 2, math.MaxUint64-1)
	got := st.rowsOf(probe, nil)
	for k, f := range probe {
		want := []float32{0, 0, 0}
		if _, ok := slices.BinarySearch(fids, f); ok {
			want = values(f)
			want[0] = fp16(want[0])
		}
		if !slices.Equal(got[3*k:3*k+3], want) {
			t.Errorf("fid %#x: %v, want %v", f, got[3*k:3*k+3], want)
		}
	}

	for k, order := range [][]uint64{
		{1, 2, 3, 3, 4}, // sorted, a repeat
		{5, 3, 9, 1, 3}, // unsorted, a repeat
		{1, 3, 3, 2},    // a repeat before the disorder
	} {
		dir := filepath.Join(base, "dup", strconv.Itoa(k))
		_, err := loadTable(ctx, dir, writeVersion(t, dir, meta, order, values))
		if !errors.Is(err, servingmodel.ErrCorrupt) || !strings.Contains(err.Error(), dir) ||
			!strings.Contains(err.Error(), `table "t"`) || !strings.Contains(err.Error(), "fid 3 twice") {
			t.Errorf("fids %v: %v, want ErrCorrupt naming %s, table t and fid 3", order, err, dir)
		}
	}
}

func fp16Config() *hashtablepb.FloatCompressorConfig {
	return &hashtablepb.FloatCompressorConfig{Type: &hashtablepb.FloatCompressorConfig_Fp16_{Fp16: &hashtablepb.FloatCompressorConfig_Fp16{}}}
}

func fp16(x float32) float32 { return compress.Fp16ToFloat32(compress.Float32ToFp16(x)) }

// TestSyncRows: rows read back by fid through the table's codecs, kept in their stored form
// (an fp16 row takes half an fp32 row's bytes); an absent fid reads as zeros; a synced row,
// of a loaded fid or a new one, is stored as the table stores it, and an all-zero one
// erases its fid where skip_zero_embedding is set; lookups allocate nothing.
func TestSyncRows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		comp    *hashtablepb.FloatCompressorConfig
		rowSize int
		synced  float32 // 1/3 as stored
	}{
		{"fp32", nil, 8, 1.0 / 3},
		{"fp16", fp16Config(), 4, 0.333251953125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &hashtablepb.EmbeddingHashTableConfig{SkipZeroEmbedding: proto.Bool(true),
				EntryConfig: &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{{DimSize: proto.Int32(2), CompConfig: tc.comp}}}}
			meta, err := servingmodel.NewTable("t", 2, cfg)
			if err != nil {
				t.Fatal(err)
			}
			fids := []uint64{9, 3, 7, 1, 5, 2}
			dir := filepath.Join(t.TempDir(), "m", "1")
			st, err := loadTable(context.Background(), dir, writeVersion(t, dir, meta, fids, func(f uint64) []float32 { return []float32{float32(f), -float32(f)} }))
			if err != nil {
				t.Fatal(err)
			}
			if len(st.enc) != len(fids)*tc.rowSize {
				t.Errorf("%d bytes stored for %d rows, want %d each", len(st.enc), len(fids), tc.rowSize)
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
			st.assign([]int64{4, 9, 3}, []float32{0, 0, 0, 0, 7, 8})
			got = st.rowsOf([]uint64{4, 9, 3}, got[:0])
			if want := []float32{0, 0, 0, 0, 7, 8}; !slices.Equal(got, want) {
				t.Errorf("rows after erasing 4 and 9: %v, want %v", got, want)
			}
			st.assign([]int64{4, 9}, []float32{1, 1, 2, 2})
			got = st.rowsOf([]uint64{4, 9}, got[:0])
			if want := []float32{1, 1, 2, 2}; !slices.Equal(got, want) {
				t.Errorf("rows synced again: %v, want %v", got, want)
			}
			probe := []uint64{1, 2, 3, 4, 100, 9}
			dst := make([]float32, 0, 2*len(probe))
			if n := testing.AllocsPerRun(100, func() { dst = st.rowsOf(probe, dst[:0]) }); n != 0 {
				t.Errorf("rowsOf allocates %v times", n)
			}
		})
	}
}

// TestExportedVersionOrder: a version as training exports it (its tables in fid order)
// and the same version with its table files shuffled load to the same tables and answer
// Predict alike.
func TestExportedVersionOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a run without -short: trains and exports a model")
	}
	ctx := context.Background()
	dir, v, data := plantedVersion(t, 4096, 1<<16, `{"fp16": {}}`)
	man, err := servingmodel.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	shuffledDir := filepath.Join(t.TempDir(), "bench", strconv.FormatInt(v, 10))
	if err := os.MkdirAll(shuffledDir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tb := range man.Tables {
		b, err := os.ReadFile(filepath.Join(dir, tb.File))
		if err != nil {
			t.Fatal(err)
		}
		rows := slices.Collect(slices.Chunk(b, tb.RowBytes))
		if !slices.IsSortedFunc(rows, func(a, b []byte) int {
			return cmp.Compare(binary.LittleEndian.Uint64(a), binary.LittleEndian.Uint64(b))
		}) {
			t.Errorf("table %q: the export's rows are not in fid order", tb.Name)
		}
		rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		b = slices.Concat(rows...)
		tb.CRC32C = crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
		if err := os.WriteFile(filepath.Join(shuffledDir, tb.File), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, shuffledDir, man)
	var models []*Model
	for _, d := range []string{dir, shuffledDir} {
		sv, err := (Loader{Workers: 1}).Load(ctx, "bench", d, v)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, sv.(*Model))
	}
	for i, st := range models[0].tables {
		sameTable(t, st, models[1].tables[i])
	}
	req := predictRequest(t, data, 256)
	var preds [][]float32
	for _, m := range models {
		resp, err := m.Predict(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, resp.GetOutputs()[OutputPredictions].GetFloatVal())
	}
	if len(preds[0]) != 256 || !slices.Equal(preds[0], preds[1]) {
		t.Errorf("predictions differ: %d and %d of them", len(preds[0]), len(preds[1]))
	}
}
