package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/internal/mix"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/fid"
)

// PlantedKind is the model family of a Planted labeler.
type PlantedKind int

// Planted kinds.
const (
	// PlantedLR is logistic regression: logit = Bias + Σ w_fid over every fid of the row.
	PlantedLR PlantedKind = iota + 1
	// PlantedFM is a factorization machine: the LR logit plus Σ_{f<f'} <x_f, x_f'>, where
	// x_f is the sum of the vectors of the fids of feature f.
	PlantedFM
)

// ParsePlantedKind parses "lr" and "fm".
func ParsePlantedKind(s string) (PlantedKind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "lr":
		return PlantedLR, nil
	case "fm":
		return PlantedFM, nil
	}
	return 0, fmt.Errorf("io/synth: unknown planted model %q (want lr or fm)", s)
}

// String returns the name of k, as ParsePlantedKind accepts it.
func (k PlantedKind) String() string {
	switch k {
	case PlantedLR:
		return "lr"
	case PlantedFM:
		return "fm"
	}
	return "PlantedKind(" + strconv.Itoa(int(k)) + ")"
}

// Default shape of a planted model (NewPlanted): the variance of the logit around Bias,
// and the share of it that the FM interaction term carries.
const (
	// PlantedLogitVar is the target variance of logit - Bias, assuming distinct fids:
	// Bayes AUC ≈ 0.8.
	PlantedLogitVar = 2.0
	// PlantedFMShare is the part of PlantedLogitVar carried by the FM interaction term.
	PlantedFMShare = 0.6
	// PlantedBias is the default Bias: a positive rate of about 0.3.
	PlantedBias = -1.1
)

// maxPlantedDim bounds Planted.Dim.
const maxPlantedDim = 1 << 12

// Planted is a Labeler whose labels come from a known ("planted") logistic-regression or
// factorization-machine model over the row's fids, so that a model trained on the data can
// be judged against the Bayes-optimal predictor (the true probabilities).
//
// # Model
//
// Parameters are keyed by the v2 form of a fid, the form io/dataset reads fids in (it
// converts v1 fids with fid.V1ToV2), so Logit of the fids read back from a file is the logit
// the labels were drawn from, for either Config.FidVersion.
//
// Every fid has a bias weight w_fid ~ N(0, WeightScale²) and, for PlantedFM, a vector
// v_fid ∈ R^Dim with independent N(0, VectorScale²) components. Nothing is stored: the
// parameters of a fid are a hash of (Seed, fid) through splitmix64 and a Box–Muller
// transform, so they are the same in every process and for every data set with the same
// Seed, and an FM model shares its weights w with the LR model of the same Seed. For a row
// whose feature f holds the fids F_f:
//
//	x_f   = Σ_{fid ∈ F_f} v_fid                                 (SUM pooling)
//	logit = Bias + Σ_f Σ_{fid ∈ F_f} w_fid + Σ_{f<f'} <x_f, x_f'>   (the last sum for FM only)
//	p     = sigmoid(logit)
//
// which is exactly the model family of a trainer that sums the "bias" layout of
// PlantedFeatureConfigs (ADDN of column 0), adds a global bias, and takes the pairwise dot
// products of the per-feature blocks of the "vec" layout (CONCAT of columns [1, 1+Dim)).
// Every label of the row is drawn independently: 1 with probability p, else 0.
//
// # Concurrency
//
// A Planted must not be modified while in use. Label only reads it, apart from the optional
// per-row records (Probs, LinearLogits, Labels), which it writes at index Row.Index: rows are
// disjoint, so Label is safe for concurrent use, as Generate requires. Label does not
// allocate.
type Planted struct {
	// Kind is PlantedLR or PlantedFM.
	Kind PlantedKind
	// Dim is the width of the FM vectors (ignored by LR).
	Dim int
	// Seed selects the parameters.
	Seed uint64
	// Bias is the global bias w0.
	Bias float64
	// WeightScale is the standard deviation of the fid weights w_fid.
	WeightScale float64
	// VectorScale is the standard deviation of each component of the fid vectors v_fid.
	VectorScale float64
	// FidVersion is the version of the fids Label sees in Row.Fids (Config.FidVersion): 1
	// converts them to v2 before use; 0 and 2 use them as they are. The methods that take
	// fids (Weight, Vector, Logit, ...) always take v2 fids.
	FidVersion int

	// Probs, when row i < len(Probs), receives float32(p) of row i.
	Probs []float32
	// LinearLogits, when row i < len(LinearLogits), receives the LR part of the logit of
	// row i (Bias + Σ w_fid), which is the whole logit for PlantedLR.
	LinearLogits []float32
	// Labels, when row i < len(Labels), receives the first label drawn for row i.
	Labels []float32
}

