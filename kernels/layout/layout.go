package layout

import (
	"errors"
	"fmt"
	"sync"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/shard"
)

// ErrInput is wrapped by errors about inputs that do not fit the config or each other.
var ErrInput = errors.New("kernels/layout: invalid input")

const (
	sharedBit  = shard.SharedBit
	offsetMask = sharedBit - 1
)

// Sharded is the sharding output of one request, as the layout kernels read it.
type Sharded struct {
	FidOffset     []uint64
	FeatureOffset []int32
	NflOffset     []uint32
	BatchSize     int
	RowSplits     [][]int64 // v2: row splits of list k = t*P+p
	EmbRowLength  []int32   // v4: floats of chunk p*T+t
	EmbSize       []int32   // v5: floats of tensor k = t*P+p for this request
}

// FromShard returns the Sharded view of a sharding result (aliasing its slices).
func FromShard(r *shard.Result) Sharded {
	s := Sharded{FidOffset: r.FidOffset, FeatureOffset: r.FeatureOffset, NflOffset: r.NflOffset,
		BatchSize: r.BatchSize, EmbRowLength: r.EmbRowLength, EmbSize: r.EmbSize}
	if r.Version == 2 {
		for t := 0; t < r.Tables; t++ {
			for p := 0; p < r.PS; p++ {
				s.RowSplits = append(s.RowSplits, r.Splits(t, p))
			}
		}
	}
	return s
}

// Embedding is the float storage the kernel reads embeddings from (forward) or writes
// embedding gradients to (backward).
type Embedding struct {
	Tensors [][]float32 // v1, v2, v3, v5: one per (table, shard) k = t*P+p
	Dims    []int       // v1: width of tensor k (its rows are len/width)
	Flat    []float32   // v4: the one flat buffer
}

// Options selects the variant.
type Options struct {
	Version  int // 1..5
	PS       int // number of PS shards P; 0 means 1
	Parallel int // goroutines; ≤ 1 runs serially
}

// target is where one slice of a layout writes, per row.
type target struct {
	feature   int
	start     int // first column of the slice in the feature's embedding
	width     int
	pooling   featcfg.Pooling
	seqLen    int  // FIRSTN positions
	out       int  // output tensor index
	off       int  // offset of the slice in a row of the output
	posStride int  // FIRSTN: floats between sequence positions
	rowSize   int  // floats per row of the output
	add       bool // ADDN
}

// Layouter runs the layout kernels of one config.
type Layouter struct {
	cfg     *featcfg.Config
	opts    Options
	targets []target
	sizes   []int  // floats per row of every output
	addN    []bool // whether every output is an ADDN output
	workers int
	plans   []plan  // features read by pooled (non-FIRSTN) slices, in feature order
	planOf  []int   // plan index of every feature, -1 if none
	width   int     // Σ plan spans: floats of one row of pooled values
	byFeat  [][]int // target indexes of every feature, in config order
	byOut   [][]int // target indexes of every output, in config order
	tmplOff []int   // offset of every output's template row (see forwardRequest), -1 for ADDN
	tmplLen int     // Σ row sizes of the outputs that have a template row
	scratch [][]float32
	tmplUse [][]bool // per worker: whether each output's template row is in use for the request
}

// plan is how one feature is pooled: once per entry, over the union [lo, hi) of the
// columns its pooled slices read, into a row of pooled values at offset off.
type plan struct {
	feature int
	lo, hi  int
	off     int
	mean    bool
}

