package layout

import (
	"sync/atomic"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/internal/vecf32"
)

// entry returns the fid offsets of feature n's entry for row r, and whether n is present.
func entry(req *Sharded, n, r int) ([]uint64, bool) {
	nfl := req.NflOffset
	start := int(nfl[n] & offsetMask)
	if int(nfl[n+1]&offsetMask) == start {
		return nil, false
	}
	e := start + r
	if nfl[n]&sharedBit != 0 {
		e = start
	}
	return req.FidOffset[req.FeatureOffset[e]:req.FeatureOffset[e+1]], true
}

// poolInto writes the pooled columns [lo, hi) of the fids' embeddings into dst (hi-lo
// floats): the sum, or for MEAN the sum of each value divided by the fid count (every term
// divided before summing, in float32, as Monolith does). dst starts from zero, so the
// result is exactly that of accumulating into a zeroed buffer; no fid gives zeros.
func poolInto(dst []float32, fids []uint64, bs []block, lo int, mean bool) {
	w := len(dst)
	clear(dst)
	switch {
	case !mean:
		for _, fo := range fids {
			b := &bs[fo>>32]
			a := int(uint32(fo))*b.stride + lo
			vecf32.Add(dst, b.data[a:a+w])
		}
	case len(fids)&(len(fids)-1) != 0:
		n := float32(len(fids))
		for _, fo := range fids {
			b := &bs[fo>>32]
			a := int(uint32(fo))*b.stride + lo
			vecf32.AddDiv(dst, b.data[a:a+w], n)
		}
	default:
		// A power-of-two count: v * (1/n) is the same single rounding of the same exact value
		// as v / n, so the product is bit-identical (subnormals included) and cheaper.
		inv := 1 / float32(len(fids))
		for _, fo := range fids {
			b := &bs[fo>>32]
			a := int(uint32(fo))*b.stride + lo
			v := b.data[a : a+w]
			for k := range dst {
				dst[k] += v[k] * inv
			}
		}
	}
}

// Forward computes the layout outputs into out (one tensor per output, in output order,
// each OutputSizes(ΣB)[i] floats, row-major). out is overwritten.
//
// Every feature entry is pooled once, over all the columns its slices read, into a block of
// pooled rows; the slices are then written from it in config order (ADDN summing in slice
// order). Pooling is element-wise, so this gives exactly the values of pooling slice by
// slice.
func (l *Layouter) Forward(reqs []Sharded, emb Embedding, out [][]float32) error {
	blocks, err := l.blocks(reqs, emb)
	if err != nil {
		return err
	}
	rows, err := l.check(reqs, blocks)
	if err != nil {
		return err
	}
	if err := l.checkOutputs(out, rows, "output"); err != nil {
		return err
	}
	l.run(func(w int) {
		r0, r1 := rows*w/l.workers, rows*(w+1)/l.workers
		for i, o := range out {
			if l.addN[i] { // ADDN outputs accumulate; every other element is written once below
				clear(o[r0*l.sizes[i] : r1*l.sizes[i]])
			}
		}
		scratch := grow(l.scratch[w], (rowBlock+1)*l.width+l.tmplLen)
		l.scratch[w] = scratch
		base := 0
		for ri := range reqs {
			n := reqs[ri].BatchSize
			if lo, hi := max(r0-base, 0), min(r1-base, n); lo < hi {
				l.forwardRequest(&reqs[ri], blocks[ri], out, base, lo, hi, scratch, l.tmplUse[w])
			}
			base += n
		}
	})
	return nil
}

