package shard

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"github.com/monolith-go/monolith/kernels/featcfg"
)

// SharedBit flags a shared feature in nfl_offset (Monolith's SHARD_BIT).
const SharedBit = 1 << 31

// noDedup is the fid value the reference's hash table uses as its empty marker; it is never
// deduplicated.
const noDedup = ^uint64(0)

// ErrInput is wrapped by errors about malformed inputs.
var ErrInput = errors.New("kernels/shard: invalid input")

// FeatureInput holds the entries of one configured feature: entry e holds
// Values[Offsets[e]:Offsets[e+1]]. A shared feature has one entry; otherwise there is one
// entry per row. Nil Offsets means every entry is empty.
type FeatureInput struct {
	Shared  bool
	Offsets []int32
	Values  []uint64
}

// Entries returns the number of entries for a batch of rows.
func (f *FeatureInput) Entries(rows int) int {
	if f.Shared {
		return 1
	}
	return rows
}

// Entry returns the fids of entry e.
func (f *FeatureInput) Entry(e int) []uint64 {
	if f.Offsets == nil {
		return nil
	}
	return f.Values[f.Offsets[e]:f.Offsets[e+1]]
}

// Input is one batch as the kernel sees it.
type Input struct {
	Rows     int            // batch_size
	Features []FeatureInput // one per configured feature, in the Config's order
	scratch  [][]int32      // composed offsets of flattened sequence columns (FromBatch)
}

// Options selects the sharding variant.
type Options struct {
	PS       int  // number of PS shards P; 0 means 1, as Monolith's Python wrapper does
	Version  int  // 1..5
	Unique   bool // deduplicate per feature
	Parallel int  // goroutines; ≤ 1 runs serially
}

// Result holds every output of one call. Per-(table, ps) values are indexed by
// k = t*P + p whatever the version; storage order of Fids and RowSplits is the version's
// (ps-major for v4, table-major otherwise).
type Result struct {
	Version   int
	PS        int
	Tables    int
	BatchSize int

	Fids      []uint64 // all fid lists, concatenated in the version's order
	listStart []int    // by k
	listEnd   []int

	FidOffset     []uint64 // (index1 << 32) | index2, one per fid occurrence
	FeatureOffset []int32  // [E+1]
	NflOffset     []uint32 // [F+1], bit 31 = shared

	RowSplits  []int64 // all row splits, concatenated in the version's order
	splitStart []int   // by k; list k has F_t+1 splits
	splitEnd   []int

	EmbSize        []int32 // by k: Σ_f len(f,p)·D_f
	TableRowLength []int32 // v4 order p*T+t: len(list (t,p))
	ShardRowLength []int32 // [P]: Σ_t len(list (t,p))
	EmbRowLength   []int32 // v4 order p*T+t: Σ_f len(f,p)·D_f

	Counts []int32 // len(f, p) by f*P+p: unique or occurrence count of feature f on shard p
}

// List returns the fid list of (table t, shard p).
func (r *Result) List(t, p int) []uint64 {
	k := t*r.PS + p
	return r.Fids[r.listStart[k]:r.listEnd[k]]
}

// Splits returns the row splits of (table t, shard p): [0, c_0, c_0+c_1, ...].
func (r *Result) Splits(t, p int) []int64 {
	k := t*r.PS + p
	return r.RowSplits[r.splitStart[k]:r.splitEnd[k]]
}

// ListStart returns the position of list (t, p) in Fids.
func (r *Result) ListStart(t, p int) int { return r.listStart[t*r.PS+p] }

// Index1 returns the high half of a fid_offset.
func Index1(v uint64) uint32 { return uint32(v >> 32) }

// Index2 returns the low half of a fid_offset.
func Index2(v uint64) uint32 { return uint32(v) }

// Sharder runs sharding_sparse_fids for one Config and Options, reusing its buffers.
type Sharder struct {
	cfg  *featcfg.Config
	opts Options
	mod  modulo
	res  Result

	featOcc []int // first occurrence index of every feature, [F+1]
	baseRow []int // by f*P+p: rows before feature f in list (t,p)
	baseEmb []int // by f*P+p: floats before feature f in the (t,p) embedding buffer
	workers []dedup
	parts   []int // feature ranges per worker, [G+1]
	// v2 index1 base of each table: Σ_{t'<t} F_t'·P
	v2base []int
}

