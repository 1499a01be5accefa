package parse_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	kparse "github.com/monolith-go/monolith/kernels/parse"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/parse"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

func init() { register.Function1x1(digest) }

// digest renders a parsed batch: its schema and every column's values.
func digest(rec arrow.RecordBatch) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows;", rec.NumRows())
	for i, c := range rec.Columns() {
		fmt.Fprintf(&b, "%s %s=%v;", rec.Schema().Field(i).Name, c.DataType(), c)
	}
	return b.String()
}

// fixtureBatches cuts the ExampleBatch fixture into batches of n rows.
func fixtureBatches(t *testing.T, n int64) []arrow.RecordBatch {
	fix := batchtest.FixtureRecord(t, memory.NewGoAllocator())
	var out []arrow.RecordBatch
	for lo := int64(0); lo < fix.NumRows(); lo += n {
		out = append(out, fix.NewSlice(lo, min(lo+n, fix.NumRows())))
	}
	return out
}

// sparseNames are the fixture's sparse features.
func sparseNames(t *testing.T, rec arrow.RecordBatch) []string {
	var names []string
	for _, n := range batch.Features(rec.Schema()) {
		if _, err := batch.SparseColumn(rec, n); err == nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		t.Fatal("fixture has no sparse features")
	}
	return names
}

func TestParse(t *testing.T) {
	recs := fixtureBatches(t, 3)
	names := sparseNames(t, recs[0])
	tests := []struct {
		name string
		cfg  parse.Config
	}{
		{"sparse", parse.SparseOnly(names...)},
		{"sparse+label", parse.Config{
			Sparse: []kparse.SparseFeature{{Name: names[0]}, {Name: names[len(names)-1]}},
			Dense:  []kparse.DenseFeature{{Name: kparse.NameLabel, Dim: 1}},
			Extra:  []kparse.ExtraFeature{{Name: "uid", Dim: 1}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := tc.cfg.Spec()
			if err != nil {
				t.Fatal(err)
			}
			var want []any
			for _, r := range recs {
				out, err := kparse.Parse(memory.NewGoAllocator(), r, spec)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, digest(out))
			}
			p, s := beam.NewPipelineWithRoot()
			in := beam.Reshuffle(s, element.Create(s, recs...))
			out := beam.Reshuffle(s, parse.Parse(s, in, tc.cfg)) // through the coder
			passert.Equals(s, beam.ParDo(s, digest, out), want...)
			if err := ptest.Run(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRejectedBatch(t *testing.T) {
	recs := fixtureBatches(t, 4)
	// A dense float feature of dim 1 read from a fid list is rejected by the parser.
	cfg := parse.Config{Dense: []kparse.DenseFeature{{Name: sparseNames(t, recs[0])[0], Dim: 1}}}
	spec, err := cfg.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kparse.Parse(memory.NewGoAllocator(), recs[0], spec); err == nil {
		t.Fatal("precondition: the kernel accepts a dense read of a fid list")
	}
	p, s := beam.NewPipelineWithRoot()
	parse.Parse(s, element.Create(s, recs...), cfg)
	err = ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), "parse.Parse") {
		t.Fatalf("pipeline error = %v, want a parse.Parse error", err)
	}
}

func TestConstructionError(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "parse.Parse") {
			t.Fatalf("recover() = %v, want a parse.Parse panic", r)
		}
	}()
	_, s := beam.NewPipelineWithRoot()
	parse.Parse(s, beam.Create(s, 1), parse.Config{Sparse: []kparse.SparseFeature{{Name: "a"}, {Name: "a"}}})
}
