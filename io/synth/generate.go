package synth

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/fid"
)

// Result describes a generated data set.
type Result struct {
	Files   []File // in index order
	Records int64  // records (messages) written
	Rows    int64  // rows written
	Bytes   int64  // total size of the files on disk
}

// File describes one generated file.
type File struct {
	Path    string
	Records int64
	Rows    int64
	Bytes   int64 // size on disk (after compression)
}

// Paths returns the paths of the files, in index order.
func (r Result) Paths() []string {
	out := make([]string, len(r.Files))
	for i, f := range r.Files {
		out[i] = f.Path
	}
	return out
}

// Generate writes the data set c into dir (created if needed) as c.Files files named by
// Config.FileName, and returns what it wrote. Each file is written through recordio.Create,
// so it appears complete or not at all; files are generated Config.Parallel at a time, each
// from its own random streams, so the output does not depend on the parallelism. Memory is
// bounded by one group of Config.BatchRows rows per file in progress, whatever the size of
// the data set. On error or cancellation Generate removes the files it had completed and
// returns the error. Existing files with the same names are replaced; other files in dir
// are left alone.
func Generate(ctx context.Context, c Config, dir string) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	p, err := newPlan(c)
	if err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return Result{}, fmt.Errorf("io/synth: %w", err)
	}
	workers := c.Parallel
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, c.Files)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	files := make([]File, c.Files)
	errs := make([]error, c.Files)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			g := newGen(p)
			for {
				i := int(next.Add(1) - 1)
				if i >= c.Files || wctx.Err() != nil {
					return
				}
				f, err := g.file(wctx, i, filepath.Join(dir, c.FileName(i)))
				if err != nil {
					errs[i] = err
					cancel()
					return
				}
				files[i] = f
			}
		})
	}
	wg.Wait()
	var first error
	for _, e := range errs {
		if e != nil && (first == nil || errors.Is(first, context.Canceled) && !errors.Is(e, context.Canceled)) {
			first = e
		}
	}
	if first == nil && slices.ContainsFunc(files, func(f File) bool { return f.Path == "" }) {
		first = ctx.Err() // the workers stopped early: the caller cancelled
	}
	if first != nil {
		for _, f := range files {
			if f.Path != "" {
				if err := os.Remove(f.Path); err != nil {
					first = errors.Join(first, fmt.Errorf("io/synth: %w", err))
				}
			}
		}
		return Result{}, first
	}
	res := Result{Files: files}
	for _, f := range files {
		res.Records += f.Records
		res.Rows += f.Rows
		res.Bytes += f.Bytes
	}
	return res, nil
}

// plan is the read-only part of a generation, shared by the workers.
type plan struct {
	c       Config
	z       *zipf
	names   [][]byte // sparse feature names, SparseFeatures order
	slots   []int
	dense   []byte // dense feature name
	member  int    // Feature oneof member of the fid lists
	labeler Labeler
	pbType  uint8 // LagrangeX pb_type
}

func newPlan(c Config) (*plan, error) {
	z, err := newZipf(c.Vocab, c.Zipf)
	if err != nil {
		return nil, err
	}
	p := &plan{c: c, z: z, dense: []byte(c.DenseName()), member: featFidV1List, labeler: c.Labeler, pbType: 1}
	if c.FidVersion == 2 {
		p.member = featFidV2List
	}
	if p.labeler == nil {
		p.labeler = RandomLabeler{PositiveRate: c.PositiveRate}
	}
	if c.Type == batch.SourceInstance {
		p.pbType = 0 // io.md §1.2.2
	}
	for _, f := range c.SparseFeatures() {
		p.names = append(p.names, []byte(f.Name))
		p.slots = append(p.slots, f.Slot)
	}
	return p, nil
}

// gen generates files, one at a time; its buffers hold one group and are reused.
type gen struct {
	p          *plan
	feat, meta *rng
	labelSrc   *rng
	labelRand  *rand.Rand

	rows   int      // rows of the group
	fids   []uint64 // fids of every cell of the group
	off    []int    // cell i is fids[off[i]:off[i+1]]: shared cells, then row-major rows
	dense  []float32
	labels []float32
	uid    uint64
	chnid  uint64
	userID []byte
	lids   []byte // encoded LineIds
	lidOff []int
	row    Row
	out    []byte
}

