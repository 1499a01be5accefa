package filter_test

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/filter/filtertest"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

var mem = filtertest.Mem

// fidsOf returns every fid of e's fid_v1_list and fid_v2_list features.
func fidsOf(e *examplepb.Example) []uint64 {
	var out []uint64
	for _, f := range e.NamedFeature {
		out = append(out, f.GetFeature().GetFidV1List().GetValue()...)
		out = append(out, f.GetFeature().GetFidV2List().GetValue()...)
	}
	return out
}

// feature returns e's named feature, or nil.
func feature(e *examplepb.Example, name string) *examplepb.Feature {
	for _, f := range e.NamedFeature {
		if f.Name == name {
			return f.Feature
		}
	}
	return nil
}

func batchFromExamplesOpts(exs []*examplepb.Example, bytesOnly bool) (arrow.RecordBatch, error) {
	if bytesOnly {
		return batch.FromExamples(mem, exs, batch.WithoutLineIDFields())
	}
	return batch.FromExamples(mem, exs)
}

// roundTrip passes rec through the arrow.RecordBatch coder.
func roundTrip(t testing.TB, rec arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	b, err := element.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	out, err := element.DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// replaceLineIDs returns rec (without decoded LineId columns) with its "__line_id__"
// bytes replaced, unchecked.
func replaceLineIDs(t testing.TB, rec arrow.RecordBatch, lids [][]byte) arrow.RecordBatch {
	t.Helper()
	idx := rec.Schema().FieldIndices(batch.ColLineID)
	if len(idx) != 1 {
		t.Fatalf("no %s column", batch.ColLineID)
	}
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer b.Release()
	for _, l := range lids {
		b.Append(l)
	}
	arr := b.NewArray()
	defer arr.Release()
	cols := slices.Clone(rec.Columns())
	cols[idx[0]] = arr
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}