// NewPlanted returns a Planted of the given kind, dim and seed with the default scales for
// the features of c: Bias = PlantedBias, and scales such that, if the fids of a row were all
// distinct, the logit would vary around Bias with variance PlantedLogitVar, of which the
// interaction term carries PlantedFMShare for FM. With m the mean number of fids per cell
// and F = c.Features + c.Shared, that is
//
//	WeightScale² = (1 - share)·PlantedLogitVar / (F·m)                 (share = 0 for LR)
//	VectorScale⁴ = share·PlantedLogitVar / (Dim · F(F-1)/2 · m²)
//
// Zipf-frequent fids repeat across rows, so the variance over a data set departs from the
// target by an amount that depends on Seed. dim is ignored (and may be 0) for LR.
func NewPlanted(kind PlantedKind, c Config, dim int, seed uint64) (*Planted, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := &Planted{Kind: kind, Dim: dim, Seed: seed, Bias: PlantedBias, FidVersion: c.FidVersion}
	F := float64(c.Features + c.Shared)
	fids := max(float64(c.FidsMin+c.FidsMax)/2, 0.5)
	share := 0.0
	if kind == PlantedFM && F > 1 {
		share = PlantedFMShare
	}
	m.WeightScale = math.Sqrt((1 - share) * PlantedLogitVar / (F * fids))
	if kind == PlantedFM && dim > 0 && F > 1 {
		m.VectorScale = math.Sqrt(math.Sqrt(share * PlantedLogitVar / (float64(dim) * F * (F - 1) / 2 * fids * fids)))
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Validate reports the first problem of m, wrapping ErrConfig.
func (m *Planted) Validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case m.Kind != PlantedLR && m.Kind != PlantedFM:
		return fmt.Errorf("%w: planted model kind %v (want lr or fm)", ErrConfig, m.Kind)
	case m.Kind == PlantedFM && (m.Dim < 1 || m.Dim > maxPlantedDim):
		return fmt.Errorf("%w: planted FM dim %d must be in [1, %d]", ErrConfig, m.Dim, maxPlantedDim)
	case !finite(m.Bias):
		return fmt.Errorf("%w: planted bias %v must be finite", ErrConfig, m.Bias)
	case !finite(m.WeightScale) || m.WeightScale < 0 || !finite(m.VectorScale) || m.VectorScale < 0:
		return fmt.Errorf("%w: planted scales %v and %v must be finite and >= 0", ErrConfig, m.WeightScale, m.VectorScale)
	case m.FidVersion < 0 || m.FidVersion > 2:
		return fmt.Errorf("%w: planted fid version %d (want 1 or 2, or 0 for 2)", ErrConfig, m.FidVersion)
	}
	return nil
}

// fidKey is the hash of (seed, fid) that the parameters of the v2 fid fid derive from.
func (m *Planted) fidKey(fid uint64) uint64 {
	return mix64(fid ^ mix64(m.Seed+0x6a09e667f3bcc909))
}

// gaussPair returns component pair k of the fid with key key: two independent N(0, 1)
// values from one splitmix64 hash (32 bits for each Box–Muller uniform). Component 0 is the
// weight w, components 1..Dim the vector v.
func gaussPair(key uint64, k int) (float64, float64) {
	h := mix64(key + uint64(k+1)*0x9e3779b97f4a7c15)
	u1 := (float64(h>>32) + 0.5) * 0x1p-32 // (0, 1)
	r := math.Sqrt(-2 * math.Log(u1))
	s, c := math.Sincos(2 * math.Pi * float64(uint32(h)) * 0x1p-32)
	return r * c, r * s
}

// Weight returns the weight w_fid of the v2 fid fid.
func (m *Planted) Weight(fid uint64) float64 {
	w, _ := gaussPair(m.fidKey(fid), 0)
	return m.WeightScale * w
}

