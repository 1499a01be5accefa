// Package checkpoint saves and restores the tables of one parameter-server shard (decision
// P9): per table a TFRecord file of Monolith EntryDump records and a file of its filter
// state, plus a MANIFEST.json naming every file with its size, CRC-32C and entry count.
//
// # Layout
//
//	DIR/LATEST                       name of the newest complete checkpoint
//	DIR/ckpt-00000007-step-42/       the 7th checkpoint of DIR, taken at global step 42
//	    MANIFEST.json                pspb.CheckpointManifest in protobuf JSON, written last
//	    t000-<table>.entries         TFRecord of hashtablepb.EntryDump (one record per fid)
//	    t000-<table>.filter          TFRecord of HashFilterSplitMetaDump / DataDump records
//
// # Atomicity (P7)
//
// Save writes into DIR/.tmp-ckpt-…, fsyncs every file and the folder, renames the folder
// to a name no earlier checkpoint has (the sequence number grows even when the step does
// not), fsyncs DIR, and only then rewrites LATEST (itself atomically). No save ever
// replaces or deletes an earlier checkpoint, so a crash at any point leaves LATEST naming
// a complete one; leftover .tmp- folders and checkpoints beyond the retention count are
// removed by Prune. Tables are read through table.Snapshot, one internal shard
// at a time, so lookups and applies go on during a save.
//
// # Restore
//
// Restore checks the manifest, then each file's size, CRC-32C and entry count while it
// loads it into fresh tables. Any mismatch, missing file, truncated or corrupt record is an
// error naming the file and record; the caller discards the half-filled tables and the
// checkpoint on disk is left untouched, so an earlier checkpoint stays usable.
// RestoreShard also checks, before reading any table, that the manifest names the shard
// restoring it. ReadTable streams one table's entries with the same checks, and
// ReadTableRecords its raw records, for tools that read a checkpoint without loading it
// into tables (ps/export).
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/ps/table"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// FormatVersion is the manifest format this package writes and reads.
const FormatVersion = 1

// The files of a checkpoint directory. Frozen.
const (
	// ManifestName is the manifest of a checkpoint folder, written last: a folder holding
	// it is a complete checkpoint (IsCheckpoint).
	ManifestName = "MANIFEST.json"
	// LatestName is the file of a checkpoint directory naming its newest checkpoint
	// (Latest).
	LatestName = "LATEST"
)

const (
	dirPrefix = "ckpt-"
	tmpPrefix = ".tmp-ckpt-"
)

// ErrNoCheckpoint means a directory holds no complete checkpoint.
var ErrNoCheckpoint = errors.New("ps/checkpoint: no checkpoint")

// ErrCorrupt wraps every restore failure caused by the files themselves.
var ErrCorrupt = errors.New("ps/checkpoint: corrupt or partial checkpoint")

// ErrWrongShard means a checkpoint is of another shard than the one restoring it
// (RestoreShard).
var ErrWrongShard = errors.New("ps/checkpoint: checkpoint of another shard")

// Meta identifies a checkpoint.
type Meta struct {
	Step      int64
	Shard     int
	NumShards int
	// Applied are the request ids the shard had applied (its duplicate window), saved in
	// AppliedName and given back by ReadApplied.
	Applied []*pspb.AppliedRequest
}

// AppliedName is the file of a checkpoint folder holding Meta.Applied.
const AppliedName = "applied.ids"

