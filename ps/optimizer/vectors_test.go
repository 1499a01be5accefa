package optimizer

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// TestSpecVectors checks every test vector of spec/ps.md §3.6 (Monolith's C++ unit tests).
// The second step runs twice: on the original state and on a fresh state restored from the
// first step's dump; both must give the vector.
func TestSpecVectors(t *testing.T) {
	f := proto.Float32
	tests := []struct {
		name  string
		cfg   *hashtablepb.OptimizerConfig
		dim   int
		lr    float32
		step  int64 // global step of every call
		grads [][]float32
		want  [][]string // w after each step, as printed in the spec
	}{
		{"sgd", wrap(&hashtablepb.SgdOptimizerConfig{}), 1, 0.1, 0,
			[][]float32{{1}}, [][]string{{"-0.1"}}},
		{"adagrad", wrap(&hashtablepb.AdagradOptimizerConfig{InitialAccumulatorValue: f(1)}), 2, 0.1, 0,
			[][]float32{{1, 2}}, [][]string{{"-0.07071067", "-0.08944272"}}},
		{"adagrad weight decay", wrap(&hashtablepb.AdagradOptimizerConfig{InitialAccumulatorValue: f(1), WeightDecayFactor: f(0.1)}), 2, 0.1, 0,
			[][]float32{{1, 2}, {1, 2}}, [][]string{{"-0.07071067", "-0.08944272"}, {"-0.128173", "-0.155943"}}},
		{"ftrl", wrap(&hashtablepb.FtrlOptimizerConfig{}), 1, 0.01, 0,
			[][]float32{{10}, {10}}, [][]string{{"-0.009995"}, {"-0.0170643"}}},
		{"ftrl d=2", wrap(&hashtablepb.FtrlOptimizerConfig{}), 2, 0.01, 0,
			[][]float32{{10, 1}, {10, 1}}, [][]string{{"-0.009995", "-0.00953463"}, {"-0.0170643", "-0.0164353"}}},
		{"adam", wrap(&hashtablepb.AdamOptimizerConfig{}), 1, 0.01, 0,
			[][]float32{{10}, {10}}, [][]string{{"-0.00990099"}, {"-0.01983060"}}},
		{"adam d=2", wrap(&hashtablepb.AdamOptimizerConfig{}), 2, 0.01, 0,
			[][]float32{{10, 1}, {10, 1}}, [][]string{{"-0.00990099", "-0.00909091"}, {"-0.01983060", "-0.01842895"}}},
		{"momentum", wrap(&hashtablepb.MomentumOptimizerConfig{}), 1, 0.01, 0,
			[][]float32{{10}, {10}}, [][]string{{"-0.1"}, {"-0.29"}}},
		{"rmsprop", wrap(&hashtablepb.RmspropOptimizerConfig{}), 1, 0.01, 0,
			[][]float32{{10}, {10}}, [][]string{{"-0.024025"}, {"-0.042686"}}},
		{"rmspropv2 d=2", wrap(&hashtablepb.RmspropV2OptimizerConfig{}), 2, 0.01, 0,
			[][]float32{{10, 1}, {10, 1}}, [][]string{{"-0.0090909", "-0.005"}, {"-0.0158549", "-0.0092045"}}},
		{"adadelta", wrap(&hashtablepb.AdadeltaOptimizerConfig{}), 1, 0.01, 0,
			[][]float32{{10}, {10}}, [][]string{{"-0.0031607"}, {"-0.0064035"}}},
		{"group_adagrad l2 1", wrap(&hashtablepb.GroupAdaGradOptimizerConfig{L2RegularizationStrength: f(1), Beta: f(1), InitialAccumulatorValue: f(0)}), 1, 0.01, 0,
			[][]float32{{10}}, [][]string{{"-0.008182"}}},
		{"group_adagrad l2 0.5", wrap(&hashtablepb.GroupAdaGradOptimizerConfig{L2RegularizationStrength: f(0.5), Beta: f(1), InitialAccumulatorValue: f(0)}), 2, 0.01, 0,
			[][]float32{{10, 1}}, [][]string{{"-0.008639", "-0.000864"}}},
		{"group_adagrad l2 0", wrap(&hashtablepb.GroupAdaGradOptimizerConfig{L2RegularizationStrength: f(0), Beta: f(1), InitialAccumulatorValue: f(0)}), 2, 0.01, 0,
			[][]float32{{10, 1}}, [][]string{{"-0.009091", "-0.000909"}}},
		{"batch_softmax", wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{}), 1, 0.1, 1,
			[][]float32{{0}}, [][]string{{"0.1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := mustNew(t, tc.cfg, tc.dim)
			e := newEntry(o)
			check := func(label string, got []float32, want []string) {
				t.Helper()
				for i, ws := range want {
					// A vector matches to every digit the spec prints, within one unit of
					// its last decimal (Monolith's tests truncate as often as they round).
					w, tol := parseVector(t, ws)
					if d := math.Abs(float64(got[i]) - w); d > tol {
						t.Errorf("%s: w[%d] = %.9g, want %s (off by %.2g > %.2g)", label, i, got[i], ws, d, tol)
					}
				}
			}
			for k, g := range tc.grads {
				if k > 0 {
					// Continue from a restored copy as well.
					r := newEntry(o)
					copy(r.w, e.w)
					if err := o.Restore(r.state, o.Dump(e.state)); err != nil {
						t.Fatal(err)
					}
					o.Step(r.w, g, r.state, tc.lr, tc.step)
					check("restored", r.w, tc.want[k])
				}
				o.Step(e.w, g, e.state, tc.lr, tc.step)
				check("step", e.w, tc.want[k])
			}
		})
	}
}

