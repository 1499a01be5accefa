package optimizer

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

func TestNewKindsAndStateLen(t *testing.T) {
	const d = 5
	tests := []struct {
		cfg      *hashtablepb.OptimizerConfig
		dim      int
		kind     string
		stateLen int
	}{
		{wrap(&hashtablepb.SgdOptimizerConfig{}), d, "sgd", 0},
		{wrap(&hashtablepb.AdagradOptimizerConfig{}), d, "adagrad", d},
		{wrap(&hashtablepb.FtrlOptimizerConfig{}), d, "ftrl", 2 * d},
		{wrap(&hashtablepb.AdadeltaOptimizerConfig{}), d, "adadelta", 2 * d},
		{wrap(&hashtablepb.AdamOptimizerConfig{}), d, "adam", 2*d + 2},
		{wrap(&hashtablepb.AmsgradOptimizerConfig{}), d, "amsgrad", 3*d + 2},
		{wrap(&hashtablepb.MomentumOptimizerConfig{}), d, "momentum", d},
		{wrap(&hashtablepb.MovingAverageOptimizerConfig{}), d, "moving_average", 0},
		{wrap(&hashtablepb.RmspropOptimizerConfig{}), d, "rmsprop", d},
		{wrap(&hashtablepb.RmspropV2OptimizerConfig{}), d, "rmspropv2", d},
		{wrap(&hashtablepb.GroupAdaGradOptimizerConfig{}), d, "group_adagrad", 1},
		{wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{}), 1, "batch_softmax", 2},
		{rounded(wrap(&hashtablepb.AdamOptimizerConfig{})), d, "adam", 2*d + 2},
	}
	for _, tc := range tests {
		// The config's own dim_size is ignored in favour of the segment dim.
		o := mustNew(t, tc.cfg, tc.dim)
		if o.Kind() != tc.kind || o.Dim() != tc.dim || o.StateLen() != tc.stateLen {
			t.Errorf("%s: Kind, Dim, StateLen = %q, %d, %d; want %q, %d, %d",
				tc.kind, o.Kind(), o.Dim(), o.StateLen(), tc.kind, tc.dim, tc.stateLen)
		}
	}
}

func TestInit(t *testing.T) {
	f := proto.Float32
	tests := []struct {
		cfg  *hashtablepb.OptimizerConfig
		dim  int
		want []float32
	}{
		{wrap(&hashtablepb.AdagradOptimizerConfig{}), 2, []float32{0.1, 0.1}},
		{wrap(&hashtablepb.AdagradOptimizerConfig{InitialAccumulatorValue: f(1)}), 2, []float32{1, 1}},
		{wrap(&hashtablepb.FtrlOptimizerConfig{InitialAccumulatorValue: f(1e-6)}), 2, []float32{1e-6, 1e-6, 0, 0}},
		{wrap(&hashtablepb.AdadeltaOptimizerConfig{}), 1, []float32{0, 0}},
		{wrap(&hashtablepb.AdamOptimizerConfig{}), 2, []float32{0, 0, 0, 0, 0.9, 0.99}},
		{wrap(&hashtablepb.AmsgradOptimizerConfig{Beta1: f(0.5), Beta2: f(0.75)}), 1, []float32{0, 0, 0, 0.5, 0.75}},
		{wrap(&hashtablepb.MomentumOptimizerConfig{}), 2, []float32{0, 0}},
		{wrap(&hashtablepb.RmspropOptimizerConfig{}), 1, []float32{0}},
		{wrap(&hashtablepb.RmspropV2OptimizerConfig{}), 1, []float32{0}},
		{wrap(&hashtablepb.GroupAdaGradOptimizerConfig{}), 4, []float32{0.1}},
		{wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{}), 1, []float32{0, 0}},
	}
	for _, tc := range tests {
		o := mustNew(t, tc.cfg, tc.dim)
		state := make([]float32, o.StateLen())
		for i := range state {
			state[i] = 42
		}
		o.Init(state)
		for i := range tc.want {
			if state[i] != tc.want[i] {
				t.Errorf("%s: Init = %v, want %v", o.Kind(), state, tc.want)
				break
			}
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  *hashtablepb.OptimizerConfig
		dim  int
		is   error
		want string
	}{
		{"nil", nil, 4, ErrConfig, "ps/optimizer: invalid optimizer config: nil OptimizerConfig"},
		{"empty", &hashtablepb.OptimizerConfig{}, 4, ErrConfig, "OptimizerConfig has no optimizer set"},
		{"dim 0", wrap(&hashtablepb.SgdOptimizerConfig{}), 0, ErrConfig, "dim 0 must be positive"},
		{"dim -3", wrap(&hashtablepb.AdagradOptimizerConfig{}), -3, ErrConfig, "dim -3 must be positive"},
		{"batch_softmax dim 2", wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{}), 2, ErrConfig, "batch_softmax: invalid optimizer config: dim 2, must be 1"},
		{"dynamic_wd_adagrad", wrap(&hashtablepb.DynamicWdAdagradOptimizerConfig{}), 4, ErrNotImplemented, "not implemented: dynamic_wd_adagrad"},
		{"group_ftrl", wrap(&hashtablepb.GroupFtrlOptimizerConfig{}), 4, ErrNotImplemented, "not implemented: group_ftrl"},
		{"dc", wrap(&hashtablepb.DcOptimizerConfig{}), 4, ErrNotImplemented, "not implemented: dc"},
		{"group_ftrl rounded", rounded(wrap(&hashtablepb.GroupFtrlOptimizerConfig{})), 4, ErrNotImplemented, "ps/optimizer: not implemented: group_ftrl"},
	}
	for _, tc := range tests {
		o, err := New(tc.cfg, tc.dim)
		if err == nil {
			t.Errorf("%s: New = %v, want an error", tc.name, o)
			continue
		}
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want one wrapping %v containing %q", tc.name, err, tc.is, tc.want)
		}
	}
}

