package synth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// small is a data set that exercises every part of a row in a few hundred rows.
func small(typ batch.Source) Config {
	c := DefaultConfig()
	c.Type = typ
	c.Rows = 300
	c.Files = 2
	c.BatchRows = 64
	c.Features = 5
	c.Shared = 2
	c.FidsMin, c.FidsMax = 0, 4
	c.Vocab = 1000
	c.Dense = 3
	c.Tasks = 2
	c.PositiveRate = 0.3
	c.Users = 50
	return c
}

var types = []batch.Source{batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance}

// row is one row read back through io/dataset.
type row struct {
	fids   [][]uint64 // v2, SparseFeatures order
	shared []bool     // the column was a SHARED list
	dense  []float32
	labels []float32
	lineID []byte
}

// readBack reads a generated data set with io/dataset and returns its rows and stats.
func readBack(t *testing.T, c Config, paths []string) ([]row, dataset.Stats) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	o := dataset.Options{Type: c.Type, Mem: mem, BatchRows: 100}
	o.Record.PB = c.Record.PB
	r, err := dataset.Open(paths, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	feats := c.SparseFeatures()
	var rows []row
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n := int(rec.NumRows())
		base := len(rows)
		rows = append(rows, make([]row, n)...)
		for _, f := range feats {
			if c.Type == batch.SourceInstance && c.FidVersion == 1 && len(rec.Schema().FieldIndices(f.Name)) == 0 {
				// A slot without fids in any row of the batch has no column.
				for i := range n {
					rows[base+i].fids = append(rows[base+i].fids, nil)
					rows[base+i].shared = append(rows[base+i].shared, false)
				}
				continue
			}
			sp, err := batch.SparseColumn(rec, f.Name)
			if err != nil {
				t.Fatalf("feature %s: %v", f.Name, err)
			}
			for i := range n {
				rows[base+i].fids = append(rows[base+i].fids, slices.Clone(sp.Row(i)))
				rows[base+i].shared = append(rows[base+i].shared, sp.Shared)
			}
		}
		if c.Dense > 0 {
			d, err := batch.DenseColumn(rec, c.DenseName())
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				rows[base+i].dense = slices.Clone(d.Row(i))
			}
		}
		if c.Tasks > 0 {
			l, err := batch.DenseColumn(rec, batch.ColLabel)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				rows[base+i].labels = slices.Clone(l.Row(i))
			}
		}
		lid := rec.Column(rec.Schema().FieldIndices(batch.ColLineID)[0]).(*array.Binary)
		for i := range n {
			rows[base+i].lineID = slices.Clone(lid.Value(i))
		}
		rec.Release()
	}
	return rows, r.Stats()
}

func generate(t testing.TB, c Config) (Result, string) {
	t.Helper()
	dir := t.TempDir()
	res, err := Generate(context.Background(), c, dir)
	if err != nil {
		t.Fatal(err)
	}
	return res, dir
}

// TestRoundTrip: every message type × framing × codec reads back through io/dataset with
// the configured counts and the same rows (the rows do not depend on any of the three).
func TestRoundTrip(t *testing.T) {
	var want []row
	for _, typ := range types {
		for _, framing := range []recordio.Framing{recordio.PBStream, recordio.TFRecord} {
			for _, codec := range []compress.Codec{compress.None, compress.Gzip, compress.Zlib, compress.Snappy, compress.Zstd} {
				t.Run(fmt.Sprintf("%v/%v/%v", typ, framing, codec), func(t *testing.T) {
					c := small(typ)
					c.Record.Framing, c.Record.Codec = framing, codec
					res, _ := generate(t, c)
					wantRecords := c.Rows
					if typ == batch.SourceExampleBatch {
						wantRecords = 6 // 150 rows per file: 64 + 64 + 22
					}
					if len(res.Files) != 2 || res.Rows != c.Rows || res.Records != wantRecords {
						t.Fatalf("result %+v; want 2 files, %d rows, %d records", res, c.Rows, wantRecords)
					}
					var bytes int64
					for i, f := range res.Files {
						st, err := os.Stat(f.Path)
						if err != nil || st.Size() != f.Bytes || f.Rows != 150 || filepath.Base(f.Path) != c.FileName(i) {
							t.Errorf("file %d: %+v, stat %v %v", i, f, st, err)
						}
						bytes += f.Bytes
					}
					if bytes != res.Bytes {
						t.Errorf("bytes %d, files sum to %d", res.Bytes, bytes)
					}
					rows, st := readBack(t, c, res.Paths())
					if st.Rows != c.Rows || st.Records != wantRecords || st.Files != 2 {
						t.Fatalf("read back %+v", st)
					}
					checkRows(t, c, rows)
					if want == nil {
						want = rows
					} else if !sameRows(want, rows) {
						t.Errorf("rows differ from the first combination's")
					}
				})
			}
		}
	}
}

