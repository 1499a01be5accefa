package synth

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/metrics"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/fid"
)

// plantedConfig is the shape of `monolith gen --planted` data, smaller.
func plantedConfig(rows int64, seed uint64) Config {
	c := DefaultConfig()
	c.Record = recordio.Options{Framing: recordio.TFRecord}
	c.Rows, c.Files, c.Seed = rows, 2, seed
	c.Features, c.Shared, c.FidsMin, c.FidsMax, c.Vocab, c.Zipf = 8, 0, 1, 1, 1000, 1.05
	return c
}

func TestParsePlantedKind(t *testing.T) {
	for _, k := range []PlantedKind{PlantedLR, PlantedFM} {
		if got, err := ParsePlantedKind(" " + k.String() + " "); err != nil || got != k {
			t.Errorf("ParsePlantedKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if got, err := ParsePlantedKind("FM"); err != nil || got != PlantedFM {
		t.Errorf("ParsePlantedKind(FM) = %v, %v", got, err)
	}
	if _, err := ParsePlantedKind("dnn"); err == nil {
		t.Error("ParsePlantedKind(dnn) succeeded")
	}
	if s := PlantedKind(9).String(); s != "PlantedKind(9)" {
		t.Errorf("String of an unknown kind: %q", s)
	}
}

// TestPlantedParams: the parameters are a function of (Seed, fid) only, differ between
// seeds and fids, are shared by the LR and FM models of a seed, and are Gaussian with the
// configured scales.
func TestPlantedParams(t *testing.T) {
	fm := &Planted{Kind: PlantedFM, Dim: 5, Seed: 42, WeightScale: 0.5, VectorScale: 2}
	fm2 := &Planted{Kind: PlantedFM, Dim: 5, Seed: 42, WeightScale: 0.5, VectorScale: 2}
	lr := &Planted{Kind: PlantedLR, Seed: 42, WeightScale: 0.5}
	other := &Planted{Kind: PlantedFM, Dim: 5, Seed: 43, WeightScale: 0.5, VectorScale: 2}
	const n = 40000
	v, v2, vo := make([]float64, 5), make([]float64, 5), make([]float64, 5)
	var sumW, sumW2 float64
	var sumV, sumV2 [5]float64
	var sameSeed, sameFid int
	prev := make([]float64, 5)
	for i := range uint64(n) {
		f := Fid(1, int(i%7)+1, i/7+1)
		w := fm.Weight(f)
		if w != fm2.Weight(f) || w != lr.Weight(f) {
			t.Fatalf("fid %#x: weight %v, again %v, LR %v", f, w, fm2.Weight(f), lr.Weight(f))
		}
		fm.Vector(f, v)
		fm2.Vector(f, v2)
		other.Vector(f, vo)
		if !slices.Equal(v, v2) {
			t.Fatalf("fid %#x: vector %v, again %v", f, v, v2)
		}
		if w == other.Weight(f) || slices.Equal(v, vo) {
			sameSeed++
		}
		if slices.Equal(v, prev) {
			sameFid++
		}
		copy(prev, v)
		sumW += w
		sumW2 += w * w
		for j, x := range v {
			sumV[j] += x
			sumV2[j] += x * x
		}
	}
	if sameSeed > 0 || sameFid > 0 {
		t.Errorf("%d fids have the same parameters under two seeds, %d the vector of the previous fid", sameSeed, sameFid)
	}
	// Mean within 5 standard errors of 0; standard deviation within 3%.
	check := func(what string, sum, sum2, scale float64) {
		mean, sd := sum/n, math.Sqrt(sum2/n)
		if math.Abs(mean) > 5*scale/math.Sqrt(n) || math.Abs(sd/scale-1) > 0.03 {
			t.Errorf("%s: mean %.4f, sd %.4f; want 0 and %v", what, mean, sd, scale)
		}
	}
	check("w", sumW, sumW2, 0.5)
	for j := range sumV {
		check("v["+string(rune('0'+j))+"]", sumV[j], sumV2[j], 2)
	}
}

// naiveLogit computes the logit from Weight and Vector with the explicit pairwise sum.
func naiveLogit(m *Planted, fids [][]uint64) (logit, linear float64) {
	linear = m.Bias
	var xs [][]float64
	v := make([]float64, m.Dim)
	for _, cell := range fids {
		x := make([]float64, m.Dim)
		for _, f := range cell {
			linear += m.Weight(f)
			if m.Kind == PlantedFM {
				m.Vector(f, v)
				for j := range x {
					x[j] += v[j]
				}
			}
		}
		xs = append(xs, x)
	}
	logit = linear
	if m.Kind == PlantedFM {
		for f := range xs {
			for g := f + 1; g < len(xs); g++ {
				for j := range xs[f] {
					logit += xs[f][j] * xs[g][j]
				}
			}
		}
	}
	return logit, linear
}

// TestPlantedLogit: Logit and LinearLogit agree with the model's definition for LR and FM,
// odd and even dims, multi-fid and empty cells; LR has no interaction term, FM does, and
// the linear part of an FM is the LR of the same seed.
func TestPlantedLogit(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	for _, dim := range []int{1, 2, 4, 7} {
		fm := &Planted{Kind: PlantedFM, Dim: dim, Seed: seed, Bias: -0.7, WeightScale: 0.3, VectorScale: 0.4}
		lr := &Planted{Kind: PlantedLR, Dim: dim, Seed: seed, Bias: -0.7, WeightScale: 0.3, VectorScale: 0.4}
		differ := 0
		for range 200 {
			fids := make([][]uint64, 1+r.IntN(6))
			for f := range fids {
				for range r.IntN(4) {
					fids[f] = append(fids[f], Fid(2, f+1, 1+r.Uint64N(50)))
				}
			}
			for _, m := range []*Planted{fm, lr} {
				logit, linear := naiveLogit(m, fids)
				if got := m.Logit(fids); math.Abs(got-logit) > 1e-9*(1+math.Abs(logit)) {
					t.Fatalf("%v dim %d %v: Logit %v, want %v", m.Kind, dim, fids, got, logit)
				}
				if got := m.LinearLogit(fids); math.Abs(got-linear) > 1e-12*(1+math.Abs(linear)) {
					t.Fatalf("%v dim %d: LinearLogit %v, want %v", m.Kind, dim, got, linear)
				}
				if p := m.Prob(fids); math.Abs(p-1/(1+math.Exp(-logit))) > 1e-12 {
					t.Fatalf("%v: Prob %v for logit %v", m.Kind, p, logit)
				}
			}
			if lr.Logit(fids) != lr.LinearLogit(fids) || fm.LinearLogit(fids) != lr.Logit(fids) {
				t.Fatalf("dim %d: LR logit %v, its linear part %v, FM linear part %v", dim, lr.Logit(fids), lr.LinearLogit(fids), fm.LinearLogit(fids))
			}
			if fm.Logit(fids) != lr.Logit(fids) {
				differ++
			}
		}
		if differ < 100 {
			t.Errorf("dim %d: FM and LR logits differ in only %d of 200 rows", dim, differ)
		}
	}
}

// recorder is a Labeler that keeps a copy of every row's fids and labels.
type recorder struct {
	m      *Planted
	mu     sync.Mutex
	fids   map[int64][][]uint64
	labels map[int64][]float32
}

func (r *recorder) Label(rnd *rand.Rand, row *Row, labels []float32) {
	r.m.Label(rnd, row, labels)
	fids := make([][]uint64, len(row.Fids))
	for f, cell := range row.Fids {
		fids[f] = slices.Clone(cell)
		if r.m.FidVersion == 1 {
			fid.ConvertV1ToV2(fids[f])
		}
	}
	r.mu.Lock()
	r.fids[row.Index] = fids
	r.labels[row.Index] = slices.Clone(labels)
	r.mu.Unlock()
}

// TestPlantedGenerate: through Generate (several files at once), the recorded p, linear
// logit and label of every row are those of the row's fids; every task draws its own label
// (the tasks differ but agree in rate); the label rate is the mean p; the default model has
// a Bayes AUC of 0.75–0.85 and a positive rate in [0.2, 0.5], with the FM interaction term
// carrying a real share of the signal.
func TestPlantedGenerate(t *testing.T) {
	rows := int64(30000)
	if raceEnabled {
		rows = 10000
	}
	for _, kind := range []PlantedKind{PlantedFM, PlantedLR} {
		c := plantedConfig(rows, 5)
		c.Tasks, c.Parallel = 2, 2
		if kind == PlantedLR {
			c.FidVersion = 2 // FM: v1 fids, which Label converts
		}
		m, err := NewPlanted(kind, c, 4, 9)
		if err != nil {
			t.Fatal(err)
		}
		m.Probs, m.LinearLogits, m.Labels = make([]float32, rows), make([]float32, rows), make([]float32, rows)
		rec := &recorder{m: m, fids: map[int64][][]uint64{}, labels: map[int64][]float32{}}
		c.Labeler = rec
		if _, err := Generate(context.Background(), c, t.TempDir()); err != nil {
			t.Fatal(err)
		}
		var meanP, pos, pos1, taskDiff float64
		for i := range rows {
			fids, labels := rec.fids[i], rec.labels[i]
			if m.Probs[i] != float32(m.Prob(fids)) || m.LinearLogits[i] != float32(m.LinearLogit(fids)) || m.Labels[i] != labels[0] {
				t.Fatalf("%v row %d: recorded p %v, linear %v, label %v; want %v, %v, %v", kind, i,
					m.Probs[i], m.LinearLogits[i], m.Labels[i], m.Prob(fids), m.LinearLogit(fids), labels[0])
			}
			meanP += float64(m.Probs[i])
			pos += float64(labels[0])
			pos1 += float64(labels[1])
			if labels[0] != labels[1] {
				taskDiff++
			}
		}
		n := float64(rows)
		meanP, pos, pos1 = meanP/n, pos/n, pos1/n
		se := math.Sqrt(meanP * (1 - meanP) / n)
		if math.Abs(pos-meanP) > 5*se || math.Abs(pos1-meanP) > 5*se {
			t.Errorf("%v: label rates %.4f and %.4f, mean p %.4f (se %.4f)", kind, pos, pos1, meanP, se)
		}
		if taskDiff < n/10 {
			t.Errorf("%v: the two tasks differ in only %v rows", kind, taskDiff)
		}
		auc, err := metrics.AUC(m.Probs, m.Labels)
		if err != nil {
			t.Fatal(err)
		}
		linAUC, err := metrics.AUC(m.LinearLogits, m.Labels)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: Bayes AUC %.4f, LR-only AUC %.4f, positive rate %.4f", kind, auc, linAUC, pos)
		if auc < 0.75 || auc > 0.85 || pos < 0.2 || pos > 0.5 {
			t.Errorf("%v: Bayes AUC %.4f, positive rate %.4f; want 0.75–0.85 and 0.2–0.5", kind, auc, pos)
		}
		if kind == PlantedFM && auc-linAUC < 0.05 {
			t.Errorf("FM: the LR part alone has AUC %.4f, close to the full model's %.4f", linAUC, auc)
		}
		if kind == PlantedLR && math.Abs(auc-linAUC) > 1e-3 {
			t.Errorf("LR: AUC of p %.4f, of the linear logit %.4f", auc, linAUC)
		}
	}
}

// TestPlantedDeterminism: planted data does not depend on the parallelism, and a new
// Planted with the same fields gives byte-identical files.
func TestPlantedDeterminism(t *testing.T) {
	gen := func(parallel int) map[string][]byte {
		c := plantedConfig(3000, 3)
		c.Files, c.Parallel, c.BatchRows = 4, parallel, 100
		m, err := NewPlanted(PlantedFM, c, 4, 3)
		if err != nil {
			t.Fatal(err)
		}
		c.Labeler = m
		dir := t.TempDir()
		res, err := Generate(context.Background(), c, dir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, p := range res.Paths() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(p)] = b
		}
		return out
	}
	a, b := gen(1), gen(4)
	if len(a) != 4 {
		t.Fatalf("%d files", len(a))
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s differs between parallel 1 and 4", name)
		}
	}
}

