package model_test

import (
	"fmt"

	kmodel "github.com/monolith-go/monolith/kernels/model"
	"github.com/monolith-go/monolith/transforms/model"
)

// biasOnly is a user's model: the logit of a row is its bias input plus one learned
// offset. It reads only the layout output named spec.Bias.
type biasOnly struct {
	bias int // input index
	rows int
}

func (m *biasOnly) Params() []kmodel.Param {
	return []kmodel.Param{{Name: "offset", Rows: 1, Cols: 1}}
}

func (m *biasOnly) Reads(i int) bool { return i == m.bias }

func (m *biasOnly) Forward(b kmodel.Batch, logits []float32) error {
	m.rows = b.Rows
	for r := range b.Rows {
		logits[r] = b.In[m.bias][r] + b.Params[0][0]
	}
	return nil
}

func (m *biasOnly) Backward(dlogits []float32, g kmodel.Grads) error {
	g.Params[0][0] = 0
	for r := range m.rows {
		g.In[m.bias][r] = dlogits[r]
		g.Params[0][0] += dlogits[r]
	}
	return nil
}

// newBiasOnly finds the bias input among the layout outputs.
func newBiasOnly(spec model.Spec, inputs []kmodel.Input) (model.Net, error) {
	for i, in := range inputs {
		if in.Name == spec.Bias && in.Width == 1 {
			return &biasOnly{bias: i}, nil
		}
	}
	return nil, fmt.Errorf("bias_only: no [B, 1] layout output named %q", spec.Bias)
}

// A model registered from an init function is known by name to the transforms, and so to
// every worker of a pipeline built from the program and to `model:` in a training config.
func init() {
	if err := model.Register("bias_only", newBiasOnly); err != nil {
		panic(err)
	}
}

func ExampleRegister() {
	net, err := model.New(model.Spec{Name: "bias_only", Bias: "bias"},
		[]kmodel.Input{{Name: "bias", Width: 1}, {Name: "vec", Width: 8, Fields: []int{4, 4}}})
	if err != nil {
		panic(err)
	}
	logits := make([]float32, 2)
	if err := net.Forward(kmodel.Batch{Rows: 2, In: [][]float32{{0.5, -1}, make([]float32, 16)}, Params: [][]float32{{0.25}}}, logits); err != nil {
		panic(err)
	}
	fmt.Println(model.Names())
	fmt.Println(net.Params()[0].Name, net.Reads(0), net.Reads(1), logits)
	// Output:
	// [bias_only deepfm fm lr]
	// offset true false [0.75 -0.75]
}
