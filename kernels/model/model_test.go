package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// fixture returns inputs "bias" [B,1], "other" [B,3] (unused by every model) and "vec"
// [B, F·k].
func fixture(F, k int) []Input {
	fields := make([]int, F)
	for i := range fields {
		fields[i] = k
	}
	return []Input{{Name: "bias", Width: 1, Fields: []int{1}}, {Name: "other", Width: 3}, {Name: "vec", Width: F * k, Fields: fields}}
}

func randomBatch(t *testing.T, m *Model, inputs []Input, rows int, rng *rand.Rand) Batch {
	t.Helper()
	b := Batch{Rows: rows}
	for _, in := range inputs {
		v := make([]float32, rows*in.Width)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.5)
		}
		b.In = append(b.In, v)
	}
	for _, p := range m.Params() {
		v := make([]float32, p.Size())
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.3)
		}
		b.Params = append(b.Params, v)
	}
	return b
}

func zerosLike(vs [][]float32) [][]float32 {
	out := make([][]float32, len(vs))
	for i, v := range vs {
		out[i] = make([]float32, len(v))
	}
	return out
}

func filledLike(vs [][]float32, v float32) [][]float32 {
	out := zerosLike(vs)
	for _, o := range out {
		for i := range o {
			o[i] = v
		}
	}
	return out
}

// loss is Σ_r c_r·logit_r for fixed random c: its gradient w.r.t. the logits is c.
func loss(t *testing.T, m *Model, b Batch, c []float32) float64 {
	t.Helper()
	logits := make([]float32, b.Rows)
	if err := m.Forward(b, logits); err != nil {
		t.Fatal(err)
	}
	var s float64
	for r, z := range logits {
		s += float64(c[r]) * float64(z)
	}
	return s
}

func TestGradientsMatchFiniteDifferences(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"lr", Spec{Kind: LR}},
		{"fm", Spec{Kind: FM}},
		{"deepfm", Spec{Kind: DeepFM, Hidden: []int{5, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			inputs := fixture(3, 2)
			m, err := New(tc.spec, inputs)
			if err != nil {
				t.Fatal(err)
			}
			const rows = 4
			b := randomBatch(t, m, inputs, rows, rng)
			c := make([]float32, rows)
			for i := range c {
				c[i] = float32(rng.NormFloat64())
			}
			loss(t, m, b, c)
			// Backward must overwrite (the trainer reuses its buffers): start from garbage.
			g := Grads{In: filledLike(b.In, 123), Params: filledLike(b.Params, -77)}
			sentinel := float32(7)
			g.In[1][0] = sentinel // an input the model does not read must be left alone
			if err := m.Backward(c, g); err != nil {
				t.Fatal(err)
			}
			if g.In[1][0] != sentinel {
				t.Fatalf("Backward wrote the gradient of an unread input")
			}
			check := func(what string, vals, grads []float32) {
				t.Helper()
				for i := range vals {
					// A ReLU kink near the point spoils a wide difference: retry narrower.
					var num float64
					ok := false
					for _, eps := range []float32{1e-2, 1e-3, 1e-4} {
						old := vals[i]
						vals[i] = old + eps
						up := loss(t, m, b, c)
						vals[i] = old - eps
						down := loss(t, m, b, c)
						vals[i] = old
						num = (up - down) / (2 * float64(eps))
						if math.Abs(num-float64(grads[i])) <= 2e-2*math.Max(1, math.Abs(num)) {
							ok = true
							break
						}
					}
					if !ok {
						t.Errorf("%s[%d]: analytic %g, numeric %g", what, i, grads[i], num)
					}
				}
			}
			for i, in := range inputs {
				if m.Reads(i) {
					check(in.Name, b.In[i], g.In[i])
				}
			}
			for j, p := range m.Params() {
				check(p.Name, b.Params[j], g.Params[j])
			}
		})
	}
}

