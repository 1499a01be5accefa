// Package kernelbench builds the inputs of the kernel benchmarks: the shape of data-path.md
// §6.1 (B=256, 199 features, even slots shared, ExampleBatch) and a large shape (B=4096,
// 100 features, 1–10 fids per entry), and counts the bytes each kernel must touch.
package kernelbench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// Case is one benchmark input.
type Case struct {
	Name string
	PS   int
	Cfg  *featcfg.Config
	In   *shard.Input
}

// Scenario61 is the §6.1 shape: B=256, P=5, fc_slot_1..199 in three groups (SUM [1,4,8],
// MEAN [1,4,16], FIRSTN [1,4,16] L=3), layouts bias/vec/ffm1/ffm2/firstN, 1–6 fids per
// entry, even slots SHARED.
func Scenario61(seed uint64) Case {
	rng := rand.New(rand.NewPCG(seed, 61))
	fc := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}}
	bias := &examplepb.OutConfig{OutType: examplepb.OutType_ADDN}
	vec := &examplepb.OutConfig{OutType: examplepb.OutType_CONCAT}
	ffm1 := &examplepb.OutConfig{OutType: examplepb.OutType_STACK}
	ffm2 := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
	firstN := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
	for s := 1; s <= 199; s++ {
		name := fmt.Sprintf("fc_slot_%d", s)
		sc := func(a, b int32) *examplepb.SliceConfig {
			return &examplepb.SliceConfig{FeatureName: name, Start: a, End: b}
		}
		switch {
		case s <= 49:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_one", SliceDims: []int32{1, 4, 8}}
			bias.SliceConfigs = append(bias.SliceConfigs, sc(0, 1))
			vec.SliceConfigs = append(vec.SliceConfigs, sc(1, 5))
			ffm1.SliceConfigs = append(ffm1.SliceConfigs, sc(5, 13))
		case s <= 99:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_two", SliceDims: []int32{1, 4, 16}, PoolingType: examplepb.PoolingType_MEAN}
			bias.SliceConfigs = append(bias.SliceConfigs, sc(0, 1))
			vec.SliceConfigs = append(vec.SliceConfigs, sc(1, 5))
			ffm2.SliceConfigs = append(ffm2.SliceConfigs, sc(5, 21))
		default:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_one", SliceDims: []int32{1, 4, 16},
				PoolingType: examplepb.PoolingType_FIRSTN, MaxSequenceLength: 3}
			firstN.SliceConfigs = append(firstN.SliceConfigs, sc(1, 21))
		}
	}
	fc.OutConfigs = map[string]*examplepb.OutConfig{"bias": bias, "vec": vec, "ffm1": ffm1, "ffm2": ffm2, "firstN": firstN}
	cfg := mustConfig(fc)
	const B = 256
	in := &shard.Input{Rows: B, Features: make([]shard.FeatureInput, len(cfg.Features))}
	for _, f := range cfg.Features {
		s := uint64(featcfg.SlotOfName(f.Name))
		fi := shard.FeatureInput{Shared: s%2 == 0, Offsets: []int32{0}}
		for range fi.Entries(B) {
			for i := range 1 + rng.IntN(6) {
				fi.Values = append(fi.Values, s<<48|uint64(i+1)*1000+uint64(1+rng.IntN(9))*100)
			}
			fi.Offsets = append(fi.Offsets, int32(len(fi.Values)))
		}
		in.Features[f.Index] = fi
	}
	return Case{Name: "s61", PS: 5, Cfg: cfg, In: in}
}

// Large is a production-sized batch: B=4096, P=4, 100 features in four tables, 1–10 fids
// per entry (fids drawn from a 2^20 vocabulary per feature, so they repeat), layouts bias
// (ADDN over 90 features), vec (CONCAT, 25×8), ffm (STACK, 25×8), deep (NONE, 25×[16]) and
// seq (NONE FIRSTN L=5, 10×[5,8]).
func Large(seed uint64) Case { return LargeRows(seed, 4096) }

