package servingmodel

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/ps/export"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// cloneServing is cfg with entry_config.entry_type SERVING, as an exported table's
// configuration reads (spec/ps.md §2.2).
func cloneServing(cfg *hashtablepb.EmbeddingHashTableConfig) *hashtablepb.EmbeddingHashTableConfig {
	c := proto.Clone(cfg).(*hashtablepb.EmbeddingHashTableConfig)
	if c == nil {
		c = &hashtablepb.EmbeddingHashTableConfig{}
	}
	if c.EntryConfig == nil {
		c.EntryConfig = &hashtablepb.EntryConfig{}
	}
	c.EntryConfig.EntryType = hashtablepb.EntryConfig_SERVING.Enum()
	return c
}

func marshalConfig(c *hashtablepb.EmbeddingHashTableConfig) (json.RawMessage, error) {
	return protojson.Marshal(c)
}

// Open reads the manifest of the version folder dir. A version without its done marker
// ({dir}.write.done), a manifest that does not parse or of another format, or a table
// whose codecs or row size disagree with its segments is an error wrapping ErrCorrupt;
// the table files are checked as they are read (Scan).
func Open(dir string) (*Manifest, error) {
	if _, err := os.Stat(dir + DoneSuffix); err != nil {
		return nil, fmt.Errorf("%w: %s has no %s marker (not finished, or not an export): %v", ErrCorrupt, dir, DoneSuffix, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, filepath.Join(dir, ManifestName), err)
	}
	if m.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%w: %s: format %d, this build reads %d", ErrCorrupt, dir, m.FormatVersion, FormatVersion)
	}
	for _, t := range m.Tables {
		var cfg hashtablepb.EmbeddingHashTableConfig
		if err := protojson.Unmarshal(t.Config, &cfg); err != nil {
			return nil, fmt.Errorf("%w: %s: table %q config: %v", ErrCorrupt, dir, t.Name, err)
		}
		spans, segs, err := spansOf(&cfg, t.Dim)
		if err != nil || !slices.Equal(segs, t.Segments) || rowBytes(spans) != t.RowBytes || filepath.Base(t.File) != t.File {
			return nil, fmt.Errorf("%w: %s: table %q: segments %v, row bytes %d, file %q disagree with its config (%v)", ErrCorrupt, dir, t.Name, t.Segments, t.RowBytes, t.File, err)
		}
		t.spans = spans
	}
	return &m, nil
}

// rowReader reads a table file row by row, checking its size up front and its entry count
// and CRC-32C at the end (close).
type rowReader struct {
	t    *Table
	path string
	f    *os.File
	r    io.Reader
	h    hash.Hash32
	row  []byte
	n    uint64
}