// Between the two passes, fid_offset holds shard<<32 | position, with firstBit marking
// the first occurrence of a fid in its (feature, shard) list.
const firstBit = 1 << 31

// MaxPS is the largest ps_num the sharder accepts.
const MaxPS = 1 << 20

// New returns a Sharder. It validates the options against the config.
func New(cfg *featcfg.Config, opts Options) (*Sharder, error) {
	if opts.PS == 0 {
		opts.PS = 1
	}
	if opts.PS < 0 || opts.PS > MaxPS {
		return nil, fmt.Errorf("kernels/shard: ps_num %d out of range [1, %d]", opts.PS, MaxPS)
	}
	if opts.Version < 1 || opts.Version > 5 {
		return nil, fmt.Errorf("kernels/shard: version %d is not 1..5", opts.Version)
	}
	if len(cfg.Tables) == 0 {
		return nil, fmt.Errorf("kernels/shard: the config has no features")
	}
	g := max(opts.Parallel, 1)
	s := &Sharder{cfg: cfg, opts: opts, mod: newModulo(uint64(opts.PS)), workers: make([]dedup, g)}
	base := 0
	for _, t := range cfg.Tables {
		s.v2base = append(s.v2base, base)
		base += len(t.Features) * opts.PS
	}
	return s, nil
}

// Config returns the Sharder's config.
func (s *Sharder) Config() *featcfg.Config { return s.cfg }

// Options returns the Sharder's options (PS resolved).
func (s *Sharder) Options() Options { return s.opts }

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// validate checks the shape of an input.
func (s *Sharder) validate(in *Input) error {
	if in.Rows < 0 {
		return fmt.Errorf("%w: batch size %d", ErrInput, in.Rows)
	}
	if len(in.Features) != len(s.cfg.Features) {
		return fmt.Errorf("%w: %d feature inputs for %d configured features", ErrInput, len(in.Features), len(s.cfg.Features))
	}
	for f := range in.Features {
		fi := &in.Features[f]
		if fi.Offsets == nil {
			continue
		}
		n := fi.Entries(in.Rows)
		if len(fi.Offsets) != n+1 {
			return fmt.Errorf("%w: feature %q: %d offsets for %d entries", ErrInput, s.cfg.Features[f].Name, len(fi.Offsets), n)
		}
		prev := fi.Offsets[0]
		if prev < 0 {
			return fmt.Errorf("%w: feature %q: negative offset", ErrInput, s.cfg.Features[f].Name)
		}
		for _, o := range fi.Offsets[1:] {
			if o < prev {
				return fmt.Errorf("%w: feature %q: offsets decrease", ErrInput, s.cfg.Features[f].Name)
			}
			prev = o
		}
		if int(prev) > len(fi.Values) {
			return fmt.Errorf("%w: feature %q: offsets run past %d values", ErrInput, s.cfg.Features[f].Name, len(fi.Values))
		}
	}
	return nil
}