// New returns a Layouter for cfg.
func New(cfg *featcfg.Config, opts Options) (*Layouter, error) {
	if opts.PS == 0 {
		opts.PS = 1
	}
	if opts.PS < 0 {
		return nil, fmt.Errorf("kernels/layout: ps_num %d", opts.PS)
	}
	if opts.Version < 1 || opts.Version > 5 {
		return nil, fmt.Errorf("kernels/layout: version %d is not 1..5", opts.Version)
	}
	l := &Layouter{cfg: cfg, opts: opts, workers: max(opts.Parallel, 1)}
	maxW := 1
	out := 0
	for li := range cfg.Layouts {
		lay := &cfg.Layouts[li]
		width := 0
		for _, s := range lay.Slices {
			width += s.Width()
		}
		for i, s := range lay.Slices {
			tg := target{feature: s.Feature, start: s.Start, width: s.Width(), pooling: s.Pooling,
				out: out, off: s.Offset, posStride: s.Width(), rowSize: lay.RowSize[0], add: lay.OutType == featcfg.AddN}
			if s.Pooling == featcfg.FirstN {
				tg.seqLen = s.MaxSeqLen
			}
			switch lay.OutType {
			case featcfg.Concat:
				tg.posStride = width // D1
			case featcfg.None:
				tg.out, tg.off, tg.rowSize = out+i, 0, lay.RowSize[i]
			}
			maxW = max(maxW, s.Width())
			l.targets = append(l.targets, tg)
		}
		l.sizes = append(l.sizes, lay.RowSize...)
		for range lay.Outputs() {
			l.addN = append(l.addN, lay.OutType == featcfg.AddN)
		}
		out += lay.Outputs()
	}
	_ = maxW
	F := len(cfg.Features)
	l.planOf = make([]int, F)
	l.byFeat = make([][]int, F)
	lo, hi := make([]int, F), make([]int, F)
	for n := range lo {
		lo[n], hi[n], l.planOf[n] = 1<<30, -1, -1
	}
	for ti, tg := range l.targets {
		l.byFeat[tg.feature] = append(l.byFeat[tg.feature], ti)
		if tg.pooling != featcfg.FirstN {
			lo[tg.feature] = min(lo[tg.feature], tg.start)
			hi[tg.feature] = max(hi[tg.feature], tg.start+tg.width)
		}
	}
	for n := 0; n < F; n++ {
		if hi[n] < 0 {
			continue
		}
		l.planOf[n] = len(l.plans)
		l.plans = append(l.plans, plan{feature: n, lo: lo[n], hi: hi[n], off: l.width, mean: cfg.Features[n].Pooling == featcfg.Mean})
		l.width += hi[n] - lo[n]
	}
	l.byOut = make([][]int, len(l.sizes))
	for ti, tg := range l.targets {
		l.byOut[tg.out] = append(l.byOut[tg.out], ti)
	}
	l.tmplOff = make([]int, len(l.sizes))
	for o := range l.sizes {
		l.tmplOff[o] = -1
		if !l.addN[o] {
			l.tmplOff[o] = l.tmplLen
			l.tmplLen += l.sizes[o]
		}
	}
	l.scratch = make([][]float32, l.workers)
	l.tmplUse = make([][]bool, l.workers)
	for w := range l.tmplUse {
		l.tmplUse[w] = make([]bool, len(l.sizes))
	}
	return l, nil
}

// rowBlock is the number of rows pooled at once in the forward pass.
const rowBlock = 32

// RowSizes returns the number of floats per row of every output tensor, in output order.
func (l *Layouter) RowSizes() []int { return l.sizes }

// OutputSizes returns the number of floats of every output tensor for a batch of rows.
func (l *Layouter) OutputSizes(rows int) []int {
	out := make([]int, len(l.sizes))
	for i, s := range l.sizes {
		out[i] = s * rows
	}
	return out
}

// block is a view of embedding storage: the data of fid (index1, index2) for a slice
// starting at s is data[index2*stride+s:].
type block struct {
	data   []float32
	stride int
}