func TestLearningRate(t *testing.T) {
	f := proto.Float32
	warm := mustNew(t, wrap(&hashtablepb.SgdOptimizerConfig{LearningRate: f(0.01), WarmupSteps: proto.Int64(100)}), 1)
	for _, tc := range []struct {
		step int64
		want float32
	}{{-5, 0}, {0, 0}, {1, 0.0001}, {50, 0.005}, {99, 0.0099}, {100, 0.01}, {1 << 40, 0.01}} {
		if got := warm.LearningRate(tc.step); !closeTo(got, float64(tc.want), 1e-6) {
			t.Errorf("warmup LearningRate(%d) = %v, want %v", tc.step, got, tc.want)
		}
	}
	for _, tc := range []struct {
		cfg  *hashtablepb.OptimizerConfig
		want float32
	}{
		{wrap(&hashtablepb.AdagradOptimizerConfig{}), 0.001}, // proto defaults
		{wrap(&hashtablepb.SgdOptimizerConfig{}), 0.01},
		{wrap(&hashtablepb.FtrlOptimizerConfig{}), 0.01},
		{wrap(&hashtablepb.RmspropOptimizerConfig{}), 0.01},
		{wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{}), 0.1},
		{wrap(&hashtablepb.MovingAverageOptimizerConfig{}), 0},
		{wrap(&hashtablepb.AdamOptimizerConfig{LearningRate: f(0.5)}), 0.5},
		{rounded(wrap(&hashtablepb.AdamOptimizerConfig{LearningRate: f(0.5)})), 0.5},
		{wrap(&hashtablepb.GroupAdaGradOptimizerConfig{WarmupSteps: proto.Int64(10)}), 0.005}, // at step 5
	} {
		dim := 1
		o := mustNew(t, tc.cfg, dim)
		if got := o.LearningRate(5); got != tc.want {
			t.Errorf("%s: LearningRate(5) = %v, want %v", o.Kind(), got, tc.want)
		}
	}
}

// TestStepUsesLRArgument checks that Step takes its learning rate from the call, not the
// config, for every rule that has one.
func TestStepUsesLRArgument(t *testing.T) {
	for _, k := range allKinds() {
		if k.name == "moving_average" {
			continue
		}
		o := mustNew(t, k.cfg, k.dim)
		a, b := newEntry(o), newEntry(o)
		g := []float32{1, -2, 3}[:k.dim]
		o.Step(a.w, g, a.state, 0.01, 7)
		o.Step(b.w, g, b.state, 0.02, 7)
		if a.w[0] == b.w[0] {
			t.Errorf("%s: lr 0.01 and 0.02 gave the same weight %v", k.name, a.w[0])
		}
	}
}

func TestStepShortSlicePanics(t *testing.T) {
	o := mustNew(t, wrap(&hashtablepb.AdagradOptimizerConfig{}), 4)
	state := make([]float32, 4)
	o.Init(state)
	buf := make([]float32, 8)
	defer func() {
		if recover() == nil {
			t.Error("Step with len(w) < Dim() did not panic")
		}
		for i, v := range buf[3:] {
			if v != 0 {
				t.Errorf("Step wrote past len(w): buf[%d] = %v", 3+i, v)
			}
		}
	}()
	o.Step(buf[:3], []float32{1, 1, 1, 1}, state, 0.1, 0)
}
