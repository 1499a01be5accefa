package model

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// ErrConfig is wrapped by every error of New; ErrInput by every error of Forward and
// Backward.
var (
	ErrConfig = errors.New("kernels/model: invalid model")
	ErrInput  = errors.New("kernels/model: invalid input")
)

// Kind is a model family.
type Kind int

// Model kinds.
const (
	LR Kind = iota + 1
	FM
	DeepFM
)

// ParseKind parses "lr", "fm" and "deepfm".
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "lr":
		return LR, nil
	case "fm":
		return FM, nil
	case "deepfm", "deep_fm":
		return DeepFM, nil
	}
	return 0, fmt.Errorf("%w: unknown model %q (want lr, fm or deepfm)", ErrConfig, s)
}

// String returns the name ParseKind accepts.
func (k Kind) String() string {
	switch k {
	case LR:
		return "lr"
	case FM:
		return "fm"
	case DeepFM:
		return "deepfm"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Input describes one layout output a model may read.
type Input struct {
	Name   string // the layout output's tensor name
	Width  int    // floats per row
	Fields []int  // widths of its slices, in order (a CONCAT layout's field vectors)
}

// InitKind is how a dense parameter starts.
type InitKind int

// Initializers.
const (
	Zeros   InitKind = iota // all zero
	Uniform                 // uniform in [-Scale, Scale]
)

// Param is one dense parameter: a table of Rows rows of Cols floats, row-major.
type Param struct {
	Name       string
	Rows, Cols int
	Init       InitKind
	Scale      float32 // Uniform: the bound
}

// Size returns Rows·Cols.
func (p Param) Size() int { return p.Rows * p.Cols }

// Spec selects and shapes a model.
type Spec struct {
	Kind   Kind
	Bias   string // name of the [B, 1] bias layout (default "bias")
	Vec    string // name of the CONCAT layout of field vectors (FM, DeepFM; default "vec")
	Hidden []int  // DeepFM: widths of the hidden layers (default [64, 32])
}

// Batch is the input of one step. In holds every layout output (by output index, each
// Rows·Width floats); Params holds every dense parameter (in Params order).
type Batch struct {
	Rows   int
	In     [][]float32
	Params [][]float32
}

// Grads receives the gradients of one step, shaped like Batch.In and Batch.Params.
// Backward overwrites the gradients of the inputs the model reads and of every parameter;
// it leaves the other inputs' gradients alone.
type Grads struct {
	In     [][]float32
	Params [][]float32
}

// Model is a trainable model over layout tensors.
type Model struct {
	spec    Spec
	inputs  []Input
	bias    int // input index
	vec     int // input index, -1 for LR
	fields  int // F
	k       int // field width
	params  []Param
	widths  []int // DeepFM layer widths: in, hidden..., 1
	rows    int
	scratch struct {
		sum []float32   // FM: Σ_i x_i per row, [B·k]
		act [][]float32 // DeepFM: activations of every layer, act[0] is the input view
		dz  [][]float32 // DeepFM: gradients of every layer's pre-activation
	}
	batch Batch
}

// New binds spec to the layout outputs inputs (in output order).
func New(spec Spec, inputs []Input) (*Model, error) {
	if spec.Bias == "" {
		spec.Bias = "bias"
	}
	if spec.Vec == "" {
		spec.Vec = "vec"
	}
	if spec.Kind == DeepFM && len(spec.Hidden) == 0 {
		spec.Hidden = []int{64, 32}
	}
	m := &Model{spec: spec, inputs: inputs, bias: -1, vec: -1}
	for i, in := range inputs {
		switch in.Name {
		case spec.Bias:
			m.bias = i
		case spec.Vec:
			m.vec = i
		}
	}
	if m.bias < 0 {
		return nil, fmt.Errorf("%w: no layout named %q for the bias (layouts: %s)", ErrConfig, spec.Bias, names(inputs))
	}
	if w := inputs[m.bias].Width; w != 1 {
		return nil, fmt.Errorf("%w: bias layout %q is %d wide, want 1", ErrConfig, spec.Bias, w)
	}
	m.params = append(m.params, Param{Name: "w0", Rows: 1, Cols: 1, Init: Zeros})
	switch spec.Kind {
	case LR:
		m.vec = -1
	case FM, DeepFM:
		if m.vec < 0 {
			return nil, fmt.Errorf("%w: %s needs a CONCAT layout named %q (layouts: %s)", ErrConfig, spec.Kind, spec.Vec, names(inputs))
		}
		in := inputs[m.vec]
		if len(in.Fields) == 0 {
			return nil, fmt.Errorf("%w: layout %q has no fields", ErrConfig, in.Name)
		}
		k, sum := in.Fields[0], 0
		for _, w := range in.Fields {
			if w != k || w <= 0 {
				return nil, fmt.Errorf("%w: layout %q: FM needs fields of one positive width, got %v", ErrConfig, in.Name, in.Fields)
			}
			sum += w
		}
		if sum != in.Width {
			return nil, fmt.Errorf("%w: layout %q: fields %v do not add up to its width %d", ErrConfig, in.Name, in.Fields, in.Width)
		}
		m.fields, m.k = len(in.Fields), k
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", ErrConfig, int(spec.Kind))
	}
	if spec.Kind == DeepFM {
		m.widths = append([]int{inputs[m.vec].Width}, spec.Hidden...)
		m.widths = append(m.widths, 1)
		for l := 0; l+1 < len(m.widths); l++ {
			in, out := m.widths[l], m.widths[l+1]
			if out <= 0 {
				return nil, fmt.Errorf("%w: hidden layer width %d", ErrConfig, out)
			}
			// Glorot-uniform weights, zero biases.
			scale := float32(math.Sqrt(6 / float64(in+out)))
			m.params = append(m.params,
				Param{Name: fmt.Sprintf("mlp%d_w", l), Rows: in, Cols: out, Init: Uniform, Scale: scale},
				Param{Name: fmt.Sprintf("mlp%d_b", l), Rows: 1, Cols: out, Init: Zeros})
		}
		m.scratch.act = make([][]float32, len(m.widths))
		m.scratch.dz = make([][]float32, len(m.widths))
	}
	return m, nil
}

func names(inputs []Input) string {
	s := make([]string, len(inputs))
	for i, in := range inputs {
		s[i] = in.Name
	}
	return strings.Join(s, ", ")
}

// Kind returns the model's kind.
func (m *Model) Kind() Kind { return m.spec.Kind }

// Params returns the dense parameters, in the order Batch.Params holds them.
func (m *Model) Params() []Param { return m.params }

// Reads reports whether the model reads layout output i.
func (m *Model) Reads(i int) bool { return i == m.bias || i == m.vec }

func (m *Model) check(b Batch, what string) error {
	if b.Rows < 0 {
		return fmt.Errorf("%w: %s: %d rows", ErrInput, what, b.Rows)
	}
	if len(b.In) != len(m.inputs) {
		return fmt.Errorf("%w: %s: %d layout outputs, the model was built for %d", ErrInput, what, len(b.In), len(m.inputs))
	}
	for _, i := range []int{m.bias, m.vec} {
		if i >= 0 && len(b.In[i]) != b.Rows*m.inputs[i].Width {
			return fmt.Errorf("%w: %s: layout %q has %d floats, want %d rows × %d", ErrInput, what, m.inputs[i].Name, len(b.In[i]), b.Rows, m.inputs[i].Width)
		}
	}
	if len(b.Params) != len(m.params) {
		return fmt.Errorf("%w: %s: %d dense parameters, want %d", ErrInput, what, len(b.Params), len(m.params))
	}
	for j, p := range m.params {
		if len(b.Params[j]) != p.Size() {
			return fmt.Errorf("%w: %s: parameter %q has %d floats, want %d", ErrInput, what, p.Name, len(b.Params[j]), p.Size())
		}
	}
	return nil
}

// Forward writes the logit of every row of b into logits[:b.Rows].
func (m *Model) Forward(b Batch, logits []float32) error {
	if err := m.check(b, "forward"); err != nil {
		return err
	}
	if len(logits) < b.Rows {
		return fmt.Errorf("%w: forward: %d logits for %d rows", ErrInput, len(logits), b.Rows)
	}
	m.batch, m.rows = b, b.Rows
	w0 := b.Params[0][0]
	bias := b.In[m.bias]
	for r := 0; r < b.Rows; r++ {
		logits[r] = w0 + bias[r]
	}
	if m.vec >= 0 {
		m.fmForward(b.In[m.vec], logits)
	}
	if m.spec.Kind == DeepFM {
		m.mlpForward(b.In[m.vec], logits)
	}
	return nil
}

// fmForward adds ½ Σ_d ((Σ_i x_id)² − Σ_i x_id²) to every row's logit and keeps Σ_i x_i.
func (m *Model) fmForward(x, logits []float32) {
	F, k := m.fields, m.k
	m.scratch.sum = grow(m.scratch.sum, m.rows*k)
	for r := 0; r < m.rows; r++ {
		row := x[r*F*k : (r+1)*F*k]
		s := m.scratch.sum[r*k : (r+1)*k]
		clear(s)
		var sq float32
		for i := 0; i < F; i++ {
			v := row[i*k : (i+1)*k]
			for d, e := range v {
				s[d] += e
				sq += e * e
			}
		}
		var ss float32
		for _, e := range s {
			ss += e * e
		}
		logits[r] += 0.5 * (ss - sq)
	}
}

// mlpForward adds the MLP output to every row's logit, keeping every layer's activation.
// Each layer is one matrix product over the batch (gonum's BLAS).
func (m *Model) mlpForward(x, logits []float32) {
	B := m.rows
	act := m.scratch.act
	act[0] = x
	L := len(m.widths) - 1
	for l := 0; l < L; l++ {
		in, out := m.widths[l], m.widths[l+1]
		w, bias := m.batch.Params[1+2*l], m.batch.Params[2+2*l]
		act[l+1] = grow(act[l+1], B*out)
		h := act[l+1]
		for r := 0; r < B; r++ {
			copy(h[r*out:(r+1)*out], bias)
		}
		gemmRows(blas.NoTrans, 1, matrix(act[l], B, in), matrix(w, in, out), 1, matrix(h, B, out))
		if l+1 < L {
			for j, e := range h {
				if e < 0 {
					h[j] = 0
				}
			}
		}
	}
	for r := 0; r < B; r++ {
		logits[r] += act[L][r]
	}
}

// gemmRows is c = alpha·a·op(b) + beta·c, computed in blocks of gemmBlock rows of a and c.
// Each block is small enough that gonum multiplies it on the calling goroutine: over the
// whole batch it would split the product into 64-row blocks on goroutines of its own,
// whose start and hand-back cost more than a batch's layer takes (a few µs of work per
// block), and would take the cores of the steps running beside it. The rows of c are
// independent and, while the inner dimension fits one block, each is summed in the same
// order, so the result is the same bits; a deeper product is left to gonum whole (its
// parallel split also splits the inner dimension, which changes the order of the sums).
func gemmRows(tb blas.Transpose, alpha float32, a, b blas32.General, beta float32, c blas32.General) {
	if a.Cols > gemmBlock {
		blas32.Gemm(blas.NoTrans, tb, alpha, a, b, beta, c)
		return
	}
	for lo := 0; lo < a.Rows; lo += gemmBlock {
		hi := min(lo+gemmBlock, a.Rows)
		blas32.Gemm(blas.NoTrans, tb, alpha, rowsOf(a, lo, hi), b, beta, rowsOf(c, lo, hi))
	}
}

// gemmBlock is gemmRows' block: one 64-row block of gonum's, which multiplies products of
// fewer than 4 blocks (of 64 × 64) on the calling goroutine.
const gemmBlock = 64

// rowsOf is rows [lo, hi) of m.
func rowsOf(m blas32.General, lo, hi int) blas32.General {
	return blas32.General{Rows: hi - lo, Cols: m.Cols, Stride: m.Stride, Data: m.Data[lo*m.Stride : (hi-1)*m.Stride+m.Cols]}
}

// matrix is data as a rows × cols row-major matrix.
func matrix(data []float32, rows, cols int) blas32.General {
	return blas32.General{Rows: rows, Cols: cols, Stride: cols, Data: data[:rows*cols]}
}

// Backward writes into g the gradients of the last Forward's inputs and parameters, given
// dlogits[r] = d loss / d logit of row r.
func (m *Model) Backward(dlogits []float32, g Grads) error {
	b := m.batch
	if len(dlogits) < m.rows {
		return fmt.Errorf("%w: backward: %d logit gradients for %d rows", ErrInput, len(dlogits), m.rows)
	}
	if err := m.check(Batch{Rows: m.rows, In: g.In, Params: g.Params}, "backward gradients"); err != nil {
		return err
	}
	dl := dlogits[:m.rows]
	var s float32
	for _, d := range dl {
		s += d
	}
	g.Params[0][0] = s
	copy(g.In[m.bias], dl)
	if m.vec < 0 {
		return nil
	}
	// d/dx_id of ½((Σx)² − Σx²) = s_d − x_id.
	F, k := m.fields, m.k
	x, dx := b.In[m.vec], g.In[m.vec]
	for r := 0; r < m.rows; r++ {
		s := m.scratch.sum[r*k : (r+1)*k]
		d := dl[r]
		for i := 0; i < F; i++ {
			o := (r*F + i) * k
			for e := 0; e < k; e++ {
				dx[o+e] = d * (s[e] - x[o+e])
			}
		}
	}
	if m.spec.Kind == DeepFM {
		m.mlpBackward(dl, g)
	}
	return nil
}

// mlpBackward backpropagates through the MLP, adding into the input gradient. Per layer:
// the weight gradient is xᵀ·dz, the bias gradient the column sums of dz, and the input
// gradient dz·wᵀ (masked by the ReLU below the first layer), each one matrix product.
func (m *Model) mlpBackward(dl []float32, g Grads) {
	B := m.rows
	L := len(m.widths) - 1
	act, dz := m.scratch.act, m.scratch.dz
	dz[L] = grow(dz[L], B)
	copy(dz[L], dl)
	for l := L - 1; l >= 0; l-- {
		in, out := m.widths[l], m.widths[l+1]
		w := m.batch.Params[1+2*l]
		gw, gb := g.Params[1+2*l], g.Params[2+2*l]
		d := matrix(dz[l+1], B, out)
		blas32.Gemm(blas.Trans, blas.NoTrans, 1, matrix(act[l], B, in), d, 0, matrix(gw, in, out))
		clear(gb)
		for r := 0; r < B; r++ {
			axpy(gb, dz[l+1][r*out:(r+1)*out], 1)
		}
		if l > 0 {
			dz[l] = grow(dz[l], B*in)
			gemmRows(blas.Trans, 1, d, matrix(w, in, out), 0, matrix(dz[l], B, in))
			// ReLU: the activation is zero where the pre-activation was negative.
			for i, xi := range act[l][:B*in] {
				if xi <= 0 {
					dz[l][i] = 0
				}
			}
		} else {
			// g.In[m.vec] already holds the FM part: add to it.
			gemmRows(blas.Trans, 1, d, matrix(w, in, out), 1, matrix(g.In[m.vec], B, in))
		}
	}
}

// axpy adds a·x to y (len(x) == len(y)).
func axpy(y, x []float32, a float32) {
	x = x[:len(y)]
	for j := range y {
		y[j] += a * x[j]
	}
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