// forwardRequest writes rows [lo, hi) of one request, whose rows start at base.
//
// A slice whose values are the same in every row of the request (its feature is shared, or
// absent) is written once into a template row of its output, unless the output is ADDN.
// Each block of rows of such an output starts as copies of the template (one copy, then
// doubling copies), and the other slices are written over it. This replaces one small copy
// per row and shared slice; every element still receives the same value.
func (l *Layouter) forwardRequest(req *Sharded, bs []block, out [][]float32, base, lo, hi int, scratch []float32, tmplUse []bool) {
	W := l.width
	shared := scratch[rowBlock*W : (rowBlock+1)*W] // pooled values of shared features, computed once
	tmpl := scratch[(rowBlock+1)*W:]
	nfl := req.NflOffset
	for _, pl := range l.plans {
		if nfl[pl.feature]&sharedBit != 0 {
			if fids, ok := entry(req, pl.feature, 0); ok {
				poolInto(shared[pl.off:pl.off+pl.hi-pl.lo], fids, bs, pl.lo, pl.mean)
			}
		}
	}
	for o, ts := range l.byOut {
		tmplUse[o] = false
		if l.tmplOff[o] < 0 {
			continue
		}
		row := tmpl[l.tmplOff[o] : l.tmplOff[o]+l.sizes[o]]
		for _, ti := range ts {
			tg := &l.targets[ti]
			if !l.rowConstant(req, tg.feature) {
				continue
			}
			if !tmplUse[o] {
				tmplUse[o] = true
				clear(row)
			}
			l.writeTarget(req, bs, tg, 0, 1, row[tg.off:], shared, 0)
		}
	}
	for b0 := lo; b0 < hi; b0 += rowBlock {
		nb := min(rowBlock, hi-b0)
		pooled := scratch[:nb*W] // every span of a present feature is written below
		for _, pl := range l.plans {
			span := pl.hi - pl.lo
			if nfl[pl.feature]&sharedBit != 0 {
				continue // read from shared by the targets
			}
			for i := 0; i < nb; i++ {
				fids, ok := entry(req, pl.feature, b0+i)
				if !ok {
					break
				}
				poolInto(pooled[i*W+pl.off:i*W+pl.off+span], fids, bs, pl.lo, pl.mean)
			}
		}
		for o, use := range tmplUse {
			if !use {
				continue
			}
			rs := l.sizes[o]
			region := out[o][(base+b0)*rs : (base+b0+nb)*rs]
			copy(region, tmpl[l.tmplOff[o]:l.tmplOff[o]+rs])
			for k := rs; k < len(region); k *= 2 {
				copy(region[k:], region[:k])
			}
		}
		for ti := range l.targets {
			tg := &l.targets[ti]
			constant := l.rowConstant(req, tg.feature)
			if constant && !tg.add {
				continue // written from the template
			}
			if constant && nfl[tg.feature]&offsetMask == nfl[tg.feature+1]&offsetMask {
				continue // ADDN of an absent feature adds nothing
			}
			src, srcStride := pooled, W
			if constant {
				src, srcStride = shared, 0 // the same pooled values for every row
			}
			l.writeTarget(req, bs, tg, b0, nb, out[tg.out][(base+b0)*tg.rowSize+tg.off:], src, srcStride)
		}
	}
}

// rowConstant reports whether feature n has the same values in every row of the request:
// it is shared, or absent.
func (l *Layouter) rowConstant(req *Sharded, n int) bool {
	nfl := req.NflOffset
	return nfl[n]&sharedBit != 0 || nfl[n]&offsetMask == nfl[n+1]&offsetMask
}

// writeTarget writes (or for ADDN adds) the slice tg of the nb rows from r0 into dst,
// which starts at the slice's offset in row r0 (rows tg.rowSize floats apart). A pooled
// slice reads row i's pooled values of its feature from src[i*srcStride:]; FIRSTN gathers
// from the embeddings. An absent feature writes zeros.
func (l *Layouter) writeTarget(req *Sharded, bs []block, tg *target, r0, nb int, dst, src []float32, srcStride int) {
	nfl := req.NflOffset
	absent := nfl[tg.feature]&offsetMask == nfl[tg.feature+1]&offsetMask
	if tg.pooling == featcfg.FirstN {
		for i := 0; i < nb; i++ {
			row := dst[i*tg.rowSize:]
			var fids []uint64
			if !absent {
				fids, _ = entry(req, tg.feature, r0+i)
			}
			n := min(len(fids), tg.seqLen)
			for q, fo := range fids[:n] {
				b := &bs[fo>>32]
				a := int(uint32(fo))*b.stride + tg.start
				copySmall(row[q*tg.posStride:q*tg.posStride+tg.width], b.data[a:a+tg.width])
			}
			for q := n; q < tg.seqLen; q++ { // positions without a fid are zero
				clear(row[q*tg.posStride : q*tg.posStride+tg.width])
			}
		}
		return
	}
	if absent {
		if !tg.add {
			for i := 0; i < nb; i++ {
				clear(dst[i*tg.rowSize:][:tg.width])
			}
		}
		return
	}
	pl := &l.plans[l.planOf[tg.feature]]
	src0 := pl.off + tg.start - pl.lo
	for i := 0; i < nb; i++ {
		s := src[i*srcStride+src0 : i*srcStride+src0+tg.width]
		d := dst[i*tg.rowSize:]
		d = d[:len(s)]
		switch {
		case !tg.add:
			copySmall(d, s)
		case len(s) < 8: // too short for a vector: no call
			for k := range d {
				d[k] += s[k]
			}
		default:
			vecf32.Add(d, s)
		}
	}
}