// Vector writes the vector v_fid of the v2 fid fid to v, which must have Dim elements.
func (m *Planted) Vector(fid uint64, v []float64) {
	if len(v) != m.Dim {
		panic(fmt.Sprintf("io/synth: Planted.Vector: %d elements, want Dim = %d", len(v), m.Dim))
	}
	key := m.fidKey(fid)
	for c := 1; c <= m.Dim; c++ { // component c is value c%2 of pair c/2
		a, b := gaussPair(key, c/2)
		if c%2 == 1 {
			a = b
		}
		v[c-1] = m.VectorScale * a
	}
}

// Logit returns the logit of a row whose feature f holds the v2 fids fids[f] (in
// SparseFeatures order, as Row.Fids).
func (m *Planted) Logit(fids [][]uint64) float64 {
	logit, _ := m.logits(fids, false)
	return logit
}

// LinearLogit returns the LR part of the logit of a row: Bias + Σ w_fid. It is the whole
// logit for PlantedLR.
func (m *Planted) LinearLogit(fids [][]uint64) float64 {
	_, linear := m.logits(fids, false)
	return linear
}

// Prob returns sigmoid(Logit(fids)), the probability of a positive label.
func (m *Planted) Prob(fids [][]uint64) float64 { return sigmoid(m.Logit(fids)) }

// logits returns the logit and its linear part. Component c of a fid's parameters (0 the
// weight, 1..Dim the vector) is value c%2 of gaussPair(key, c/2); for each pair it sums the
// components per feature and adds the pairwise products of the vector components through
// Σ_{f<f'} x_f·x_f' = ((Σ_f x_f)² - Σ_f x_f²)/2, so it needs no buffer. v1 says the fids
// are v1 fids, to be converted to v2.
func (m *Planted) logits(fids [][]uint64, v1 bool) (logit, linear float64) {
	dim := 0
	if m.Kind == PlantedFM {
		dim = m.Dim
	}
	var wsum, inter float64
	for k := 0; 2*k <= dim; k++ {
		var s0, q0, s1, q1 float64
		for _, cell := range fids {
			var x0, x1 float64
			for _, f := range cell {
				if v1 {
					f = fid.V1ToV2(f)
				}
				a, b := gaussPair(m.fidKey(f), k)
				x0 += a
				x1 += b
			}
			s0 += x0
			q0 += x0 * x0
			s1 += x1
			q1 += x1 * x1
		}
		if k == 0 {
			wsum = s0 // component 0: the weights
		} else {
			inter += (s0*s0 - q0) / 2
		}
		if 2*k+1 <= dim {
			inter += (s1*s1 - q1) / 2
		}
	}
	linear = m.Bias + m.WeightScale*wsum
	return linear + m.VectorScale*m.VectorScale*inter, linear
}

// sigmoid returns 1/(1+e^-z).
func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

// Label implements Labeler: every label is 1 with probability Prob(row.Fids), drawn from r
// (53 bits of one r.Uint64 per label). It records p, the linear logit and the first label
// when row.Index falls in Probs, LinearLogits or Labels.
func (m *Planted) Label(r *rand.Rand, row *Row, labels []float32) {
	logit, linear := m.logits(row.Fids, m.FidVersion == 1)
	p := sigmoid(logit)
	for i := range labels {
		labels[i] = 0
		if float64(r.Uint64()>>11)*0x1p-53 < p {
			labels[i] = 1
		}
	}
	i := row.Index
	if i < int64(len(m.Probs)) {
		m.Probs[i] = float32(p)
	}
	if i < int64(len(m.LinearLogits)) {
		m.LinearLogits[i] = float32(linear)
	}
	if i < int64(len(m.Labels)) && len(labels) > 0 {
		m.Labels[i] = labels[0]
	}
}

