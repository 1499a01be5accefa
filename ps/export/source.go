package export

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// Source is a resolved checkpoint: one checkpoint of each shard of a parameter server,
// and its tables merged over the shards. A Source only names files; reading them
// happens in Table.Scan. It is safe for concurrent use once resolved.
type Source struct {
	Path   string  // the directory given to Resolve
	Shards []Shard // in shard order
	Tables []*Table
}

// Shard is the checkpoint of one parameter-server shard.
type Shard struct {
	Index, Count int    // shard Index of Count (for a lone checkpoint, what its manifest says)
	Checkpoint   string // the checkpoint folder (holding MANIFEST.json)
	Step         int64  // the global step of the checkpoint
}

// Table is one embedding table of a Source, with its part in every shard.
type Table struct {
	Name    string
	Dim     int
	Entries uint64 // over all shards, as the manifests record them
	parts   []part
}

type part struct {
	dir string
	ct  *pspb.CheckpointTable
}

// Resolve finds the checkpoint(s) of dir, which is one of:
//
//   - a checkpoint folder (it holds MANIFEST.json): that checkpoint;
//   - a checkpoint root (it holds LATEST): the checkpoint LATEST names;
//   - a multi-shard root (it holds shard-I-of-N folders, each a checkpoint root): the
//     checkpoint LATEST names in every shard folder. Every folder must agree on N, every
//     shard 0..N-1 must be there, and each manifest must say it is shard I of N.
//
// The tables of the shards' manifests are merged by name: every shard must hold the same
// tables with the same dims. Manifests are read and checked; table files are not opened.
func Resolve(dir string) (*Source, error) {
	if checkpoint.IsCheckpoint(dir) {
		return resolveOne(dir, dir)
	}
	switch path, err := checkpoint.Latest(dir); {
	case err == nil:
		return resolveOne(dir, path)
	case !errors.Is(err, checkpoint.ErrNoCheckpoint):
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	dirs, err := checkpoint.ShardDirs(dir)
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	counts := slices.Sorted(maps.Keys(dirs))
	if len(counts) > 1 {
		return nil, fmt.Errorf("%s%s: shard folders disagree on the number of shards: %q and %q",
			errPrefix, dir, anyName(dirs[counts[0]]), anyName(dirs[counts[1]]))
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("%s%s is not a checkpoint: it has no %s (a checkpoint folder), no %s (a checkpoint root) and no shard-I-of-N folders (a multi-shard root)",
			errPrefix, dir, checkpoint.ManifestName, checkpoint.LatestName)
	}
	count, byIndex := counts[0], dirs[counts[0]]
	for i, p := range byIndex {
		if i >= count {
			return nil, fmt.Errorf("%s%s: shard folder %q names a shard out of range", errPrefix, dir, filepath.Base(p))
		}
	}
	var missing []string
	for i := range count {
		if byIndex[i] == "" {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s%s: shard(s) %s of %d are missing (no shard-I-of-%d folder)", errPrefix, dir, strings.Join(missing, ", "), count, count)
	}
	folders := make([]string, count)
	for i := range count {
		if folders[i], err = checkpoint.Latest(byIndex[i]); err != nil {
			return nil, fmt.Errorf("%sshard %d of %d: %w", errPrefix, i, count, err)
		}
	}
	return ResolveShards(dir, folders)
}

// ResolveShards is the Source of one checkpoint folder per shard, folders[i] shard i of
// len(folders) (for example every shard's checkpoint at one step); dir names it in errors.
func ResolveShards(dir string, folders []string) (*Source, error) {
	count := len(folders)
	if count == 0 {
		return nil, fmt.Errorf("%s%s: no shard checkpoints", errPrefix, dir)
	}
	src := &Source{Path: dir}
	ms := make([]*pspb.CheckpointManifest, count)
	for i, path := range folders {
		m, err := checkpoint.ReadManifest(path)
		if err != nil {
			return nil, fmt.Errorf("%sshard %d of %d: %w", errPrefix, i, count, err)
		}
		if int(m.GetShard()) != i || int(m.GetNumShards()) != count {
			return nil, fmt.Errorf("%s%s: the manifest says shard %d of %d, its folder shard %d of %d",
				errPrefix, path, m.GetShard(), m.GetNumShards(), i, count)
		}
		ms[i] = m
		src.Shards = append(src.Shards, Shard{Index: i, Count: count, Checkpoint: path, Step: m.GetStep()})
	}
	if err := src.merge(ms); err != nil {
		return nil, err
	}
	return src, nil
}

// resolveOne is the Source of the one checkpoint at path (found from dir). Shard is what
// its manifest says.
func resolveOne(dir, path string) (*Source, error) {
	m, err := checkpoint.ReadManifest(path)
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	src := &Source{Path: dir, Shards: []Shard{{Index: int(m.GetShard()), Count: max(int(m.GetNumShards()), 1), Checkpoint: path, Step: m.GetStep()}}}
	if err := src.merge([]*pspb.CheckpointManifest{m}); err != nil {
		return nil, err
	}
	return src, nil
}

// merge builds the tables of the manifests ms (one per shard, in shard order).
func (s *Source) merge(ms []*pspb.CheckpointManifest) error {
	byName := map[string]*Table{}
	for i, m := range ms {
		dir := s.Shards[i].Checkpoint
		seen := map[string]bool{}
		for _, ct := range m.GetTables() {
			name := ct.GetName()
			if seen[name] {
				return fmt.Errorf("%s%s: the manifest lists table %q twice", errPrefix, dir, name)
			}
			seen[name] = true
			t := byName[name]
			switch {
			case t == nil && i > 0:
				return fmt.Errorf("%s%s: shard %d has table %q, shard 0 (%s) does not", errPrefix, dir, i, name, s.Shards[0].Checkpoint)
			case t == nil:
				t = &Table{Name: name, Dim: int(ct.GetDim())}
				byName[name] = t
				s.Tables = append(s.Tables, t)
			case t.Dim != int(ct.GetDim()):
				return fmt.Errorf("%s%s: table %q has dim %d in shard %d, %d in shard 0", errPrefix, dir, name, ct.GetDim(), i, t.Dim)
			}
			t.Entries += ct.GetEntries()
			t.parts = append(t.parts, part{dir: dir, ct: ct})
		}
		for _, t := range s.Tables {
			if !seen[t.Name] {
				return fmt.Errorf("%s%s: shard %d has no table %q, which shard 0 (%s) has", errPrefix, dir, i, t.Name, s.Shards[0].Checkpoint)
			}
		}
	}
	return nil
}

// Table returns the table called name, or nil.
func (s *Source) Table(name string) *Table {
	for _, t := range s.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Only returns a copy of s with only the named tables, in the order given. An unknown or
// repeated name is an error listing the tables s has.
func (s *Source) Only(names []string) (*Source, error) {
	out := &Source{Path: s.Path, Shards: s.Shards}
	for _, n := range names {
		t := s.Table(n)
		if t == nil {
			var have []string
			for _, t := range s.Tables {
				have = append(have, strconv.Quote(t.Name))
			}
			return nil, fmt.Errorf("%s%s has no table %q (it has %s)", errPrefix, s.Path, n, strings.Join(have, ", "))
		}
		if slices.Contains(out.Tables, t) {
			return nil, fmt.Errorf("%stable %q given twice", errPrefix, n)
		}
		out.Tables = append(out.Tables, t)
	}
	return out, nil
}

// Steps returns the distinct global steps of the shards' checkpoints, in shard order of
// first appearance (more than one when the shards saved at different steps).
func (s *Source) Steps() []int64 {
	var out []int64
	for _, sh := range s.Shards {
		if !slices.Contains(out, sh.Step) {
			out = append(out, sh.Step)
		}
	}
	return out
}

// Scan streams the entries of the table to fn: shard 0's file first, each in file order,
// each checked as checkpoint.ReadTable checks it (size, CRC-32C, record framing,
// EntryDump parsing, entry count). fn must not retain the dump. Entries reach fn before
// a file's checksum is known: discard what was made of them when Scan fails. Errors name
// the checkpoint file and record; an error of fn is wrapped (errors.Is and errors.As
// find it) with the same position.
func (t *Table) Scan(ctx context.Context, fn func(*hashtablepb.EntryDump) error) error {
	for _, p := range t.parts {
		if err := checkpoint.ReadTable(ctx, p.dir, p.ct, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanRecords is Scan without parsing: fn gets each record of the table's files as it
// is (checkpoint.ReadTableRecords), valid until fn returns.
func (t *Table) scanRecords(ctx context.Context, fn func(rec []byte) error) error {
	for _, p := range t.parts {
		if err := checkpoint.ReadTableRecords(ctx, p.dir, p.ct, fn); err != nil {
			return err
		}
	}
	return nil
}

// Files returns the checkpoint files holding the table, in the order Scan reads them.
func (t *Table) Files() []string {
	out := make([]string, len(t.parts))
	for i, p := range t.parts {
		out[i] = filepath.Join(p.dir, p.ct.GetFile())
	}
	return out
}

// anyName is the folder name of the lowest shard of a listing.
func anyName(byIndex map[int]string) string {
	return filepath.Base(byIndex[slices.Min(slices.Collect(maps.Keys(byIndex)))])
}

// Config is the table's configuration as the checkpoint recorded it (shard 0's).
func (t *Table) Config() *hashtablepb.EmbeddingHashTableConfig {
	if len(t.parts) == 0 {
		return nil
	}
	return t.parts[0].ct.GetConfig()
}