// Shard shards one batch. The Result and its slices are reused by the next call.
func (s *Sharder) Shard(in *Input) (*Result, error) {
	if err := s.validate(in); err != nil {
		return nil, err
	}
	cfg, P := s.cfg, s.opts.PS
	F, T := len(cfg.Features), len(cfg.Tables)
	r := &s.res
	r.Version, r.PS, r.Tables, r.BatchSize = s.opts.Version, P, T, in.Rows

	// Entries, feature_offset and nfl_offset.
	E := 0
	for f := range in.Features {
		E += in.Features[f].Entries(in.Rows)
	}
	r.FeatureOffset = grow(r.FeatureOffset, E+1)
	r.NflOffset = grow(r.NflOffset, F+1)
	s.featOcc = grow(s.featOcc, F+1)
	e, occ := 0, 0
	for f := range in.Features {
		fi := &in.Features[f]
		r.NflOffset[f] = uint32(e)
		if fi.Shared {
			r.NflOffset[f] |= SharedBit
		}
		s.featOcc[f] = occ
		n := fi.Entries(in.Rows)
		if fi.Offsets == nil {
			fo := r.FeatureOffset[e : e+n]
			for i := range fo {
				fo[i] = int32(occ)
			}
		} else {
			fo := r.FeatureOffset[e : e+n]
			offs := fi.Offsets[:n+1]
			delta := int32(occ) - offs[0]
			for i := range fo {
				fo[i] = offs[i] + delta
			}
			occ += int(offs[n] - offs[0])
		}
		e += n
	}
	if occ > 1<<31-1 {
		return nil, fmt.Errorf("%w: %d fids in one batch exceed 2^31", ErrInput, occ)
	}
	r.FeatureOffset[E] = int32(occ)
	r.NflOffset[F] = uint32(E + 1)
	s.featOcc[F] = occ
	r.FidOffset = grow(r.FidOffset, occ)
	r.Counts = grow(r.Counts, F*P)
	clear(r.Counts)

	// Pass A: shard and deduplicate every feature; count (feature, shard) list lengths.
	s.partition(in)
	s.run(func(w int) {
		for f := s.parts[w]; f < s.parts[w+1]; f++ {
			s.countFeature(in, f, &s.workers[w])
		}
	})

	// List and row-split layout, bases, sizes.
	s.layoutLists()

	// Pass B: fill the lists and fid_offset.
	s.run(func(w int) {
		for f := s.parts[w]; f < s.parts[w+1]; f++ {
			s.fillFeature(in, f)
		}
	})
	return r, nil
}

// partition splits the features into contiguous ranges of similar occurrence counts.
func (s *Sharder) partition(in *Input) {
	g := len(s.workers)
	F := len(s.cfg.Features)
	s.parts = grow(s.parts, g+1)
	total := s.featOcc[F]
	f := 0
	for w := 0; w < g; w++ {
		s.parts[w] = f
		target := total * (w + 1) / g
		for f < F && (s.featOcc[f+1] <= target || w == g-1) {
			f++
		}
	}
	s.parts[g] = F
}

// run calls work(w) for every worker, concurrently when there are several.
func (s *Sharder) run(work func(w int)) {
	if len(s.workers) == 1 {
		work(0)
		return
	}
	var wg sync.WaitGroup
	for w := range s.workers {
		wg.Go(func() { work(w) })
	}
	wg.Wait()
}

// values returns the fids of all of feature f's entries, in entry order (they are
// contiguous).
func (fi *FeatureInput) values(rows int) []uint64 {
	if fi.Offsets == nil {
		return nil
	}
	n := fi.Entries(rows)
	return fi.Values[fi.Offsets[0]:fi.Offsets[n]]
}

// countFeature is pass A for feature f: it stages shard<<32 | position (| firstBit) of
// every occurrence in fid_offset and counts the (feature, shard) lists.
func (s *Sharder) countFeature(in *Input, f int, d *dedup) {
	P := s.opts.PS
	vals := in.Features[f].values(in.Rows)
	cnt := s.res.Counts[f*P : (f+1)*P]
	stage := s.res.FidOffset[s.featOcc[f]:s.featOcc[f+1]]
	stage = stage[:len(vals)]
	d.shards = grow(d.shards, len(vals))
	shards := d.shards[:len(vals)]
	s.mod.modAll(shards, vals)
	if !s.opts.Unique {
		for i, p := range shards {
			stage[i] = uint64(p)<<32 | uint64(cnt[p]) | firstBit
			cnt[p]++
		}
		return
	}
	d.reset(len(vals))
	d.countUnique(vals, shards, stage, cnt)
}

// countUnique stages every occurrence of vals (whose shards are in shards) and counts the
// distinct fids of each shard in cnt: the first occurrence of a fid gets the next position
// of its shard and firstBit, a repeated one the position of its first. Its loop keeps its
// state in locals, so that the compiler holds them in registers (see modAll).
func (d *dedup) countUnique(vals []uint64, shards []uint32, stage []uint64, cnt []int32) {
	slots := d.slots[:d.mask+1]
	mask, shift, gen := d.mask, d.shift, d.gen
	shards = shards[:len(vals)]
	stage = stage[:len(vals)]
next:
	for i, v := range vals {
		p := shards[i]
		pos := uint32(cnt[p])
		if v != noDedup {
			for h := (v * hashMul) >> shift; ; h = (h + 1) & mask {
				sl := &slots[h]
				if sl.gen != gen {
					*sl = slot{key: v, gen: gen, pos: pos}
					break
				}
				if sl.key == v {
					stage[i] = uint64(p)<<32 | uint64(sl.pos)
					continue next
				}
			}
		}
		cnt[p]++
		stage[i] = uint64(p)<<32 | uint64(pos) | firstBit
	}
}

