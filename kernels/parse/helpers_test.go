package parse

import (
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// result is a parse output in plain Go form: per name, the rows of a sparse feature or
// the flat rows×dim values of a dense / extra feature.
type result struct {
	n      int
	sparse map[string][][]uint64
	f32    map[string][]float32
	i64    map[string][]int64
	str    map[string][]string
}

func newResult(n int) *result {
	return &result{n: n, sparse: map[string][][]uint64{}, f32: map[string][]float32{},
		i64: map[string][]int64{}, str: map[string][]string{}}
}

// zeroResult is the all-default output of spec for n rows.
func zeroResult(spec *Spec, n int) *result {
	res := newResult(n)
	for _, f := range spec.Sparse() {
		res.sparse[f.Name] = make([][]uint64, n)
	}
	add := func(name string, dim int, dt DType) {
		switch dt {
		case Float32:
			res.f32[name] = make([]float32, n*dim)
		case Int64:
			res.i64[name] = make([]int64, n*dim)
		default:
			res.str[name] = make([]string, n*dim)
		}
	}
	for _, f := range spec.Dense() {
		add(f.Name, f.Dim, f.DType)
	}
	for _, f := range spec.Extra() {
		dt, _ := ExtraType(f.Name)
		add(f.Name, f.Dim, dt)
	}
	return res
}

// toResult converts a Parse output, checking its schema against the spec.
func toResult(t testing.TB, rec arrow.RecordBatch, spec *Spec, src batch.Source) *result {
	t.Helper()
	if !rec.Schema().Equal(spec.Schema(src)) {
		t.Fatalf("output schema %v, want %v", rec.Schema(), spec.Schema(src))
	}
	n := int(rec.NumRows())
	res := newResult(n)
	for i, f := range rec.Schema().Fields() {
		col := rec.Column(i)
		if col.Len() != n || col.NullN() != 0 {
			t.Fatalf("column %q: %d rows (%d null), want %d", f.Name, col.Len(), col.NullN(), n)
		}
		switch c := col.(type) {
		case *array.List:
			vals := c.ListValues().(*array.Uint64).Uint64Values()
			rows := make([][]uint64, n)
			for r := range n {
				s, e := c.ValueOffsets(r)
				if s != e {
					rows[r] = append([]uint64(nil), vals[s:e]...)
				}
			}
			res.sparse[f.Name] = rows
		case *array.FixedSizeList:
			switch v := c.ListValues().(type) {
			case *array.Float32:
				res.f32[f.Name] = append([]float32{}, v.Float32Values()...)
			case *array.Int64:
				res.i64[f.Name] = append([]int64{}, v.Int64Values()...)
			case *array.Binary:
				s := make([]string, v.Len())
				for j := range s {
					s[j] = string(v.Value(j))
				}
				res.str[f.Name] = s
			default:
				t.Fatalf("column %q: unexpected child %T", f.Name, v)
			}
		default:
			t.Fatalf("column %q: unexpected type %s", f.Name, col.DataType())
		}
	}
	return res
}

// sameF32 compares floats bit for bit (NaNs equal).
func sameF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
			return false
		}
		if a[i] == 0 && math.Signbit(float64(a[i])) != math.Signbit(float64(b[i])) {
			return false
		}
	}
	return true
}

// diffResult returns a description of the first difference, or "".
func diffResult(got, want *result) string {
	if got.n != want.n {
		return "row counts differ"
	}
	for name, w := range want.sparse {
		g := got.sparse[name]
		if len(g) != len(w) {
			return "sparse " + name + ": row count"
		}
		for r := range w {
			if len(g[r]) != len(w[r]) {
				return fmt.Sprintf("sparse %s row %d: got %x want %x", name, r, g[r], w[r])
			}
			for j := range w[r] {
				if g[r][j] != w[r][j] {
					return fmt.Sprintf("sparse %s row %d: got %x want %x", name, r, g[r], w[r])
				}
			}
		}
	}
	for name, w := range want.f32 {
		if g := got.f32[name]; !sameF32(g, w) {
			return fmt.Sprintf("float %s: got %v want %v", name, g, w)
		}
	}
	for name, w := range want.i64 {
		g := got.i64[name]
		if len(g) != len(w) {
			return fmt.Sprintf("int64 %s: got %v want %v", name, g, w)
		}
		for j := range w {
			if g[j] != w[j] {
				return fmt.Sprintf("int64 %s: got %v want %v", name, g, w)
			}
		}
	}
	for name, w := range want.str {
		g := got.str[name]
		if len(g) != len(w) {
			return fmt.Sprintf("bytes %s: got %q want %q", name, g, w)
		}
		for j := range w {
			if g[j] != w[j] {
				return fmt.Sprintf("bytes %s: got %q want %q", name, g, w)
			}
		}
	}
	if len(got.sparse) != len(want.sparse) || len(got.f32) != len(want.f32) || len(got.i64) != len(want.i64) || len(got.str) != len(want.str) {
		return "column sets differ"
	}
	return ""
}

// Message builders.

func unset() *examplepb.Feature { return &examplepb.Feature{} }

func list(name string, cells ...*examplepb.Feature) *examplepb.NamedFeatureList {
	return &examplepb.NamedFeatureList{Name: name, Feature: cells}
}

func shared(name string, cell *examplepb.Feature) *examplepb.NamedFeatureList {
	return &examplepb.NamedFeatureList{Name: name, Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{cell}}
}

func nf(name string, f *examplepb.Feature) *examplepb.NamedFeature {
	return &examplepb.NamedFeature{Name: name, Feature: f}
}

func ebRecord(t testing.TB, mem memory.Allocator, rows int, lists ...*examplepb.NamedFeatureList) arrow.RecordBatch {
	t.Helper()
	rec, err := batch.FromExampleBatch(mem, &examplepb.ExampleBatch{BatchSize: int32(rows), NamedFeatureList: lists})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func exRecord(t testing.TB, mem memory.Allocator, exs ...*examplepb.Example) arrow.RecordBatch {
	t.Helper()
	rec, err := batch.FromExamples(mem, exs)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func inRecord(t testing.TB, mem memory.Allocator, ins ...*parserpb.Instance) arrow.RecordBatch {
	t.Helper()
	rec, err := batch.FromInstances(mem, ins)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func mustSpec(t testing.TB, sparse []SparseFeature, dense []DenseFeature, extra []ExtraFeature) *Spec {
	t.Helper()
	s, err := NewSpec(sparse, dense, extra)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// parseResult parses rec with spec and converts the output.
func parseResult(t testing.TB, mem memory.Allocator, rec arrow.RecordBatch, spec *Spec) (*result, error) {
	t.Helper()
	out, err := Parse(mem, rec, spec)
	if err != nil {
		return nil, err
	}
	defer out.Release()
	src, _ := batch.SourceOf(rec.Schema())
	return toResult(t, out, spec, src), nil
}