// PlantedFeatureConfigs returns the FeatureConfigs of the model family of Planted for the
// features of c, with FM vectors of width dim:
//
//   - every sparse feature is in the one table "emb", with slice_dims [1, dim] (a bias
//     column then the vector) and SUM pooling;
//   - layout "bias": ADDN of column [0, 1) of every feature, shape [-1, 1];
//   - layout "vec": CONCAT of columns [1, 1+dim) of every feature in SparseFeatures order,
//     shape [-1, Features·dim].
//
// Planted data has no shared features: it returns an error wrapping ErrConfig when
// c.Shared > 0. A dense feature has no embedding and is not listed.
func PlantedFeatureConfigs(c Config, dim int) (*examplepb.FeatureConfigs, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch {
	case c.Shared > 0:
		return nil, fmt.Errorf("%w: planted data has no shared features (shared %d)", ErrConfig, c.Shared)
	case dim < 1 || dim > maxPlantedDim:
		return nil, fmt.Errorf("%w: planted dim %d must be in [1, %d]", ErrConfig, dim, maxPlantedDim)
	}
	fc := &examplepb.FeatureConfigs{
		FeatureConfigs: map[string]*examplepb.FeatureConfig{},
		OutConfigs:     map[string]*examplepb.OutConfig{},
	}
	bias := &examplepb.OutConfig{OutType: examplepb.OutType_ADDN, Shape: []*examplepb.TensorShape{{Dims: []int32{-1, 1}}}}
	vec := &examplepb.OutConfig{OutType: examplepb.OutType_CONCAT,
		Shape: []*examplepb.TensorShape{{Dims: []int32{-1, int32(c.Features * dim)}}}}
	for _, f := range c.SparseFeatures() {
		fc.FeatureConfigs[f.Name] = &examplepb.FeatureConfig{Table: "emb", PoolingType: examplepb.PoolingType_SUM, SliceDims: []int32{1, int32(dim)}}
		bias.SliceConfigs = append(bias.SliceConfigs, &examplepb.SliceConfig{FeatureName: f.Name, Start: 0, End: 1})
		vec.SliceConfigs = append(vec.SliceConfigs, &examplepb.SliceConfig{FeatureName: f.Name, Start: 1, End: int32(1 + dim)})
	}
	fc.OutConfigs["bias"] = bias
	fc.OutConfigs["vec"] = vec
	return fc, nil
}

// PlantedSet is a planted data set as GeneratePlanted writes it.
type PlantedSet struct {
	Train, Eval Result
	// TrainConfig and EvalConfig are the data configs of the two parts (their seeds:
	// splitmix64 outputs 1 and 2 of the model's seed).
	TrainConfig, EvalConfig Config
	// EvalProbs, EvalLinear and EvalLabels are, per eval row, the true probability, the
	// logit of the model's linear part and the drawn label.
	EvalProbs, EvalLinear, EvalLabels []float32
}

// GeneratePlanted writes a planted data set into dir: train/ (c's rows and files, data
// seed splitmix64(c.Seed, 1)) and eval/ (evalRows rows in evalFiles files, data seed
// splitmix64(c.Seed, 2)), both labelled by m. monolith gen --planted and the benchmark
// suite's training section write their data with it.
func GeneratePlanted(ctx context.Context, c Config, m *Planted, evalRows int64, evalFiles int, dir string) (PlantedSet, error) {
	train, eval := c, c
	train.Seed = mix.SplitMix(c.Seed, 1)
	eval.Seed, eval.Rows, eval.Files = mix.SplitMix(c.Seed, 2), evalRows, evalFiles
	if err := eval.Validate(); err != nil {
		return PlantedSet{}, fmt.Errorf("eval set: %w", err)
	}
	if err := m.Validate(); err != nil {
		return PlantedSet{}, err
	}
	trainM := *m
	train.Labeler = &trainM
	trainRes, err := Generate(ctx, train, filepath.Join(dir, "train"))
	if err != nil {
		return PlantedSet{}, fmt.Errorf("train set: %w", err)
	}
	evalM := *m
	evalM.Probs = make([]float32, eval.Rows)
	evalM.LinearLogits = make([]float32, eval.Rows)
	evalM.Labels = make([]float32, eval.Rows)
	eval.Labeler = &evalM
	evalRes, err := Generate(ctx, eval, filepath.Join(dir, "eval"))
	if err != nil {
		return PlantedSet{}, fmt.Errorf("eval set: %w", err)
	}
	return PlantedSet{Train: trainRes, Eval: evalRes, TrainConfig: train, EvalConfig: eval,
		EvalProbs: evalM.Probs, EvalLinear: evalM.LinearLogits, EvalLabels: evalM.Labels}, nil
}
