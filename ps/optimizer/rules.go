package optimizer

import (
	"math"

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
func (o *sgd) Dump(state []float32) *hashtablepb.SingleOptimizerDump { return dumpNew(o, state) }

func (o *sgd) DumpTo(dst *hashtablepb.SingleOptimizerDump, _ []float32) bool {
	if w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_Sgd); !ok || w.Sgd == nil {
		dst.Type = &hashtablepb.SingleOptimizerDump_Sgd{Sgd: &hashtablepb.SgdOptimizerDump{}}
	}
	return true
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
	start := 0
	if n8 := len(w) &^ 7; useAVX2 && n8 > 0 {
		// Eight lanes at a time, each the scalar loop's IEEE operations in its order.
		adagradAVX2(&w[0], &g[0], &norm[0], n8, lr, wd)
		start = n8
	}
	for i := start; i < len(w); i++ {
		gi := g[i] + wd*w[i]
		n := norm[i] + gi*gi
		norm[i] = n
		w[i] -= lr / sqrt32(n) * gi
	}
}

func (o *adagrad) Dump(state []float32) *hashtablepb.SingleOptimizerDump { return dumpNew(o, state) }

func (o *adagrad) DumpTo(dst *hashtablepb.SingleOptimizerDump, state []float32) bool {
	w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_Adagrad)
	if !ok || w.Adagrad == nil {
		w = &hashtablepb.SingleOptimizerDump_Adagrad{Adagrad: &hashtablepb.AdagradOptimizerDump{}}
		dst.Type = w
	}
	w.Adagrad.Norm = append(w.Adagrad.Norm[:0], span(state, o.dim)...)
	return true
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

func (o *ftrl) Dump(state []float32) *hashtablepb.SingleOptimizerDump { return dumpNew(o, state) }

func (o *ftrl) DumpTo(dst *hashtablepb.SingleOptimizerDump, state []float32) bool {
	state = span(state, 2*o.dim)
	w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_Ftrl)
	if !ok || w.Ftrl == nil {
		w = &hashtablepb.SingleOptimizerDump_Ftrl{Ftrl: &hashtablepb.FtrlOptimizerDump{}}
		dst.Type = w
	}
	w.Ftrl.Zero = append(w.Ftrl.Zero[:0], state[o.dim:]...)
	w.Ftrl.Norm = append(w.Ftrl.Norm[:0], state[:o.dim]...)
	return true
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

func (o *adadelta) Dump(state []float32) *hashtablepb.SingleOptimizerDump { return dumpNew(o, state) }

func (o *adadelta) DumpTo(dst *hashtablepb.SingleOptimizerDump, state []float32) bool {
	state = span(state, 2*o.dim)
	w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_Adadelta)
	if !ok || w.Adadelta == nil {
		w = &hashtablepb.SingleOptimizerDump_Adadelta{Adadelta: &hashtablepb.AdadeltaOptimizerDump{}}
		dst.Type = w
	}
	w.Adadelta.Accum = append(w.Adadelta.Accum[:0], state[:o.dim]...)
	w.Adadelta.AccumUpdate = append(w.Adadelta.AccumUpdate[:0], state[o.dim:]...)
	return true
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

// ---- Adam and AMSGrad: state m[d], v[d], (AMSGrad: vhat[d],) beta1_power, beta2_power ----

// adam is Adam, or AMSGrad when ams is set: AMSGrad keeps vhat = max(vhat, v) after the
// moments and divides by √vhat instead of √v; the rest is the same.
type adam struct {
	base
	beta1, beta2, wd, eps float32
	nesterov              bool
	ams                   bool
}

// vecs is the number of per-weight state vectors: m, v (and vhat).
func (o *adam) vecs() int {
	if o.ams {
		return 3
	}
	return 2
}

func (o *adam) StateLen() int { return o.vecs()*o.dim + 2 }

func (o *adam) Init(state []float32) {
	n := o.vecs() * o.dim
	state = span(state, n+2)
	fill(state[:n], 0)
	state[n] = o.beta1
	state[n+1] = o.beta2
}

// biasCorrected is the step's learning rate α·√(1 − β2^t)/(1 − β1^t).
func (o *adam) biasCorrected(lr, beta1Power, beta2Power float32) float32 {
	return lr * sqrt32(1-beta2Power) / (1 - beta1Power)
}

