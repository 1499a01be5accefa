package servingmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
		codecs, segs, err := codecsOf(&cfg, t.Dim)
		if err != nil || !slices.Equal(segs, t.Segments) || rowBytes(codecs, segs) != t.RowBytes || filepath.Base(t.File) != t.File {
			return nil, fmt.Errorf("%w: %s: table %q: segments %v, row bytes %d, file %q disagree with its config (%v)", ErrCorrupt, dir, t.Name, t.Segments, t.RowBytes, t.File, err)
		}
		t.codecs = codecs
	}
	return &m, nil
}

// Scan reads the rows of table t of the version folder dir, calling fn with each fid and
// its decoded values (valid until fn returns). The file's size, entry count and CRC-32C
// must match the manifest: a damaged file is an error wrapping ErrCorrupt (fn may have seen
// rows by then; discard them).
func (t *Table) Scan(dir string, fn func(fid int64, emb []float32) error) error {
	path := filepath.Join(dir, t.File)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if uint64(st.Size()) != t.Bytes || t.RowBytes <= 0 || t.Bytes != t.Entries*uint64(t.RowBytes) {
		return fmt.Errorf("%w: %s is %d bytes; the manifest says %d bytes, %d rows of %d", ErrCorrupt, path, st.Size(), t.Bytes, t.Entries, t.RowBytes)
	}
	h := crc32.New(castagnoli)
	r := io.TeeReader(f, h)
	row := make([]byte, t.RowBytes)
	emb := make([]float32, t.Dim)
	for i := uint64(0); i < t.Entries; i++ {
		if _, err := io.ReadFull(r, row); err != nil {
			return fmt.Errorf("%w: %s row %d: %v", ErrCorrupt, path, i, err)
		}
		fid := t.Decode(row, emb)
		if err := fn(fid, emb); err != nil {
			return err
		}
	}
	if got := h.Sum32(); got != t.CRC32C {
		return fmt.Errorf("%w: %s: CRC-32C %08x, the manifest says %08x", ErrCorrupt, path, got, t.CRC32C)
	}
	return nil
}

// Verify reads every table of the version folder dir back and compares it with src row by
// row: the same fids in the same order (less the skipped all-zero rows), each value equal
// to the checkpoint's through its codec (bit for bit; fp32 exactly the checkpoint's).
func Verify(ctx context.Context, dir string, src *export.Source) error {
	m, err := Open(dir)
	if err != nil {
		return err
	}
	if len(m.Tables) != len(src.Tables) {
		return fmt.Errorf("servingmodel: verify %s: %d tables, the checkpoint has %d", dir, len(m.Tables), len(src.Tables))
	}
	for i, t := range m.Tables {
		st := src.Tables[i]
		type want struct {
			fid int64
			num []float32
		}
		next := make(chan want, 64)
		scanErr := make(chan error, 1)
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			defer close(next)
			scanErr <- st.Scan(cctx, func(d *hashtablepb.EntryDump) error {
				if t.SkipZero && zeroRow(d.GetNum()) {
					return nil
				}
				select {
				case next <- want{d.GetId(), slices.Clone(d.GetNum())}:
					return nil
				case <-cctx.Done():
					return cctx.Err()
				}
			})
		}()
		row := make([]byte, t.RowBytes)
		exp := make([]float32, t.Dim)
		var n uint64
		err := t.Scan(dir, func(fid int64, emb []float32) error {
			w, ok := <-next
			if !ok {
				return fmt.Errorf("row %d (fid %d) is not in the checkpoint", n, fid)
			}
			t.encode(row, w.fid, w.num)
			t.Decode(row, exp)
			if fid != w.fid {
				return fmt.Errorf("row %d: fid %d, the checkpoint has %d", n, fid, w.fid)
			}
			for k := range emb {
				if math.Float32bits(emb[k]) != math.Float32bits(exp[k]) {
					return fmt.Errorf("fid %d value %d: %v, the checkpoint's %v stores as %v", fid, k, emb[k], w.num[k], exp[k])
				}
			}
			n++
			return nil
		})
		if _, more := <-next; err == nil && more {
			err = fmt.Errorf("the checkpoint has rows after the %d written", n)
		}
		cancel()
		for range next {
		}
		if serr := <-scanErr; err == nil && serr != nil && !errors.Is(serr, context.Canceled) {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("servingmodel: verify %s table %q: %w", dir, t.Name, err)
		}
	}
	return nil
}