func TestFMIsThePairwiseSum(t *testing.T) {
	inputs := fixture(4, 3)
	m, err := New(Spec{Kind: FM}, inputs)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	b := randomBatch(t, m, inputs, 5, rng)
	logits := make([]float32, 5)
	if err := m.Forward(b, logits); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 5; r++ {
		want := float64(b.Params[0][0]) + float64(b.In[0][r])
		x := b.In[2][r*12 : (r+1)*12]
		for i := 0; i < 4; i++ {
			for j := i + 1; j < 4; j++ {
				for d := 0; d < 3; d++ {
					want += float64(x[i*3+d]) * float64(x[j*3+d])
				}
			}
		}
		if math.Abs(want-float64(logits[r])) > 1e-5 {
			t.Errorf("row %d: logit %g, want %g", r, logits[r], want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   Spec
		inputs []Input
	}{
		{"no bias", Spec{Kind: LR, Bias: "nope"}, fixture(2, 2)},
		{"wide bias", Spec{Kind: LR, Bias: "other"}, fixture(2, 2)},
		{"no vec", Spec{Kind: FM, Vec: "nope"}, fixture(2, 2)},
		{"uneven fields", Spec{Kind: FM}, []Input{{Name: "bias", Width: 1}, {Name: "vec", Width: 5, Fields: []int{2, 3}}}},
		{"fields vs width", Spec{Kind: FM}, []Input{{Name: "bias", Width: 1}, {Name: "vec", Width: 6, Fields: []int{2, 2}}}},
		{"bad hidden", Spec{Kind: DeepFM, Hidden: []int{0}}, fixture(2, 2)},
		{"bad kind", Spec{Kind: 9}, fixture(2, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.spec, tc.inputs); !errors.Is(err, ErrConfig) {
				t.Fatalf("New = %v, want ErrConfig", err)
			}
		})
	}
}

func TestForwardInputErrors(t *testing.T) {
	inputs := fixture(2, 2)
	m, err := New(Spec{Kind: FM}, inputs)
	if err != nil {
		t.Fatal(err)
	}
	b := randomBatch(t, m, inputs, 3, rand.New(rand.NewPCG(1, 1)))
	short := b
	short.In = append([][]float32(nil), b.In...)
	short.In[2] = short.In[2][:5]
	for _, tc := range []struct {
		name   string
		b      Batch
		logits int
	}{
		{"short vec", short, 3},
		{"few logits", b, 2},
		{"missing params", Batch{Rows: 3, In: b.In}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.Forward(tc.b, make([]float32, tc.logits)); !errors.Is(err, ErrInput) {
				t.Fatalf("Forward = %v, want ErrInput", err)
			}
		})
	}
}

func TestSigmoidXent(t *testing.T) {
	logits := []float32{0, 2, -3, 40, -40}
	labels := []float32{1, 0, 0, 1, 1}
	probs := make([]float32, 5)
	d := make([]float32, 5)
	sum, err := SigmoidXent(logits, labels, probs, d)
	if err != nil {
		t.Fatal(err)
	}
	var want float64
	for i, z := range logits {
		p := 1 / (1 + math.Exp(-float64(z)))
		if math.Abs(float64(probs[i])-p) > 1e-6 || math.Abs(float64(d[i])-(p-float64(labels[i]))) > 1e-6 {
			t.Errorf("row %d: p %g d %g, want %g %g", i, probs[i], d[i], p, p-float64(labels[i]))
		}
		if labels[i] > 0 {
			want += math.Log1p(math.Exp(-float64(z)))
		} else {
			want += math.Log1p(math.Exp(float64(z)))
		}
	}
	if math.Abs(sum-want) > 1e-9*math.Max(1, want) || math.IsInf(sum, 0) {
		t.Fatalf("loss %g, want %g", sum, want)
	}
	if _, err := SigmoidXent(logits, labels[:2], nil, nil); !errors.Is(err, ErrInput) {
		t.Fatalf("length mismatch: %v", err)
	}
}

func BenchmarkForwardBackward(b *testing.B) {
	for _, spec := range []Spec{{Kind: FM}, {Kind: DeepFM}} {
		b.Run(spec.Kind.String(), func(b *testing.B) {
			inputs := fixture(8, 4)
			m, err := New(spec, inputs)
			if err != nil {
				b.Fatal(err)
			}
			t := &testing.T{}
			bt := randomBatch(t, m, inputs, 256, rand.New(rand.NewPCG(1, 2)))
			g := Grads{In: zerosLike(bt.In), Params: zerosLike(bt.Params)}
			logits := make([]float32, 256)
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Forward(bt, logits); err != nil {
					b.Fatal(err)
				}
				if err := m.Backward(logits, g); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*256/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// TestGemmRowsSameBits: the blocked product is gonum's whole-matrix product, bit for bit,
// at the shapes of a DeepFM layer (batches above and below the 4-block parallel cut) and
// beyond one block of columns and depth.
func TestGemmRowsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(rows, cols int) blas32.General {
		m := matrix(make([]float32, rows*cols), rows, cols)
		for i := range m.Data {
			m.Data[i] = float32(rng.NormFloat64())
		}
		return m
	}
	for _, c := range []struct{ rows, in, out int }{{256, 48, 32}, {256, 32, 16}, {256, 16, 1}, {1000, 48, 32}, {100, 150, 70}, {1, 3, 2}, {0, 4, 4}} {
		for _, tb := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, beta := range []float32{0, 1} {
				a := random(c.rows, c.in)
				b := random(c.in, c.out)
				if tb == blas.Trans {
					b = random(c.out, c.in)
				}
				want := random(c.rows, c.out)
				got := matrix(append([]float32(nil), want.Data...), c.rows, c.out)
				blas32.Gemm(blas.NoTrans, tb, 0.5, a, b, beta, want)
				gemmRows(tb, 0.5, a, b, beta, got)
				for i := range want.Data {
					if math.Float32bits(got.Data[i]) != math.Float32bits(want.Data[i]) {
						t.Fatalf("%+v trans %v beta %v: element %d is %v, want %v", c, tb, beta, i, got.Data[i], want.Data[i])
					}
				}
			}
		}
	}
}