func (o *adam) Step(w, g, state []float32, lr float32, _ int64) {
	w = span(w, o.dim)
	g = span(g, len(w))
	d := len(w)
	n := o.vecs() * d
	state = span(state, n+2)
	m := state[:d]
	v := state[d:][:len(w)]
	vhat := state[n-d:][:len(w)] // AMSGrad's vhat; v for Adam, which never touches it
	powers := state[n:][:2]
	lrt := o.biasCorrected(lr, powers[0], powers[1])
	b1, b2, wd, eps := o.beta1, o.beta2, o.wd, o.eps
	k1, k2 := 1-b1, 1-b2
	ams, nesterov := o.ams, o.nesterov
	for i := range w {
		gi := g[i] + wd*w[i]
		mi := m[i] + (gi-m[i])*k1
		vi := v[i] + (gi*gi-v[i])*k2
		den := vi
		if ams {
			if den = vhat[i]; den < vi { // std::max(vhat, v): keeps vhat when either is NaN
				den = vi
			}
		}
		if nesterov {
			w[i] -= ((gi*k1 + b1*mi) * lrt) / (sqrt32(den) + eps)
		} else {
			w[i] -= (mi * lrt) / (sqrt32(den) + eps)
		}
		m[i] = mi
		v[i] = vi
		if ams {
			vhat[i] = den
		}
	}
	powers[0] *= b1
	powers[1] *= b2
}

func (o *adam) Dump(state []float32) *hashtablepb.SingleOptimizerDump { return dumpNew(o, state) }

func (o *adam) DumpTo(dst *hashtablepb.SingleOptimizerDump, state []float32) bool {
	d := o.dim
	n := o.vecs() * d
	state = span(state, n+2)
	if o.ams {
		w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_Amsgrad)
		if !ok || w.Amsgrad == nil {
			w = &hashtablepb.SingleOptimizerDump_Amsgrad{Amsgrad: &hashtablepb.AmsgradOptimizerDump{}}
			dst.Type = w
		}
		a := w.Amsgrad
		a.M = append(a.M[:0], state[:d]...)
		a.V = append(a.V[:0], state[d:2*d]...)
		a.Vhat = append(a.Vhat[:0], state[2*d:3*d]...)
		setFloat32(&a.Beta1Power, state[n])
		setFloat32(&a.Beta2Power, state[n+1])
		return true
	}
	w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_Adam)
	if !ok || w.Adam == nil {
		w = &hashtablepb.SingleOptimizerDump_Adam{Adam: &hashtablepb.AdamOptimizerDump{}}
		dst.Type = w
	}
	a := w.Adam
	a.M = append(a.M[:0], state[:d]...)
	a.V = append(a.V[:0], state[d:2*d]...)
	setFloat32(&a.Beta1Power, state[n])
	setFloat32(&a.Beta2Power, state[n+1])
	return true
}

// Restore writes each bias-correction power into its own slot (Monolith writes both into
// the beta1_power slot).
func (o *adam) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	dim := o.dim
	n := o.vecs() * dim
	if err := o.checkDump(state, d, n+2); err != nil {
		return err
	}
	var m, v, vhat []float32
	var beta1, beta2 *float32
	if o.ams {
		a := d.GetAmsgrad()
		m, v, vhat, beta1, beta2 = a.GetM(), a.GetV(), a.GetVhat(), a.Beta1Power, a.Beta2Power
	} else {
		a := d.GetAdam()
		m, v, beta1, beta2 = a.GetM(), a.GetV(), a.Beta1Power, a.Beta2Power
	}
	if err := o.checkField("m", m); err != nil {
		return err
	}
	if err := o.checkField("v", v); err != nil {
		return err
	}
	if o.ams {
		if err := o.checkField("vhat", vhat); err != nil {
			return err
		}
	}
	if err := o.checkScalar("beta1_power", beta1 != nil); err != nil {
		return err
	}
	if err := o.checkScalar("beta2_power", beta2 != nil); err != nil {
		return err
	}
	copy(state[:dim], m)
	copy(state[dim:2*dim], v)
	if o.ams {
		copy(state[2*dim:3*dim], vhat)
	}
	state[n] = *beta1
	state[n+1] = *beta2
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

func (o *momentum) Dump(state []float32) *hashtablepb.SingleOptimizerDump { return dumpNew(o, state) }

func (o *momentum) DumpTo(dst *hashtablepb.SingleOptimizerDump, state []float32) bool {
	w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_Momentum)
	if !ok || w.Momentum == nil {
		w = &hashtablepb.SingleOptimizerDump_Momentum{Momentum: &hashtablepb.MomentumOptimizerDump{}}
		dst.Type = w
	}
	w.Momentum.N = append(w.Momentum.N[:0], span(state, o.dim)...)
	return true
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

// DumpTo reports false and leaves dst alone: there is nothing to dump.
func (o *movingAverage) DumpTo(_ *hashtablepb.SingleOptimizerDump, _ []float32) bool { return false }

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