// blocks builds the block table of every request. Embedding storage may be embeddings or
// embedding gradients: the addressing is the same.
func (l *Layouter) blocks(reqs []Sharded, emb Embedding) ([][]block, error) {
	cfg, P := l.cfg, l.opts.PS
	T := len(cfg.Tables)
	K := T * P
	if l.opts.Version != 5 && len(reqs) != 1 {
		return nil, fmt.Errorf("%w: version %d takes one request, got %d", ErrInput, l.opts.Version, len(reqs))
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%w: no request", ErrInput)
	}
	needTensors := func() error {
		if len(emb.Tensors) != K {
			return fmt.Errorf("%w: version %d needs %d embedding tensors (tables × ps), got %d", ErrInput, l.opts.Version, K, len(emb.Tensors))
		}
		return nil
	}
	out := make([][]block, len(reqs))
	switch l.opts.Version {
	case 1:
		if err := needTensors(); err != nil {
			return nil, err
		}
		if len(emb.Dims) != K {
			return nil, fmt.Errorf("%w: version 1 needs the width of each of the %d tensors", ErrInput, K)
		}
		bs := make([]block, K)
		for k := range bs {
			if emb.Dims[k] <= 0 || len(emb.Tensors[k])%emb.Dims[k] != 0 {
				return nil, fmt.Errorf("%w: tensor %d has %d floats, not rows of width %d", ErrInput, k, len(emb.Tensors[k]), emb.Dims[k])
			}
			bs[k] = block{emb.Tensors[k], emb.Dims[k]}
		}
		out[0] = bs
	case 2:
		if err := needTensors(); err != nil {
			return nil, err
		}
		r := reqs[0]
		if len(r.RowSplits) != K {
			return nil, fmt.Errorf("%w: version 2 needs %d row splits, got %d", ErrInput, K, len(r.RowSplits))
		}
		var bs []block
		for t := 0; t < T; t++ {
			feats := cfg.Tables[t].Features
			for p := 0; p < P; p++ {
				k := t*P + p
				split := r.RowSplits[k]
				if len(split) != len(feats)+1 || split[0] != 0 {
					return nil, fmt.Errorf("%w: row splits of list %d: %v for %d features", ErrInput, k, split, len(feats))
				}
				base := 0
				for j, f := range feats {
					rows := int(split[j+1] - split[j])
					d := cfg.Features[f].Dim
					if rows < 0 || base+rows*d > len(emb.Tensors[k]) {
						return nil, fmt.Errorf("%w: row splits of list %d exceed its tensor of %d floats", ErrInput, k, len(emb.Tensors[k]))
					}
					bs = append(bs, block{emb.Tensors[k][base : base+rows*d], d})
					base += rows * d
				}
			}
		}
		out[0] = bs
	case 3:
		if err := needTensors(); err != nil {
			return nil, err
		}
		bs := make([]block, K)
		for k := range bs {
			bs[k] = block{emb.Tensors[k], 1}
		}
		out[0] = bs
	case 4:
		r := reqs[0]
		if len(r.EmbRowLength) != K {
			return nil, fmt.Errorf("%w: version 4 needs %d emb row lengths, got %d", ErrInput, K, len(r.EmbRowLength))
		}
		bs := make([]block, K)
		pos := 0
		for p := 0; p < P; p++ {
			for t := 0; t < T; t++ {
				n := int(r.EmbRowLength[p*T+t])
				if n < 0 || pos+n > len(emb.Flat) {
					return nil, fmt.Errorf("%w: emb row lengths exceed the flat buffer of %d floats", ErrInput, len(emb.Flat))
				}
				bs[t*P+p] = block{emb.Flat[pos : pos+n], 1}
				pos += n
			}
		}
		out[0] = bs
	case 5:
		if err := needTensors(); err != nil {
			return nil, err
		}
		base := make([]int, K)
		for ri, r := range reqs {
			if len(r.EmbSize) != K {
				return nil, fmt.Errorf("%w: request %d: emb_size has %d entries, want %d", ErrInput, ri, len(r.EmbSize), K)
			}
			bs := make([]block, K)
			for k := range bs {
				n := int(r.EmbSize[k])
				if n < 0 || base[k]+n > len(emb.Tensors[k]) {
					return nil, fmt.Errorf("%w: request %d: emb_size exceeds tensor %d of %d floats", ErrInput, ri, k, len(emb.Tensors[k]))
				}
				bs[k] = block{emb.Tensors[k][base[k] : base[k]+n], 1}
				base[k] += n
			}
			out[ri] = bs
		}
	}
	return out, nil
}

