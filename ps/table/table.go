package table

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolith-go/monolith/internal/mix"
	"github.com/monolith-go/monolith/kernels/reduce"
	"github.com/monolith-go/monolith/ps/compress"
	"github.com/monolith-go/monolith/ps/filter"
	"github.com/monolith-go/monolith/ps/initializer"
	"github.com/monolith-go/monolith/ps/optimizer"
	"github.com/monolith-go/monolith/schemas/fid"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

const (
	shardBits  = 4
	numShards  = 1 << shardBits
	chunkShift = 10
	chunkRows  = 1 << chunkShift
	// maxSlots bounds the rows of one shard (slots are uint32).
	maxSlots = math.MaxUint32
	// timeWords is the number of float32 words holding an entry's int64 update time.
	timeWords     = 2
	secondsPerDay = 86400
)

// reduceAgg is the scratch of the duplicate summation in Apply.
type reduceAgg = reduce.Aggregated[int64]

func aggregate(dst *reduceAgg, fids []int64, grads []float32, dim int) error {
	return reduce.AggregateGrads(dst, fids, grads, dim)
}

// segment is one part of a row with its own rules.
type segment struct {
	off, dim   int // weights at row[off : off+dim]
	stOff, stN int // state at row[stOff : stOff+stN]
	init       initializer.Initializer
	opt        optimizer.Optimizer
	ret        compress.Retriever
	dumps      bool // opt.Dump emits an element
}

// Table is a concurrent fid → entry map. See the package doc.
type Table struct {
	name     string
	cfg      *hashtablepb.EmbeddingHashTableConfig
	segs     []segment
	dim      int // Σ segment dims
	stride   int // floats per row
	hasRet   bool
	filter   filter.Filter
	readOnly bool
	now      func() int64

	defaultExpire int64           // seconds, 0 = never
	slotExpire    map[int64]int64 // per-slot override, seconds (0 = never)

	maxUpdate atomic.Int64
	shards    [numShards]shard
	aggPool   sync.Pool // *reduceAgg
	groupPool sync.Pool // *grouping
}

// shard is one lock stripe of a table.
type shard struct {
	mu     sync.RWMutex
	idx    index
	chunks [][]float32 // chunk c holds rows c<<chunkShift …; chunk 0 grows by doubling
	used   uint32      // slots handed out (high-water mark)
	free   []uint32    // slots of evicted entries, reused first
	rng    *rand.Rand
	_      [64]byte // keeps neighbouring shards' locks off one cache line
}

// New builds an empty table.
func New(opts Options) (*Table, error) {
	if opts.Name == "" {
		return nil, fmt.Errorf("%w: empty table name", ErrInvalidConfig)
	}
	cfg := opts.Config
	if cfg == nil || cfg.GetEntryConfig() == nil {
		return nil, fmt.Errorf("%w: table %q: no entry_config", ErrInvalidConfig, opts.Name)
	}
	ec := cfg.GetEntryConfig()
	if ec.GetEntryType() == hashtablepb.EntryConfig_SERVING {
		return nil, fmt.Errorf("%w: table %q: not implemented: SERVING entries (compressed serving storage)", ErrInvalidConfig, opts.Name)
	}
	if cfg.GetSkipZeroEmbedding() {
		return nil, fmt.Errorf("%w: table %q: skip_zero_embedding is only legal for SERVING entries", ErrInvalidConfig, opts.Name)
	}
	if len(ec.GetSegments()) == 0 {
		return nil, fmt.Errorf("%w: table %q: entry_config has no segments", ErrInvalidConfig, opts.Name)
	}
	t := &Table{name: opts.Name, cfg: cfg, filter: opts.Filter, readOnly: opts.ReadOnlyApply, now: opts.Now}
	if t.now == nil {
		t.now = func() int64 { return time.Now().Unix() }
	}
	stateOff := 0
	for i, s := range ec.GetSegments() {
		d := int(s.GetDimSize())
		if d <= 0 {
			return nil, fmt.Errorf("%w: table %q segment %d: dim_size %d must be > 0", ErrInvalidConfig, opts.Name, i, d)
		}
		in, err := initializer.New(s.GetInitConfig(), d)
		if err != nil {
			return nil, fmt.Errorf("%w: table %q segment %d: %w", ErrInvalidConfig, opts.Name, i, err)
		}
		op, err := optimizer.New(s.GetOptConfig(), d)
		if err != nil {
			return nil, fmt.Errorf("%w: table %q segment %d: %w", ErrInvalidConfig, opts.Name, i, err)
		}
		rt, err := compress.NewRetriever(s.GetCompConfig(), d)
		if err != nil {
			return nil, fmt.Errorf("%w: table %q segment %d: %w", ErrInvalidConfig, opts.Name, i, err)
		}
		t.segs = append(t.segs, segment{off: t.dim, dim: d, stOff: stateOff, stN: op.StateLen(), init: in, opt: op, ret: rt,
			dumps: op.Dump(make([]float32, op.StateLen())) != nil})
		t.dim += d
		stateOff += op.StateLen()
		t.hasRet = t.hasRet || rt != nil
	}
	for i := range t.segs {
		t.segs[i].stOff += t.dim
	}
	t.stride = t.dim + stateOff + timeWords
	exp := cfg.GetSlotExpireTimeConfig()
	t.defaultExpire = int64(exp.GetDefaultExpireTime()) * secondsPerDay
	for _, se := range exp.GetSlotExpireTimes() {
		if se.GetSlot() > fid.MaxSlotV2 {
			return nil, fmt.Errorf("%w: table %q: slot_expire_times slot %d exceeds %d", ErrInvalidConfig, opts.Name, se.GetSlot(), fid.MaxSlotV2)
		}
		if t.slotExpire == nil {
			t.slotExpire = map[int64]int64{}
		}
		t.slotExpire[int64(se.GetSlot())] = int64(se.GetExpireTime()) * secondsPerDay
	}
	// initial_capacity (proto default 1) reserves index cells, as Monolith reserves
	// cuckoo-map slots; rows are still allocated as entries arrive.
	perShard := int(min(cfg.GetInitialCapacity(), 1<<32) / numShards)
	for i := range t.shards {
		t.shards[i].rng = rand.New(rand.NewPCG(opts.Seed, uint64(i)))
		t.shards[i].idx.reserve(perShard)
	}
	t.aggPool.New = func() any { return new(reduceAgg) }
	t.groupPool.New = func() any { return new(grouping) }
	return t, nil
}