func (o *rmsprop) Dump(state []float32) *hashtablepb.SingleOptimizerDump { return dumpNew(o, state) }

func (o *rmsprop) DumpTo(dst *hashtablepb.SingleOptimizerDump, state []float32) bool {
	n := span(state, o.dim)
	if o.v1 {
		w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_Rmsprop)
		if !ok || w.Rmsprop == nil {
			w = &hashtablepb.SingleOptimizerDump_Rmsprop{Rmsprop: &hashtablepb.RmspropOptimizerDump{}}
			dst.Type = w
		}
		w.Rmsprop.N = append(w.Rmsprop.N[:0], n...)
		return true
	}
	w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_Rmspropv2)
	if !ok || w.Rmspropv2 == nil {
		w = &hashtablepb.SingleOptimizerDump_Rmspropv2{Rmspropv2: &hashtablepb.RmspropV2OptimizerDump{}}
		dst.Type = w
	}
	w.Rmspropv2.N = append(w.Rmspropv2.N[:0], n...)
	return true
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
	return dumpNew(o, state)
}

func (o *groupAdagrad) DumpTo(dst *hashtablepb.SingleOptimizerDump, state []float32) bool {
	w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_GroupAdagrad)
	if !ok || w.GroupAdagrad == nil {
		w = &hashtablepb.SingleOptimizerDump_GroupAdagrad{GroupAdagrad: &hashtablepb.GroupAdaGradOptimizerDump{}}
		dst.Type = w
	}
	setFloat32(&w.GroupAdagrad.GradSquareSum, span(state, 1)[0])
	return true
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
func (o *batchSoftmax) Init(state []float32) { StoreInt64(span(state, 2), 0) }

// Step ignores g. A negative step leaves w and the state unchanged (Monolith aborts the
// process).
func (o *batchSoftmax) Step(w, _, state []float32, lr float32, step int64) {
	w = span(w, 1)
	state = span(state, 2)
	if step < 0 {
		return
	}
	w[0] = (1-lr)*w[0] + lr*float32(step-LoadInt64(state))
	StoreInt64(state, step)
}

func (o *batchSoftmax) Dump(state []float32) *hashtablepb.SingleOptimizerDump {
	return dumpNew(o, state)
}

func (o *batchSoftmax) DumpTo(dst *hashtablepb.SingleOptimizerDump, state []float32) bool {
	w, ok := dst.Type.(*hashtablepb.SingleOptimizerDump_BatchSoftmax)
	if !ok || w.BatchSoftmax == nil {
		w = &hashtablepb.SingleOptimizerDump_BatchSoftmax{BatchSoftmax: &hashtablepb.BatchSoftmaxOptimizerDump{}}
		dst.Type = w
	}
	b := w.BatchSoftmax
	if b.GlobalStep == nil {
		b.GlobalStep = new(int64)
	}
	*b.GlobalStep = LoadInt64(span(state, 2))
	return true
}

func (o *batchSoftmax) Restore(state []float32, d *hashtablepb.SingleOptimizerDump) error {
	if err := o.checkDump(state, d, 2); err != nil {
		return err
	}
	b := d.GetBatchSoftmax()
	if err := o.checkScalar("global_step", b.GlobalStep != nil); err != nil {
		return err
	}
	StoreInt64(state, b.GetGlobalStep())
	return nil
}

// LoadInt64 and StoreInt64 keep an int64 in the two float32 words s[0], s[1]: low 32 bits
// first. The words hold arbitrary bit patterns (possibly NaNs); Go copies floats bit for
// bit. BatchSoftmax keeps its last step this way and ps/table an entry's update time.
func LoadInt64(s []float32) int64 {
	return int64(uint64(math.Float32bits(s[0])) | uint64(math.Float32bits(s[1]))<<32)
}

// StoreInt64 writes v into s[0], s[1] (see LoadInt64).
func StoreInt64(s []float32, v int64) {
	s[0] = math.Float32frombits(uint32(v))
	s[1] = math.Float32frombits(uint32(uint64(v) >> 32))
}

// ---- helpers ----

// dumpNew is Dump through DumpTo: a fresh SingleOptimizerDump, or nil when o dumps nothing.
func dumpNew(o interface {
	DumpTo(*hashtablepb.SingleOptimizerDump, []float32) bool
}, state []float32) *hashtablepb.SingleOptimizerDump {
	d := &hashtablepb.SingleOptimizerDump{}
	if !o.DumpTo(d, state) {
		return nil
	}
	return d
}

// setFloat32 stores v in the optional field *p, allocating it only when unset.
func setFloat32(p **float32, v float32) {
	if *p == nil {
		*p = new(float32)
	}
	**p = v
}

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
