package optimizer

import (
	"errors"
	"fmt"
	"math"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

var (
	// ErrConfig is wrapped by New's errors for a missing or invalid configuration.
	ErrConfig = errors.New("invalid optimizer config")
	// ErrNotImplemented is wrapped by New's error for the optimizers Monolith's open-source
	// build cannot construct either: dynamic_wd_adagrad, group_ftrl and dc.
	ErrNotImplemented = errors.New("not implemented")
	// ErrDump is wrapped by Restore's errors for a dump of the wrong kind or shape.
	ErrDump = errors.New("invalid optimizer dump")
)

// New returns the update rule of a segment of dim weights configured by cfg, wrapped in
// the binary16 stochastic-rounding decorator when cfg.stochastic_rounding_float16 is set.
// The dim_size inside the chosen config is ignored: dim wins, as the segment's dim_size
// does in Monolith. Unset fields take the proto2 defaults of spec/ps.md §3.2.
//
// Errors wrap ErrConfig for a nil cfg, a cfg with no optimizer set, dim ≤ 0 and a
// batch_softmax dim other than 1, and ErrNotImplemented for dynamic_wd_adagrad, group_ftrl
// and dc.
func New(cfg *hashtablepb.OptimizerConfig, dim int) (Optimizer, error) {
	if cfg == nil {
		return nil, fmt.Errorf("ps/optimizer: %w: nil OptimizerConfig", ErrConfig)
	}
	if dim <= 0 {
		return nil, fmt.Errorf("ps/optimizer: %w: dim %d must be positive", ErrConfig, dim)
	}
	o, err := newRule(cfg, dim)
	if err != nil {
		return nil, err
	}
	if cfg.GetStochasticRoundingFloat16() {
		o = &fp16Rounding{Optimizer: o}
	}
	return o, nil
}

func newRule(cfg *hashtablepb.OptimizerConfig, dim int) (Optimizer, error) {
	switch t := cfg.GetType().(type) {
	case *hashtablepb.OptimizerConfig_Sgd:
		c := t.Sgd
		return &sgd{base{"sgd", dim, c.GetLearningRate(), c.GetWarmupSteps()}}, nil
	case *hashtablepb.OptimizerConfig_Adagrad:
		c := t.Adagrad
		return &adagrad{
			base: base{"adagrad", dim, c.GetLearningRate(), c.GetWarmupSteps()},
			init: c.GetInitialAccumulatorValue(),
			wd:   c.GetWeightDecayFactor(),
		}, nil
	case *hashtablepb.OptimizerConfig_Ftrl:
		c := t.Ftrl
		return &ftrl{
			base: base{"ftrl", dim, c.GetLearningRate(), c.GetWarmupSteps()},
			init: c.GetInitialAccumulatorValue(),
			beta: c.GetBeta(),
			l1:   c.GetL1RegularizationStrength(),
			l2:   c.GetL2RegularizationStrength(),
		}, nil
	case *hashtablepb.OptimizerConfig_Adadelta:
		c := t.Adadelta
		return &adadelta{
			base: base{"adadelta", dim, c.GetLearningRate(), c.GetWarmupSteps()},
			wd:   c.GetWeightDecayFactor(),
			rho:  c.GetAveragingRatio(),
			eps:  c.GetEpsilon(),
		}, nil
	case *hashtablepb.OptimizerConfig_Adam:
		c := t.Adam
		return &adam{
			base:     base{"adam", dim, c.GetLearningRate(), c.GetWarmupSteps()},
			beta1:    c.GetBeta1(),
			beta2:    c.GetBeta2(),
			wd:       c.GetWeightDecayFactor(),
			eps:      c.GetEpsilon(),
			nesterov: c.GetUseNesterov(),
		}, nil
	case *hashtablepb.OptimizerConfig_Amsgrad:
		c := t.Amsgrad
		return &adam{
			base:     base{"amsgrad", dim, c.GetLearningRate(), c.GetWarmupSteps()},
			beta1:    c.GetBeta1(),
			beta2:    c.GetBeta2(),
			wd:       c.GetWeightDecayFactor(),
			eps:      c.GetEpsilon(),
			nesterov: c.GetUseNesterov(),
			ams:      true,
		}, nil
	case *hashtablepb.OptimizerConfig_Momentum:
		c := t.Momentum
		return &momentum{
			base:     base{"momentum", dim, c.GetLearningRate(), c.GetWarmupSteps()},
			wd:       c.GetWeightDecayFactor(),
			mu:       c.GetMomentum(),
			nesterov: c.GetUseNesterov(),
		}, nil
	case *hashtablepb.OptimizerConfig_MovingAverage:
		return &movingAverage{
			base: base{kind: "moving_average", dim: dim},
			mu:   t.MovingAverage.GetMomentum(),
		}, nil
	case *hashtablepb.OptimizerConfig_Rmsprop:
		c := t.Rmsprop
		return &rmsprop{
			base: base{kind: "rmsprop", dim: dim, lr: c.GetLearningRate()},
			wd:   c.GetWeightDecayFactor(),
			mu:   c.GetMomentum(),
			v1:   true,
		}, nil
	case *hashtablepb.OptimizerConfig_Rmspropv2:
		c := t.Rmspropv2
		return &rmsprop{
			base: base{kind: "rmspropv2", dim: dim, lr: c.GetLearningRate()},
			wd:   c.GetWeightDecayFactor(),
			mu:   c.GetMomentum(),
		}, nil
	case *hashtablepb.OptimizerConfig_GroupAdagrad:
		c := t.GroupAdagrad
		return &groupAdagrad{
			base: base{"group_adagrad", dim, c.GetLearningRate(), c.GetWarmupSteps()},
			init: c.GetInitialAccumulatorValue(),
			beta: c.GetBeta(),
			l2:   c.GetL2RegularizationStrength(),
			wd:   c.GetWeightDecayFactor(),
		}, nil
	case *hashtablepb.OptimizerConfig_BatchSoftmax:
		if dim != 1 {
			return nil, fmt.Errorf("ps/optimizer: batch_softmax: %w: dim %d, must be 1", ErrConfig, dim)
		}
		return &batchSoftmax{base{kind: "batch_softmax", dim: dim, lr: t.BatchSoftmax.GetLearningRate()}}, nil
	case *hashtablepb.OptimizerConfig_DynamicWdAdagrad:
		return nil, notImplemented("dynamic_wd_adagrad")
	case *hashtablepb.OptimizerConfig_GroupFtrl:
		return nil, notImplemented("group_ftrl")
	case *hashtablepb.OptimizerConfig_Dc:
		return nil, notImplemented("dc")
	case nil:
		return nil, fmt.Errorf("ps/optimizer: %w: OptimizerConfig has no optimizer set", ErrConfig)
	default:
		return nil, fmt.Errorf("ps/optimizer: %w: unknown optimizer %T", ErrConfig, t)
	}
}

func notImplemented(kind string) error {
	return fmt.Errorf("ps/optimizer: %w: %s (Monolith's open-source build cannot construct it either)", ErrNotImplemented, kind)
}

// base holds what every rule shares: its kind, dim and default learning-rate schedule.
type base struct {
	kind   string
	dim    int
	lr     float32 // configured learning_rate
	warmup int64   // warmup_steps; ≤ 0 means none
}

func (b *base) Dim() int     { return b.dim }
func (b *base) Kind() string { return b.kind }

// LearningRate is the configured rate, or with warmup_steps W > 0 the linear ramp
// lr·min(step, W)/W from 0 (TF's polynomial decay of power 1 that Monolith's Python side
// installs); negative steps give 0.
func (b *base) LearningRate(step int64) float32 {
	if b.warmup <= 0 {
		return b.lr
	}
	s := min(max(step, 0), b.warmup)
	return float32(float64(b.lr) * float64(s) / float64(b.warmup))
}

// dumpKind is the SingleOptimizerDump oneof name of d ("" when d or its type is unset).
func dumpKind(d *hashtablepb.SingleOptimizerDump) string {
	switch d.GetType().(type) {
	case *hashtablepb.SingleOptimizerDump_Adagrad:
		return "adagrad"
	case *hashtablepb.SingleOptimizerDump_Sgd:
		return "sgd"
	case *hashtablepb.SingleOptimizerDump_Ftrl:
		return "ftrl"
	case *hashtablepb.SingleOptimizerDump_DynamicWdAdagrad:
		return "dynamic_wd_adagrad"
	case *hashtablepb.SingleOptimizerDump_Adadelta:
		return "adadelta"
	case *hashtablepb.SingleOptimizerDump_Adam:
		return "adam"
	case *hashtablepb.SingleOptimizerDump_Amsgrad:
		return "amsgrad"
	case *hashtablepb.SingleOptimizerDump_Momentum:
		return "momentum"
	case *hashtablepb.SingleOptimizerDump_Rmsprop:
		return "rmsprop"
	case *hashtablepb.SingleOptimizerDump_Rmspropv2:
		return "rmspropv2"
	case *hashtablepb.SingleOptimizerDump_GroupFtrl:
		return "group_ftrl"
	case *hashtablepb.SingleOptimizerDump_BatchSoftmax:
		return "batch_softmax"
	case *hashtablepb.SingleOptimizerDump_GroupAdagrad:
		return "group_adagrad"
	}
	return ""
}

// checkDump verifies that d holds this rule's kind and that state can hold the state.
func (b *base) checkDump(state []float32, d *hashtablepb.SingleOptimizerDump, stateLen int) error {
	if got := dumpKind(d); got != b.kind {
		if got == "" {
			got = "no optimizer state"
		}
		return fmt.Errorf("ps/optimizer: restore %s: %w: dump holds %s", b.kind, ErrDump, got)
	}
	if len(state) < stateLen {
		return fmt.Errorf("ps/optimizer: restore %s: state has %d words, need %d", b.kind, len(state), stateLen)
	}
	return nil
}

// checkField verifies that a repeated field of the dump has one value per weight.
func (b *base) checkField(name string, v []float32) error {
	if len(v) != b.dim {
		return fmt.Errorf("ps/optimizer: restore %s: %w: field %s has %d values, want %d", b.kind, ErrDump, name, len(v), b.dim)
	}
	return nil
}

// checkScalar verifies that an optional scalar field of the dump is present.
func (b *base) checkScalar(name string, present bool) error {
	if !present {
		return fmt.Errorf("ps/optimizer: restore %s: %w: field %s is missing", b.kind, ErrDump, name)
	}
	return nil
}

// span returns s[:n], panicking when len(s) < n (not merely cap(s)): a rule never writes
// past the slice the caller handed it. It inlines into the rules' Step methods.
func span(s []float32, n int) []float32 {
	if len(s) < n {
		panic(shortSliceError{len(s), n})
	}
	return s[:n]
}

// shortSliceError is the panic value of span.
type shortSliceError struct{ got, want int }

func (e shortSliceError) Error() string {
	return fmt.Sprintf("ps/optimizer: slice has %d values, need %d", e.got, e.want)
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
