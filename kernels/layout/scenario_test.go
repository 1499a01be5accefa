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

// scenario61 is data-path.md §6.1: B=256, P=5, features fc_slot_1..199 in three groups,
// ExampleBatch input with even slots SHARED.
func scenario61(rng *rand.Rand) (*featcfg.Config, *shard.Input) {
	fc := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}, OutConfigs: map[string]*examplepb.OutConfig{}}
	bias := &examplepb.OutConfig{OutType: examplepb.OutType_ADDN, Shape: []*examplepb.TensorShape{{Dims: []int32{-1, 1}}}}
	vec := &examplepb.OutConfig{OutType: examplepb.OutType_CONCAT, Shape: []*examplepb.TensorShape{{Dims: []int32{-1, 396}}}}
	ffm1 := &examplepb.OutConfig{OutType: examplepb.OutType_STACK, Shape: []*examplepb.TensorShape{{Dims: []int32{-1, 49, 8}}}}
	ffm2 := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
	firstN := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
	sc := func(s, a, b int32) *examplepb.SliceConfig {
		return &examplepb.SliceConfig{FeatureName: fmt.Sprintf("fc_slot_%d", s), Start: a, End: b}
	}
	for s := int32(1); s <= 199; s++ { // slice configs in numeric slot order
		name := fmt.Sprintf("fc_slot_%d", s)
		switch {
		case s <= 49:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_one", SliceDims: []int32{1, 4, 8}}
			bias.SliceConfigs = append(bias.SliceConfigs, sc(s, 0, 1))
			vec.SliceConfigs = append(vec.SliceConfigs, sc(s, 1, 5))
			ffm1.SliceConfigs = append(ffm1.SliceConfigs, sc(s, 5, 13))
		case s <= 99:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_two", SliceDims: []int32{1, 4, 16}, PoolingType: examplepb.PoolingType_MEAN}
			bias.SliceConfigs = append(bias.SliceConfigs, sc(s, 0, 1))
			vec.SliceConfigs = append(vec.SliceConfigs, sc(s, 1, 5))
			ffm2.SliceConfigs = append(ffm2.SliceConfigs, sc(s, 5, 21))
			ffm2.Shape = append(ffm2.Shape, &examplepb.TensorShape{Dims: []int32{-1, 16}})
		default:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_one", SliceDims: []int32{1, 4, 16},
				PoolingType: examplepb.PoolingType_FIRSTN, MaxSequenceLength: 3}
			firstN.SliceConfigs = append(firstN.SliceConfigs, sc(s, 1, 21))
			firstN.Shape = append(firstN.Shape, &examplepb.TensorShape{Dims: []int32{-1, 3, 20}})
		}
	}
	fc.OutConfigs = map[string]*examplepb.OutConfig{"bias": bias, "vec": vec, "ffm1": ffm1, "ffm2": ffm2, "firstN": firstN}
	cfg, err := featcfg.New(fc)
	if err != nil {
		panic(err)
	}
	const B = 256
	in := &shard.Input{Rows: B, Features: make([]shard.FeatureInput, len(cfg.Features))}
	for _, f := range cfg.Features {
		s := uint64(featcfg.SlotOfName(f.Name))
		shared := s%2 == 0
		fi := shard.FeatureInput{Shared: shared, Offsets: []int32{0}}
		for range fi.Entries(B) {
			// Distinct fids s*10000 + (i+1)*1000 + r_i*100 in explicit order (D11).
			for i := range 1 + rng.IntN(6) {
				fi.Values = append(fi.Values, s*10000+uint64(i+1)*1000+uint64(1+rng.IntN(9))*100)
			}
			fi.Offsets = append(fi.Offsets, int32(len(fi.Values)))
		}
		in.Features[f.Index] = fi
	}
	return cfg, in
}

func TestScenario61Forward(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	cfg, in := scenario61(rand.New(rand.NewPCG(seed, 61)))
	// Output order: bias, ffm1, ffm2×50, firstN×100, vec.
	var names []string
	for _, l := range cfg.Layouts {
		for range l.Outputs() {
			names = append(names, l.Name)
		}
	}
	if len(names) != 153 || names[0] != "bias" || names[1] != "ffm1" || names[2] != "ffm2" || names[52] != "firstN" || names[152] != "vec" {
		t.Fatalf("outputs %d in order %v...", len(names), names[:3])
	}
	want := refForward(cfg, in)
	// The embedding of fid x is [x, x+1, ...] in §6.1; ours is SyntheticValue. Both depend only
	// on the fid, which is what the scenario checks.
	for _, v := range []int{2, 3, 4, 5} {
		for _, par := range []int{1, 2} {
			_, _, got := runVersion(t, cfg, in, v, 5, par, false)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("v%d parallel=%d: output %d (%s) differs", v, par, i, names[i])
				}
			}
			// Shared features: every row equals row 0 in the NONE tensors of even slots.
			if v == 3 {
				for i, s := range cfg.Layouts[2].Slices { // ffm2
					if featcfg.SlotOfName(cfg.Features[s.Feature].Name)%2 == 0 {
						o := got[2+i]
						for r := 1; r < in.Rows; r++ {
							if !slices.Equal(o[r*16:(r+1)*16], o[:16]) {
								t.Fatalf("shared %s: row %d differs from row 0", cfg.Features[s.Feature].Name, r)
							}
						}
					}
				}
			}
		}
	}
}