// check validates the offsets of every request against the config and its blocks.
func (l *Layouter) check(reqs []Sharded, blocks [][]block) (rows int, err error) {
	F := len(l.cfg.Features)
	rowAddressed := l.opts.Version <= 2
	for ri, r := range reqs {
		if r.BatchSize < 0 {
			return 0, fmt.Errorf("%w: request %d: batch size %d", ErrInput, ri, r.BatchSize)
		}
		rows += r.BatchSize
		if len(r.NflOffset) != F+1 {
			return 0, fmt.Errorf("%w: request %d: nfl_offset has %d entries for %d features", ErrInput, ri, len(r.NflOffset), F)
		}
		E := len(r.FeatureOffset) - 1
		if E < 0 {
			return 0, fmt.Errorf("%w: request %d: empty feature_offset", ErrInput, ri)
		}
		for n := 0; n < F; n++ {
			start := int(r.NflOffset[n] & offsetMask)
			next := int(r.NflOffset[n+1] & offsetMask)
			if next < start || start > E+1 {
				return 0, fmt.Errorf("%w: request %d: nfl_offset of feature %q", ErrInput, ri, l.cfg.Features[n].Name)
			}
			if next == start {
				continue
			}
			need := r.BatchSize
			if r.NflOffset[n]&sharedBit != 0 {
				need = 1
			}
			if start+need > E {
				return 0, fmt.Errorf("%w: request %d: feature %q needs %d entries from %d, feature_offset has %d",
					ErrInput, ri, l.cfg.Features[n].Name, need, start, E)
			}
		}
		prev := int32(0)
		for _, o := range r.FeatureOffset {
			if o < prev || int(o) > len(r.FidOffset) {
				return 0, fmt.Errorf("%w: request %d: feature_offset %d out of order or past %d fids", ErrInput, ri, o, len(r.FidOffset))
			}
			prev = o
		}
	}
	if err := l.cfg.CheckBatch(rows); err != nil {
		return 0, err
	}
	// Every fid's whole embedding must lie in its block: checked feature by feature, in
	// parallel (it reads every fid_offset once).
	errs := make([]error, l.workers)
	l.run(func(w int) {
		for n := F * w / l.workers; n < F*(w+1)/l.workers && errs[w] == nil; n++ {
			for ri := range reqs {
				if err := l.checkFids(ri, &reqs[ri], blocks[ri], n, rowAddressed); err != nil {
					errs[w] = err
					break
				}
			}
		}
	})
	return rows, errors.Join(errs...)
}

// checkFids checks that every fid of feature n in request ri addresses its whole embedding
// inside its block.
func (l *Layouter) checkFids(ri int, r *Sharded, bs []block, n int, rowAddressed bool) error {
	start := int(r.NflOffset[n] & offsetMask)
	if int(r.NflOffset[n+1]&offsetMask) == start {
		return nil
	}
	cnt := r.BatchSize
	if r.NflOffset[n]&sharedBit != 0 {
		cnt = 1
	}
	dim := l.cfg.Features[n].Dim
	for _, fo := range r.FidOffset[r.FeatureOffset[start]:r.FeatureOffset[start+cnt]] {
		i1, i2 := int(fo>>32), int(uint32(fo))
		if i1 >= len(bs) {
			return fmt.Errorf("%w: request %d: feature %q: fid_offset block %d of %d", ErrInput, ri, l.cfg.Features[n].Name, i1, len(bs))
		}
		b := &bs[i1]
		end := i2 + dim // v3, v4, v5: index2 is a float offset
		if rowAddressed {
			// v1, v2: index2 is a row of width stride, which must hold the feature.
			if b.stride < dim {
				return fmt.Errorf("%w: request %d: feature %q of width %d in a block of rows of width %d",
					ErrInput, ri, l.cfg.Features[n].Name, dim, b.stride)
			}
			end = (i2 + 1) * b.stride
		}
		if end > len(b.data) {
			return fmt.Errorf("%w: request %d: feature %q: fid_offset (%d, %d) is past block %d of %d floats",
				ErrInput, ri, l.cfg.Features[n].Name, i1, i2, i1, len(b.data))
		}
	}
	return nil
}

// run calls work(w) for every worker, concurrently when there are several.
func (l *Layouter) run(work func(w int)) {
	if l.workers == 1 {
		work(0)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < l.workers; w++ {
		wg.Go(func() { work(w) })
	}
	wg.Wait()
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInput}, args...)...)
}
