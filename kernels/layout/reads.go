package layout

import (
	"math"

	"github.com/monolith-go/monolith/kernels/featcfg"
)

// ForwardReads reads every cache line of the embeddings that Forward reads (one word per
// 64-byte line), split across goroutines as Forward splits rows, and writes nothing: the
// time of Forward's gathers alone, which benchmarks set beside Forward's own time. It
// returns a sum of the words read, so that the reads cannot be dropped.
func (l *Layouter) ForwardReads(reqs []Sharded, emb Embedding) (uint64, error) {
	blocks, err := l.blocks(reqs, emb)
	if err != nil {
		return 0, err
	}
	rows, err := l.check(reqs, blocks)
	if err != nil {
		return 0, err
	}
	sums := make([]uint64, l.workers)
	l.run(func(w int) {
		r0, r1 := rows*w/l.workers, rows*(w+1)/l.workers
		base := 0
		for ri := range reqs {
			n := reqs[ri].BatchSize
			if lo, hi := max(r0-base, 0), min(r1-base, n); lo < hi {
				sums[w] += l.readRequest(&reqs[ri], blocks[ri], lo, hi)
			}
			base += n
		}
	})
	var s uint64
	for _, v := range sums {
		s += v
	}
	return s, nil
}

// readRequest reads what forwardRequest reads for rows [lo, hi) of one request: the pooled
// columns of every entry (a shared entry once) and the first L fids of FIRSTN slices.
func (l *Layouter) readRequest(req *Sharded, bs []block, lo, hi int) uint64 {
	var acc uint64
	for _, pl := range l.plans {
		if req.NflOffset[pl.feature]&sharedBit != 0 {
			if fids, ok := entry(req, pl.feature, 0); ok {
				acc += readLines(fids, bs, pl.lo, pl.hi-pl.lo)
			}
			continue
		}
		for r := lo; r < hi; r++ {
			fids, ok := entry(req, pl.feature, r)
			if !ok {
				break
			}
			acc += readLines(fids, bs, pl.lo, pl.hi-pl.lo)
		}
	}
	for ti := range l.targets {
		tg := &l.targets[ti]
		if tg.pooling != featcfg.FirstN {
			continue
		}
		for r := lo; r < hi; r++ {
			fids, ok := entry(req, tg.feature, r)
			if !ok {
				break
			}
			acc += readLines(fids[:min(len(fids), tg.seqLen)], bs, tg.start, tg.width)
		}
	}
	return acc
}

// readLines reads one word of every cache line of columns [lo, lo+w) of each fid's row.
func readLines(fids []uint64, bs []block, lo, w int) uint64 {
	if w <= 0 {
		return 0
	}
	var acc uint64
	for _, fo := range fids {
		b := &bs[fo>>32]
		a := int(uint32(fo))*b.stride + lo
		d := b.data[a : a+w]
		for k := 0; k < len(d); k += 16 {
			acc += uint64(math.Float32bits(d[k]))
		}
		acc += uint64(math.Float32bits(d[len(d)-1]))
	}
	return acc
}
