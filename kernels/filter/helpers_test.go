package filter

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// Proto builders.

func lid(fn func(l *matrixpb.LineId)) *matrixpb.LineId {
	l := &matrixpb.LineId{}
	if fn != nil {
		fn(l)
	}
	return l
}

func withActions(a ...int32) *matrixpb.LineId { return lid(func(l *matrixpb.LineId) { l.Actions = a }) }

func feat(name string, f *examplepb.Feature) *examplepb.NamedFeature {
	return &examplepb.NamedFeature{Name: name, Feature: f}
}

func fidV1(name string, v ...uint64) *examplepb.NamedFeature {
	return feat(name, &examplepb.Feature{Type: &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: v}}})
}

func fidV2(name string, v ...uint64) *examplepb.NamedFeature {
	return feat(name, &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: v}}})
}

func int64F(name string, v ...int64) *examplepb.NamedFeature {
	return feat(name, &examplepb.Feature{Type: &examplepb.Feature_Int64List{Int64List: &examplepb.Int64List{Value: v}}})
}

func floatF(name string, v ...float32) *examplepb.NamedFeature {
	return feat(name, &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: v}}})
}

func doubleF(name string, v ...float64) *examplepb.NamedFeature {
	return feat(name, &examplepb.Feature{Type: &examplepb.Feature_DoubleList{DoubleList: &examplepb.DoubleList{Value: v}}})
}

func bytesF(name string, v ...string) *examplepb.NamedFeature {
	var b [][]byte
	for _, s := range v {
		b = append(b, []byte(s))
	}
	return feat(name, &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: b}}})
}

func ex(labels []float32, l *matrixpb.LineId, fs ...*examplepb.NamedFeature) *examplepb.Example {
	return &examplepb.Example{Label: labels, LineId: l, NamedFeature: fs}
}

// Batch builders. opts may hold batch.WithoutLineIDFields().

func examples(t testing.TB, mem memory.Allocator, exs []*examplepb.Example, opts ...batch.Option) arrow.RecordBatch {
	t.Helper()
	rec, err := batch.FromExamples(mem, exs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func instances(t testing.TB, mem memory.Allocator, ins []*parserpb.Instance, opts ...batch.Option) arrow.RecordBatch {
	t.Helper()
	rec, err := batch.FromInstances(mem, ins, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// lineIDVariants are the two ways a batch carries LineIds: with the decoded columns, and
// with only the bytes (the op then decodes them itself).
var lineIDVariants = []struct {
	name string
	opts []batch.Option
}{
	{"decoded", nil},
	{"bytes", []batch.Option{batch.WithoutLineIDFields()}},
}

// Result readers.

func rowsOf(t testing.TB, rec arrow.RecordBatch) []batch.Row {
	t.Helper()
	rows, err := batch.Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() == 0 {
		return nil
	}
	return rows
}

// labelsOf returns every row's labels (nil for none) through batch.Rows.
func labelsOf(t testing.TB, rec arrow.RecordBatch) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, r := range rowsOf(t, rec) {
		out = append(out, []float32(r.Label))
	}
	return out
}

// lineIDsOf returns every row's decoded LineId (nil when absent).
func lineIDsOf(t testing.TB, rec arrow.RecordBatch) []*matrixpb.LineId {
	t.Helper()
	var out []*matrixpb.LineId
	for _, r := range rowsOf(t, rec) {
		if r.LineID == nil {
			out = append(out, nil)
			continue
		}
		l := &matrixpb.LineId{}
		if err := proto.Unmarshal(r.LineID, l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func equalLabels(a, b [][]float32) bool {
	return slices.EqualFunc(a, b, func(x, y []float32) bool { return slices.Equal(x, y) })
}

func keep(t testing.TB, f Filter, rec arrow.RecordBatch) []int {
	t.Helper()
	got, err := f.Keep(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil {
		got = []int{}
	}
	return got
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

const inv = InvalidLabel