// sameRows compares rows, ignoring whether a column was a SHARED list.
func sameRows(a, b []row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !slices.EqualFunc(x.fids, y.fids, slices.Equal) || !slices.Equal(x.dense, y.dense) ||
			!slices.Equal(x.labels, y.labels) || !bytes.Equal(x.lineID, y.lineID) {
			return false
		}
	}
	return true
}

// checkRows checks the invariants of every row: cell sizes, slots, vocabulary, shared
// cells, labels and the LineId fields.
func checkRows(t *testing.T, c Config, rows []row) {
	t.Helper()
	feats := c.SparseFeatures()
	if int64(len(rows)) != c.Rows {
		t.Fatalf("%d rows, want %d", len(rows), c.Rows)
	}
	for i, r := range rows {
		group := groupStart(c, int64(i))
		for f, cell := range r.fids {
			if len(cell) < c.FidsMin || len(cell) > c.FidsMax {
				t.Fatalf("row %d %s: %d fids, want %d..%d", i, feats[f].Name, len(cell), c.FidsMin, c.FidsMax)
			}
			for _, v := range cell {
				if fid.SlotV2(v) != uint64(feats[f].Slot) {
					t.Fatalf("row %d %s: fid %#x has slot %d, want %d", i, feats[f].Name, v, fid.SlotV2(v), feats[f].Slot)
				}
			}
			wantShared := feats[f].Shared && c.Type == batch.SourceExampleBatch
			if r.shared[f] != wantShared {
				t.Fatalf("row %d %s: shared column %v, want %v", i, feats[f].Name, r.shared[f], wantShared)
			}
			if feats[f].Shared && !slices.Equal(cell, rows[group].fids[f]) {
				t.Fatalf("row %d %s: shared cell %v differs from the group's first row %v", i, feats[f].Name, cell, rows[group].fids[f])
			}
		}
		if len(r.dense) != c.Dense || len(r.labels) != c.Tasks {
			t.Fatalf("row %d: dense %v labels %v", i, r.dense, r.labels)
		}
		for _, d := range r.dense {
			if !(d >= 0 && d < 1) {
				t.Fatalf("row %d: dense value %v", i, d)
			}
		}
		var lid matrixpb.LineId
		if err := proto.Unmarshal(r.lineID, &lid); err != nil {
			t.Fatalf("row %d: LineId: %v", i, err)
		}
		var wantActions []int32
		for task, l := range r.labels {
			if l != 0 && l != 1 {
				t.Fatalf("row %d: label %v", i, l)
			}
			if l > 0 {
				wantActions = append(wantActions, int32(task+1))
			}
		}
		if lid.GetReqTime() != c.ReqTimeBase+int64(i) || !slices.Equal(lid.GetActions(), wantActions) ||
			lid.GetUserId() != strconv.FormatUint(lid.GetUid(), 10) || lid.GetChnid() < 0 || lid.GetChnid() >= int64(c.Channels) ||
			lid.GetSampleRate() != c.SampleRate || lid.Uid == nil || lid.GetUid()>>63 != 0 {
			t.Fatalf("row %d: LineId %v, labels %v", i, &lid, r.labels)
		}
		var first matrixpb.LineId
		_ = proto.Unmarshal(rows[group].lineID, &first)
		if lid.GetUid() != first.GetUid() || lid.GetChnid() != first.GetChnid() {
			t.Fatalf("row %d: uid/chnid %d/%d differ from the group's %d/%d", i, lid.GetUid(), lid.GetChnid(), first.GetUid(), first.GetChnid())
		}
	}
}

// groupStart returns the index of the first row of row i's group.
func groupStart(c Config, i int64) int64 {
	for f := range c.Files {
		first, n := c.fileRows(f)
		if i < first+n {
			return first + (i-first)/int64(c.BatchRows)*int64(c.BatchRows)
		}
	}
	panic("row out of range")
}

