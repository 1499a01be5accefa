package optimizer

import (
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// wrap puts one optimizer config into an OptimizerConfig.
func wrap(c proto.Message) *hashtablepb.OptimizerConfig {
	o := &hashtablepb.OptimizerConfig{}
	switch c := c.(type) {
	case *hashtablepb.SgdOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Sgd{Sgd: c}
	case *hashtablepb.AdagradOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Adagrad{Adagrad: c}
	case *hashtablepb.FtrlOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Ftrl{Ftrl: c}
	case *hashtablepb.DynamicWdAdagradOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_DynamicWdAdagrad{DynamicWdAdagrad: c}
	case *hashtablepb.AdadeltaOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Adadelta{Adadelta: c}
	case *hashtablepb.AdamOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Adam{Adam: c}
	case *hashtablepb.AmsgradOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Amsgrad{Amsgrad: c}
	case *hashtablepb.MomentumOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Momentum{Momentum: c}
	case *hashtablepb.MovingAverageOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_MovingAverage{MovingAverage: c}
	case *hashtablepb.RmspropOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Rmsprop{Rmsprop: c}
	case *hashtablepb.RmspropV2OptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Rmspropv2{Rmspropv2: c}
	case *hashtablepb.DcOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_Dc{Dc: c}
	case *hashtablepb.GroupFtrlOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_GroupFtrl{GroupFtrl: c}
	case *hashtablepb.BatchSoftmaxOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_BatchSoftmax{BatchSoftmax: c}
	case *hashtablepb.GroupAdaGradOptimizerConfig:
		o.Type = &hashtablepb.OptimizerConfig_GroupAdagrad{GroupAdagrad: c}
	default:
		panic(fmt.Sprintf("wrap: %T", c))
	}
	return o
}

func rounded(c *hashtablepb.OptimizerConfig) *hashtablepb.OptimizerConfig {
	c.StochasticRoundingFloat16 = proto.Bool(true)
	return c
}

func mustNew(t testing.TB, cfg *hashtablepb.OptimizerConfig, dim int) Optimizer {
	t.Helper()
	o, err := New(cfg, dim)
	if err != nil {
		t.Fatalf("New(%v, %d): %v", cfg, dim, err)
	}
	return o
}

// entry is one entry's weights and state for an optimizer.
type entry struct {
	w, state []float32
}

func newEntry(o Optimizer, w0 ...float32) *entry {
	e := &entry{w: make([]float32, o.Dim()), state: make([]float32, o.StateLen())}
	copy(e.w, w0)
	o.Init(e.state)
	return e
}

// closeTo reports whether got is within rel·max(|want|, 1e-3) + 1e-9 of want.
func closeTo(got float32, want float64, rel float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(float64(got))
	}
	return math.Abs(float64(got)-want) <= rel*math.Max(math.Abs(want), 1e-3)+1e-9
}

// allKinds is one usable configuration of every optimizer, with its dim.
func allKinds() []struct {
	name string
	cfg  *hashtablepb.OptimizerConfig
	dim  int
} {
	type kc = struct {
		name string
		cfg  *hashtablepb.OptimizerConfig
		dim  int
	}
	return []kc{
		{"sgd", wrap(&hashtablepb.SgdOptimizerConfig{}), 3},
		{"adagrad", wrap(&hashtablepb.AdagradOptimizerConfig{WeightDecayFactor: proto.Float32(0.01)}), 3},
		{"ftrl", wrap(&hashtablepb.FtrlOptimizerConfig{L1RegularizationStrength: proto.Float32(0.01), L2RegularizationStrength: proto.Float32(0.1), Beta: proto.Float32(1)}), 3},
		{"adadelta", wrap(&hashtablepb.AdadeltaOptimizerConfig{}), 3},
		{"adam", wrap(&hashtablepb.AdamOptimizerConfig{}), 3},
		{"adam_nesterov", wrap(&hashtablepb.AdamOptimizerConfig{UseNesterov: proto.Bool(true), WeightDecayFactor: proto.Float32(0.01)}), 3},
		{"amsgrad", wrap(&hashtablepb.AmsgradOptimizerConfig{}), 3},
		{"momentum", wrap(&hashtablepb.MomentumOptimizerConfig{}), 3},
		{"momentum_nesterov", wrap(&hashtablepb.MomentumOptimizerConfig{UseNesterov: proto.Bool(true)}), 3},
		{"moving_average", wrap(&hashtablepb.MovingAverageOptimizerConfig{}), 3},
		{"rmsprop", wrap(&hashtablepb.RmspropOptimizerConfig{}), 3},
		{"rmspropv2", wrap(&hashtablepb.RmspropV2OptimizerConfig{}), 3},
		{"group_adagrad", wrap(&hashtablepb.GroupAdaGradOptimizerConfig{L2RegularizationStrength: proto.Float32(0.01)}), 3},
		{"batch_softmax", wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{}), 1},
		{"sgd_fp16", rounded(wrap(&hashtablepb.SgdOptimizerConfig{})), 3},
		{"adam_fp16", rounded(wrap(&hashtablepb.AdamOptimizerConfig{})), 3},
	}
}