func newGen(p *plan) *gen {
	g := &gen{p: p, row: Row{Fids: make([][]uint64, len(p.names))}}
	g.labelSrc = &rng{}
	g.labelRand = rand.New(&g.labelSrc.p)
	return g
}

// file writes file i.
func (g *gen) file(ctx context.Context, i int, path string) (File, error) {
	c := &g.p.c
	first, rows := c.fileRows(i)
	g.feat = newRNG(c.Seed, i, streamFeatures)
	g.meta = newRNG(c.Seed, i, streamMeta)
	*g.labelSrc = *newRNG(c.Seed, i, streamLabels)
	o := c.Record
	o.Codec = c.codec()
	w, err := recordio.Create(path, o)
	if err != nil {
		return File{}, err
	}
	f := File{Path: path, Rows: rows}
	for done := int64(0); done < rows; {
		if err := ctx.Err(); err != nil {
			_ = w.Abort()
			return File{}, err
		}
		n := int(min(int64(c.BatchRows), rows-done))
		g.fill(first+done, n)
		recs, err := g.write(w)
		if err != nil {
			_ = w.Abort()
			return File{}, fmt.Errorf("io/synth: %s: %w", path, err)
		}
		f.Records += recs
		done += int64(n)
	}
	if err := w.Close(); err != nil {
		return File{}, fmt.Errorf("io/synth: %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return File{}, fmt.Errorf("io/synth: %w", err)
	}
	f.Bytes = st.Size()
	return f, nil
}

// fill draws the next group of n rows starting at row first. The feature stream draws the
// shared cells, then row by row the individual cells and the dense values; the meta stream
// the group's user and channel; the label stream whatever the Labeler draws, row by row.
// This order does not depend on the message type, so every type carries the same rows.
func (g *gen) fill(first int64, n int) {
	c := &g.p.c
	F, S := c.Features, c.Shared
	g.rows = n
	g.fids = g.fids[:0]
	g.off = append(g.off[:0], 0)
	for s := range S {
		g.cell(F + s)
	}
	g.dense = g.dense[:0]
	for range n {
		for f := range F {
			g.cell(f)
		}
		for range c.Dense {
			g.dense = append(g.dense, g.feat.float32())
		}
	}
	g.uid = userUID(g.meta.uint64n(uint64(c.Users)))
	g.userID = strconv.AppendUint(g.userID[:0], g.uid, 10)
	g.chnid = g.meta.uint64n(uint64(c.Channels))

	T := c.Tasks
	if cap(g.labels) < n*T {
		g.labels = make([]float32, n*T)
	}
	g.labels = g.labels[:n*T]
	g.lids = g.lids[:0]
	g.lidOff = append(g.lidOff[:0], 0)
	for r := range n {
		labels := g.labels[r*T : (r+1)*T]
		if T > 0 {
			g.row.Index = first + int64(r)
			for f := range F + S {
				g.row.Fids[f] = g.cellFids(r, f)
			}
			g.row.Dense = g.dense[r*c.Dense : (r+1)*c.Dense]
			g.p.labeler.Label(g.labelRand, &g.row, labels)
		}
		g.lids = g.appendLineID(g.lids, first+int64(r), labels)
		g.lidOff = append(g.lidOff, len(g.lids))
	}
	clear(g.row.Fids) // drop the views
	g.row.Dense = nil
}

// cell draws one cell of feature f.
func (g *gen) cell(f int) {
	c := &g.p.c
	n := c.FidsMin
	if span := c.FidsMax - c.FidsMin; span > 0 {
		n += int(g.feat.uint64n(uint64(span) + 1))
	}
	// Fid, unrolled by version, with zipf.sample's common case inlined.
	slot, z, r := uint64(g.p.slots[f]), g.p.z, g.feat
	off := sigOffset(slot)
	hi, v1 := slot<<fid.V2SigBits, c.FidVersion == 1
	if v1 {
		hi = slot << fid.V1SigBits
	}
	for range n {
		v := r.uint64()
		col := v >> z.shift
		if e := z.alias[col]; uint32(v) >= e.thresh {
			col = uint64(e.alias)
		}
		rank := col + 1
		if col >= z.head {
			rank = z.sampleSlow(r, col)
		}
		sig := perm48(rank + off)
		if v1 {
			sig |= v1High(sig)
		}
		g.fids = append(g.fids, hi|sig)
	}
	g.off = append(g.off, len(g.fids))
}

// cellFids returns the fids of feature f (SparseFeatures order) in row r of the group.
func (g *gen) cellFids(r, f int) []uint64 {
	F, S := g.p.c.Features, g.p.c.Shared
	i := f - F // shared cell
	if f < F {
		i = S + r*F + f
	}
	return g.fids[g.off[i]:g.off[i+1]]
}

// userUID is the uid of user u: a fixed 63-bit hash, the same in every data set.
func userUID(u uint64) uint64 { return mix64(u+0x2545f4914f6cdd1d) >> 1 }

// appendLineID appends the LineId of row index with the given labels.
func (g *gen) appendLineID(b []byte, index int64, labels []float32) []byte {
	c := &g.p.c
	b = appendTag(b, lidUID, wireFixed64)
	b = binary.LittleEndian.AppendUint64(b, g.uid)
	b = appendVarintField(b, lidReqTime, uint64(c.ReqTimeBase+index))
	n := 0
	for t, l := range labels {
		if l > 0 {
			n += sizeVarint(uint64(t + 1))
		}
	}
	if n > 0 {
		b = appendLen(b, lidActions, n)
		for t, l := range labels {
			if l > 0 {
				b = binary.AppendUvarint(b, uint64(t+1))
			}
		}
	}
	b = appendVarintField(b, lidChnid, g.chnid)
	b = appendTag(b, lidSampleRate, wireFixed32)
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(c.SampleRate))
	return appendString(b, lidUserID, g.userID)
}

