package table

import (
	"fmt"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

func (t *Table) checkRows(what string, fids []int64, vals []float32) error {
	if len(vals) != len(fids)*t.dim {
		return fmt.Errorf("%w: table %q: %s has %d floats, want %d fids × dim %d = %d",
			ErrDimensionMismatch, t.name, what, len(vals), len(fids), t.dim, len(fids)*t.dim)
	}
	return nil
}

// Lookup writes the row of every fid into out (len(fids) × Dim(), request order) and
// returns how many were present. Absent fids read as zeros and are not created. found,
// when not nil, must have len(fids) elements and receives per-position presence.
func (t *Table) Lookup(fids []int64, out []float32, found []bool) (int, error) {
	if err := t.checkLookup(fids, out, found); err != nil {
		return 0, err
	}
	g := t.groupPool.Get().(*grouping)
	defer t.groupPool.Put(g)
	g.build(fids)
	n, _ := t.lookup(g, fids, out, found)
	return n, nil
}

func (t *Table) checkLookup(fids []int64, out []float32, found []bool) error {
	if err := t.checkRows("out", fids, out); err != nil {
		return err
	}
	if found != nil && len(found) != len(fids) {
		return fmt.Errorf("%w: table %q: found has %d elements for %d fids", ErrDimensionMismatch, t.name, len(found), len(fids))
	}
	return nil
}

// lookup is Lookup on a built grouping: it fills out, records presence in found when not
// nil, and returns the number present and the number absent per shard.
func (t *Table) lookup(g *grouping, fids []int64, out []float32, found []bool) (n int, missing [numShards]int32) {
	var rows [blk][]float32
	for si, order := range g.blocks(t, false) {
		sh := &t.shards[si]
		for j, i := range order {
			rows[j] = nil
			if s, ok := sh.idx.get(uint64(fids[i]), g.hs[i]); ok {
				rows[j] = sh.row(s, t.stride)
			}
		}
		g.touchRows(rows[:len(order)])
		for j, i := range order {
			dst := out[int(i)*t.dim : (int(i)+1)*t.dim]
			if r := rows[j]; r != nil {
				t.fill(dst, r)
				n++
			} else {
				clear(dst)
				missing[si]++
			}
			if found != nil {
				found[i] = rows[j] != nil
			}
		}
	}
	return n, missing
}

// LookupOrCreate is Lookup that creates absent fids the filter admits (each position
// counts one occurrence), the seed contract's create_if_missing (§8.2). Counting is per
// position: in the call that creates a fid, every position holding it from the creating
// one on counts as initialized; found positions count as found. found, when not nil,
// reports presence after the call.
//
// It is a grouped Lookup followed, for each shard with absent fids, by one pass under the
// shard's write lock that re-checks them in request order (another call may have created
// them meanwhile: they count as found) and creates the admitted ones. The filter thus sees
// the absent positions grouped by shard, in request order within a shard.
func (t *Table) LookupOrCreate(fids []int64, out []float32, found []bool) (numFound, numInit int, err error) {
	if err := t.checkLookup(fids, out, found); err != nil {
		return 0, 0, err
	}
	g := t.groupPool.Get().(*grouping)
	defer t.groupPool.Put(g)
	g.build(fids)
	hit := found
	if hit == nil {
		if cap(g.hit) < len(fids) {
			g.hit = make([]bool, len(fids))
		}
		hit = g.hit[:len(fids)]
	}
	numFound, missing := t.lookup(g, fids, out, hit)
	if numFound == len(fids) {
		return numFound, 0, nil
	}
	clear(g.made)
	for si := range numShards {
		if missing[si] == 0 {
			continue
		}
		sh := &t.shards[si]
		sh.mu.Lock()
		for _, i := range g.order[g.start[si]:g.start[si+1]] {
			if hit[i] {
				continue
			}
			f := fids[i]
			dst := out[int(i)*t.dim : (int(i)+1)*t.dim]
			if s, ok := sh.idx.get(uint64(f), g.hs[i]); ok { // created earlier in this call, or by another
				t.fill(dst, sh.row(s, t.stride))
				if _, mine := g.made[f]; mine {
					numInit++
				} else {
					numFound++
				}
				hit[i] = true
			} else if t.filter == nil || t.filter.Admit(f, 1) {
				r, cerr := t.create(sh, uint64(f), g.hs[i])
				if cerr != nil {
					sh.mu.Unlock()
					return numFound, numInit, fmt.Errorf("table %q: %w", t.name, cerr)
				}
				setTime(r, t.now())
				t.fill(dst, r)
				if g.made == nil {
					g.made = map[int64]struct{}{}
				}
				g.made[f] = struct{}{}
				numInit++
				hit[i] = true
			}
		}
		sh.mu.Unlock()
	}
	return numFound, numInit, nil
}

// Apply sums the gradient rows of equal fids (grads is len(fids) × Dim()) and applies
// one optimizer step per unique fid, each segment with its learning rate: lrs has one
// rate per segment, or is empty for each optimizer's configured schedule at step.
// updateTime is the data time in seconds (0: the wall clock). Validation happens before
// any entry is touched.
func (t *Table) Apply(fids []int64, grads, lrs []float32, step, updateTime int64) (ApplyResult, error) {
	var res ApplyResult
	if err := t.checkRows("gradients", fids, grads); err != nil {
		return res, err
	}
	if len(lrs) != 0 && len(lrs) != len(t.segs) {
		return res, fmt.Errorf("%w: table %q: %d learning rates for %d segments", ErrDimensionMismatch, t.name, len(lrs), len(t.segs))
	}
	var lrBuf [8]float32
	if len(lrs) == 0 {
		lrs = lrBuf[:0]
		for i := range t.segs {
			lrs = append(lrs, t.segs[i].opt.LearningRate(step))
		}
	}
	if updateTime == 0 {
		updateTime = t.now()
	}
	agg := t.aggPool.Get().(*reduceAgg)
	defer t.aggPool.Put(agg)
	if err := aggregate(agg, fids, grads, t.dim); err != nil {
		return res, fmt.Errorf("table %q: %w", t.name, err)
	}
	var gbuf []float32
	if t.hasRet {
		gbuf = make([]float32, t.dim)
	}
	ids := agg.IDs
	g := t.groupPool.Get().(*grouping)
	defer t.groupPool.Put(g)
	g.build(ids)
	var rows [blk][]float32
	for si, order := range g.blocks(t, true) {
		sh := &t.shards[si]
		for j, u := range order {
			f := ids[u]
			s, ok := sh.idx.get(uint64(f), g.hs[u])
			switch {
			case ok:
				rows[j] = sh.row(s, t.stride)
			case !t.readOnly && (t.filter == nil || t.filter.Admit(f, uint32(agg.Counts[u]))):
				r, err := t.create(sh, uint64(f), g.hs[u])
				if err != nil {
					return res, fmt.Errorf("table %q: %w", t.name, err) // blocks unlocks
				}
				rows[j] = r
				res.Created++
			default:
				rows[j] = nil
				res.NotFound++
			}
		}
		g.touchRows(rows[:len(order)])
		for j, u := range order {
			if r := rows[j]; r != nil {
				t.step(r, agg.Row(int(u)), gbuf, lrs, step)
				setTime(r, updateTime)
				res.Updated++
			}
		}
	}
	t.raiseMaxUpdate(updateTime)
	return res, nil
}

// step runs every segment's optimizer on row r with gradient g.
func (t *Table) step(r, g, gbuf, lrs []float32, gstep int64) {
	for i := range t.segs {
		sg := &t.segs[i]
		w := r[sg.off : sg.off+sg.dim]
		gs := g[sg.off : sg.off+sg.dim]
		if sg.ret != nil {
			gs = gbuf[sg.off : sg.off+sg.dim]
			copy(gs, g[sg.off:sg.off+sg.dim])
			sg.ret.Backward(gs, w, gstep)
		}
		sg.opt.Step(w, gs, r[sg.stOff:sg.stOff+sg.stN], lrs[i], gstep)
	}
}

// Assign upserts rows (len(fids) × Dim()): new fids the filter admits are initialized
// first; then the weights become the given row and the time updateTime (0: wall clock).
// Optimizer state is kept. Returns the number of fids written.
func (t *Table) Assign(fids []int64, rows []float32, updateTime int64) (int, error) {
	if err := t.checkRows("rows", fids, rows); err != nil {
		return 0, err
	}
	if updateTime == 0 {
		updateTime = t.now()
	}
	g := t.groupPool.Get().(*grouping)
	defer t.groupPool.Put(g)
	g.build(fids)
	n := 0
	for si, order := range g.blocks(t, true) {
		sh := &t.shards[si]
		for _, i := range order {
			f := fids[i]
			s, ok := sh.idx.get(uint64(f), g.hs[i])
			var r []float32
			if ok {
				r = sh.row(s, t.stride)
			} else if t.filter == nil || t.filter.Admit(f, 1) {
				var err error
				if r, err = t.create(sh, uint64(f), g.hs[i]); err != nil {
					return n, fmt.Errorf("table %q: %w", t.name, err) // blocks unlocks
				}
			}
			if r != nil {
				copy(r[:t.dim], rows[int(i)*t.dim:(int(i)+1)*t.dim])
				setTime(r, updateTime)
				n++
			}
		}
	}
	t.raiseMaxUpdate(updateTime)
	return n, nil
}

// Evict removes every expired entry (see the package doc) and returns how many. It locks
// one shard at a time.
func (t *Table) Evict() int {
	clock := t.maxUpdate.Load()
	n := 0
	var victims []uint64
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		victims = victims[:0]
		sh.idx.each(func(k uint64, s uint32) {
			if t.expired(int64(k), rowTime(sh.row(s, t.stride)), clock) {
				victims = append(victims, k)
			}
		})
		for _, k := range victims {
			if s, ok := sh.idx.del(k, hash(int64(k))); ok {
				sh.free = append(sh.free, s)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Contains reports whether fid is present.
func (t *Table) Contains(f int64) bool {
	sh, h := t.locate(f)
	sh.mu.RLock()
	_, ok := sh.idx.get(uint64(f), h)
	sh.mu.RUnlock()
	return ok
}

// Size is the number of entries.
func (t *Table) Size() int64 {
	var n int64
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		n += int64(sh.idx.len())
		sh.mu.RUnlock()
	}
	return n
}

// Stats reports the size and memory of the table. MemoryBytes counts the row chunks,
// the index, the free lists and the filter; RawBytes is the embedding and optimizer-state
// bytes of the live entries, the floor MemoryBytes is measured against.
func (t *Table) Stats() Stats {
	st := Stats{Name: t.name, Dim: t.dim, MaxUpdateTime: t.maxUpdate.Load()}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		st.Size += int64(sh.idx.len())
		for _, c := range sh.chunks {
			st.MemoryBytes += int64(cap(c)) * 4
		}
		st.MemoryBytes += sh.idx.memoryBytes() + int64(cap(sh.free))*4
		sh.mu.RUnlock()
	}
	st.RawBytes = st.Size * int64(t.stride-timeWords) * 4
	if t.filter != nil {
		st.MemoryBytes += t.filter.MemoryBytes()
	}
	return st
}

// Snapshot calls fn with an EntryDump of every live, unexpired entry (expiry against the
// clock at the start of the snapshot). It copies one shard at a time under that shard's
// read lock and calls fn outside any lock, so lookups and applies continue meanwhile;
// each entry is consistent, the snapshot as a whole is not a single instant. Returns fn's
// first error.
//
// Every call of fn receives the same *EntryDump, overwritten in place for each entry: its
// id and time pointers, its value slice and its optimizer dumps with their slices are
// reused. fn must not retain d or anything reachable from it after it returns (marshal it,
// or proto.Clone it), nor modify it.
func (t *Table) Snapshot(fn func(d *hashtablepb.EntryDump) error) error {
	clock := t.maxUpdate.Load()
	var keys []uint64
	var rows []float32
	var id, lts int64
	d := &hashtablepb.EntryDump{Id: &id, LastUpdateTsSec: &lts, Num: make([]float32, t.dim), Opt: &hashtablepb.OptimizerDump{}}
	// One reusable SingleOptimizerDump per segment that dumps, in segment order.
	for i := range t.segs {
		if t.segs[i].dumps {
			d.Opt.Dump = append(d.Opt.Dump, &hashtablepb.SingleOptimizerDump{})
		}
	}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		keys, rows = keys[:0], rows[:0]
		sh.idx.each(func(k uint64, s uint32) {
			keys = append(keys, k)
			rows = append(rows, sh.row(s, t.stride)...)
		})
		sh.mu.RUnlock()
		for j, k := range keys {
			r := rows[j*t.stride : (j+1)*t.stride]
			ts := rowTime(r)
			if t.expired(int64(k), ts, clock) {
				continue
			}
			id, lts = int64(k), ts
			copy(d.Num, r[:t.dim])
			od := d.Opt.Dump
			for si := range t.segs {
				sg := &t.segs[si]
				if sg.dumps {
					sg.opt.DumpTo(od[0], r[sg.stOff:sg.stOff+sg.stN])
					od = od[1:]
				}
			}
			if err := fn(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// Restore upserts one dumped entry: a new fid is initialized first, then the weights,
// optimizer state and time come from the dump (a missing time is 0). The expiry clock
// rises to the restored time. The filter is not consulted. A dump whose optimizer state
// is invalid leaves no new entry behind, but may have overwritten part of the state of an
// entry that already existed (restores go into fresh tables, which are discarded on error).
func (t *Table) Restore(d *hashtablepb.EntryDump) error {
	if d.Id == nil {
		return fmt.Errorf("table %q: entry dump without id", t.name)
	}
	f := d.GetId()
	if len(d.GetNum()) != t.dim {
		return fmt.Errorf("%w: table %q fid %d: dump has %d values, want dim %d", ErrDimensionMismatch, t.name, f, len(d.GetNum()), t.dim)
	}
	dumps := d.GetOpt().GetDump()
	want := 0
	for i := range t.segs {
		if t.segs[i].dumps {
			want++
		}
	}
	if len(dumps) != want {
		return fmt.Errorf("table %q fid %d: dump has %d optimizer states, want %d", t.name, f, len(dumps), want)
	}
	sh, h := t.locate(f)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, existed := sh.idx.get(uint64(f), h)
	var r []float32
	if existed {
		r = sh.row(s, t.stride)
	} else {
		var err error
		if r, err = t.create(sh, uint64(f), h); err != nil {
			return fmt.Errorf("table %q: %w", t.name, err)
		}
	}
	k := 0
	for i := range t.segs {
		sg := &t.segs[i]
		if !sg.dumps {
			continue
		}
		if err := sg.opt.Restore(r[sg.stOff:sg.stOff+sg.stN], dumps[k]); err != nil {
			if !existed { // do not leave a half-restored new entry behind
				s, _ := sh.idx.del(uint64(f), h)
				sh.free = append(sh.free, s)
			}
			return fmt.Errorf("table %q fid %d segment %d: %w", t.name, f, i, err)
		}
		k++
	}
	copy(r[:t.dim], d.GetNum())
	setTime(r, d.GetLastUpdateTsSec())
	t.raiseMaxUpdate(d.GetLastUpdateTsSec())
	return nil
}