func (t *Table) open(dir string) (*rowReader, error) {
	path := filepath.Join(dir, t.File)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	st, err := f.Stat()
	if err == nil && (uint64(st.Size()) != t.Bytes || t.RowBytes <= 0 || t.Bytes != t.Entries*uint64(t.RowBytes)) {
		err = fmt.Errorf("%s is %d bytes; the manifest says %d bytes, %d rows of %d", path, st.Size(), t.Bytes, t.Entries, t.RowBytes)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	h := crc32.New(castagnoli)
	// Rows are a few dozen bytes: read the file in 64 KiB blocks, not one system call per row.
	return &rowReader{t: t, path: path, f: f, r: io.TeeReader(bufio.NewReaderSize(f, 64<<10), h), h: h, row: make([]byte, t.RowBytes)}, nil
}

// next decodes the next row into emb and returns its fid; ok is false after the last.
func (rr *rowReader) next(emb []float32) (fid int64, ok bool, err error) {
	fid, enc, ok, err := rr.nextRow()
	if ok {
		rr.t.DecodeValues(enc, emb)
	}
	return fid, ok, err
}

// nextRow reads the next row: its fid and its encoded values (valid until the next call);
// ok is false after the last.
func (rr *rowReader) nextRow() (fid int64, enc []byte, ok bool, err error) {
	if rr.n == rr.t.Entries {
		return 0, nil, false, nil
	}
	if _, err := io.ReadFull(rr.r, rr.row); err != nil {
		return 0, nil, false, fmt.Errorf("%w: %s row %d: %v", ErrCorrupt, rr.path, rr.n, err)
	}
	rr.n++
	return int64(binary.LittleEndian.Uint64(rr.row)), rr.row[entryHeaderSize:], true, nil
}

// close checks that every row was read and the checksum, and closes the file.
func (rr *rowReader) close() error {
	defer rr.f.Close()
	if rr.n != rr.t.Entries {
		return fmt.Errorf("%s: %d of %d rows read", rr.path, rr.n, rr.t.Entries)
	}
	if got := rr.h.Sum32(); got != rr.t.CRC32C {
		return fmt.Errorf("%w: %s: CRC-32C %08x, the manifest says %08x", ErrCorrupt, rr.path, got, rr.t.CRC32C)
	}
	return nil
}

// Scan reads the rows of table t of the version folder dir, calling fn with each fid and
// its decoded values (valid until fn returns). The file's size, entry count and CRC-32C
// must match the manifest: a damaged file is an error wrapping ErrCorrupt (fn may have seen
// rows by then; discard them).
func (t *Table) Scan(dir string, fn func(fid int64, emb []float32) error) error {
	emb := make([]float32, t.Dim)
	return t.ScanEncoded(dir, func(fid int64, enc []byte) error {
		t.DecodeValues(enc, emb)
		return fn(fid, emb)
	})
}

// ScanEncoded is Scan with each row's values as stored (ValueBytes; DecodeValues reads
// them), for a reader that keeps them in that form.
func (t *Table) ScanEncoded(dir string, fn func(fid int64, enc []byte) error) error {
	rr, err := t.open(dir)
	if err != nil {
		return err
	}
	for {
		fid, enc, ok, err := rr.nextRow()
		if err != nil {
			rr.f.Close()
			return err
		}
		if !ok {
			return rr.close()
		}
		if err := fn(fid, enc); err != nil {
			rr.f.Close()
			return err
		}
	}
}

// Verify reads every table of the version folder dir back and compares it with src row by
// row: the same fids (less the skipped all-zero rows) in ascending order, each value equal
// to the checkpoint's through its codec (bit for bit; fp32 exactly the checkpoint's). The
// checkpoint's rows are sorted as Write sorts them, beyond sortBudget bytes through
// temporary files beside the version folder.
func Verify(ctx context.Context, dir string, src *export.Source) error {
	return verify(ctx, dir, src, sortBudget)
}

// verify is Verify sorting at most budget bytes of the checkpoint's rows in memory.
func verify(ctx context.Context, dir string, src *export.Source, budget int) error {
	m, err := Open(dir)
	if err != nil {
		return err
	}
	if len(m.Tables) != len(src.Tables) {
		return fmt.Errorf("servingmodel: verify %s: %d tables, the checkpoint has %d", dir, len(m.Tables), len(src.Tables))
	}
	for i, t := range m.Tables {
		if err := t.verify(ctx, dir, src.Tables[i], budget); err != nil {
			return fmt.Errorf("servingmodel: verify %s table %q: %w", dir, t.Name, err)
		}
	}
	return nil
}

// verify reads t's file alongside the rows of the checkpoint table st, sorted by fid: each
// a record of the fid and its Dim values in fp32.
func (t *Table) verify(ctx context.Context, dir string, st *export.Table, budget int) (err error) {
	rr, err := t.open(dir)
	if err != nil {
		return err
	}
	defer rr.f.Close()
	sorter := newRecordSorter(entryHeaderSize+4*t.Dim, budget, st.Entries, filepath.Dir(dir), tmpPrefix+"verify-"+filepath.Base(dir)+"-*")
	defer func() {
		if cerr := sorter.close(); err == nil {
			err = cerr
		}
	}()
	rec := make([]byte, entryHeaderSize+4*t.Dim)
	err = st.Scan(ctx, func(d *hashtablepb.EntryDump) error {
		num := d.GetNum()
		if t.SkipZero && zeroRow(num) {
			return nil
		}
		if len(num) != t.Dim {
			return fmt.Errorf("fid %d has %d values, the table dim is %d", d.GetId(), len(num), t.Dim)
		}
		binary.LittleEndian.PutUint64(rec, uint64(d.GetId()))
		for k, x := range num {
			binary.LittleEndian.PutUint32(rec[entryHeaderSize+4*k:], math.Float32bits(x))
		}
		return sorter.add(rec)
	})
	if err != nil {
		return err
	}
	got, want, num, row := make([]float32, t.Dim), make([]float32, t.Dim), make([]float32, t.Dim), make([]byte, t.RowBytes)
	err = sorter.each(func(rec []byte) error {
		id := int64(fidOf(rec))
		for k := range num {
			num[k] = math.Float32frombits(binary.LittleEndian.Uint32(rec[entryHeaderSize+4*k:]))
		}
		fid, ok, err := rr.next(got)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("the checkpoint has fid %d after the %d rows written", id, rr.n)
		case fid != id:
			return fmt.Errorf("row %d: fid %d, the checkpoint has %d", rr.n-1, fid, id)
		}
		t.Store(want, num, row)
		for k := range got {
			if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
				return fmt.Errorf("fid %d value %d: %v, the checkpoint's %v stores as %v", fid, k, got[k], num[k], want[k])
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return rr.close()
}