// lineID returns the encoded LineId of row r of the group.
func (g *gen) lineID(r int) []byte { return g.lids[g.lidOff[r]:g.lidOff[r+1]] }

// write encodes the group into records and writes them; it returns the record count.
func (g *gen) write(w *recordio.Writer) (int64, error) {
	c := &g.p.c
	rec := recordio.Record{}
	switch {
	case c.Record.Framing == recordio.PBStream && c.Record.PB.LagrangeX:
		rec.PBType = g.p.pbType
	case c.Record.Framing == recordio.PBStream && c.Record.PB.HasSortID:
		rec.SortID = g.userID
	}
	if c.Type == batch.SourceExampleBatch {
		g.out = g.appendExampleBatch(g.out[:0])
		rec.Payload = g.out
		return 1, w.WriteRecord(rec)
	}
	for r := range g.rows {
		if c.Type == batch.SourceExample {
			g.out = g.appendExample(g.out[:0], r)
		} else {
			g.out = g.appendInstance(g.out[:0], r)
		}
		rec.Payload = g.out
		if err := w.WriteRecord(rec); err != nil {
			return int64(r), err
		}
	}
	return int64(g.rows), nil
}

// Reserved list names (io.md §2.6).
var (
	nameLabel  = []byte(batch.ListLabel)
	nameLineID = []byte(batch.ListLineID)
)

// appendExampleBatch appends the group as one ExampleBatch: the individual features, the
// shared ones (SHARED), the dense feature, __LINE_ID__ and __LABEL__, then batch_size.
func (g *gen) appendExampleBatch(b []byte) []byte {
	c := &g.p.c
	F, S, n := c.Features, c.Shared, g.rows
	for f := range F + S {
		name, slot := g.p.names[f], g.p.slots[f]
		body := sizeField(nflName, len(name)) + sizeID(nflID, slot)
		rows := n
		if f >= F {
			rows = 1
			body += sizeTag(nflType) + 1
		}
		for r := range rows {
			body += sizeField(nflFeature, fidFeatureSize(len(g.cellFids(r, f))))
		}
		b = appendLen(b, ebNamedFeatureList, body)
		b = appendString(b, nflName, name)
		for r := range rows {
			cell := g.cellFids(r, f)
			b = appendLen(b, nflFeature, fidFeatureSize(len(cell)))
			b = appendFidFeature(b, g.p.member, cell)
		}
		if f >= F {
			b = appendVarintField(b, nflType, 1) // SHARED
		}
		b = appendID(b, nflID, slot)
	}
	if D := c.Dense; D > 0 {
		b = appendLen(b, ebNamedFeatureList, sizeField(nflName, len(g.p.dense))+n*sizeField(nflFeature, floatFeatureSize(D)))
		b = appendString(b, nflName, g.p.dense)
		for r := range n {
			b = appendLen(b, nflFeature, floatFeatureSize(D))
			b = appendFloatFeature(b, g.dense[r*D:(r+1)*D])
		}
	}
	body := sizeField(nflName, len(nameLineID))
	for r := range n {
		body += sizeField(nflFeature, bytesFeatureSize(len(g.lineID(r))))
	}
	b = appendLen(b, ebNamedFeatureList, body)
	b = appendString(b, nflName, nameLineID)
	for r := range n {
		lid := g.lineID(r)
		b = appendLen(b, nflFeature, bytesFeatureSize(len(lid)))
		b = appendBytesFeature(b, lid)
	}
	if T := c.Tasks; T > 0 {
		b = appendLen(b, ebNamedFeatureList, sizeField(nflName, len(nameLabel))+n*sizeField(nflFeature, floatFeatureSize(T)))
		b = appendString(b, nflName, nameLabel)
		for r := range n {
			b = appendLen(b, nflFeature, floatFeatureSize(T))
			b = appendFloatFeature(b, g.labels[r*T:(r+1)*T])
		}
	}
	return appendVarintField(b, ebBatchSize, uint64(n))
}

