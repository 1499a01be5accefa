// Package servingmodel is the exported model directory that serving loads: under
// {base}/{name}/{version}/ the model spec and the embedding tables in SERVING form, with a
// manifest of sizes and checksums, published atomically and marked by {version}.write.done.
package servingmodel

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/ps/compress"
	"github.com/monolith-go/monolith/ps/export"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// FormatVersion is the manifest format this package writes and reads.
const FormatVersion = 1

// The files of a model version.
const (
	ManifestName    = "MANIFEST.json"
	DoneSuffix      = ".write.done" // {base}/{name}/{version}.write.done, written last
	tableSuffix     = ".serving"
	tmpPrefix       = ".tmp-"
	entryHeaderSize = 8 // the fid, int64 little-endian, before each row
)

// ErrCorrupt wraps every failure caused by a version's files.
var ErrCorrupt = errors.New("servingmodel: corrupt or partial model version")

// Spec is what serving needs besides the tables to answer like training's evaluation: the
// model and the features. Writers fill it; this package stores it as it is.
type Spec struct {
	Model          string `json:"model"`
	Bias           string `json:"bias_layout"`
	Vec            string `json:"vec_layout"`
	Hidden         []int  `json:"hidden,omitempty"`
	Unique         bool   `json:"unique"`
	Shards         int    `json:"shards"`          // the PS shard count the feature layout was built for
	FeatureConfigs string `json:"feature_configs"` // FeatureConfigs, protobuf text
	GlobalStep     int64  `json:"global_step"`     // of the checkpoint
}

// Segment is one segment of a served row: its dim and storage codec.
type Segment struct {
	Dim   int    `json:"dim"`
	Codec string `json:"codec"`
}

// Table is one served table: its rows in File, each an 8-byte fid then the segments'
// encodings, RowBytes in all; Write writes them in ascending order of fid as an unsigned
// number (versions written before may hold them in any order).
type Table struct {
	Name     string    `json:"name"`
	Dim      int       `json:"dim"`
	Segments []Segment `json:"segments"`
	// SkipZero: all-zero rows were left out (skip_zero_embedding); a missing fid reads as
	// zeros either way.
	SkipZero bool   `json:"skip_zero_embedding"`
	File     string `json:"file"`
	RowBytes int    `json:"row_bytes"`
	Entries  uint64 `json:"entries"`
	Bytes    uint64 `json:"bytes"`
	CRC32C   uint32 `json:"crc32c"`
	// Config is the table's configuration with entry_type SERVING (spec/ps.md §2.2).
	Config json.RawMessage `json:"config"`

	spans []span // from Segments and the config (Open, NewTable)
}