func TestPlantedLabelNoAlloc(t *testing.T) {
	m := &Planted{Kind: PlantedFM, Dim: 8, Seed: 1, WeightScale: 0.3, VectorScale: 0.3, Probs: make([]float32, 4)}
	row := &Row{Index: 2, Fids: [][]uint64{{1, 2}, {3}, {}, {4, 5, 6}}}
	labels := make([]float32, 1)
	r := rand.New(rand.NewPCG(1, 2))
	if n := testing.AllocsPerRun(100, func() { m.Label(r, row, labels) }); n != 0 {
		t.Errorf("Label allocates %v times per row", n)
	}
	if m.Probs[2] == 0 {
		t.Error("Label did not record p")
	}
}

func TestNewPlantedAndValidate(t *testing.T) {
	c := plantedConfig(100, 1)
	fm, err := NewPlanted(PlantedFM, c, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := NewPlanted(PlantedLR, c, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The default scales give the target variances (8 features, 1 fid each, dim 4).
	if got := 8 * lr.WeightScale * lr.WeightScale; math.Abs(got-PlantedLogitVar) > 1e-12 {
		t.Errorf("LR weight variance %v, want %v", got, PlantedLogitVar)
	}
	if got := 8 * fm.WeightScale * fm.WeightScale; math.Abs(got-(1-PlantedFMShare)*PlantedLogitVar) > 1e-12 {
		t.Errorf("FM weight variance %v", got)
	}
	if got := 4 * 28 * math.Pow(fm.VectorScale, 4); math.Abs(got-PlantedFMShare*PlantedLogitVar) > 1e-12 {
		t.Errorf("FM interaction variance %v", got)
	}
	if lr.VectorScale != 0 || fm.Bias != PlantedBias {
		t.Errorf("LR vector scale %v, bias %v", lr.VectorScale, fm.Bias)
	}
	for _, m := range []Planted{
		{Kind: 0},
		{Kind: PlantedFM, Dim: 0},
		{Kind: PlantedFM, Dim: maxPlantedDim + 1},
		{Kind: PlantedLR, Bias: math.NaN()},
		{Kind: PlantedLR, WeightScale: -1},
		{Kind: PlantedLR, VectorScale: math.Inf(1)},
	} {
		if err := m.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Validate = %v, want ErrConfig", m, err)
		}
	}
	if _, err := NewPlanted(PlantedFM, c, 0, 1); !errors.Is(err, ErrConfig) {
		t.Errorf("FM with dim 0: %v", err)
	}
	c.Rows = 0
	if _, err := NewPlanted(PlantedLR, c, 0, 1); !errors.Is(err, ErrConfig) {
		t.Errorf("invalid config: %v", err)
	}
}

// TestPlantedFeatureConfigs: one table, bias and vec layouts over every feature, accepted
// by kernels/featcfg; shared features and bad dims are rejected.
func TestPlantedFeatureConfigs(t *testing.T) {
	c := plantedConfig(100, 1)
	c.Features, c.Dense = 12, 3
	fc, err := PlantedFeatureConfigs(c, 5)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := featcfg.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Features) != 12 || len(cfg.Tables) != 1 || cfg.Tables[0].Name != "emb" || len(cfg.Layouts) != 2 {
		t.Fatalf("%d features, tables %v, %d layouts", len(cfg.Features), cfg.Tables, len(cfg.Layouts))
	}
	for _, f := range cfg.Features {
		if !slices.Equal(f.SliceDims, []int{1, 5}) || f.Pooling != featcfg.Pooling(examplepb.PoolingType_SUM) {
			t.Errorf("feature %s: slice dims %v, pooling %v", f.Name, f.SliceDims, f.Pooling)
		}
	}
	bias, vec := cfg.Layouts[0], cfg.Layouts[1]
	if bias.Name != "bias" || bias.OutType != featcfg.OutType(examplepb.OutType_ADDN) || !slices.Equal(bias.RowSize, []int{1}) || len(bias.Slices) != 12 {
		t.Errorf("bias layout %+v", bias)
	}
	if vec.Name != "vec" || vec.OutType != featcfg.OutType(examplepb.OutType_CONCAT) || !slices.Equal(vec.RowSize, []int{60}) {
		t.Errorf("vec layout %+v", vec)
	}
	for i, s := range vec.Slices {
		if name := cfg.Features[s.Feature].Name; name != c.SparseFeatures()[i].Name || s.Start != 1 || s.End != 6 || s.Offset != 5*i {
			t.Errorf("vec slice %d: %s [%d, %d) at %d", i, name, s.Start, s.End, s.Offset)
		}
	}
	c.Shared = 1
	if _, err := PlantedFeatureConfigs(c, 5); !errors.Is(err, ErrConfig) {
		t.Errorf("shared features: %v", err)
	}
	c.Shared = 0
	for _, dim := range []int{0, maxPlantedDim + 1} {
		if _, err := PlantedFeatureConfigs(c, dim); !errors.Is(err, ErrConfig) {
			t.Errorf("dim %d: %v", dim, err)
		}
	}
}
