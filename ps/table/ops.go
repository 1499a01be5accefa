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
	if err := t.checkRows("out", fids, out); err != nil {
		return 0, err
	}
	if found != nil && len(found) != len(fids) {
		return 0, fmt.Errorf("%w: table %q: found has %d elements for %d fids", ErrDimensionMismatch, t.name, len(found), len(fids))
	}
	g := t.groupPool.Get().(*grouping)
	defer t.groupPool.Put(g)
	g.build(fids)
	n := 0
	var slots [blk]uint32
	var oks [blk]bool
	for si := range numShards {
		lo, hi := g.start[si], g.start[si+1]
		if lo == hi {
			continue
		}
		sh := &t.shards[si]
		sh.mu.RLock()
		for b := lo; b < hi; b += blk {
			e := min(b+blk, hi)
			g.touchKeys(sh, b, e)
			for j, i := range g.order[b:e] {
				slots[j], oks[j] = sh.idx.get(uint64(fids[i]), g.hs[i])
			}
			g.touchRows(sh, slots[:e-b], oks[:e-b], t.stride)
			for j, i := range g.order[b:e] {
				dst := out[int(i)*t.dim : (int(i)+1)*t.dim]
				if oks[j] {
					t.fill(dst, sh.row(slots[j], t.stride))
					n++
				} else {
					clear(dst)
				}
				if found != nil {
					found[i] = oks[j]
				}
			}
		}
		sh.mu.RUnlock()
	}
	return n, nil
}

// LookupOrCreate is Lookup that creates absent fids the filter admits (each position
// counts one occurrence), the seed contract's create_if_missing (§8.2). Counting is per
// position: in the call that creates a fid, every position holding it counts as
// initialized; found positions count as found. found, when not nil, reports presence
// after the call.
func (t *Table) LookupOrCreate(fids []int64, out []float32, found []bool) (numFound, numInit int, err error) {
	if err := t.checkRows("out", fids, out); err != nil {
		return 0, 0, err
	}
	if found != nil && len(found) != len(fids) {
		return 0, 0, fmt.Errorf("%w: table %q: found has %d elements for %d fids", ErrDimensionMismatch, t.name, len(found), len(fids))
	}
	var created map[int64]struct{}
	for i, f := range fids {
		dst := out[i*t.dim : (i+1)*t.dim]
		sh, h := t.locate(f)
		sh.mu.RLock()
		s, ok := sh.idx.get(uint64(f), h)
		if ok {
			t.fill(dst, sh.row(s, t.stride))
		}
		sh.mu.RUnlock()
		switch {
		case ok:
			if _, mine := created[f]; mine {
				numInit++
			} else {
				numFound++
			}
		default:
			sh.mu.Lock()
			if s, ok = sh.idx.get(uint64(f), h); ok { // created concurrently
				t.fill(dst, sh.row(s, t.stride))
				numFound++
			} else if t.filter == nil || t.filter.Admit(f, 1) {
				r, cerr := t.create(sh, uint64(f), h)
				if cerr != nil {
					sh.mu.Unlock()
					return numFound, numInit, fmt.Errorf("table %q: %w", t.name, cerr)
				}
				setTime(r, t.now())
				t.fill(dst, r)
				if created == nil {
					created = map[int64]struct{}{}
				}
				created[f] = struct{}{}
				numInit++
				ok = true
			} else {
				clear(dst)
			}
			sh.mu.Unlock()
		}
		if found != nil {
			found[i] = ok
		}
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
	for si := range numShards {
		lo, hi := g.start[si], g.start[si+1]
		if lo == hi {
			continue
		}
		sh := &t.shards[si]
		sh.mu.Lock()
		for b := lo; b < hi; b += blk {
			e := min(b+blk, hi)
			g.touchKeys(sh, b, e)
			for j, u := range g.order[b:e] {
				f := ids[u]
				s, ok := sh.idx.get(uint64(f), g.hs[u])
				switch {
				case ok:
					rows[j] = sh.row(s, t.stride)
				case !t.readOnly && (t.filter == nil || t.filter.Admit(f, uint32(agg.Counts[u]))):
					r, err := t.create(sh, uint64(f), g.hs[u])
					if err != nil {
						sh.mu.Unlock()
						return res, fmt.Errorf("table %q: %w", t.name, err)
					}
					rows[j] = r
					res.Created++
				default:
					rows[j] = nil
					res.NotFound++
				}
			}
			g.touchRowSlices(rows[:e-b])
			for j, u := range g.order[b:e] {
				if r := rows[j]; r != nil {
					t.step(r, agg.Row(int(u)), gbuf, lrs, step)
					setTime(r, updateTime)
					res.Updated++
				}
			}
		}
		sh.mu.Unlock()
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
	n := 0
	for i, f := range fids {
		sh, h := t.locate(f)
		sh.mu.Lock()
		s, ok := sh.idx.get(uint64(f), h)
		var r []float32
		if ok {
			r = sh.row(s, t.stride)
		} else if t.filter == nil || t.filter.Admit(f, 1) {
			var err error
			if r, err = t.create(sh, uint64(f), h); err != nil {
				sh.mu.Unlock()
				return n, fmt.Errorf("table %q: %w", t.name, err)
			}
		}
		if r != nil {
			copy(r[:t.dim], rows[i*t.dim:(i+1)*t.dim])
			setTime(r, updateTime)
			n++
		}
		sh.mu.Unlock()
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
			if s, ok := sh.idx.del(k, mix(k)); ok {
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
// each entry is consistent, the snapshot as a whole is not a single instant. fn must not
// retain the dump. Returns fn's first error.
func (t *Table) Snapshot(fn func(*hashtablepb.EntryDump) error) error {
	clock := t.maxUpdate.Load()
	var keys []uint64
	var rows []float32
	d := &hashtablepb.EntryDump{Opt: &hashtablepb.OptimizerDump{}}
	num := make([]float32, t.dim)
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
			copy(num, r[:t.dim])
			id, lts := int64(k), ts
			d.Id, d.Num, d.LastUpdateTsSec = &id, num, &lts
			d.Opt.Dump = d.Opt.Dump[:0]
			for si := range t.segs {
				sg := &t.segs[si]
				if od := sg.opt.Dump(r[sg.stOff : sg.stOff+sg.stN]); od != nil {
					d.Opt.Dump = append(d.Opt.Dump, od)
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
