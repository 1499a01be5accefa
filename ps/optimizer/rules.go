package optimizer

import (
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// Each rule's Step reslices its inputs with span first: the resulting equal lengths let
// the compiler drop the bounds checks of the element loop.

// ---- SGD: w ← w − α·g; no state ----

type sgd struct{ base }

func (o *sgd) StateLen() int    { return 0 }
func (o *sgd) Init(_ []float32) {}

func (o *sgd) Step(w, g, _ []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	for i := range w {
		w[i] -= lr * g[i]
	}
}

// Dump returns an empty SgdOptimizerDump element, as Monolith does.
func (o *sgd) Dump(_ []float32) *hashtablepb.SingleOptimizerDump {
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Sgd{Sgd: &hashtablepb.SgdOptimizerDump{}}}
}

func (o *sgd) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	return o.checkDump(state, d, 0)
}

// ---- Adagrad: state norm[d] ----

type adagrad struct {
	base
	init, wd float32
}

func (o *adagrad) StateLen() int { return o.dim }

func (o *adagrad) Init(state []float32) {
	fill(span(state, o.dim), o.init)
}

func (o *adagrad) Step(w, g, state []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	norm := span(state, len(w))
	wd := o.wd
	for i := range w {
		gi := g[i] + wd*w[i]
		n := norm[i] + gi*gi
		norm[i] = n
		w[i] -= lr / sqrt32(n) * gi
	}
}

func (o *adagrad) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Adagrad{
		Adagrad: &hashtablepb.AdagradOptimizerDump{Norm: slices.Clone(span(state, o.dim))},
	}}
}

func (o *adagrad) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	if err := o.checkDump(state, d, o.dim); err != nil {
		return err
	}
	norm := d.GetAdagrad().GetNorm()
	if err := o.checkField("norm", norm); err != nil {
		return err
	}
	copy(state, norm)
	return nil
}

// ---- FTRL-Proximal: state norm[d], zero[d] ----

type ftrl struct {
	base
	init, beta, l1, l2 float32
}

func (o *ftrl) StateLen() int { return 2 * o.dim }

func (o *ftrl) Init(state []float32) {
	state = span(state, 2*o.dim)
	fill(state[:o.dim], o.init)
	fill(state[o.dim:], 0)
}

func (o *ftrl) Step(w, g, state []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	state = span(state, 2*len(w))
	norm := state[:len(w)]
	zero := state[len(w):][:len(w)]
	l1, l2, beta := o.l1, o.l2, o.beta
	for i := range w {
		gi := g[i]
		n := norm[i] + gi*gi
		sqrtN := sqrt32(n)
		sigma := (sqrtN - sqrt32(norm[i])) / lr
		z := zero[i] + (gi - sigma*w[i])
		zero[i] = z
		norm[i] = n
		if abs32(z) > l1 {
			w[i] = lr * (sign32(z)*l1 - z) / (sqrtN + beta + l2*lr)
		} else {
			w[i] = 0
		}
	}
}

func (o *ftrl) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	state = span(state, 2*o.dim)
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Ftrl{
		Ftrl: &hashtablepb.FtrlOptimizerDump{
			Zero: slices.Clone(state[o.dim:]),
			Norm: slices.Clone(state[:o.dim]),
		},
	}}
}

func (o *ftrl) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	if err := o.checkDump(state, d, 2*o.dim); err != nil {
		return err
	}
	f := d.GetFtrl()
	if err := o.checkField("zero", f.GetZero()); err != nil {
		return err
	}
	if err := o.checkField("norm", f.GetNorm()); err != nil {
		return err
	}
	copy(state[:o.dim], f.GetNorm())
	copy(state[o.dim:2*o.dim], f.GetZero())
	return nil
}

// ---- Adadelta: state accum[d], accum_update[d] ----

type adadelta struct {
	base
	wd, rho, eps float32
}

func (o *adadelta) StateLen() int { return 2 * o.dim }

func (o *adadelta) Init(state []float32) { fill(span(state, 2*o.dim), 0) }

func (o *adadelta) Step(w, g, state []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	state = span(state, 2*len(w))
	accum := state[:len(w)]
	update := state[len(w):][:len(w)]
	wd, rho, eps := o.wd, o.rho, o.eps
	keep := 1 - rho
	for i := range w {
		gi := g[i] + wd*w[i]
		a := accum[i]*rho + gi*gi*keep
		u := sqrt32(update[i]+eps) / sqrt32(a+eps) * gi
		w[i] -= u * lr
		update[i] = update[i]*rho + u*u*keep
		accum[i] = a
	}
}

func (o *adadelta) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	state = span(state, 2*o.dim)
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Adadelta{
		Adadelta: &hashtablepb.AdadeltaOptimizerDump{
			Accum:       slices.Clone(state[:o.dim]),
			AccumUpdate: slices.Clone(state[o.dim:]),
		},
	}}
}

