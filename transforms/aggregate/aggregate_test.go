package aggregate_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/transforms/aggregate"
	"github.com/monolith-go/monolith/transforms/element"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

func init() {
	register.Function1x1[element.TableGrads, string](show)
}

func show(g element.TableGrads) string {
	return fmt.Sprintf("%s fids=%v off=%v grads=%v counts=%v", g.Key(), g.Fids, g.Offsets, g.Grads, g.Counts)
}

// Two features of one table with widths 2 and 1: fid 7 occurs three times with width 2,
// fid 9 twice with width 1.
var in = element.TableGrads{Table: "t", Shard: 1,
	Fids:    []uint64{7, 9, 7, 7, 9},
	Offsets: []int32{0, 2, 3, 5, 7, 8},
	Grads:   []float32{1, 2, 10, 3, 4, 5, 6, 20},
}

var want = element.TableGrads{Table: "t", Shard: 1,
	Fids:    []uint64{7, 9},
	Offsets: []int32{0, 2, 3},
	Grads:   []float32{1 + 3 + 5, 2 + 4 + 6, 30},
	Counts:  []int32{3, 2},
}

func TestAggregator(t *testing.T) {
	var a aggregate.Aggregator
	got, err := a.Aggregate(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s\nwant %s", show(got), show(want))
	}
	empty, err := a.Aggregate(element.TableGrads{Table: "e"})
	if err != nil || len(empty.Fids) != 0 || empty.Check() != nil {
		t.Fatalf("empty: %+v %v", empty, err)
	}
	bad := in
	bad.Offsets = []int32{0, 2, 3, 4, 6, 7} // fid 7 once 1 wide
	bad.Grads = in.Grads[:7]
	if _, err := a.Aggregate(bad); err == nil {
		t.Fatal("a fid with two widths was aggregated")
	}
}

func TestAggregateGradsOnPrism(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	col := beam.Reshuffle(s, beam.Create(s, in, element.TableGrads{Table: "u"}))
	out := aggregate.AggregateGrads(s, col)
	passert.Equals(s, beam.ParDo(s, show, beam.Reshuffle(s, out)), show(want), show(element.TableGrads{Table: "u", Offsets: []int32{0}, Counts: []int32{}}))
	ptest.RunAndValidate(t, p)
}