// layoutLists places every (table, shard) list and its row splits in the version's order
// and computes per-(feature, shard) bases and the size vectors.
func (s *Sharder) layoutLists() {
	cfg, r, P := s.cfg, &s.res, s.opts.PS
	F, T := len(cfg.Features), len(cfg.Tables)
	K := T * P
	r.listStart, r.listEnd = grow(r.listStart, K), grow(r.listEnd, K)
	r.splitStart, r.splitEnd = grow(r.splitStart, K), grow(r.splitEnd, K)
	r.EmbSize = grow(r.EmbSize, K)
	s.baseRow, s.baseEmb = grow(s.baseRow, F*P), grow(s.baseEmb, F*P)
	splits := 0
	for t := range cfg.Tables {
		splits += (len(cfg.Tables[t].Features) + 1) * P
	}
	r.RowSplits = grow(r.RowSplits, splits)
	// Order in which the lists are stored.
	pos, spos := 0, 0
	place := func(t, p int) {
		k := t*P + p
		rows, emb := 0, 0
		split := r.RowSplits[spos:]
		split[0] = 0
		for j, f := range cfg.Tables[t].Features {
			c := int(r.Counts[f*P+p])
			s.baseRow[f*P+p], s.baseEmb[f*P+p] = rows, emb
			rows += c
			emb += c * cfg.Features[f].Dim
			split[j+1] = int64(rows)
		}
		r.listStart[k], r.listEnd[k] = pos, pos+rows
		r.EmbSize[k] = int32(emb)
		pos += rows
		r.splitStart[k] = spos
		spos += len(cfg.Tables[t].Features) + 1
		r.splitEnd[k] = spos
	}
	if s.opts.Version == 4 {
		for p := 0; p < P; p++ {
			for t := 0; t < T; t++ {
				place(t, p)
			}
		}
	} else {
		for t := 0; t < T; t++ {
			for p := 0; p < P; p++ {
				place(t, p)
			}
		}
	}
	r.Fids = grow(r.Fids, pos)
	r.TableRowLength = grow(r.TableRowLength, K)
	r.EmbRowLength = grow(r.EmbRowLength, K)
	r.ShardRowLength = grow(r.ShardRowLength, P)
	clear(r.ShardRowLength)
	for t := 0; t < T; t++ {
		for p := 0; p < P; p++ {
			k := t*P + p
			n := int32(r.listEnd[k] - r.listStart[k])
			r.TableRowLength[p*T+t] = n
			r.EmbRowLength[p*T+t] = r.EmbSize[k]
			r.ShardRowLength[p] += n
		}
	}
}

// fillFeature is pass B for feature f: writes its fids into the lists and turns the
// staged values into fid_offsets.
func (s *Sharder) fillFeature(in *Input, f int) {
	cfg, r, P := s.cfg, &s.res, s.opts.PS
	ft := &cfg.Features[f]
	t := ft.Table
	vals := in.Features[f].values(in.Rows)
	fo := r.FidOffset[s.featOcc[f]:s.featOcc[f+1]]
	fo = fo[:len(vals)]
	// dest[p] = position of (feature f, shard p)'s first fid in Fids.
	var destBuf [64]int
	dest := destBuf[:0]
	if P > len(destBuf) {
		dest = make([]int, 0, P)
	}
	for p := 0; p < P; p++ {
		dest = append(dest, r.listStart[t*P+p]+s.baseRow[f*P+p])
	}
	scatterFirst(r.Fids, dest, fo, vals)
	tp := uint64(t * P)
	switch s.opts.Version {
	case 1:
		base := s.baseRow[f*P : (f+1)*P]
		for i, v := range fo {
			p := v >> 32
			fo[i] = (tp+p)<<32 | uint64(base[p]) + uint64(uint32(v)&^firstBit)
		}
	case 2:
		v2 := uint64(s.v2base[t] + ft.InTable)
		nf := uint64(len(cfg.Tables[t].Features))
		for i, v := range fo {
			fo[i] = (v2+(v>>32)*nf)<<32 | uint64(uint32(v)&^firstBit)
		}
	default:
		dim := uint64(ft.Dim)
		base := s.baseEmb[f*P : (f+1)*P]
		for i, v := range fo {
			p := v >> 32
			fo[i] = (tp+p)<<32 | (uint64(uint32(v)&^firstBit)*dim+uint64(base[p]))&0xFFFFFFFF
		}
	}
}