// appendExample appends row r as an Example: named features (individual, shared, dense),
// then line_id and label.
func (g *gen) appendExample(b []byte, r int) []byte {
	c := &g.p.c
	for f := range c.Features + c.Shared {
		name, slot, cell := g.p.names[f], g.p.slots[f], g.cellFids(r, f)
		b = appendLen(b, exNamedFeature, sizeField(nfName, len(name))+sizeField(nfFeature, fidFeatureSize(len(cell)))+sizeID(nfID, slot))
		b = appendString(b, nfName, name)
		b = appendLen(b, nfFeature, fidFeatureSize(len(cell)))
		b = appendFidFeature(b, g.p.member, cell)
		b = appendID(b, nfID, slot)
	}
	if D := c.Dense; D > 0 {
		b = appendLen(b, exNamedFeature, sizeField(nfName, len(g.p.dense))+sizeField(nfFeature, floatFeatureSize(D)))
		b = appendString(b, nfName, g.p.dense)
		b = appendLen(b, nfFeature, floatFeatureSize(D))
		b = appendFloatFeature(b, g.dense[r*D:(r+1)*D])
	}
	b = appendString(b, exLineID, g.lineID(r))
	return appendPackedFloat(b, exLabel, g.labels[r*c.Tasks:(r+1)*c.Tasks])
}

// appendInstance appends row r as an Instance: v1 fids in the top-level fid field (all
// features, in order), label, line_id, then v2 fid features and the dense feature as named
// features.
func (g *gen) appendInstance(b []byte, r int) []byte {
	c := &g.p.c
	nf := c.Features + c.Shared
	if c.FidVersion == 1 {
		total := 0
		for f := range nf {
			total += len(g.cellFids(r, f))
		}
		if total > 0 {
			b = appendLen(b, inFid, 8*total)
			for f := range nf {
				b = appendFixed64s(b, g.cellFids(r, f))
			}
		}
	}
	b = appendPackedFloat(b, inLabel, g.labels[r*c.Tasks:(r+1)*c.Tasks])
	b = appendString(b, inLineID, g.lineID(r))
	if c.FidVersion == 2 {
		for f := range nf {
			name, cell := g.p.names[f], g.cellFids(r, f)
			b = appendLen(b, inFeature, sizeField(mfName, len(name))+sizePacked(mfFid, len(cell), 8))
			b = appendString(b, mfName, name)
			b = appendPackedFixed64(b, mfFid, cell)
		}
	}
	if D := c.Dense; D > 0 {
		b = appendLen(b, inFeature, sizeField(mfName, len(g.p.dense))+sizePacked(mfFloatValue, D, 4))
		b = appendString(b, mfName, g.p.dense)
		b = appendPackedFloat(b, mfFloatValue, g.dense[r*D:(r+1)*D])
	}
	return b
}

// maxRecordSize bounds the size of one record (generously: every cell at FidsMax fids and
// 48 bytes of names, tags and lengths).
func (c Config) maxRecordSize() float64 {
	perRow := float64(c.Features+c.Shared)*(8*float64(c.FidsMax)+48) + 4*float64(c.Dense) + 32 +
		8*float64(c.Tasks) + 96 + 4*float64(c.Tasks)
	if c.Type == batch.SourceExampleBatch {
		return perRow * float64(c.BatchRows)
	}
	return perRow
}