// TestScenario62Grad is data-path.md §6.2: with all-ones upstream gradients each fid gets,
// in every dim, +1 per occurrence (SUM), +1/len per occurrence (MEAN) or +1 per occurrence
// at position < 3 (FIRSTN).
func TestScenario62Grad(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 62))
	fc := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}, OutConfigs: map[string]*examplepb.OutConfig{}}
	bias := &examplepb.OutConfig{OutType: examplepb.OutType_ADDN}
	vec := &examplepb.OutConfig{OutType: examplepb.OutType_CONCAT}
	ffm1 := &examplepb.OutConfig{OutType: examplepb.OutType_STACK}
	ffm2 := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
	firstN := &examplepb.OutConfig{OutType: examplepb.OutType_NONE}
	letters := []string{}
	for c := 'a'; c <= 'z'; c++ {
		letters = append(letters, string(c))
	}
	letters = append(letters, "za", "zb", "zc")
	slotOf := map[string]int{}
	for i, l := range letters {
		s := i + 1
		name := "fc_slot_" + l
		slotOf[name] = s
		sc := func(a, b int32) *examplepb.SliceConfig {
			return &examplepb.SliceConfig{FeatureName: name, Start: a, End: b}
		}
		switch {
		case s <= 9:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_one", SliceDims: []int32{1, 4, 8}}
			bias.SliceConfigs = append(bias.SliceConfigs, sc(0, 1))
			vec.SliceConfigs = append(vec.SliceConfigs, sc(1, 5))
			ffm1.SliceConfigs = append(ffm1.SliceConfigs, sc(5, 13))
		case s <= 19:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_two", SliceDims: []int32{1, 4, 16}, PoolingType: examplepb.PoolingType_MEAN}
			bias.SliceConfigs = append(bias.SliceConfigs, sc(0, 1))
			vec.SliceConfigs = append(vec.SliceConfigs, sc(1, 5))
			ffm2.SliceConfigs = append(ffm2.SliceConfigs, sc(5, 21))
		default:
			fc.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_one", SliceDims: []int32{1, 4, 16},
				PoolingType: examplepb.PoolingType_FIRSTN, MaxSequenceLength: 3}
			firstN.SliceConfigs = append(firstN.SliceConfigs, sc(0, 21))
		}
	}
	fc.OutConfigs = map[string]*examplepb.OutConfig{"bias": bias, "vec": vec, "ffm1": ffm1, "ffm2": ffm2, "firstN": firstN}
	cfg, err := featcfg.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Layouts[4].RowSize[0]; got != 76 {
		t.Fatalf("vec row size %d, want 76", got)
	}
	const B = 256
	in := &shard.Input{Rows: B, Features: make([]shard.FeatureInput, len(cfg.Features))}
	truth := map[uint64]float64{} // expected gradient of every fid (absent: 0)
	distinct := 0
	for _, f := range cfg.Features {
		s := uint64(slotOf[f.Name])
		K := 257 + rng.IntN(10)
		fids := make([]uint64, 0, K)
		seen := map[uint64]bool{}
		for len(fids) < K {
			x := s<<48 + uint64(100+rng.IntN(1e6-100))
			if !seen[x] {
				seen[x] = true
				fids = append(fids, x)
			}
		}
		n := K - 255
		distinct += K
		fi := shard.FeatureInput{Offsets: []int32{0}}
		for b := 0; b < B; b++ {
			row := fids[b : b+n]
			fi.Values = append(fi.Values, row...)
			fi.Offsets = append(fi.Offsets, int32(len(fi.Values)))
			for i, x := range row {
				switch f.Pooling {
				case featcfg.Sum:
					truth[x]++
				case featcfg.Mean:
					truth[x] += 1 / float64(n)
				case featcfg.FirstN:
					if i < 3 {
						truth[x]++
					}
				}
			}
		}
		in.Features[f.Index] = fi
	}
	for _, v := range []int{2, 3, 4, 5} {
		for _, par := range []int{1, 2} {
			P := 3
			s, _ := shard.New(cfg, shard.Options{PS: P, Version: v, Unique: true})
			r, err := s.Shard(in)
			if err != nil {
				t.Fatal(err)
			}
			emb, _ := Arrange(v, cfg, r, ListBuffers(cfg, r, value))
			l, _ := New(cfg, Options{Version: v, PS: P, Parallel: par})
			grads := l.Outputs(B)
			for _, g := range grads {
				for i := range g {
					g[i] = 1
				}
			}
			eg := Zeros(emb)
			if err := l.Backward([]Sharded{FromShard(r)}, grads, eg); err != nil {
				t.Fatal(err)
			}
			lists := Lists(v, cfg, r, eg)
			checked := 0
			for ti := range cfg.Tables {
				for p := 0; p < P; p++ {
					buf := lists[ti*P+p]
					pos, i := 0, 0
					list := r.List(ti, p)
					for _, f := range cfg.Tables[ti].Features {
						d := cfg.Features[f].Dim
						for range r.Counts[f*P+p] {
							want := truth[list[i]]
							for k := 0; k < d; k++ {
								if math.Abs(float64(buf[pos+k])-want) > 1e-4*(1+want) {
									t.Fatalf("v%d parallel=%d: fid %#x dim %d: grad %v, want %v", v, par, list[i], k, buf[pos+k], want)
								}
							}
							pos += d
							i++
							checked++
						}
					}
				}
			}
			if checked != distinct {
				t.Fatalf("v%d: checked %d fids, %d distinct", v, checked, distinct)
			}
		}
	}
}