// LargeRows is the large shape with B = rows (≥ 1): the same configuration, and for
// rows = 4096 the same input as Large; the throughput-vs-batch-size and scaling
// measurements of `monolith bench` vary rows.
func LargeRows(seed uint64, rows int) Case {
	rng := rand.New(rand.NewPCG(seed, 4096))
	fc := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}}
	bias := &examplepb.OutConfig{OutType: examplepb.OutType_ADDN}
	vec := &examplepb.OutConfig{OutType: examplepb.OutType_CONCAT}
	ffm := &examplepb.OutConfig{OutType: examplepb.OutType_STACK}
	deep := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
	seq := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
	for f := 0; f < 100; f++ {
		name := fmt.Sprintf("f%03d", f)
		sc := func(a, b int32) *examplepb.SliceConfig {
			return &examplepb.SliceConfig{FeatureName: name, Start: a, End: b}
		}
		switch {
		case f < 25:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "user", SliceDims: []int32{1, 8}}
			vec.SliceConfigs = append(vec.SliceConfigs, sc(1, 9))
		case f < 50:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "item", SliceDims: []int32{1, 8}}
			ffm.SliceConfigs = append(ffm.SliceConfigs, sc(1, 9))
		case f < 75:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "ctx", SliceDims: []int32{1, 16}, PoolingType: examplepb.PoolingType_MEAN}
			deep.SliceConfigs = append(deep.SliceConfigs, sc(1, 17))
		case f < 90:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "cross", SliceDims: []int32{1, 4}}
			vec.SliceConfigs = append(vec.SliceConfigs, sc(1, 5))
		default:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "seq", SliceDims: []int32{8}, PoolingType: examplepb.PoolingType_FIRSTN, MaxSequenceLength: 5}
			seq.SliceConfigs = append(seq.SliceConfigs, sc(0, 8))
			continue
		}
		bias.SliceConfigs = append(bias.SliceConfigs, sc(0, 1))
	}
	fc.OutConfigs = map[string]*examplepb.OutConfig{"bias": bias, "vec": vec, "ffm": ffm, "deep": deep, "seq": seq}
	cfg := mustConfig(fc)
	B := max(rows, 1)
	in := &shard.Input{Rows: B, Features: make([]shard.FeatureInput, len(cfg.Features))}
	for _, f := range cfg.Features {
		fi := shard.FeatureInput{Offsets: make([]int32, 1, B+1)}
		for range B {
			for range 1 + rng.IntN(10) {
				fi.Values = append(fi.Values, uint64(f.Index+1)<<48|rng.Uint64N(1<<20))
			}
			fi.Offsets = append(fi.Offsets, int32(len(fi.Values)))
		}
		in.Features[f.Index] = fi
	}
	return Case{Name: "large", PS: 4, Cfg: cfg, In: in}
}

func mustConfig(fc *examplepb.FeatureConfigs) *featcfg.Config {
	cfg, err := featcfg.New(fc)
	if err != nil {
		panic(err)
	}
	return cfg
}

// ShardBytes is the input plus output bytes of sharding c with result r: fids and offsets
// read; fid_offset, fid lists, feature_offset, nfl_offset and row splits written.
func ShardBytes(c Case, r *shard.Result) int64 {
	var n int64
	for f := range c.In.Features {
		fi := &c.In.Features[f]
		n += 8*int64(len(fi.Values)) + 4*int64(len(fi.Offsets))
	}
	return n + 8*int64(len(r.FidOffset)) + 8*int64(len(r.Fids)) + 4*int64(len(r.FeatureOffset)) +
		4*int64(len(r.NflOffset)) + 8*int64(len(r.RowSplits))
}

// LayoutBytes counts the bytes the layout forward (grad=false) or backward pass must touch
// for sharding result r, at the least: per feature entry, the feature_offset pair and, per
// fid, its fid_offset and the embedding columns the feature's slices use (their union; for
// FIRSTN only the first L fids), read forward and read plus written backward; every output
// float written (forward) or read (backward); and, backward, the zeroed gradient buffers.
// A shared entry is read once forward (it is pooled once) and once per row backward.
func LayoutBytes(c Case, r *shard.Result, l *layout.Layouter, grad bool) int64 {
	F := len(c.Cfg.Features)
	lo, hi, seq := make([]int, F), make([]int, F), make([]int, F)
	for n := range lo {
		lo[n], hi[n] = 1<<30, -1
	}
	for _, lay := range c.Cfg.Layouts {
		for _, s := range lay.Slices {
			lo[s.Feature], hi[s.Feature] = min(lo[s.Feature], s.Start), max(hi[s.Feature], s.End)
			if s.Pooling == featcfg.FirstN {
				seq[s.Feature] = s.MaxSeqLen
			}
		}
	}
	var n int64
	for f := 0; f < F; f++ {
		if hi[f] < 0 {
			continue
		}
		start := int(r.NflOffset[f] &^ shard.SharedBit)
		shared := r.NflOffset[f]&shard.SharedBit != 0
		entries := r.BatchSize
		if shared && !grad {
			entries = 1
		}
		per := 8 + 4*int64(hi[f]-lo[f])
		if grad {
			per = 8 + 8*int64(hi[f]-lo[f])
		}
		for e := 0; e < entries; e++ {
			ei := start + e
			if shared {
				ei = start
			}
			fids := int64(r.FeatureOffset[ei+1] - r.FeatureOffset[ei])
			if seq[f] > 0 {
				fids = min(fids, int64(seq[f]))
			}
			n += 8 + fids*per
		}
	}
	for _, size := range l.OutputSizes(r.BatchSize) {
		n += 4 * int64(size)
	}
	if grad {
		for _, e := range r.EmbSize {
			n += 4 * int64(e)
		}
	}
	return n
}

// MemcpyMBps measures memcpy bandwidth (bytes copied per second, in MB/s) on buffers of n
// bytes, for about 100 ms.
func MemcpyMBps(n int) float64 { return MemcpyMBpsFor(n, 100*time.Millisecond) }

// MemcpyMBpsFor measures memcpy bandwidth on buffers of n bytes for about d (at least one
// copy).
func MemcpyMBpsFor(n int, d time.Duration) float64 {
	n = max(n, 1)
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in
	var copied int
	start := time.Now()
	for copied == 0 || time.Since(start) < d {
		copy(dst, src)
		copied += n
	}
	return float64(copied) / time.Since(start).Seconds() / 1e6
}
