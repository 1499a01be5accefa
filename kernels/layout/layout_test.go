package layout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// value is the embedding used by the tests: it depends only on the fid, so duplicates are
// consistent across lists, as in Monolith's tests.
// value is the tests' embedding: SyntheticValue, but -0 for about one value in seven, so
// that bit-for-bit comparisons see the +0 a sum into zeroed outputs makes of it.
func value(f uint64, k int) float32 {
	if (f>>3+uint64(k))%7 == 0 {
		return float32(math.Copysign(0, -1))
	}
	return SyntheticValue(f, k)
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// refForward computes the layout outputs straight from the feature entries and the
// declared shapes, without sharding (the naive reference).
func refForward(cfg *featcfg.Config, in *shard.Input) [][]float32 {
	B := in.Rows
	var outs [][]float32
	for _, lay := range cfg.Layouts {
		first := len(outs)
		for i := range lay.Shapes {
			sh := lay.OutputShape(i, B)
			n := 1
			for _, d := range sh {
				n *= d
			}
			outs = append(outs, make([]float32, n))
		}
		widthSum := 0
		for _, s := range lay.Slices {
			widthSum += s.Width()
		}
		colBefore := 0
		for i, s := range lay.Slices {
			fi := &in.Features[s.Feature]
			w := s.Width()
			for r := 0; r < B; r++ {
				var fids []uint64
				if fi.Shared {
					fids = fi.Entry(0)
				} else {
					fids = fi.Entry(r)
				}
				if s.Pooling == featcfg.FirstN {
					L := s.MaxSeqLen
					for q := 0; q < len(fids) && q < L; q++ {
						for k := 0; k < w; k++ {
							v := value(fids[q], s.Start+k)
							switch lay.OutType {
							case featcfg.Concat: // [B, L, Σw]
								outs[first][(r*L+q)*widthSum+colBefore+k] = v
							case featcfg.Stack: // [B, S, L, w]
								outs[first][((r*len(lay.Slices)+i)*L+q)*w+k] = v
							case featcfg.None: // [B, L, w]
								outs[first+i][(r*L+q)*w+k] = v
							}
						}
					}
					continue
				}
				pooled := make([]float32, w)
				for _, f := range fids {
					for k := 0; k < w; k++ {
						if s.Pooling == featcfg.Mean {
							pooled[k] += value(f, s.Start+k) / float32(len(fids))
						} else {
							pooled[k] += value(f, s.Start+k)
						}
					}
				}
				for k := 0; k < w; k++ {
					switch lay.OutType {
					case featcfg.Concat: // [B, Σw]
						outs[first][r*widthSum+colBefore+k] = pooled[k]
					case featcfg.Stack: // [B, S, w]
						outs[first][(r*len(lay.Slices)+i)*w+k] = pooled[k]
					case featcfg.AddN: // [B, w]
						outs[first][r*w+k] += pooled[k]
					case featcfg.None: // [B, w]
						outs[first+i][r*w+k] = pooled[k]
					}
				}
			}
			colBefore += w
		}
	}
	return outs
}

// randomSetup returns a config with layouts of every out type and pooling, and an input.
func randomSetup(rng *rand.Rand, uniformDims bool) (*featcfg.Config, *shard.Input) {
	fc := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}, OutConfigs: map[string]*examplepb.OutConfig{}}
	nf := 2 + rng.IntN(8)
	tableDim := map[string][]int32{}
	var names []string
	for f := 0; f < nf; f++ {
		name := fmt.Sprintf("f%02d", f)
		table := fmt.Sprint("t", rng.IntN(3))
		dims := []int32{1, int32(1 + rng.IntN(4)), int32(1 + rng.IntN(6))}
		if uniformDims {
			if d, ok := tableDim[table]; ok {
				dims = d
			}
			tableDim[table] = dims
		}
		pool := examplepb.PoolingType(rng.IntN(2))
		seq := int32(0)
		if rng.IntN(4) == 0 {
			pool, seq = examplepb.PoolingType_FIRSTN, int32(1+rng.IntN(4))
		}
		fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: table, SliceDims: dims, PoolingType: pool, MaxSequenceLength: seq}
		names = append(names, name)
	}
	isFirstN := func(n string) bool { return fc.FeatureConfigs[n].PoolingType == examplepb.PoolingType_FIRSTN }
	var pooled, firstn []string
	for _, n := range names {
		if isFirstN(n) {
			firstn = append(firstn, n)
		} else {
			pooled = append(pooled, n)
		}
	}
	sc := func(n string, start, end int32) *examplepb.SliceConfig {
		return &examplepb.SliceConfig{FeatureName: n, Start: start, End: end}
	}
	if len(pooled) > 0 {
		bias := &examplepb.OutConfig{OutType: examplepb.OutType_ADDN}
		vec := &examplepb.OutConfig{OutType: examplepb.OutType_CONCAT}
		stack := &examplepb.OutConfig{OutType: examplepb.OutType_STACK}
		for _, n := range pooled {
			bias.SliceConfigs = append(bias.SliceConfigs, sc(n, 0, 1))
			d := fc.FeatureConfigs[n].SliceDims
			vec.SliceConfigs = append(vec.SliceConfigs, sc(n, 1, 1+d[1]))
			stack.SliceConfigs = append(stack.SliceConfigs, sc(n, 0, 1))
		}
		fc.OutConfigs["bias"], fc.OutConfigs["vec"], fc.OutConfigs["stack1"] = bias, vec, stack
		none := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
		for _, n := range pooled {
			d := fc.FeatureConfigs[n].SliceDims
			none.SliceConfigs = append(none.SliceConfigs, sc(n, 1, 1+d[1]+d[2]))
		}
		fc.OutConfigs["deep"] = none
	}
	if len(firstn) > 0 {
		none := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
		for _, n := range firstn {
			d := fc.FeatureConfigs[n].SliceDims
			none.SliceConfigs = append(none.SliceConfigs, sc(n, 0, d[0]+d[1]+d[2]))
		}
		fc.OutConfigs["seq"] = none
		// Multi-slice FIRSTN CONCAT and STACK (D1) need one L.
		L := fc.FeatureConfigs[firstn[0]].MaxSequenceLength
		cat := &examplepb.OutConfig{OutType: examplepb.OutType_CONCAT}
		stk := &examplepb.OutConfig{OutType: examplepb.OutType_STACK}
		for _, n := range firstn {
			if fc.FeatureConfigs[n].MaxSequenceLength == L {
				cat.SliceConfigs = append(cat.SliceConfigs, sc(n, 0, 1), sc(n, 1, 2))
				stk.SliceConfigs = append(stk.SliceConfigs, sc(n, 0, 1), sc(n, 0, 1))
			}
		}
		fc.OutConfigs["seqcat"], fc.OutConfigs["seqstack"] = cat, stk
	}
	cfg, err := featcfg.New(fc)
	if err != nil {
		panic(err)
	}
	rows := 1 + rng.IntN(12)
	in := &shard.Input{Rows: rows}
	pool := make([]uint64, 4+rng.IntN(20))
	for i := range pool {
		pool[i] = rng.Uint64() >> 1
	}
	for range cfg.Features {
		fi := shard.FeatureInput{Shared: rng.IntN(4) == 0}
		if rng.IntN(6) > 0 {
			fi.Offsets = []int32{0}
			for range fi.Entries(rows) {
				for range rng.IntN(6) {
					fi.Values = append(fi.Values, pool[rng.IntN(len(pool))])
				}
				fi.Offsets = append(fi.Offsets, int32(len(fi.Values)))
			}
		}
		in.Features = append(in.Features, fi)
	}
	return cfg, in
}