// TestSpecDumpContents checks the dump fields Monolith's unit tests check after one step.
func TestSpecDumpContents(t *testing.T) {
	step := func(cfg *hashtablepb.OptimizerConfig, dim int, g ...float32) *hashtablepb.SingleOptimizerDump {
		o := mustNew(t, cfg, dim)
		e := newEntry(o)
		o.Step(e.w, g, e.state, 0.01, 0)
		return o.Dump(e.state)
	}
	near := func(name string, got float32, want float64) {
		t.Helper()
		if !closeTo(got, want, 1e-5) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	d := step(wrap(&hashtablepb.FtrlOptimizerConfig{}), 2, 10, 1)
	near("ftrl norm[0]", d.GetFtrl().GetNorm()[0], 100.1)
	near("ftrl norm[1]", d.GetFtrl().GetNorm()[1], 1.1)
	near("ftrl zero[0]", d.GetFtrl().GetZero()[0], 10)
	d = step(wrap(&hashtablepb.AdamOptimizerConfig{}), 2, 10, 1)
	near("adam m[0]", d.GetAdam().GetM()[0], 1)
	near("adam m[1]", d.GetAdam().GetM()[1], 0.1)
	near("adam v[0]", d.GetAdam().GetV()[0], 1)
	near("adam beta1_power", d.GetAdam().GetBeta1Power(), 0.81)
	near("adam beta2_power", d.GetAdam().GetBeta2Power(), 0.9801)
	d = step(wrap(&hashtablepb.RmspropOptimizerConfig{}), 1, 10)
	near("rmsprop n", d.GetRmsprop().GetN()[0], 10)
	d = step(wrap(&hashtablepb.RmspropV2OptimizerConfig{}), 2, 10, 1)
	near("rmspropv2 n[0]", d.GetRmspropv2().GetN()[0], 100)
	near("rmspropv2 n[1]", d.GetRmspropv2().GetN()[1], 1)
	d = step(wrap(&hashtablepb.GroupAdaGradOptimizerConfig{InitialAccumulatorValue: proto.Float32(0)}), 2, 10, 1)
	near("group_adagrad grad_square_sum", d.GetGroupAdagrad().GetGradSquareSum(), 100)
}

// parseVector returns the value of a printed decimal and its tolerance: one unit of its
// last digit plus two float32 ulps (the 8-decimal vectors are finer than float32).
func parseVector(t *testing.T, s string) (float64, float64) {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	decimals := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		decimals = len(s) - i - 1
	}
	return v, math.Pow(10, -float64(decimals)) + 2*math.Abs(v)*0x1p-23
}