// TestCanonicalBytes: every record is the canonical encoding of its message (what
// proto.Marshal gives after decoding), for each type and fid version, with and without
// labels, dense values and empty cells; and the PB-stream sort id is the user_id.
func TestCanonicalBytes(t *testing.T) {
	for _, typ := range types {
		for _, version := range []int{1, 2} {
			for _, bare := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/v%d/bare=%v", typ, version, bare), func(t *testing.T) {
					c := small(typ)
					c.FidVersion = version
					c.Files = 1
					c.FirstSlot = 120 // two-byte ids
					if bare {
						c.Dense, c.Tasks, c.Shared, c.FidsMin = 0, 0, 0, 1
					}
					res, _ := generate(t, c)
					o := c.Record
					r, err := recordio.Open(res.Files[0].Path, o)
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					n := 0
					for ; ; n++ {
						rec, err := r.Next()
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil {
							t.Fatal(err)
						}
						var m proto.Message
						switch typ {
						case batch.SourceExampleBatch:
							m = &examplepb.ExampleBatch{}
						case batch.SourceExample:
							m = &examplepb.Example{}
						default:
							m = &parserpb.Instance{}
						}
						if err := proto.Unmarshal(rec.Payload, m); err != nil {
							t.Fatalf("record %d: %v", n, err)
						}
						if unknown := m.ProtoReflect().GetUnknown(); len(unknown) > 0 {
							t.Fatalf("record %d: unknown fields %x", n, unknown)
						}
						canon, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(canon, rec.Payload) {
							t.Fatalf("record %d is not canonical:\n got %x\nwant %x", n, rec.Payload, canon)
						}
						if lid := lineIDOf(t, m); string(rec.SortID) != lid.GetUserId() || lid.GetUserId() == "" {
							t.Fatalf("record %d: sort id %q, user_id %q", n, rec.SortID, lid.GetUserId())
						}
					}
					if int64(n) != res.Records {
						t.Errorf("%d records, result says %d", n, res.Records)
					}
				})
			}
		}
	}
}

// lineIDOf returns the (first) LineId of a record.
func lineIDOf(t *testing.T, m proto.Message) *matrixpb.LineId {
	switch m := m.(type) {
	case *examplepb.ExampleBatch:
		for _, l := range m.GetNamedFeatureList() {
			if l.GetName() == batch.ListLineID {
				lid := &matrixpb.LineId{}
				if err := proto.Unmarshal(l.GetFeature()[0].GetBytesList().GetValue()[0], lid); err != nil {
					t.Fatal(err)
				}
				return lid
			}
		}
	case *examplepb.Example:
		return m.GetLineId()
	case *parserpb.Instance:
		return m.GetLineId()
	}
	return nil
}