func (o *adadelta) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	if err := o.checkDump(state, d, 2*o.dim); err != nil {
		return err
	}
	a := d.GetAdadelta()
	if err := o.checkField("accum", a.GetAccum()); err != nil {
		return err
	}
	if err := o.checkField("accum_update", a.GetAccumUpdate()); err != nil {
		return err
	}
	copy(state[:o.dim], a.GetAccum())
	copy(state[o.dim:2*o.dim], a.GetAccumUpdate())
	return nil
}

// ---- Adam: state m[d], v[d], beta1_power, beta2_power ----

type adam struct {
	base
	beta1, beta2, wd, eps float32
	nesterov              bool
}

func (o *adam) StateLen() int { return 2*o.dim + 2 }

func (o *adam) Init(state []float32) {
	state = span(state, 2*o.dim+2)
	fill(state[:2*o.dim], 0)
	state[2*o.dim] = o.beta1
	state[2*o.dim+1] = o.beta2
}

// biasCorrected is the step's learning rate α·√(1 − β2^t)/(1 − β1^t).
func (o *adam) biasCorrected(lr, beta1Power, beta2Power float32) float32 {
	return lr * sqrt32(1-beta2Power) / (1 - beta1Power)
}

func (o *adam) Step(w, g, state []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	d := len(w)
	state = span(state, 2*d+2)
	m := state[:d]
	v := state[d:][:len(w)]
	powers := state[2*d:][:2]
	lrt := o.biasCorrected(lr, powers[0], powers[1])
	b1, b2, wd, eps := o.beta1, o.beta2, o.wd, o.eps
	k1, k2 := 1-b1, 1-b2
	for i := range w {
		gi := g[i] + wd*w[i]
		mi := m[i] + (gi-m[i])*k1
		vi := v[i] + (gi*gi-v[i])*k2
		if o.nesterov {
			w[i] -= ((gi*k1 + b1*mi) * lrt) / (sqrt32(vi) + eps)
		} else {
			w[i] -= (mi * lrt) / (sqrt32(vi) + eps)
		}
		m[i] = mi
		v[i] = vi
	}
	powers[0] *= b1
	powers[1] *= b2
}

func (o *adam) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	d := o.dim
	state = span(state, 2*d+2)
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Adam{
		Adam: &hashtablepb.AdamOptimizerDump{
			M:          slices.Clone(state[:d]),
			V:          slices.Clone(state[d : 2*d]),
			Beta1Power: proto.Float32(state[2*d]),
			Beta2Power: proto.Float32(state[2*d+1]),
		},
	}}
}

// Restore writes each bias-correction power into its own slot (Monolith writes both into
// the beta1_power slot).
func (o *adam) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	n := o.dim
	if err := o.checkDump(state, d, 2*n+2); err != nil {
		return err
	}
	a := d.GetAdam()
	if err := o.checkField("m", a.GetM()); err != nil {
		return err
	}
	if err := o.checkField("v", a.GetV()); err != nil {
		return err
	}
	if err := o.checkScalar("beta1_power", a.Beta1Power != nil); err != nil {
		return err
	}
	if err := o.checkScalar("beta2_power", a.Beta2Power != nil); err != nil {
		return err
	}
	copy(state[:n], a.GetM())
	copy(state[n:2*n], a.GetV())
	state[2*n] = a.GetBeta1Power()
	state[2*n+1] = a.GetBeta2Power()
	return nil
}

// ---- AMSGrad: state m[d], v[d], vhat[d], beta1_power, beta2_power ----

type amsgrad struct{ adam }

func (o *amsgrad) StateLen() int { return 3*o.dim + 2 }

func (o *amsgrad) Init(state []float32) {
	state = span(state, 3*o.dim+2)
	fill(state[:3*o.dim], 0)
	state[3*o.dim] = o.beta1
	state[3*o.dim+1] = o.beta2
}

func (o *amsgrad) Step(w, g, state []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	d := len(w)
	state = span(state, 3*d+2)
	m := state[:d]
	v := state[d:][:len(w)]
	vhat := state[2*d:][:len(w)]
	powers := state[3*d:][:2]
	lrt := o.biasCorrected(lr, powers[0], powers[1])
	b1, b2, wd, eps := o.beta1, o.beta2, o.wd, o.eps
	k1, k2 := 1-b1, 1-b2
	for i := range w {
		gi := g[i] + wd*w[i]
		mi := m[i] + (gi-m[i])*k1
		vi := v[i] + (gi*gi-v[i])*k2
		vh := vhat[i]
		if vh < vi { // std::max(vhat, v): keeps vhat when either is NaN
			vh = vi
		}
		if o.nesterov {
			w[i] -= ((gi*k1 + b1*mi) * lrt) / (sqrt32(vh) + eps)
		} else {
			w[i] -= (mi * lrt) / (sqrt32(vh) + eps)
		}
		m[i] = mi
		v[i] = vi
		vhat[i] = vh
	}
	powers[0] *= b1
	powers[1] *= b2
}

