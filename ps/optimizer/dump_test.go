package optimizer

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// TestDumpRestoreRoundTrip steps every rule, dumps its state through the wire format,
// restores it into a fresh entry and checks that the state words match bit for bit and
// that both entries keep evolving identically.
func TestDumpRestoreRoundTrip(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			o := mustNew(t, k.cfg, k.dim)
			a := newEntry(o, 0.3, -0.2, 0.1)
			g := []float32{0.5, -1.5, 2}[:k.dim]
			for s := range int64(3) {
				o.Step(a.w, g, a.state, 0.05, 10+s)
			}
			d := o.Dump(a.state)
			if k.name == "moving_average" {
				if d != nil {
					t.Fatalf("Dump = %v, want nil", d)
				}
				if err := o.Restore(a.state, nil); err != nil {
					t.Fatalf("Restore(nil) = %v", err)
				}
				return
			}
			if got := dumpKind(d); got != o.Kind() {
				t.Fatalf("Dump holds %q, want %q", got, o.Kind())
			}
			wire, err := proto.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			var back hashtablepb.SingleOptimizerDump
			if err := proto.Unmarshal(wire, &back); err != nil {
				t.Fatal(err)
			}
			b := newEntry(o)
			copy(b.w, a.w)
			if err := o.Restore(b.state, &back); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			for i := range a.state {
				if math.Float32bits(a.state[i]) != math.Float32bits(b.state[i]) {
					t.Fatalf("restored state %v, want %v", b.state, a.state)
				}
			}
			for s := range int64(3) {
				o.Step(a.w, g, a.state, 0.05, 20+s)
				o.Step(b.w, g, b.state, 0.05, 20+s)
			}
			for i := range a.w {
				if a.w[i] != b.w[i] {
					t.Fatalf("after restore w = %v, want %v", b.w, a.w)
				}
			}
		})
	}
}

// TestDumpIsACopy checks that a dump does not alias the state it was taken from.
func TestDumpIsACopy(t *testing.T) {
	o := mustNew(t, wrap(&hashtablepb.AdagradOptimizerConfig{}), 2)
	e := newEntry(o)
	d := o.Dump(e.state)
	e.state[0] = 7
	if d.GetAdagrad().GetNorm()[0] != 0.1 {
		t.Fatal("Dump aliases the state slice")
	}
}

func TestBatchSoftmaxStepWords(t *testing.T) {
	o := mustNew(t, wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{}), 1)
	e := newEntry(o)
	for _, step := range []int64{1, 1 << 40, math.MaxInt64, -1 << 33} {
		d := &hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_BatchSoftmax{
			BatchSoftmax: &hashtablepb.BatchSoftmaxOptimizerDump{GlobalStep: proto.Int64(step)}}}
		if err := o.Restore(e.state, d); err != nil {
			t.Fatal(err)
		}
		if got := o.Dump(e.state).GetBatchSoftmax().GetGlobalStep(); got != step {
			t.Errorf("global_step %d came back as %d", step, got)
		}
	}
	// The words are little-endian halves of the int64.
	StoreInt64(e.state, 0x0000000700000003)
	if math.Float32bits(e.state[0]) != 3 || math.Float32bits(e.state[1]) != 7 {
		t.Errorf("state words %#x %#x, want 3 7", math.Float32bits(e.state[0]), math.Float32bits(e.state[1]))
	}
}