// TestDeterminism: the same Config gives byte-identical files whatever the parallelism;
// another seed gives other files.
func TestDeterminism(t *testing.T) {
	for _, typ := range types {
		c := small(typ)
		c.Files = 3
		c.Record.Codec = compress.Zstd
		c.Parallel = 1
		a, _ := generate(t, c)
		c.Parallel = 3
		b, _ := generate(t, c)
		c.Seed++
		d, _ := generate(t, c)
		for i := range a.Files {
			x, y, z := readFile(t, a.Files[i].Path), readFile(t, b.Files[i].Path), readFile(t, d.Files[i].Path)
			if !bytes.Equal(x, y) {
				t.Errorf("%v file %d differs between runs", typ, i)
			}
			if bytes.Equal(x, z) {
				t.Errorf("%v file %d is the same for seeds %d and %d", typ, i, c.Seed-1, c.Seed)
			}
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFidVersions: v1 data reads back as the v2 conversion of the same fids, and Fid's v1
// and v2 forms agree; each slot's vocabulary is exactly Vocab distinct fids.
func TestFidVersions(t *testing.T) {
	for _, typ := range types {
		c := small(typ)
		c.FidVersion = 1
		r1, _ := generate(t, c)
		rows1, _ := readBack(t, c, r1.Paths())
		c.FidVersion = 2
		r2, _ := generate(t, c)
		rows2, _ := readBack(t, c, r2.Paths())
		if !sameRows(rows1, rows2) {
			t.Errorf("%v: v1 and v2 data sets read back differently", typ)
		}
	}
	for _, slot := range []int{0, 1, 1023} {
		seen := map[uint64]bool{}
		for rank := uint64(1); rank <= 5000; rank++ {
			v1, v2 := Fid(1, slot, rank), Fid(2, slot, rank)
			if fid.V1ToV2(v1) != v2 || fid.SlotV1(v1) != uint64(slot) || fid.SlotV2(v2) != uint64(slot) || seen[v2] {
				t.Fatalf("slot %d rank %d: v1 %#x v2 %#x", slot, rank, v1, v2)
			}
			seen[v2] = true
		}
	}
	for x := uint64(0); x < 1<<16; x++ { // perm48 is a bijection: spot-check injectivity on a range
		if perm48(x) == perm48(x+1<<47) {
			t.Fatalf("perm48 collides at %#x", x)
		}
	}
}

// TestZipfData: in generated data the most frequent fid of a feature is its rank-1 fid
// (Fid), and the rank-1 to rank-10 frequency ratio is 10^s within 4 standard errors.
func TestZipfData(t *testing.T) {
	for _, s := range []float64{1, 1.3} {
		c := DefaultConfig()
		c.Rows, c.Features, c.Shared, c.FidsMin, c.FidsMax, c.Vocab, c.Zipf = 20000, 4, 0, 5, 5, 10000, s
		if raceEnabled {
			c.Rows = 4000
		}
		res, _ := generate(t, c)
		rows, _ := readBack(t, c, res.Paths())
		draws := 0
		var c1, c10 int
		for f, sf := range c.SparseFeatures() {
			counts := map[uint64]int{}
			for _, r := range rows {
				for _, v := range r.fids[f] {
					counts[v]++
				}
				draws += len(r.fids[f])
			}
			top := Fid(2, sf.Slot, 1)
			for v, n := range counts {
				if n > counts[top] {
					t.Fatalf("s=%v %s: fid %#x seen %d times, more than rank 1 (%d)", s, sf.Name, v, n, counts[top])
				}
			}
			c1 += counts[top]
			c10 += counts[Fid(2, sf.Slot, 10)]
		}
		var norm float64
		for k := c.Vocab; k >= 1; k-- {
			norm += math.Pow(float64(k), -s)
		}
		p1, p10 := 1/norm, math.Pow(10, -s)/norm
		tol := 4 * math.Sqrt(1/(p1*float64(draws))+1/(p10*float64(draws)))
		ratio, want := float64(c1)/float64(c10), math.Pow(10, s)
		if math.Abs(ratio/want-1) > tol {
			t.Errorf("s=%v: rank 1 / rank 10 = %.2f, want %.2f ± %.1f%%", s, ratio, want, 100*tol)
		}
		t.Logf("s=%v: rank 1 / rank 10 = %.2f (want %.2f ± %.1f%%) over %d draws", s, ratio, want, 100*tol, draws)
	}
}

// TestSharedGroups: for Example and Instance streams, shared cells change from group to
// group (and within a group are identical, which checkRows checks).
func TestSharedGroups(t *testing.T) {
	for _, typ := range types {
		c := small(typ)
		c.FidsMin = 2
		res, _ := generate(t, c)
		rows, _ := readBack(t, c, res.Paths())
		checkRows(t, c, rows)
		sh := c.Features // first shared feature
		if slices.Equal(rows[0].fids[sh], rows[64].fids[sh]) && slices.Equal(rows[64].fids[sh], rows[128].fids[sh]) {
			t.Errorf("%v: shared cells equal in three groups", typ)
		}
	}
}

// parityLabeler labels a row positive when its first fid is odd: a deterministic function
// of the features, like a planted model.
type parityLabeler struct{}

func (parityLabeler) Label(_ *rand.Rand, row *Row, labels []float32) {
	for i := range labels {
		labels[i] = 0
		if len(row.Fids[0]) > 0 && row.Fids[0][0]&1 == 1 {
			labels[i] = 1
		}
	}
}

// TestLabeler: a Labeler sees the row's fids, and replacing it changes only the labels and
// actions.
func TestLabeler(t *testing.T) {
	c := small(batch.SourceExample)
	c.FidsMin = 1
	res, _ := generate(t, c)
	base, _ := readBack(t, c, res.Paths())
	c.Labeler = parityLabeler{}
	res, _ = generate(t, c)
	rows, _ := readBack(t, c, res.Paths())
	checkRows(t, c, rows)
	pos := 0
	for i, r := range rows {
		want := float32(0)
		if r.fids[0][0]&1 == 1 { // v1 fids read back as v2 with the same low 48 bits
			want = 1
		}
		if r.labels[0] != want || r.labels[1] != want {
			t.Fatalf("row %d: labels %v, first fid %#x", i, r.labels, r.fids[0][0])
		}
		if !slices.EqualFunc(r.fids, base[i].fids, slices.Equal) || !slices.Equal(r.dense, base[i].dense) {
			t.Fatalf("row %d: features changed with the labeler", i)
		}
		pos += int(want)
	}
	if pos == 0 || pos == len(rows) {
		t.Errorf("%d positives of %d", pos, len(rows))
	}
}

// TestPositiveRate: RandomLabeler's positives follow the rate.
func TestPositiveRate(t *testing.T) {
	c := small(batch.SourceInstance)
	c.Rows, c.Files, c.Features, c.Shared, c.Dense, c.Tasks, c.PositiveRate = 20000, 1, 1, 0, 0, 3, 0.25
	if raceEnabled {
		c.Rows = 4000
	}
	res, _ := generate(t, c)
	rows, _ := readBack(t, c, res.Paths())
	pos := 0
	for _, r := range rows {
		for _, l := range r.labels {
			pos += int(l)
		}
	}
	n := float64(3 * len(rows))
	if rate, tol := float64(pos)/n, 4*math.Sqrt(0.25*0.75/n); math.Abs(rate-0.25) > tol {
		t.Errorf("positive rate %.4f, want 0.25 ± %.4f", rate, tol)
	}
}

// TestFeatureConfigs: the FeatureConfigs is valid, names exactly the generated features,
// and the sharding kernel runs on every message type.
func TestFeatureConfigs(t *testing.T) {
	for _, typ := range types {
		for _, version := range []int{1, 2} {
			c := small(typ)
			c.FidVersion = version
			c.FidsMin = 1 // every Instance v1 slot has a column
			fc, err := FeatureConfigs(c, LayoutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := featcfg.New(fc)
			if err != nil {
				t.Fatalf("%v v%d: %v", typ, version, err)
			}
			if len(cfg.Features) != c.Features+c.Shared || len(cfg.Layouts) != 3 || len(cfg.Tables) != 2 {
				t.Fatalf("%v: %d features, %d layouts, %d tables", typ, len(cfg.Features), len(cfg.Layouts), len(cfg.Tables))
			}
			mean := 0
			for _, f := range cfg.Features {
				if f.Pooling == featcfg.Mean {
					mean++
				}
			}
			if mean == 0 {
				t.Errorf("no MEAN feature")
			}
			res, _ := generate(t, c)
			s, err := shard.New(cfg, shard.Options{PS: 2, Version: 5})
			if err != nil {
				t.Fatal(err)
			}
			r, err := dataset.Open(res.Paths(), dataset.Options{Type: c.Type, Record: recordio.Options{PB: c.Record.PB}})
			if err != nil {
				t.Fatal(err)
			}
			var fids, want int
			for {
				rec, err := r.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range c.SparseFeatures() {
					if !slices.Contains(batch.Features(rec.Schema()), f.Name) {
						t.Fatalf("%v v%d: feature %s missing from the data", typ, version, f.Name)
					}
				}
				var in shard.Input
				if err := in.FromBatch(rec, cfg); err != nil {
					t.Fatal(err)
				}
				out, err := s.Shard(&in)
				if err != nil {
					t.Fatal(err)
				}
				for tb := range out.Tables {
					for p := range out.PS {
						fids += len(out.List(tb, p))
					}
				}
				for fi := range in.Features {
					want += len(in.Features[fi].Values[in.Features[fi].Offsets[0]:in.Features[fi].Offsets[len(in.Features[fi].Offsets)-1]])
				}
				rec.Release()
			}
			r.Close()
			if fids == 0 || fids != want {
				t.Errorf("%v v%d: sharded %d fids, the inputs hold %d", typ, version, fids, want)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Type = 0 }, "message type"},
		{func(c *Config) { c.Rows = 0 }, "rows"},
		{func(c *Config) { c.Files = 0 }, "files"},
		{func(c *Config) { c.Rows, c.Files = 3, 4 }, "every file needs a row"},
		{func(c *Config) { c.BatchRows = 0 }, "batch rows"},
		{func(c *Config) { c.Prefix = "a/b" }, "prefix"},
		{func(c *Config) { c.Features = -1 }, "feature counts"},
		{func(c *Config) { c.Features, c.Shared = 0, 0 }, "no sparse features"},
		{func(c *Config) { c.FidsMin, c.FidsMax = 3, 2 }, "fids per cell"},
		{func(c *Config) { c.FidsMin, c.FidsMax = 0, 0 }, "fids per cell"},
		{func(c *Config) { c.Vocab = 0 }, "vocabulary"},
		{func(c *Config) { c.Vocab = 1<<48 + 1 }, "vocabulary"},
		{func(c *Config) { c.Zipf = -0.5 }, "zipf"},
		{func(c *Config) { c.Zipf = math.NaN() }, "zipf"},
		{func(c *Config) { c.FidVersion = 3 }, "fid version"},
		{func(c *Config) { c.FirstSlot = 1020 }, "slots 1020..1039 do not fit v1"},
		{func(c *Config) { c.FirstSlot = -1 }, "slots"},
		{func(c *Config) { c.Type, c.Naming = batch.SourceInstance, NamingF }, "fc_slot"},
		{func(c *Config) { c.Naming = 7 }, "naming"},
		{func(c *Config) { c.Dense = -1 }, "dense"},
		{func(c *Config) { c.Tasks = -1 }, "tasks"},
		{func(c *Config) { c.PositiveRate = 1.5 }, "positive rate"},
		{func(c *Config) { c.Users = 0 }, "users"},
		{func(c *Config) { c.Channels = 0 }, "channels"},
		{func(c *Config) { c.SampleRate = 0 }, "sample rate"},
		{func(c *Config) { c.Parallel = -1 }, "parallel"},
		{func(c *Config) { c.Record.Codec = 99 }, "codec"},
		{func(c *Config) { c.BatchRows, c.Features, c.FidsMax = 1<<20, 1000, 100 }, "2 GiB"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v", tc.want, err)
		}
		if _, gerr := Generate(context.Background(), c, t.TempDir()); gerr == nil {
			t.Errorf("%s: Generate accepted the config", tc.want)
		}
	}
	// Valid corner cases.
	c := DefaultConfig()
	c.Type, c.FidVersion, c.FirstSlot, c.Features, c.Shared = batch.SourceInstance, 2, 32767, 1, 0
	if err := c.Validate(); err != nil {
		t.Errorf("v2 slot 32767: %v", err)
	}
	if _, err := FeatureConfigs(c, LayoutOptions{Dim: -1}); err == nil {
		t.Errorf("negative layout dim accepted")
	}
}

// TestCancel: a cancelled generation fails and leaves no file behind.
func TestCancel(t *testing.T) {
	c := small(batch.SourceExample)
	c.Files = 4
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if _, err := Generate(ctx, c, dir); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left %d files behind", len(ents))
	}
}

// TestLagrangeX: the LagrangeX header variant reads back.
func TestLagrangeX(t *testing.T) {
	for _, typ := range types {
		c := small(typ)
		c.Record.PB.HasSortID, c.Record.PB.LagrangeX = false, true
		res, _ := generate(t, c)
		rows, _ := readBack(t, c, res.Paths())
		checkRows(t, c, rows)
	}
}

// TestFileRows: files split the rows evenly, without gaps.
func TestFileRows(t *testing.T) {
	for _, tc := range []struct{ rows, files int64 }{{10, 3}, {7, 7}, {1 << 48, 1000003}, {100, 1}} {
		c := Config{Rows: tc.rows, Files: int(tc.files)}
		next := int64(0)
		for i := range c.Files {
			first, n := c.fileRows(i)
			if first != next || n < tc.rows/tc.files || n > tc.rows/tc.files+1 {
				t.Fatalf("%+v file %d: first %d n %d", tc, i, first, n)
			}
			next = first + n
		}
		if next != tc.rows {
			t.Fatalf("%+v: files end at %d", tc, next)
		}
	}
}

// TestBoundedAllocation: allocation does not grow with the number of rows (buffers are
// reused from group to group; records stream to the writer).
func TestBoundedAllocation(t *testing.T) {
	alloc := func(rows int64) uint64 {
		c := small(batch.SourceExample)
		c.Rows, c.Files, c.Parallel = rows, 1, 1
		dir := t.TempDir()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := Generate(context.Background(), c, dir); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	alloc(1000) // warm up
	few, many := alloc(2000), alloc(40000)
	t.Logf("allocated %d bytes for 2000 rows, %d for 40000", few, many)
	if many > 2*few+64<<10 {
		t.Errorf("allocation grows with the rows: %d bytes for 2000 rows, %d for 40000", few, many)
	}
}
