package export

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// Summary describes the files of an export.
type Summary struct {
	Format Format
	Dir    string // the output folder
	Tables []TableSummary
}

// TableSummary describes the export file of one table.
type TableSummary struct {
	Table   string
	Dim     int
	Path    string // the export file
	Entries int64  // entries written (Export) or compared (Verify)
	Bytes   int64  // size of the file
}

// checkNames rejects tables whose export files would collide.
func checkNames(src *Source, f Format) error {
	if _, ok := formatNames[f]; !ok {
		return fmt.Errorf("%sunknown format %v", errPrefix, f)
	}
	by := map[string]string{}
	for _, t := range src.Tables {
		n := FileName(t.Name, f)
		if o, dup := by[n]; dup {
			return fmt.Errorf("%stables %q and %q would both be exported to %s", errPrefix, o, t.Name, n)
		}
		by[n] = t.Name
	}
	return nil
}

// Export writes every table of src into outDir (created if missing) in format f, one
// file per table named FileName(table, f). Each file is written atomically: it appears
// complete or not at all, replacing an earlier export of the table. Tables are written
// one after another, streaming from the checkpoint (Parquet holds one row group in
// memory); when a table fails, the files of the tables before it stay. EntryDump files
// get the checkpoint's records as they are (their top-level fields checked, their contents
// left to Verify); Avro and Parquet files are written from the parsed entries. An entry
// without id, or, for Avro and Parquet, with proto fields unknown to this build, is an
// error wrapping ErrUnsupported.
func Export(ctx context.Context, src *Source, f Format, outDir string, opts ...Option) (Summary, error) {
	sum := Summary{Format: f, Dir: outDir}
	if err := checkNames(src, f); err != nil {
		return sum, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return sum, fmt.Errorf("%s%w", errPrefix, err)
	}
	for _, t := range src.Tables {
		ts, err := exportTable(ctx, t, f, filepath.Join(outDir, FileName(t.Name, f)), opts)
		if err != nil {
			return sum, fmt.Errorf("%sexport table %q to %s: %w", errPrefix, t.Name, ts.Path, err)
		}
		sum.Tables = append(sum.Tables, ts)
	}
	return sum, nil
}

func exportTable(ctx context.Context, t *Table, f Format, path string, opts []Option) (ts TableSummary, err error) {
	ts = TableSummary{Table: t.Name, Dim: t.Dim, Path: path}
	af, err := atomicfile.Create(path)
	if err != nil {
		return ts, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, af.Abort())
		}
	}()
	bw := bufio.NewWriterSize(af, 1<<20)
	w, err := NewWriter(bw, f, TableInfo{Name: t.Name, Dim: t.Dim}, opts...)
	if err != nil {
		return ts, err
	}
	if ew, ok := w.(*EntryDumpWriter); ok {
		// The checkpoint's records are EntryDumps already: copy them without parsing.
		err = t.scanRecords(ctx, func(rec []byte) error {
			if err := checkRecord(rec); err != nil {
				return err
			}
			ts.Entries++
			return ew.writeRecord(rec)
		})
	} else {
		err = t.Scan(ctx, func(d *hashtablepb.EntryDump) error {
			if d.Id == nil {
				return fmt.Errorf("%w: the entry has no id", ErrUnsupported)
			}
			ts.Entries++
			return w.Write(d)
		})
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ts, err
	}
	if err := bw.Flush(); err != nil {
		return ts, err
	}
	st, err := af.Stat()
	if err != nil {
		return ts, err
	}
	ts.Bytes = st.Size()
	return ts, af.Commit()
}

// Verify reads back the export of every table of src from outDir (as Export wrote it
// with format f) and compares it entry by entry, in order, with the checkpoint: the same
// number of entries, and in each the same fid, every float by its bits (math.Float32bits),
// the presence and value of every optional field and the optimizer state of every
// segment. The first difference is a *MismatchError (wrapping ErrMismatch) naming the
// table, the file, the entry, its fid and the field; a damaged export file is a
// *CorruptError; damage in the checkpoint wraps checkpoint.ErrCorrupt.
func Verify(ctx context.Context, src *Source, f Format, outDir string, opts ...Option) (Summary, error) {
	sum := Summary{Format: f, Dir: outDir}
	if err := checkNames(src, f); err != nil {
		return sum, err
	}
	for _, t := range src.Tables {
		ts, err := verifyTable(ctx, t, f, filepath.Join(outDir, FileName(t.Name, f)), opts)
		if err != nil {
			return sum, err
		}
		sum.Tables = append(sum.Tables, ts)
	}
	return sum, nil
}

func verifyTable(ctx context.Context, t *Table, f Format, path string, opts []Option) (ts TableSummary, err error) {
	ts = TableSummary{Table: t.Name, Dim: t.Dim, Path: path}
	st, err := os.Stat(path)
	if err != nil {
		return ts, fmt.Errorf("%sverify table %q: %w", errPrefix, t.Name, err)
	}
	ts.Bytes = st.Size()
	r, err := OpenReader(path, f, opts...)
	if err != nil {
		return ts, err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	if f != EntryDump && r.Table() != t.Name {
		return ts, &MismatchError{Table: t.Name, File: path, Entry: -1, Field: "table (file metadata)",
			Got: fmt.Sprintf("%q", r.Table()), Want: fmt.Sprintf("%q", t.Name)}
	}
	mismatch := func(i int64, fid uint64, field, got, want string) error {
		return &MismatchError{Table: t.Name, File: path, Entry: i, Fid: fid, Field: field, Got: got, Want: want}
	}
	err = t.Scan(ctx, func(want *hashtablepb.EntryDump) error {
		got, err := r.Next()
		if err == io.EOF {
			return mismatch(ts.Entries, uint64(want.GetId()), "entry", "the end of the file", "an entry")
		}
		if err != nil {
			return err
		}
		if d, ok := diffEntry(got, want); ok {
			return mismatch(ts.Entries, uint64(want.GetId()), d.field, d.got, d.want)
		}
		ts.Entries++
		return nil
	})
	var me *MismatchError
	var ce *CorruptError
	switch {
	case errors.As(err, &me):
		return ts, me
	case errors.As(err, &ce):
		return ts, ce
	case err != nil:
		return ts, fmt.Errorf("%sverify table %q: %w", errPrefix, t.Name, err)
	}
	got, err := r.Next()
	switch {
	case err == nil:
		return ts, mismatch(ts.Entries, uint64(got.GetId()), "entry", fmt.Sprintf("an entry (fid %d)", uint64(got.GetId())), "the end of the table")
	case err != io.EOF:
		return ts, err
	}
	return ts, nil
}