// Result describes a written checkpoint.
type Result struct {
	Path    string
	Entries int64
	Step    int64 // the step of the manifest
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// dirName is the folder name of the seq-th checkpoint of a directory, taken at step.
func dirName(seq uint64, step int64) string {
	return fmt.Sprintf("%s%08d-step-%d", dirPrefix, seq, step)
}

var dirPattern = regexp.MustCompile(`^ckpt-(\d{8,})-step-(-?\d+)$`)

// seqOf parses a checkpoint folder name.
func seqOf(name string) (uint64, bool) {
	m := dirPattern.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	return n, err == nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// SafeName returns name with every run of characters other than ASCII letters, digits,
// '_', '.' and '-' replaced by one '_': the table part of the checkpoint's file names.
// Distinct names can map to one (SafeName("a/b") == SafeName("a_b")).
func SafeName(name string) string {
	return unsafeChars.ReplaceAllString(name, "_")
}

func fileBase(i int, name string) string {
	return fmt.Sprintf("t%03d-%s", i, SafeName(name))
}

// Save writes a checkpoint of tables into a new folder of dir (created if missing) and
// points LATEST at it. Earlier checkpoints, of any step, are left as they are.
func Save(ctx context.Context, dir string, meta Meta, tables []*table.Table) (Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	tmp := filepath.Join(dir, tmpPrefix+strconv.FormatInt(meta.Step, 10)+"-"+strconv.FormatUint(rand.Uint64(), 36))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return Result{}, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	res, err := write(ctx, tmp, meta, tables)
	if err != nil {
		return Result{}, errors.Join(fmt.Errorf("checkpoint %s step %d: %w", dir, meta.Step, err), os.RemoveAll(tmp))
	}
	seq, err := lastSeq(dir)
	if err != nil {
		return Result{}, errors.Join(err, os.RemoveAll(tmp))
	}
	name := dirName(seq+1, meta.Step)
	final := filepath.Join(dir, name)
	if err := os.Rename(tmp, final); err != nil {
		return Result{}, errors.Join(fmt.Errorf("checkpoint %s: %w", dir, err), os.RemoveAll(tmp))
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return Result{}, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	lf, err := atomicfile.Create(filepath.Join(dir, LatestName))
	if err != nil {
		return Result{}, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	if _, err := lf.WriteString(name + "\n"); err != nil {
		return Result{}, errors.Join(fmt.Errorf("checkpoint %s: write LATEST: %w", dir, err), lf.Abort())
	}
	if err := lf.Commit(); err != nil {
		return Result{}, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	res.Path, res.Step = final, meta.Step
	return res, nil
}

// countingWriter tracks the size and CRC-32C of what passes through it.
type countingWriter struct {
	w   io.Writer
	n   uint64
	crc hash.Hash32
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	c.crc.Write(p[:n])
	return n, err
}

// write fills the temporary folder tmp and fsyncs it.
func write(ctx context.Context, tmp string, meta Meta, tables []*table.Table) (Result, error) {
	m := &pspb.CheckpointManifest{FormatVersion: FormatVersion, Step: meta.Step, Shard: int32(meta.Shard),
		NumShards: int32(meta.NumShards), CreatedUnix: time.Now().Unix()}
	var res Result
	seen := map[string]bool{}
	for i, t := range tables {
		if seen[t.Name()] {
			return res, fmt.Errorf("table %q given twice", t.Name())
		}
		seen[t.Name()] = true
		ct := &pspb.CheckpointTable{Name: t.Name(), Dim: int32(t.Dim()), File: fileBase(i, t.Name()) + ".entries",
			Config: t.Config(), MaxUpdateTsSec: t.MaxUpdateTime()}
		var buf []byte
		var err error
		ct.Bytes, ct.Crc32C, err = writeFile(filepath.Join(tmp, ct.File), records(func(w *tfrecord.Writer) error {
			return t.Snapshot(func(d *hashtablepb.EntryDump) error {
				if ct.Entries&1023 == 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				var err error
				if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], d); err != nil {
					return fmt.Errorf("fid %d: %w", d.GetId(), err)
				}
				ct.Entries++
				return w.Write(buf)
			})
		}))
		if err != nil {
			return res, fmt.Errorf("table %q: %w", t.Name(), err)
		}
		if f := t.Filter(); f != nil {
			ct.FilterFile = fileBase(i, t.Name()) + ".filter"
			if ct.FilterBytes, ct.FilterCrc32C, err = writeFile(filepath.Join(tmp, ct.FilterFile), records(f.Save)); err != nil {
				return res, fmt.Errorf("table %q filter: %w", t.Name(), err)
			}
		}
		res.Entries += int64(ct.Entries)
		m.Tables = append(m.Tables, ct)
	}
	if len(meta.Applied) > 0 {
		var buf []byte
		var err error
		m.AppliedFile, m.AppliedCount = AppliedName, uint64(len(meta.Applied))
		m.AppliedBytes, m.AppliedCrc32C, err = writeFile(filepath.Join(tmp, AppliedName), records(func(w *tfrecord.Writer) error {
			for _, a := range meta.Applied {
				if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], a); err != nil {
					return err
				}
				if err := w.Write(buf); err != nil {
					return err
				}
			}
			return nil
		}))
		if err != nil {
			return res, fmt.Errorf("applied request ids: %w", err)
		}
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return res, err
	}
	if _, _, err := writeFile(filepath.Join(tmp, ManifestName), func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return res, err
	}
	return res, atomicfile.SyncDir(tmp)
}

// writeFile creates path, lets body write into it, fsyncs and closes it, and returns its
// size and CRC-32C.
func writeFile(path string, body func(io.Writer) error) (size uint64, crc uint32, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	cw := &countingWriter{w: f, crc: crc32.New(castagnoli)}
	if err := body(cw); err != nil {
		return 0, 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, 0, fmt.Errorf("sync %s: %w", path, err)
	}
	return cw.n, cw.crc.Sum32(), nil
}

// records adapts a TFRecord-writing function to writeFile.
func records(fn func(*tfrecord.Writer) error) func(io.Writer) error {
	return func(w io.Writer) error {
		tw := tfrecord.NewWriter(w)
		if err := fn(tw); err != nil {
			return err
		}
		return tw.Flush()
	}
}

// Latest returns the path of the checkpoint LATEST names in dir. Without a LATEST file
// (lost, or never written by a crashed save) it scans dir and returns the newest complete
// checkpoint, so that a shard never starts empty over complete checkpoints; an error
// wrapping ErrNoCheckpoint when there is none.
func Latest(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, LatestName))
	if errors.Is(err, os.ErrNotExist) {
		all, lerr := List(dir)
		if lerr != nil {
			return "", lerr
		}
		if len(all) == 0 {
			return "", fmt.Errorf("%w in %s", ErrNoCheckpoint, dir)
		}
		return all[len(all)-1], nil
	}
	if err != nil {
		return "", fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	name := strings.TrimSpace(string(b))
	if _, ok := seqOf(name); !ok {
		return "", fmt.Errorf("%w: %s names %q, not a checkpoint folder", ErrCorrupt, filepath.Join(dir, LatestName), name)
	}
	return filepath.Join(dir, name), nil
}