// runVersion shards in with version v and runs the forward pass.
func runVersion(t testing.TB, cfg *featcfg.Config, in *shard.Input, v, P, par int, unique bool) (*shard.Result, Embedding, [][]float32) {
	t.Helper()
	s, err := shard.New(cfg, shard.Options{PS: P, Version: v, Unique: unique})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Shard(in)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := Arrange(v, cfg, r, ListBuffers(cfg, r, value))
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, Options{Version: v, PS: P, Parallel: par})
	if err != nil {
		t.Fatal(err)
	}
	out := l.Outputs(in.Rows)
	for _, o := range out { // Forward must overwrite every element
		for i := range o {
			o[i] = float32(math.NaN())
		}
	}
	if err := l.Forward([]Sharded{FromShard(r)}, emb, out); err != nil {
		t.Fatal(err)
	}
	return r, emb, out
}

// TestForwardAgainstReference: every version, unique or not, serial or parallel, gives the
// naive reference's outputs bit for bit.
func TestForwardAgainstReference(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	for c := range 150 {
		uniform := rng.IntN(2) == 0
		cfg, in := randomSetup(rng, uniform)
		want := refForward(cfg, in)
		P := 1 + rng.IntN(4)
		for v := 1; v <= 5; v++ {
			if v == 1 && !uniform {
				continue // v1 needs one width per table
			}
			for _, unique := range []bool{false, true} {
				for _, par := range []int{1, 3} {
					_, _, got := runVersion(t, cfg, in, v, P, par, unique)
					for i := range want {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("case %d v%d unique=%v parallel=%d: output %d differs\n got %v\nwant %v", c, v, unique, par, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

func dot(a, b [][]float32) float64 {
	var s float64
	for i := range a {
		for j := range a[i] {
			s += float64(a[i][j]) * float64(b[i][j])
		}
	}
	return s
}

// TestGradient checks the adjoint identity <layout(E), G> = <E, layout_grad(G)>, a finite
// difference, and that the parallel gradient equals the serial one bit for bit.
func TestGradient(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 12))
	for c := range 80 {
		uniform := rng.IntN(2) == 0
		cfg, in := randomSetup(rng, uniform)
		P := 1 + rng.IntN(4)
		for v := 1; v <= 5; v++ {
			if v == 1 && !uniform {
				continue
			}
			unique := rng.IntN(2) == 0
			r, _, _ := runVersion(t, cfg, in, v, P, 1, unique)
			// Random embeddings and output gradients.
			emb, err := Arrange(v, cfg, r, ListBuffers(cfg, r, func(uint64, int) float32 { return float32(rng.NormFloat64()) }))
			if err != nil {
				t.Fatal(err)
			}
			var grads [][]float32
			l, _ := New(cfg, Options{Version: v, PS: P})
			for _, n := range l.OutputSizes(in.Rows) {
				g := make([]float32, n)
				for i := range g {
					g[i] = float32(rng.NormFloat64())
				}
				grads = append(grads, g)
			}
			out := l.Outputs(in.Rows)
			req := []Sharded{FromShard(r)}
			if err := l.Forward(req, emb, out); err != nil {
				t.Fatal(err)
			}
			eg := Zeros(emb)
			if err := l.Backward(req, grads, eg); err != nil {
				t.Fatal(err)
			}
			lhs := dot(out, grads)
			rhs := dot(append(emb.Tensors, emb.Flat), append(eg.Tensors, eg.Flat))
			if math.Abs(lhs-rhs) > 1e-4*(1+math.Abs(lhs)) {
				t.Fatalf("case %d v%d: <layout(E),G> = %v but <E,grad(G)> = %v", c, v, lhs, rhs)
			}
			// Finite difference on one embedding element (the op is linear, so it is exact
			// up to rounding).
			bufs := Lists(v, cfg, r, emb)
			gbufs := Lists(v, cfg, r, eg)
			for k := range bufs {
				if len(bufs[k]) == 0 {
					continue
				}
				i := rng.IntN(len(bufs[k]))
				old := bufs[k][i]
				const h = 0.5
				bufs[k][i] = old + h
				_ = l.Forward(req, emb, out)
				up := dot(out, grads)
				bufs[k][i] = old - h
				_ = l.Forward(req, emb, out)
				down := dot(out, grads)
				bufs[k][i] = old
				fd := (up - down) / (2 * h)
				if math.Abs(fd-float64(gbufs[k][i])) > 1e-3*(1+math.Abs(fd)) {
					t.Fatalf("case %d v%d: finite difference %v, gradient %v (list %d element %d)", c, v, fd, gbufs[k][i], k, i)
				}
			}
			// Parallel backward equals serial.
			lp, _ := New(cfg, Options{Version: v, PS: P, Parallel: 3})
			egp := Zeros(emb)
			if err := lp.Backward(req, grads, egp); err != nil {
				t.Fatal(err)
			}
			for k := range eg.Tensors {
				if !slices.Equal(eg.Tensors[k], egp.Tensors[k]) {
					t.Fatalf("case %d v%d: parallel gradient differs in tensor %d", c, v, k)
				}
			}
			if !slices.Equal(eg.Flat, egp.Flat) {
				t.Fatalf("case %d v%d: parallel gradient differs", c, v)
			}
		}
	}
}

// TestV5Requests: R requests in one call give the outputs and gradients of R separate calls
// (D8).
func TestV5Requests(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	cfg, _ := randomSetup(rng, false)
	const P, R = 3, 3
	var reqs []Sharded
	var parts [][][]float32
	var embs [][][]float32
	total := 0
	l, _ := New(cfg, Options{Version: 5, PS: P, Parallel: 2})
	var partGrads []Embedding
	var gradsAll [][]float32
	for range R {
		// A fresh input with this config.
		_, in := randomSetupFor(rng, cfg)
		s, _ := shard.New(cfg, shard.Options{PS: P, Version: 5})
		r, err := s.Shard(in)
		if err != nil {
			t.Fatal(err)
		}
		emb := ListBuffers(cfg, r, func(uint64, int) float32 { return float32(rng.NormFloat64()) })
		out := l.Outputs(in.Rows)
		req := FromShard(r)
		req.FidOffset, req.FeatureOffset, req.NflOffset = slices.Clone(r.FidOffset), slices.Clone(r.FeatureOffset), slices.Clone(r.NflOffset)
		req.EmbSize = slices.Clone(r.EmbSize)
		if err := l.Forward([]Sharded{req}, Embedding{Tensors: emb}, out); err != nil {
			t.Fatal(err)
		}
		grads := l.Outputs(in.Rows)
		for _, g := range grads {
			for i := range g {
				g[i] = float32(rng.IntN(5))
			}
		}
		eg := Zeros(Embedding{Tensors: emb})
		if err := l.Backward([]Sharded{req}, grads, eg); err != nil {
			t.Fatal(err)
		}
		reqs, parts, embs, partGrads = append(reqs, req), append(parts, out), append(embs, emb), append(partGrads, eg)
		if gradsAll == nil {
			gradsAll = make([][]float32, len(grads))
		}
		for i := range grads {
			gradsAll[i] = append(gradsAll[i], grads[i]...)
		}
		total += in.Rows
	}
	// Concatenate the tensors of the R requests.
	emb := Embedding{Tensors: make([][]float32, len(embs[0]))}
	for _, e := range embs {
		for k := range e {
			emb.Tensors[k] = append(emb.Tensors[k], e[k]...)
		}
	}
	out := l.Outputs(total)
	if err := l.Forward(reqs, emb, out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		var want []float32
		for _, p := range parts {
			want = append(want, p[i]...)
		}
		if !slices.Equal(out[i], want) {
			t.Fatalf("output %d of the merged call differs from the concatenated requests", i)
		}
	}
	eg := Zeros(emb)
	if err := l.Backward(reqs, gradsAll, eg); err != nil {
		t.Fatal(err)
	}
	for k := range eg.Tensors {
		var want []float32
		for _, pg := range partGrads {
			want = append(want, pg.Tensors[k]...)
		}
		if !slices.Equal(eg.Tensors[k], want) {
			t.Fatalf("gradient tensor %d of the merged call differs", k)
		}
	}
}

// randomSetupFor returns a random input for an existing config.
func randomSetupFor(rng *rand.Rand, cfg *featcfg.Config) (*featcfg.Config, *shard.Input) {
	rows := 1 + rng.IntN(8)
	if rng.IntN(4) == 0 { // more than one block of rows (rowBlock) per worker
		rows = 1 + rng.IntN(3*rowBlock)
	}
	in := &shard.Input{Rows: rows}
	for range cfg.Features {
		fi := shard.FeatureInput{Shared: rng.IntN(4) == 0, Offsets: []int32{0}}
		for range fi.Entries(rows) {
			for range rng.IntN(5) {
				fi.Values = append(fi.Values, rng.Uint64()>>1)
			}
			fi.Offsets = append(fi.Offsets, int32(len(fi.Values)))
		}
		in.Features = append(in.Features, fi)
	}
	return cfg, in
}

// TestBadOffsets: corrupt sharding outputs are errors, never panics.
func TestBadOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfg, in := randomSetup(rng, false)
	r, emb, _ := runVersion(t, cfg, in, 3, 2, 1, false)
	l, _ := New(cfg, Options{Version: 3, PS: 2})
	good := FromShard(r)
	mutations := map[string]func(s *Sharded){
		"block out of range":   func(s *Sharded) { s.FidOffset[0] = 99 << 32 },
		"offset past block":    func(s *Sharded) { s.FidOffset[0] = s.FidOffset[0]&^0xFFFFFFFF | 1<<30 },
		"short nfl":            func(s *Sharded) { s.NflOffset = s.NflOffset[:1] },
		"feature_offset order": func(s *Sharded) { s.FeatureOffset[1] = -1 },
		"batch too large":      func(s *Sharded) { s.BatchSize += 5 },
	}
	for name, mut := range mutations {
		if len(good.FidOffset) == 0 && name != "short nfl" && name != "batch too large" {
			continue
		}
		s := good
		s.FidOffset, s.FeatureOffset, s.NflOffset = slices.Clone(good.FidOffset), slices.Clone(good.FeatureOffset), slices.Clone(good.NflOffset)
		mut(&s)
		out := l.Outputs(s.BatchSize)
		if err := l.Forward([]Sharded{s}, emb, out); err == nil {
			t.Errorf("%s: Forward accepted it", name)
		}
	}
}

// TestForwardReads: the reads-only pass reads the embeddings (its sum follows their
// values: zero over zeros, more over the synthetic values) and checks its inputs as
// Forward does.
func TestForwardReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cfg, in := randomSetup(rng, false)
	r, emb, _ := runVersion(t, cfg, in, 5, 2, 1, true)
	for _, par := range []int{1, 2} {
		l, err := New(cfg, Options{Version: 5, PS: 2, Parallel: par})
		if err != nil {
			t.Fatal(err)
		}
		req := []Sharded{FromShard(r)}
		got, err := l.ForwardReads(req, emb)
		if err != nil {
			t.Fatal(err)
		}
		zero, err := l.ForwardReads(req, Zeros(emb))
		if err != nil {
			t.Fatal(err)
		}
		if got == 0 || zero != 0 {
			t.Errorf("parallel %d: sums %d over the embeddings and %d over zeros; want > 0 and 0", par, got, zero)
		}
		if _, err := l.ForwardReads(req, Embedding{Tensors: emb.Tensors[:1]}); err == nil {
			t.Errorf("parallel %d: a short embedding list was accepted", par)
		}
	}
}