func (o *amsgrad) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	d := o.dim
	state = span(state, 3*d+2)
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Amsgrad{
		Amsgrad: &hashtablepb.AmsgradOptimizerDump{
			M:          slices.Clone(state[:d]),
			V:          slices.Clone(state[d : 2*d]),
			Vhat:       slices.Clone(state[2*d : 3*d]),
			Beta1Power: proto.Float32(state[3*d]),
			Beta2Power: proto.Float32(state[3*d+1]),
		},
	}}
}

func (o *amsgrad) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	n := o.dim
	if err := o.checkDump(state, d, 3*n+2); err != nil {
		return err
	}
	a := d.GetAmsgrad()
	for _, f := range [...]struct {
		name string
		v    []float32
	}{{"m", a.GetM()}, {"v", a.GetV()}, {"vhat", a.GetVhat()}} {
		if err := o.checkField(f.name, f.v); err != nil {
			return err
		}
	}
	if err := o.checkScalar("beta1_power", a.Beta1Power != nil); err != nil {
		return err
	}
	if err := o.checkScalar("beta2_power", a.Beta2Power != nil); err != nil {
		return err
	}
	copy(state[:n], a.GetM())
	copy(state[n:2*n], a.GetV())
	copy(state[2*n:3*n], a.GetVhat())
	state[3*n] = a.GetBeta1Power()
	state[3*n+1] = a.GetBeta2Power()
	return nil
}

// ---- Momentum (plain and Nesterov): state n[d] ----

type momentum struct {
	base
	wd, mu   float32
	nesterov bool
}

func (o *momentum) StateLen() int        { return o.dim }
func (o *momentum) Init(state []float32) { fill(span(state, o.dim), 0) }

func (o *momentum) Step(w, g, state []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	n := span(state, len(w))
	wd, mu := o.wd, o.mu
	if o.nesterov {
		for i := range w {
			dx := lr * (g[i] + wd*w[i])
			prev := n[i]
			ni := mu*prev - dx
			w[i] += -mu*prev + (1+mu)*ni
			n[i] = ni
		}
		return
	}
	for i := range w {
		dx := lr * (g[i] + wd*w[i])
		ni := mu*n[i] - dx
		w[i] += ni
		n[i] = ni
	}
}

func (o *momentum) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Momentum{
		Momentum: &hashtablepb.MomentumOptimizerDump{N: slices.Clone(span(state, o.dim))},
	}}
}

func (o *momentum) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	if err := o.checkDump(state, d, o.dim); err != nil {
		return err
	}
	n := d.GetMomentum().GetN()
	if err := o.checkField("n", n); err != nil {
		return err
	}
	copy(state, n)
	return nil
}

// ---- MovingAverage: w ← μ·w + (1−μ)·g; no state, no dump ----

type movingAverage struct {
	base
	mu float32
}

func (o *movingAverage) StateLen() int    { return 0 }
func (o *movingAverage) Init(_ []float32) {}

// LearningRate is 0: the rule has no learning rate and Step ignores the one it gets.
func (o *movingAverage) LearningRate(_ int64) float32 { return 0 }

func (o *movingAverage) Step(w, g, _ []float32, _ float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	mu := o.mu
	keep := 1 - mu
	for i := range w {
		w[i] = mu*w[i] + keep*g[i]
	}
}

// Dump returns nil: MovingAverage contributes no element to an entry's OptimizerDump.
func (o *movingAverage) Dump(_ []float32) *hashtablepb.SingleOptimizerDump { return nil }

// Restore accepts only a nil or empty dump.
func (o *movingAverage) Restore(_ []float32, d *hashtablepb.SingleOptimizerDump) error {
	if k := dumpKind(d); k != "" {
		return o.checkDump(nil, d, 0)
	}
	return nil
}

// ---- RMSProp v1 and v2: state n[d]; float64 arithmetic, float32 storage ----

type rmsprop struct {
	base
	wd, mu float32
	v1     bool // v1 averages dx² with weight 1−μ; v2 adds it whole
}

func (o *rmsprop) StateLen() int        { return o.dim }
func (o *rmsprop) Init(state []float32) { fill(span(state, o.dim), 0) }

// Step follows Monolith's rounding exactly: n is stored as float32 before its square root
// is taken in float32, √n + 1 is a float32 sum, and η and the weight update are float64.
func (o *rmsprop) Step(w, g, state []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	n := span(state, len(w))
	wd, mu, alpha := float64(o.wd), float64(o.mu), float64(lr)
	keep := 1.0
	if o.v1 {
		keep = 1 - mu
	}
	for i := range w {
		dx := float64(g[i]) + wd*float64(w[i])
		ni := float32(mu*float64(n[i]) + keep*dx*dx)
		eta := alpha / float64(sqrt32(ni)+1)
		w[i] = float32(float64(w[i]) - eta*dx)
		n[i] = ni
	}
}