// Manifest describes a model version.
type Manifest struct {
	FormatVersion int      `json:"format_version"`
	Name          string   `json:"name"`
	Version       int64    `json:"version"`
	Spec          Spec     `json:"spec"`
	Tables        []*Table `json:"tables"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// span is where one segment sits in a row: its values [at, at+dim) and their encoding by
// c in the stored values' bytes [off, off+n).
type span struct {
	c               compress.Codec
	at, dim, off, n int
}

// spansOf are the storage spans of a table config's segments (fp32 where no compressor
// is set; one fp32 segment of dim values when the config has none), and the segments as
// the manifest records them.
func spansOf(cfg *hashtablepb.EmbeddingHashTableConfig, dim int) ([]span, []Segment, error) {
	segs := cfg.GetEntryConfig().GetSegments()
	var comps []*hashtablepb.FloatCompressorConfig
	var dims []int
	for _, s := range segs {
		comps, dims = append(comps, s.GetCompConfig()), append(dims, int(s.GetDimSize()))
	}
	if len(segs) == 0 {
		comps, dims = []*hashtablepb.FloatCompressorConfig{nil}, []int{dim}
	}
	var spans []span
	var out []Segment
	at, off := 0, 0
	for i, comp := range comps {
		c, err := compress.NewCodec(comp)
		if err != nil {
			return nil, nil, fmt.Errorf("segment %d: %w", i, err)
		}
		d := dims[i]
		spans = append(spans, span{c: c, at: at, dim: d, off: off, n: c.Size(d)})
		out = append(out, Segment{Dim: d, Codec: c.Name()})
		at, off = at+d, off+c.Size(d)
	}
	if at != dim {
		return nil, nil, fmt.Errorf("segments of %d values in all, the table dim is %d", at, dim)
	}
	return spans, out, nil
}

// rowBytes is a stored row's size: the fid, then every span.
func rowBytes(spans []span) int {
	last := spans[len(spans)-1]
	return entryHeaderSize + last.off + last.n
}

// Result is what Write wrote.
type Result struct {
	Dir     string // the version folder
	Tables  int
	Entries uint64 // rows written
	Skipped uint64 // all-zero rows left out (skip_zero_embedding)
	Bytes   uint64 // of the table files
}

// Write exports the tables of src with spec as version of model name under base: into a
// temporary folder beside it, renamed to {base}/{name}/{version} when complete, then the
// marker {version}.write.done. An existing version is an error (versions are immutable).
// Each table file holds its rows in ascending fid order (as unsigned numbers), which lets
// a server index them as it reads them; a fid twice in the checkpoint is an error.
func Write(ctx context.Context, base, name string, version int64, spec Spec, src *export.Source) (Result, error) {
	return write(ctx, base, name, version, spec, src, sortBudget)
}

// write is Write sorting at most budget bytes of rows in memory.
func write(ctx context.Context, base, name string, version int64, spec Spec, src *export.Source, budget int) (Result, error) {
	if name == "" || filepath.Base(name) != name || version < 0 {
		return Result{}, fmt.Errorf("servingmodel: model name %q and version %d: want a plain name and a version ≥ 0", name, version)
	}
	dir := filepath.Join(base, name)
	final := filepath.Join(dir, strconv.FormatInt(version, 10))
	if _, err := os.Stat(final); err == nil {
		return Result{}, fmt.Errorf("servingmodel: %s exists: a version is written once", final)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("servingmodel: %w", err)
	}
	tmp := filepath.Join(dir, tmpPrefix+strconv.FormatInt(version, 10)+"-"+strconv.FormatUint(rand.Uint64(), 36))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return Result{}, fmt.Errorf("servingmodel: %w", err)
	}
	m := &Manifest{FormatVersion: FormatVersion, Name: name, Version: version, Spec: spec}
	res, err := writeTables(ctx, tmp, m, src, budget)
	if err == nil {
		var b []byte
		if b, err = json.MarshalIndent(m, "", "  "); err == nil {
			err = atomicfile.WriteFile(filepath.Join(tmp, ManifestName), append(b, '\n'))
		}
	}
	if err == nil {
		err = atomicfile.SyncDir(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		return Result{}, errors.Join(fmt.Errorf("servingmodel: write %s: %w", final, err), os.RemoveAll(tmp))
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return Result{}, fmt.Errorf("servingmodel: %w", err)
	}
	if err := atomicfile.WriteFile(final+DoneSuffix, nil); err != nil {
		return Result{}, fmt.Errorf("servingmodel: done marker: %w", err)
	}
	res.Dir = final
	return res, nil
}

// NewTable describes the SERVING form of a table of dim values configured by cfg (its
// codecs, row size and skip_zero_embedding), with no file or rows yet.
func NewTable(name string, dim int, cfg *hashtablepb.EmbeddingHashTableConfig) (*Table, error) {
	spans, segs, err := spansOf(cfg, dim)
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", name, err)
	}
	cb, err := marshalConfig(cloneServing(cfg))
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", name, err)
	}
	return &Table{Name: name, Dim: dim, Segments: segs, SkipZero: cfg.GetSkipZeroEmbedding(), Config: cb,
		RowBytes: rowBytes(spans), spans: spans}, nil
}

// writeTables writes every table of src into tmp in SERVING form and records it in m,
// each table's rows in ascending fid order: sorted in memory up to budget bytes of rows,
// beyond that through sorted runs spilled into tmp.
func writeTables(ctx context.Context, tmp string, m *Manifest, src *export.Source, budget int) (Result, error) {
	var res Result
	for i, st := range src.Tables {
		t, err := NewTable(st.Name, st.Dim, st.Config())
		if err != nil {
			return res, err
		}
		t.File = fmt.Sprintf("%03d-%s%s", i, safeName(st.Name), tableSuffix)
		skipped, err := t.write(ctx, tmp, st, budget)
		if err != nil {
			return res, fmt.Errorf("table %q: %w", st.Name, err)
		}
		m.Tables = append(m.Tables, t)
		res.Tables++
		res.Skipped += skipped
		res.Entries += t.Entries
		res.Bytes += t.Bytes
	}
	return res, nil
}

// write writes the rows of st into t.File under tmp, sorted by fid, and sets t's entry
// count, size and checksum; skipped is the all-zero rows left out.
func (t *Table) write(ctx context.Context, tmp string, st *export.Table, budget int) (skipped uint64, err error) {
	sorter := newRecordSorter(t.RowBytes, budget, st.Entries, tmp, ".sort-"+strings.TrimSuffix(t.File, tableSuffix)+"-*")
	defer func() {
		if cerr := sorter.close(); err == nil {
			err = cerr
		}
	}()
	row := make([]byte, t.RowBytes)
	err = st.Scan(ctx, func(d *hashtablepb.EntryDump) error {
		num := d.GetNum()
		if len(num) != t.Dim {
			return fmt.Errorf("fid %d has %d values, the table dim is %d", d.GetId(), len(num), t.Dim)
		}
		if t.SkipZero && zeroRow(num) {
			skipped++
			return nil
		}
		t.encode(row, d.GetId(), num)
		return sorter.add(row)
	})
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(filepath.Join(tmp, t.File), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	h := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(f, 64<<10)
	w := &countWriter{w: io.MultiWriter(bw, h)}
	var last uint64
	err = sorter.each(func(row []byte) error {
		fid := fidOf(row)
		if t.Entries > 0 && fid == last {
			return fmt.Errorf("fid %d twice in the checkpoint", int64(fid))
		}
		t.Entries++
		last = fid
		_, err := w.Write(row)
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	t.Bytes, t.CRC32C = w.n, h.Sum32()
	return skipped, nil
}

// encode writes fid and the row's segments into row.
func (t *Table) encode(row []byte, fid int64, num []float32) {
	binary.LittleEndian.PutUint64(row, uint64(fid))
	t.EncodeValues(row[entryHeaderSize:], num)
}

// ValueBytes is the bytes of a row's values (RowBytes less its 8-byte fid): what a server
// keeping the rows in their stored form holds per fid beside the fid.
func (t *Table) ValueBytes() int { return t.RowBytes - entryHeaderSize }

// EncodeValues writes src (Dim values) into enc (ValueBytes) through the segments' codecs.
func (t *Table) EncodeValues(enc []byte, src []float32) {
	for _, s := range t.spans {
		s.c.Encode(enc[s.off:s.off+s.n], src[s.at:s.at+s.dim])
	}
}

// DecodeValues reads Dim values from enc (ValueBytes, as EncodeValues writes them) into dst.
func (t *Table) DecodeValues(enc []byte, dst []float32) {
	for _, s := range t.spans {
		s.c.Decode(dst[s.at:s.at+s.dim], enc[s.off:s.off+s.n])
	}
}

// Store returns in dst what storing src (Dim values) in this table keeps: each segment
// encoded by its codec and decoded again (fp32 exactly src). row is scratch of RowBytes.
func (t *Table) Store(dst, src []float32, row []byte) {
	t.encode(row, 0, src)
	t.Decode(row, dst)
}

// ZeroRow is skip_zero_embedding's test (spec/ps.md §2.1): Σx² below FLT_MIN.
func ZeroRow(v []float32) bool { return zeroRow(v) }

// Decode reads one row (as written in File) into fid and dst (Dim values).
func (t *Table) Decode(row []byte, dst []float32) int64 {
	t.DecodeValues(row[entryHeaderSize:], dst)
	return int64(binary.LittleEndian.Uint64(row))
}

// zeroRow is skip_zero_embedding's test: Σx² below the smallest normal float (§2.1).
func zeroRow(v []float32) bool {
	var s float32
	for _, x := range v {
		s += x * x
	}
	return s < 0x1p-126 // FLT_MIN
}

type countWriter struct {
	w io.Writer
	n uint64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

// safeName keeps letters, digits, '-', '_' and '.' of a table name.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}