// checkOutputs checks the number and sizes of output (or output-gradient) tensors.
func (l *Layouter) checkOutputs(out [][]float32, rows int, what string) error {
	if len(out) != len(l.sizes) {
		return errorf("%d %s tensors, the config has %d", len(out), what, len(l.sizes))
	}
	for i, o := range out {
		if len(o) != l.sizes[i]*rows {
			return errorf("%s %d has %d floats, want %d", what, i, len(o), l.sizes[i]*rows)
		}
	}
	return nil
}

// Backward computes the embedding gradients from the output gradients grads (shaped like
// Forward's outputs) into embGrad, which has the embeddings' shape and is overwritten.
//
// Features are split across goroutines (no two features share gradient rows). For every
// entry, the gradients of all the feature's pooled slices are gathered into one row (MEAN
// terms divided by the entry's fid count), which is then added to each fid's gradient row;
// FIRSTN slices add position q's gradient to the q-th fid. A fid's gradient receives its
// rows' contributions in row order; where two slices of one feature overlap, their
// contributions are summed per row first (the reference sums slice by slice), which can
// differ in the last bit.
func (l *Layouter) Backward(reqs []Sharded, grads [][]float32, embGrad Embedding) error {
	blocks, err := l.blocks(reqs, embGrad)
	if err != nil {
		return err
	}
	rows, err := l.check(reqs, blocks)
	if err != nil {
		return err
	}
	if err := l.checkOutputs(grads, rows, "output gradient"); err != nil {
		return err
	}
	// Zero the gradient storage in parallel, then accumulate.
	var zero [][]float32
	zero = append(zero, embGrad.Tensors...)
	if embGrad.Flat != nil {
		zero = append(zero, embGrad.Flat)
	}
	l.run(func(w int) {
		for _, t := range zero {
			clear(t[len(t)*w/l.workers : len(t)*(w+1)/l.workers])
		}
	})
	// Each worker takes the next feature not yet taken: how long a feature takes depends
	// on the cache lines its fids' rows span and on the other worker's traffic, which no
	// static split by estimated work balanced. A feature's rows get their contributions in
	// the same order whichever worker takes it, so the result does not depend on the split.
	F := len(l.cfg.Features)
	var next atomic.Int64
	l.run(func(w int) {
		gvec := grow(l.scratch[w], l.width)
		l.scratch[w] = gvec
		for {
			n := int(next.Add(1) - 1)
			if n >= F {
				return
			}
			base := 0
			for ri := range reqs {
				l.backwardFeature(n, &reqs[ri], blocks[ri], grads, base, gvec)
				base += reqs[ri].BatchSize
			}
		}
	})
	return nil
}

// backwardFeature adds the gradients of feature n for every row of one request.
func (l *Layouter) backwardFeature(n int, req *Sharded, bs []block, grads [][]float32, base int, gvec []float32) {
	targets := l.byFeat[n]
	if len(targets) == 0 {
		return
	}
	if pi := l.planOf[n]; pi >= 0 {
		pl := &l.plans[pi]
		span := pl.hi - pl.lo
		g := gvec[:span]
		for r := 0; r < req.BatchSize; r++ {
			fids, ok := entry(req, n, r)
			if !ok {
				return
			}
			if len(fids) == 0 {
				continue
			}
			clear(g)
			nf := float32(len(fids))
			for _, ti := range targets {
				tg := &l.targets[ti]
				src := grads[tg.out][(base+r)*tg.rowSize+tg.off:]
				src = src[:tg.width]
				d := g[tg.start-pl.lo : tg.start-pl.lo+tg.width]
				if pl.mean {
					vecf32.AddDiv(d, src, nf)
				} else {
					vecf32.Add(d, src)
				}
			}
			for _, fo := range fids {
				b := &bs[fo>>32]
				a := int(uint32(fo))*b.stride + pl.lo
				vecf32.Add(b.data[a:a+span], g)
			}
		}
		return
	}
	// FIRSTN: position q of every slice goes to the q-th fid.
	for _, ti := range targets {
		tg := &l.targets[ti]
		for r := 0; r < req.BatchSize; r++ {
			fids, ok := entry(req, n, r)
			if !ok {
				return
			}
			g := grads[tg.out][(base+r)*tg.rowSize+tg.off:]
			for q, fo := range fids[:min(len(fids), tg.seqLen)] {
				b := &bs[fo>>32]
				a := int(uint32(fo))*b.stride + tg.start
				vecf32.Add(b.data[a:a+tg.width], g[q*tg.posStride:q*tg.posStride+tg.width])
			}
		}
	}
}

// copySmall copies like copy, without a call for the short runs of floats the kernels move.
func copySmall(dst, src []float32) {
	if len(src) >= 8 {
		copy(dst, src)
		return
	}
	dst = dst[:len(src)]
	for k := range dst {
		dst[k] = src[k]
	}
}