func (o *rmsprop) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	n := slices.Clone(span(state, o.dim))
	if o.v1 {
		return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Rmsprop{
			Rmsprop: &hashtablepb.RmspropOptimizerDump{N: n},
		}}
	}
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Rmspropv2{
		Rmspropv2: &hashtablepb.RmspropV2OptimizerDump{N: n},
	}}
}

func (o *rmsprop) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	if err := o.checkDump(state, d, o.dim); err != nil {
		return err
	}
	n := d.GetRmspropv2().GetN()
	if o.v1 {
		n = d.GetRmsprop().GetN()
	}
	if err := o.checkField("n", n); err != nil {
		return err
	}
	copy(state, n)
	return nil
}

// ---- GroupAdaGrad (group lasso over the segment): state G (one word) ----

type groupAdagrad struct {
	base
	init, beta, l2, wd float32
}

func (o *groupAdagrad) StateLen() int        { return 1 }
func (o *groupAdagrad) Init(state []float32) { span(state, 1)[0] = o.init }

// Step recomputes g + wd·w in its second pass instead of keeping a copy (Monolith
// allocates a vector per call); w is unchanged until that pass overwrites it.
func (o *groupAdagrad) Step(w, g, state []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	state = span(state, 1)
	wd, l2 := o.wd, o.l2
	var maxSq float32
	for i := range w {
		gi := g[i] + wd*w[i]
		if gi*gi > maxSq {
			maxSq = gi * gi
		}
	}
	sum := state[0] + maxSq
	state[0] = sum
	eta := lr / (o.beta + sqrt32(sum))
	var zNorm float32
	for i := range w {
		z := g[i] + wd*w[i] - w[i]/eta
		w[i] = z
		zNorm += z * z
	}
	zNorm = sqrt32(zNorm)
	if zNorm < l2 || zNorm == 0 {
		fill(w, 0)
		return
	}
	k := -eta * (zNorm - l2) / zNorm
	for i := range w {
		w[i] *= k
	}
}

func (o *groupAdagrad) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_GroupAdagrad{
		GroupAdagrad: &hashtablepb.GroupAdaGradOptimizerDump{GradSquareSum: proto.Float32(span(state, 1)[0])},
	}}
}

func (o *groupAdagrad) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	if err := o.checkDump(state, d, 1); err != nil {
		return err
	}
	a := d.GetGroupAdagrad()
	if err := o.checkScalar("grad_square_sum", a.GradSquareSum != nil); err != nil {
		return err
	}
	state[0] = a.GetGradSquareSum()
	return nil
}

// ---- BatchSoftmax: dim 1; state A = int64 last step, little-endian in two words ----

type batchSoftmax struct{ base }

func (o *batchSoftmax) StateLen() int        { return 2 }
func (o *batchSoftmax) Init(state []float32) { storeStep(span(state, 2), 0) }

// Step ignores g. A negative step leaves w and the state unchanged (Monolith aborts the
// process).
func (o *batchSoftmax) Step(w, _, state []float32, lr float32, step int64) {
	w = span(w, 1)
	state = span(state, 2)
	if step < 0 {
		return
	}
	w[0] = (1-lr)*w[0] + lr*float32(step-loadStep(state))
	storeStep(state, step)
}

func (o *batchSoftmax) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	return &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_BatchSoftmax{
		BatchSoftmax: &hashtablepb.BatchSoftmaxOptimizerDump{GlobalStep: proto.Int64(loadStep(span(state, 2)))},
	}}
}

func (o *batchSoftmax) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	if err := o.checkDump(state, d, 2); err != nil {
		return err
	}
	b := d.GetBatchSoftmax()
	if err := o.checkScalar("global_step", b.GlobalStep != nil); err != nil {
		return err
	}
	storeStep(state, b.GetGlobalStep())
	return nil
}

// loadStep and storeStep keep an int64 in two float32 words: low 32 bits first. The words
// hold arbitrary bit patterns (possibly NaNs); Go copies floats bit for bit.
func loadStep(s []float32) int64 {
	return int64(uint64(math.Float32bits(s[0])) | uint64(math.Float32bits(s[1]))<<32)
}

func storeStep(s []float32, v int64) {
	s[0] = math.Float32frombits(uint32(v))
	s[1] = math.Float32frombits(uint32(uint64(v) >> 32))
}

// ---- helpers ----

func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// sign32 is sign(x): −1, 0 or +1 (0 for NaN).
func sign32(x float32) float32 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