func TestRestoreErrors(t *testing.T) {
	f32 := func(v ...float32) []float32 { return v }
	adagrad := mustNew(t, wrap(&hashtablepb.AdagradOptimizerConfig{}), 2)
	ftrl := mustNew(t, wrap(&hashtablepb.FtrlOptimizerConfig{}), 2)
	adam := mustNew(t, wrap(&hashtablepb.AdamOptimizerConfig{}), 2)
	amsgrad := mustNew(t, wrap(&hashtablepb.AmsgradOptimizerConfig{}), 2)
	rmsprop := mustNew(t, wrap(&hashtablepb.RmspropOptimizerConfig{}), 2)
	ga := mustNew(t, wrap(&hashtablepb.GroupAdaGradOptimizerConfig{}), 2)
	bs := mustNew(t, wrap(&hashtablepb.BatchSoftmaxOptimizerConfig{}), 1)
	sgd := mustNew(t, wrap(&hashtablepb.SgdOptimizerConfig{}), 2)
	ma := mustNew(t, wrap(&hashtablepb.MovingAverageOptimizerConfig{}), 2)
	tests := []struct {
		name  string
		o     Optimizer
		state []float32
		d     *hashtablepb.SingleOptimizerDump
		want  string
	}{
		{"nil dump", adagrad, nil, nil, "restore adagrad: invalid optimizer dump: dump holds no optimizer state"},
		{"wrong kind", adagrad, nil, ftrl.Dump(make([]float32, 4)), "restore adagrad: invalid optimizer dump: dump holds ftrl"},
		{"short norm", adagrad, nil, (&hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Adagrad{
			Adagrad: &hashtablepb.AdagradOptimizerDump{Norm: f32(1)}}}), "restore adagrad: invalid optimizer dump: field norm has 1 values, want 2"},
		{"ftrl zero", ftrl, nil, (&hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Ftrl{
			Ftrl: &hashtablepb.FtrlOptimizerDump{Norm: f32(1, 2), Zero: f32(1, 2, 3)}}}), "restore ftrl: invalid optimizer dump: field zero has 3 values, want 2"},
		{"adam beta2_power", adam, nil, (&hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Adam{
			Adam: &hashtablepb.AdamOptimizerDump{M: f32(0, 0), V: f32(0, 0), Beta1Power: proto.Float32(0.9)}}}), "restore adam: invalid optimizer dump: field beta2_power is missing"},
		{"amsgrad vhat", amsgrad, nil, (&hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_Amsgrad{
			Amsgrad: &hashtablepb.AmsgradOptimizerDump{M: f32(0, 0), V: f32(0, 0)}}}), "restore amsgrad: invalid optimizer dump: field vhat has 0 values, want 2"},
		{"rmsprop holds v2", rmsprop, nil, mustNew(t, wrap(&hashtablepb.RmspropV2OptimizerConfig{}), 2).Dump(make([]float32, 2)),
			"restore rmsprop: invalid optimizer dump: dump holds rmspropv2"},
		{"group_adagrad missing", ga, nil, (&hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_GroupAdagrad{
			GroupAdagrad: &hashtablepb.GroupAdaGradOptimizerDump{}}}), "restore group_adagrad: invalid optimizer dump: field grad_square_sum is missing"},
		{"batch_softmax missing", bs, nil, (&hashtablepb.SingleOptimizerDump{Type: &hashtablepb.SingleOptimizerDump_BatchSoftmax{
			BatchSoftmax: &hashtablepb.BatchSoftmaxOptimizerDump{}}}), "restore batch_softmax: invalid optimizer dump: field global_step is missing"},
		{"sgd wrong kind", sgd, nil, adagrad.Dump(make([]float32, 2)), "restore sgd: invalid optimizer dump: dump holds adagrad"},
		{"moving_average with state", ma, nil, adagrad.Dump(make([]float32, 2)), "restore moving_average: invalid optimizer dump: dump holds adagrad"},
		{"short state", adam, make([]float32, 5), adam.Dump(make([]float32, 6)), "restore adam: state has 5 words, need 6"},
	}
	for _, tc := range tests {
		state := tc.state
		if state == nil {
			state = make([]float32, tc.o.StateLen())
		}
		err := tc.o.Restore(state, tc.d)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "ps/optimizer: ") {
			t.Errorf("%s: Restore error %v, want one containing %q", tc.name, err, tc.want)
		}
		if tc.name != "short state" && !errors.Is(err, ErrDump) {
			t.Errorf("%s: error %v does not wrap ErrDump", tc.name, err)
		}
	}
	// Accepted: sgd's own empty element; moving_average's nil or empty dump.
	if err := sgd.Restore(nil, sgd.Dump(nil)); err != nil {
		t.Errorf("sgd Restore(own dump) = %v", err)
	}
	if err := ma.Restore(nil, &hashtablepb.SingleOptimizerDump{}); err != nil {
		t.Errorf("moving_average Restore(empty) = %v", err)
	}
}

// TestDumpTo checks that DumpTo writes what Dump returns, replaces a dump of another kind,
// copies rather than aliases the state, and reuses its destination without allocating.
func TestDumpTo(t *testing.T) {
	other := mustNew(t, wrap(&hashtablepb.AdagradOptimizerConfig{}), 5).Dump(make([]float32, 5))
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			o := mustNew(t, k.cfg, k.dim)
			e := newEntry(o, 0.3, -0.2, 0.1)
			g := []float32{0.5, -1.5, 2}[:k.dim]
			dst := proto.Clone(other).(*hashtablepb.SingleOptimizerDump)
			for s := range int64(3) {
				o.Step(e.w, g, e.state, 0.05, 10+s)
				want := o.Dump(e.state)
				ok := o.DumpTo(dst, e.state)
				if ok != (want != nil) {
					t.Fatalf("DumpTo = %v, Dump = %v", ok, want)
				}
				if !ok {
					if !proto.Equal(dst, other) {
						t.Fatalf("DumpTo that dumps nothing changed dst to %v", dst)
					}
					return
				}
				if !proto.Equal(dst, want) {
					t.Fatalf("step %d: DumpTo wrote %v, Dump returns %v", s, dst, want)
				}
			}
			snap := proto.Clone(dst)
			for i := range e.state {
				e.state[i] += 1
			}
			if !proto.Equal(dst, snap) {
				t.Fatal("DumpTo aliases the state slice")
			}
			if n := testing.AllocsPerRun(100, func() { o.DumpTo(dst, e.state) }); n != 0 {
				t.Errorf("DumpTo into a reused dst: %v allocations, want 0", n)
			}
		})
	}
}
