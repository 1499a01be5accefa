package servingmodel

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/ps/compress"
	"github.com/monolith-go/monolith/ps/export"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// mixed has an fp16 segment then a fixed_r8 one (r 1); plain has no compressor (fp32).
const specs = `
tables {
  name: "mixed"
  config {
    entry_config {
      segments { dim_size: 2 init_config { zeros {} } opt_config { sgd { learning_rate: 0.1 } } comp_config { fp16 {} } }
      segments { dim_size: 2 init_config { zeros {} } opt_config { adagrad { learning_rate: 0.1 } } comp_config { fixed_r8 { r: 1 } } }
    }
    cuckoo {}
  }
  filter { type: NONE }
}
tables {
  name: "plain"
  config {
    entry_config { segments { dim_size: 3 init_config { zeros {} } opt_config { sgd { learning_rate: 0.1 } } } }
    cuckoo {}
  }
  filter { type: NONE }
}`

var rows = map[string]map[int64][]float32{
	"mixed": {1: {0.1, -2.5, 0.3, -0.7}, -5: {65504, 1e-8, 200, -200}, 7: {0, 0, 0, 0}},
	"plain": {2: {1.5, -0.25, math.Pi}, 3: {0, 0, 0}},
}

// checkpointOf saves the rows above as a one-shard checkpoint and returns its Source.
func checkpointOf(t *testing.T) *export.Source {
	t.Helper()
	var tc pspb.TablesConfig
	if err := prototext.Unmarshal([]byte(specs), &tc); err != nil {
		t.Fatal(err)
	}
	var tables []*table.Table
	for i, spec := range tc.GetTables() {
		tb, err := table.FromSpec(spec, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		for fid, num := range rows[spec.GetName()] {
			if _, err := tb.Assign([]int64{fid}, num, 0); err != nil {
				t.Fatal(err)
			}
		}
		tables = append(tables, tb)
	}
	dir := t.TempDir()
	res, err := checkpoint.Save(context.Background(), dir, checkpoint.Meta{Step: 42, NumShards: 1}, tables)
	if err != nil {
		t.Fatal(err)
	}
	src, err := export.Resolve(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestWriteReadVerify: a version holds every row stored by its segments' codecs, its
// manifest names the codecs and the SERVING entry type, it reads back equal to the
// checkpoint through the codecs, and it is written once.
func TestWriteReadVerify(t *testing.T) {
	ctx := context.Background()
	src := checkpointOf(t)
	base := t.TempDir()
	spec := Spec{Model: "fm", Shards: 1, GlobalStep: 42, FeatureConfigs: "x"}
	res, err := Write(ctx, base, "m", 42, spec, src)
	if err != nil {
		t.Fatal(err)
	}
	if res.Dir != filepath.Join(base, "m", "42") || res.Tables != 2 || res.Entries != 5 {
		t.Fatalf("result %+v", res)
	}
	if err := Verify(ctx, res.Dir, src); err != nil {
		t.Fatal(err)
	}
	m, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Spec.Model != "fm" || m.Version != 42 || len(m.Tables) != 2 {
		t.Fatalf("manifest %+v", m)
	}
	mixed := m.Tables[0]
	if mixed.Name != "mixed" || mixed.RowBytes != 8+2*2+2 || mixed.Segments[0].Codec != "fp16" || mixed.Segments[1].Codec != "fixed_r8" {
		t.Errorf("mixed table %+v", mixed)
	}
	if m.Tables[1].RowBytes != 8+3*4 || m.Tables[1].Segments[0].Codec != "fp32" {
		t.Errorf("plain table %+v", m.Tables[1])
	}
	var cfg hashtablepb.EmbeddingHashTableConfig
	if err := protojsonUnmarshal(mixed.Config, &cfg); err != nil || cfg.GetEntryConfig().GetEntryType() != hashtablepb.EntryConfig_SERVING {
		t.Errorf("exported config entry type %v (%v), want SERVING", cfg.GetEntryConfig().GetEntryType(), err)
	}
	fp16 := func(x float32) float32 { return compress.Fp16ToFloat32(compress.Float32ToFp16(x)) }
	r8 := func(x float32) float32 { // r 1: step 1/128
		q := float64(x) * 128
		if q >= 0 {
			q = math.Trunc(q + 0.5)
		} else {
			q = math.Trunc(q - 0.5)
		}
		return float32(max(-128, min(127, q))) / 128
	}
	got := map[int64][]float32{}
	if err := mixed.Scan(res.Dir, func(fid int64, emb []float32) error {
		got[fid] = append([]float32(nil), emb...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for fid, num := range rows["mixed"] {
		want := []float32{fp16(num[0]), fp16(num[1]), r8(num[2]), r8(num[3])}
		for k := range want {
			if got[fid][k] != want[k] {
				t.Errorf("fid %d: %v, want %v", fid, got[fid], want)
				break
			}
		}
	}
	if _, err := Write(ctx, base, "m", 42, spec, src); err == nil {
		t.Error("a second write of version 42 succeeded")
	}
}

// TestDamagedVersion: a version without its marker is not opened, and a table file with
// a flipped byte or a wrong length fails its read naming the file.
func TestDamagedVersion(t *testing.T) {
	ctx := context.Background()
	src := checkpointOf(t)
	base := t.TempDir()
	res, err := Write(ctx, base, "m", 1, Spec{Model: "fm"}, src)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(res.Dir, m.Tables[1].File)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0x40
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	nop := func(int64, []float32) error { return nil }
	if err := m.Tables[1].Scan(res.Dir, nop); !errors.Is(err, ErrCorrupt) || !contains(err.Error(), "CRC-32C") {
		t.Errorf("flipped byte: %v", err)
	}
	if err := Verify(ctx, res.Dir, src); err == nil {
		t.Error("Verify passed a damaged version")
	}
	if err := os.WriteFile(file, b[:len(b)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Tables[1].Scan(res.Dir, nop); !errors.Is(err, ErrCorrupt) || !contains(err.Error(), "bytes") {
		t.Errorf("short file: %v", err)
	}
	if err := os.Remove(res.Dir + DoneSuffix); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(res.Dir); !errors.Is(err, ErrCorrupt) || !contains(err.Error(), DoneSuffix) {
		t.Errorf("no marker: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func protojsonUnmarshal(b []byte, m proto.Message) error { return protojson.Unmarshal(b, m) }

// TestTableWithoutSegments: a table config without segments stores its rows as fp32 (a
// zero Codec once wrote nothing and took one byte per value).
func TestTableWithoutSegments(t *testing.T) {
	tb, err := NewTable("t", 3, &hashtablepb.EmbeddingHashTableConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if tb.RowBytes != 8+12 || len(tb.Segments) != 1 || tb.Segments[0].Codec != "fp32" {
		t.Fatalf("row bytes %d, segments %v; want 20 and one fp32 segment of 3", tb.RowBytes, tb.Segments)
	}
	want := []float32{1.5, -2.25, 1e-3}
	enc, got := make([]byte, tb.ValueBytes()), make([]float32, 3)
	tb.EncodeValues(enc, want)
	tb.DecodeValues(enc, got)
	if !slices.Equal(got, want) {
		t.Errorf("read back %v, want %v", got, want)
	}
}