// scatterFirst writes the fid of every first occurrence staged in fo (shard<<32 | position
// | firstBit) to fids[dest[shard]+position]. A function of its own, kept out of line, so
// that its loop runs in registers: inside fillFeature the compiler kept the index on the
// stack (one call per feature).
//
//go:noinline
func scatterFirst(fids []uint64, dest []int, fo, vals []uint64) {
	vals = vals[:len(fo)]
	for i, v := range fo {
		if v&firstBit != 0 {
			fids[dest[v>>32]+int(uint32(v)&^firstBit)] = vals[i]
		}
	}
}

// dedup is one worker's pass-A state: an open-addressing set of fids → position, reset in
// O(1) per feature with a generation counter, and the shards of the feature's fids.
type dedup struct {
	slots  []slot
	mask   uint64
	shift  uint
	gen    uint32
	shards []uint32 // the shard of each fid of the feature being counted
}

// hashMul is Fibonacci hashing's multiplier (2^64 / φ).
const hashMul = 0x9E3779B97F4A7C15

type slot struct {
	key uint64
	gen uint32
	pos uint32
}

// reset empties the set and sizes it for up to n keys (load factor at most 1/2).
func (d *dedup) reset(n int) {
	need := 16
	for need < 2*n {
		need <<= 1
	}
	if len(d.slots) < need {
		d.slots = make([]slot, need)
		d.gen = 0
	}
	// Use only the part of the table this feature needs: a smaller table stays in cache.
	d.mask = uint64(need - 1)
	d.shift = uint(64 - bits.TrailingZeros(uint(need)))
	d.gen++
	if d.gen == 0 { // wrapped: old generations could alias
		clear(d.slots)
		d.gen = 1
	}
}

// modulo computes n % d for a fixed d with multiplications (Lemire's fastmod on 128 bits),
// or a mask when d is a power of two.
type modulo struct {
	d      uint64
	mask   uint64
	pow2   bool
	mh, ml uint64 // M = ⌊(2^128−1)/d⌋ + 1
}

func newModulo(d uint64) modulo {
	m := modulo{d: d}
	if d&(d-1) == 0 {
		m.pow2, m.mask = true, d-1
		return m
	}
	qh, r := bits.Div64(0, ^uint64(0), d)
	ql, _ := bits.Div64(r, ^uint64(0), d)
	var c uint64
	m.ml, c = bits.Add64(ql, 1, 0)
	m.mh = qh + c
	return m
}

// modAll writes v % d of every v in vals to out (len(out) ≥ len(vals)). One loop per
// case with the constants in locals: a method call per fid on a copy of m made the
// compiler spill the struct and the products to the stack in every iteration.
func (m *modulo) modAll(out []uint32, vals []uint64) {
	out = out[:len(vals)]
	if m.pow2 {
		mask := m.mask
		for i, v := range vals {
			out[i] = uint32(v & mask)
		}
		return
	}
	d, mh, ml := m.d, m.mh, m.ml
	for i, v := range vals {
		out[i] = uint32(fastMod(v, d, mh, ml))
	}
}

// fastMod returns n % d given M = mh·2^64 + ml = ⌊(2^128−1)/d⌋ + 1.
func fastMod(n, d, mh, ml uint64) uint64 {
	// low = M·n mod 2^128
	h, l := bits.Mul64(ml, n)
	lh := h + mh*n
	// (low · d) >> 128
	h0, _ := bits.Mul64(l, d)
	h1, l1 := bits.Mul64(lh, d)
	_, c := bits.Add64(l1, h0, 0)
	return h1 + c
}