// IsCheckpoint reports whether dir is a complete checkpoint folder: one holding its
// manifest (ManifestName), which Save writes last. The manifest is not read; ReadManifest
// reads and checks it.
func IsCheckpoint(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ManifestName))
	return err == nil
}

// lastSeq is the highest sequence number of the checkpoint folders of dir (0 if none).
func lastSeq(dir string) (uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	var last uint64
	for _, e := range ents {
		if n, ok := seqOf(e.Name()); ok && n > last {
			last = n
		}
	}
	return last, nil
}

// List returns the complete checkpoint folders of dir (those with a manifest), oldest
// first.
func List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	type ck struct {
		seq  uint64
		path string
	}
	var cks []ck
	for _, e := range ents {
		if n, ok := seqOf(e.Name()); ok && e.IsDir() && IsCheckpoint(filepath.Join(dir, e.Name())) {
			cks = append(cks, ck{n, filepath.Join(dir, e.Name())})
		}
	}
	sort.Slice(cks, func(i, j int) bool { return cks[i].seq < cks[j].seq })
	out := make([]string, len(cks))
	for i, c := range cks {
		out[i] = c.path
	}
	return out, nil
}

// AtStep returns the newest complete checkpoint of dir taken at global step step, or an
// error wrapping ErrNoCheckpoint when there is none.
func AtStep(dir string, step int64) (string, error) {
	all, err := List(dir)
	if err != nil {
		return "", err
	}
	suffix := "-step-" + strconv.FormatInt(step, 10)
	for i := len(all) - 1; i >= 0; i-- {
		if strings.HasSuffix(filepath.Base(all[i]), suffix) {
			return all[i], nil
		}
	}
	return "", fmt.Errorf("%w at step %d in %s", ErrNoCheckpoint, step, dir)
}