// Name is the table's name.
func (t *Table) Name() string { return t.name }

// Dim is the width of an embedding row: the sum of the segment dims.
func (t *Table) Dim() int { return t.dim }

// Segments is the number of segments, which is the number of learning rates Apply takes.
func (t *Table) Segments() int { return len(t.segs) }

// Config is the table's configuration. Callers must not modify it.
func (t *Table) Config() *hashtablepb.EmbeddingHashTableConfig { return t.cfg }

// Filter is the admission filter, nil when every fid is admitted.
func (t *Table) Filter() filter.Filter { return t.filter }

// MaxUpdateTime is the newest update time the table has seen: the expiry clock.
func (t *Table) MaxUpdateTime() int64 { return t.maxUpdate.Load() }

// hash is the hash of fid f that places it: its top shardBits bits pick the shard, its
// low 32 bits the home cell in the shard's index (splitmix64, frozen).
func hash(f int64) uint64 { return mix.Mix64(uint64(f)) }

func (t *Table) locate(f int64) (*shard, uint64) {
	h := hash(f)
	return &t.shards[h>>(64-shardBits)], h
}

// row returns the stride floats of slot s. Caller holds the shard lock.
func (sh *shard) row(s uint32, stride int) []float32 {
	c := sh.chunks[s>>chunkShift]
	o := int(s&(chunkRows-1)) * stride
	return c[o : o+stride : o+stride]
}

// alloc returns a free slot, growing the storage. Caller holds the write lock.
func (sh *shard) alloc(stride int) (uint32, error) {
	if n := len(sh.free); n > 0 {
		s := sh.free[n-1]
		sh.free = sh.free[:n-1]
		return s, nil
	}
	if sh.used == maxSlots {
		return 0, fmt.Errorf("ps/table: shard full (%d rows)", sh.used)
	}
	s := sh.used
	c, o := int(s>>chunkShift), int(s&(chunkRows-1))
	// Chunks hold chunkRows rows, except that chunk 0 starts at 64 rows and doubles, so a
	// small table stays small; nothing beyond the first chunkRows rows is ever copied.
	if c == len(sh.chunks) {
		n := chunkRows
		if c == 0 {
			n = 64
		}
		sh.chunks = append(sh.chunks, make([]float32, n*stride))
	} else if o >= len(sh.chunks[c])/stride {
		grown := make([]float32, min(2*len(sh.chunks[c]), chunkRows*stride))
		copy(grown, sh.chunks[c])
		sh.chunks[c] = grown
	}
	sh.used++
	return s, nil
}

// create allocates and initializes the entry of fid k. Caller holds the write lock.
func (t *Table) create(sh *shard, k, h uint64) ([]float32, error) {
	s, err := sh.alloc(t.stride)
	if err != nil {
		return nil, err
	}
	sh.idx.put(k, h, s)
	r := sh.row(s, t.stride)
	t.initRow(r, sh.rng)
	return r, nil
}

func (t *Table) initRow(r []float32, rng *rand.Rand) {
	for i := range t.segs {
		sg := &t.segs[i]
		sg.init.Fill(r[sg.off:sg.off+sg.dim], rng)
		sg.opt.Init(r[sg.stOff : sg.stOff+sg.stN])
	}
	setTime(r, 0)
}

// rowTime is the update time of row r, kept in its last timeWords words.
func rowTime(r []float32) int64 { return optimizer.LoadInt64(r[len(r)-timeWords:]) }

func setTime(r []float32, ts int64) { optimizer.StoreInt64(r[len(r)-timeWords:], ts) }

// raiseMaxUpdate lifts the expiry clock to ts.
func (t *Table) raiseMaxUpdate(ts int64) { StoreMax(&t.maxUpdate, ts) }

// StoreMax atomically raises a to v when v is larger.
func StoreMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// expireAfter is the lifetime of fid f in seconds, 0 = never.
func (t *Table) expireAfter(f int64) int64 {
	if t.slotExpire != nil {
		if e, ok := t.slotExpire[int64(fid.SlotV2(uint64(f)))]; ok {
			return e
		}
	}
	return t.defaultExpire
}

func (t *Table) expired(f, ts, clock int64) bool {
	e := t.expireAfter(f)
	return e > 0 && clock-ts >= e
}

// fill writes the value a lookup returns for row r into dst.
func (t *Table) fill(dst, r []float32) {
	if !t.hasRet {
		copy(dst, r[:t.dim])
		return
	}
	for i := range t.segs {
		sg := &t.segs[i]
		w := r[sg.off : sg.off+sg.dim]
		if sg.ret != nil {
			sg.ret.Fill(dst[sg.off:sg.off+sg.dim], w)
		} else {
			copy(dst[sg.off:sg.off+sg.dim], w)
		}
	}
}