// Prune deletes leftover temporary folders and all but the newest keep checkpoints; the
// one LATEST names and the pinned ones (paths) are always kept.
func Prune(dir string, keep int, pinned ...string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	all, err := List(dir)
	if err != nil {
		return err
	}
	latest, _ := Latest(dir)
	if keep < 1 {
		keep = 1
	}
	for len(all) > keep {
		if all[0] != latest && !slices.Contains(pinned, all[0]) {
			errs = append(errs, os.RemoveAll(all[0]))
		}
		all = all[1:]
	}
	return errors.Join(errs...)
}

// ReadManifest reads and checks the manifest of the checkpoint at path.
func ReadManifest(path string) (*pspb.CheckpointManifest, error) {
	b, err := os.ReadFile(filepath.Join(path, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	m := &pspb.CheckpointManifest{}
	if err := protojson.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, filepath.Join(path, ManifestName), err)
	}
	if m.GetFormatVersion() != FormatVersion {
		return nil, fmt.Errorf("%w: %s: format_version %d, this build reads %d", ErrCorrupt, filepath.Join(path, ManifestName), m.GetFormatVersion(), FormatVersion)
	}
	for _, ct := range m.GetTables() {
		if err := checkFileName(path, ct, ct.GetFile()); err != nil {
			return nil, err
		}
		if f := ct.GetFilterFile(); f != "" {
			if err := checkFileName(path, ct, f); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// checkFileName rejects f, a file of table ct of the checkpoint at path, unless it is a
// plain file name inside the checkpoint folder.
func checkFileName(path string, ct *pspb.CheckpointTable, f string) error {
	if f == "" || filepath.Base(f) != f || strings.HasPrefix(f, ".") {
		return fmt.Errorf("%w: %s: table %q names file %q outside the checkpoint", ErrCorrupt, path, ct.GetName(), f)
	}
	return nil
}

// Restore loads the checkpoint at path into tables, which should be freshly built from
// the same configuration. Every table of the checkpoint must be given, with the same dim
// (restoring into a configuration without it would drop its entries silently); a given
// table the checkpoint does not hold stays empty, as when a table is added to a running
// model (Monolith warns and goes on the same way; compare the manifest's tables to log
// it). The manifest and the tables' names and dims are checked before any table is read.
// On error the tables may be half filled and must be discarded.
func Restore(ctx context.Context, path string, tables []*table.Table) (*pspb.CheckpointManifest, error) {
	m, err := ReadManifest(path)
	if err != nil {
		return nil, err
	}
	if err := restore(ctx, path, m, tables); err != nil {
		return nil, err
	}
	return m, nil
}

// RestoreShard is Restore for shard shard of numShards of a parameter server: a
// checkpoint whose manifest names another shard or shard count is an error wrapping
// ErrWrongShard, found before any table is read, so tables stay untouched.
func RestoreShard(ctx context.Context, path string, tables []*table.Table, shard, numShards int) (*pspb.CheckpointManifest, error) {
	m, err := ReadManifest(path)
	if err != nil {
		return nil, err
	}
	if int(m.GetShard()) != shard || int(m.GetNumShards()) != numShards {
		return nil, fmt.Errorf("%w: %s is shard %d of %d, want shard %d of %d",
			ErrWrongShard, path, m.GetShard(), m.GetNumShards(), shard, numShards)
	}
	if err := restore(ctx, path, m, tables); err != nil {
		return nil, err
	}
	return m, nil
}

// restore checks tables against the manifest m of the checkpoint at path, then loads
// every table of m.
func restore(ctx context.Context, path string, m *pspb.CheckpointManifest, tables []*table.Table) error {
	byName := map[string]*table.Table{}
	for _, t := range tables {
		if byName[t.Name()] != nil {
			return fmt.Errorf("ps/checkpoint: restore %s: table %q given twice", path, t.Name())
		}
		byName[t.Name()] = t
	}
	for _, ct := range m.GetTables() {
		t := byName[ct.GetName()]
		if t == nil {
			return fmt.Errorf("%w: %s holds table %q, which the configuration does not have", ErrCorrupt, path, ct.GetName())
		}
		if int(ct.GetDim()) != t.Dim() {
			return fmt.Errorf("%w: %s: table %q has dim %d, the configuration says %d", ErrCorrupt, path, ct.GetName(), ct.GetDim(), t.Dim())
		}
	}
	for _, ct := range m.GetTables() {
		if err := restoreTable(ctx, path, ct, byName[ct.GetName()]); err != nil {
			return err
		}
	}
	return nil
}

// ReadApplied calls fn with each applied request id the checkpoint at path (manifest m)
// saved, checking the file's size, checksum and count; a checkpoint without them calls
// nothing.
func ReadApplied(path string, m *pspb.CheckpointManifest, fn func(*pspb.AppliedRequest) error) error {
	switch m.GetAppliedFile() {
	case "":
		return nil
	case AppliedName:
	default:
		return fmt.Errorf("%w: %s: applied_file %q, want %q", ErrCorrupt, path, m.GetAppliedFile(), AppliedName)
	}
	a := &pspb.AppliedRequest{}
	err := countedRecords(context.Background(), path, m.GetAppliedFile(), m.GetAppliedBytes(), m.GetAppliedCrc32C(), m.GetAppliedCount(), func(rec []byte) error {
		if err := proto.Unmarshal(rec, a); err != nil {
			return err
		}
		return fn(a)
	})
	if err != nil {
		return fmt.Errorf("%w: applied request ids: %w", ErrCorrupt, err)
	}
	return nil
}

func restoreTable(ctx context.Context, dir string, ct *pspb.CheckpointTable, t *table.Table) error {
	if err := readTable(ctx, dir, ct, t.Restore); err != nil {
		return fmt.Errorf("%w: table %q: %w", ErrCorrupt, ct.GetName(), err)
	}
	f := t.Filter()
	switch {
	case ct.GetFilterFile() == "" && f != nil:
		return fmt.Errorf("%w: table %q has a filter but the checkpoint holds no filter state", ErrCorrupt, ct.GetName())
	case ct.GetFilterFile() != "" && f == nil:
		return fmt.Errorf("%w: table %q: the checkpoint holds filter state but the configuration has no filter", ErrCorrupt, ct.GetName())
	case f != nil:
		if err := readFile(dir, ct.GetFilterFile(), ct.GetFilterBytes(), ct.GetFilterCrc32C(), f.Restore); err != nil {
			return fmt.Errorf("%w: table %q filter: %w", ErrCorrupt, ct.GetName(), err)
		}
	}
	return nil
}

// ReadTable streams the entries of one table of the checkpoint at dir (ct is one of the
// tables of its manifest, see ReadManifest) to fn, in file order, checking what Restore
// checks: every record parses as an EntryDump, the file has the size, CRC-32C and number
// of entries the manifest recorded. fn must not retain the dump, which is reused. Entries
// reach fn before the checksum of the whole file is known, so a caller that keeps them
// must discard them when ReadTable fails. A problem of the file is an error wrapping
// ErrCorrupt that names the file and, where it has one, the record and its offset; an
// error returned by fn or by ctx ends the read and is returned wrapped with the same
// position, without ErrCorrupt.
func ReadTable(ctx context.Context, dir string, ct *pspb.CheckpointTable, fn func(*hashtablepb.EntryDump) error) error {
	return sortErrors(ctx, dir, ct, func(mark func(error) error) error {
		return readTable(ctx, dir, ct, func(d *hashtablepb.EntryDump) error { return mark(fn(d)) })
	})
}

// ReadTableRecords is ReadTable without parsing: fn gets every record of the table's
// entries file as it is, the wire encoding of one hashtablepb.EntryDump, for a caller that
// copies entries without looking into them. The file's size, CRC-32C, record framing and
// number of records are checked as ReadTable checks them, and errors are the same; only
// the records' contents are not. rec is valid until fn returns.
func ReadTableRecords(ctx context.Context, dir string, ct *pspb.CheckpointTable, fn func(rec []byte) error) error {
	return sortErrors(ctx, dir, ct, func(mark func(error) error) error {
		return readRecords(ctx, dir, ct, func(rec []byte) error { return mark(fn(rec)) })
	})
}

// sortErrors checks ct's file name, runs read, which reads the file and passes the
// errors of the caller's function through mark, and sorts its error: one of the caller's
// function or of ctx is returned without ErrCorrupt, any other wraps ErrCorrupt.
func sortErrors(ctx context.Context, dir string, ct *pspb.CheckpointTable, read func(mark func(error) error) error) error {
	if err := checkFileName(dir, ct, ct.GetFile()); err != nil {
		return err
	}
	var byFn bool
	err := read(func(err error) error {
		byFn = err != nil
		return err
	})
	switch {
	case err == nil:
		return nil
	case byFn || ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("ps/checkpoint: table %q: %w", ct.GetName(), err)
	default:
		return fmt.Errorf("%w: table %q: %w", ErrCorrupt, ct.GetName(), err)
	}
}

// readTable feeds the entries of ct's file, parsed, to fn, with the checks of readRecords.
func readTable(ctx context.Context, dir string, ct *pspb.CheckpointTable, fn func(*hashtablepb.EntryDump) error) error {
	d := &hashtablepb.EntryDump{}
	return readRecords(ctx, dir, ct, func(rec []byte) error {
		if err := proto.Unmarshal(rec, d); err != nil {
			return err
		}
		return fn(d)
	})
}

// readRecords feeds the records of ct's file to fn and checks the file's size, CRC-32C
// and entry count against ct. Errors name the file and, inside it, the record.
func readRecords(ctx context.Context, dir string, ct *pspb.CheckpointTable, fn func([]byte) error) error {
	return countedRecords(ctx, dir, ct.GetFile(), ct.GetBytes(), ct.GetCrc32C(), ct.GetEntries(), fn)
}

// countedRecords feeds the records of dir/name to fn and checks the file's size, CRC-32C
// and number of records against the manifest's.
func countedRecords(ctx context.Context, dir, name string, size uint64, crc uint32, entries uint64, fn func([]byte) error) error {
	var n uint64
	err := readFile(dir, name, size, crc, func(r *tfrecord.Reader) error {
		for {
			rec, err := r.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if n&1023 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if err := fn(rec); err != nil {
				return fmt.Errorf("record %d at offset %d: %w", r.Index(), r.Offset(), err)
			}
			n++
		}
	})
	if err != nil {
		return err
	}
	if n != entries {
		return fmt.Errorf("%s holds %d entries, the manifest says %d", filepath.Join(dir, name), n, entries)
	}
	return nil
}

// readFile opens dir/name, runs body over its records and checks the size and CRC-32C
// the manifest recorded.
func readFile(dir, name string, size uint64, crc uint32, body func(*tfrecord.Reader) error) error {
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if uint64(st.Size()) != size {
		return fmt.Errorf("%s is %d bytes, the manifest says %d", path, st.Size(), size)
	}
	h := crc32.New(castagnoli)
	r := tfrecord.NewReader(io.TeeReader(f, h), tfrecord.WithFile(path))
	if err := body(r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Drain what body did not read, so the checksum covers the whole file.
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if got := h.Sum32(); got != crc {
		return fmt.Errorf("%s: CRC-32C %08x, the manifest says %08x", path, got, crc)
	}
	return nil
}

// shardDirPattern matches the shard folders of a multi-shard checkpoint root.
var shardDirPattern = regexp.MustCompile(`^shard-(0|[1-9][0-9]*)-of-([1-9][0-9]*)$`)

// ShardDir is the folder of shard's checkpoints under a multi-shard checkpoint root
// (shard-I-of-N).
func ShardDir(root string, shard, numShards int) string {
	return filepath.Join(root, fmt.Sprintf("shard-%d-of-%d", shard, numShards))
}

// ShardDirs lists the shard-I-of-N folders of root: shard count → shard index → path
// (the index is not checked against the count). Other names are skipped; a number too
// large for an int is an error naming the folder, and so is a root that cannot be read
// (a missing one wraps fs.ErrNotExist).
func ShardDirs(root string) (map[int]map[int]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", root, err)
	}
	out := map[int]map[int]string{}
	for _, e := range ents {
		m := shardDirPattern.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		i, err1 := strconv.Atoi(m[1])
		n, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("checkpoint %s: shard folder %q: number out of range", root, e.Name())
		}
		if out[n] == nil {
			out[n] = map[int]string{}
		}
		out[n][i] = filepath.Join(root, e.Name())
	}
	return out, nil
}
