package batch

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// withColumn returns rec with column name replaced by col (same field, new type).
func withColumn(t *testing.T, rec arrow.RecordBatch, name string, col arrow.Array) arrow.RecordBatch {
	t.Helper()
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %q", name)
	}
	fields := rec.Schema().Fields()
	cols := rec.Columns()
	fields[idx[0]].Type = col.DataType()
	cols = append([]arrow.Array{}, cols...)
	cols[idx[0]] = col
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows())
}

// readers are every entry point that reads a whole batch back.
var readers = map[string]func(arrow.RecordBatch) error{
	"ToExampleBatch": func(r arrow.RecordBatch) error { _, err := ToExampleBatch(r); return err },
	"ToExamples":     func(r arrow.RecordBatch) error { _, err := ToExamples(r); return err },
	"ToInstances":    func(r arrow.RecordBatch) error { _, err := ToInstances(r); return err },
	"Rows":           func(r arrow.RecordBatch) error { _, err := Rows(r); return err },
}

// expectLayoutError runs every reader on rec: each must fail with ErrLayout naming want.
func expectLayoutError(t *testing.T, rec arrow.RecordBatch, want ...string) {
	t.Helper()
	for name, read := range readers {
		err := read(rec)
		if !errors.Is(err, ErrLayout) {
			t.Errorf("%s: error %v, want ErrLayout", name, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", name, err, w)
			}
		}
	}
}

// TestV1HiCellBoundaries: a v1 signature column with as many values as the fids but other
// cell boundaries (found by FuzzDecodeElements in transforms/element, where it made
// ToInstances index past an empty cell) is a layout error naming the feature and row.
func TestV1HiCellBoundaries(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec, err := FromInstances(mem, []*parserpb.Instance{{Fid: []uint64{1<<54 | 1<<50 | 5, 1<<54 | 6}}, {Fid: []uint64{1<<54 | 7}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	name := SlotFeatureName(1)
	if !rec.Schema().HasField(v1hiPrefix + name) {
		t.Fatalf("no v1 signature column: %v", rec.Schema())
	}
	// Same three values, cells [0:0] and [0:3] instead of [0:2] and [2:3].
	b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Uint8)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Uint8Builder)
	b.Append(true)
	b.Append(true)
	vb.AppendValues([]uint8{1, 0, 0}, nil)
	hi := b.NewArray()
	defer hi.Release()
	bad := withColumn(t, rec, v1hiPrefix+name, hi)
	defer bad.Release()
	expectLayoutError(t, bad, name, "row 0")
	i := bad.Schema().FieldIndices(name)[0]
	if _, err := RawFids(bad, i, 0, nil); !errors.Is(err, ErrLayout) {
		t.Errorf("RawFids: %v, want ErrLayout", err)
	}
	if _, err := RawFids(bad, i, 2, nil); err == nil {
		t.Error("RawFids: row 2 of 2 read")
	}
}

// TestLabelType: a label list of another value type is a layout error, not a panic.
func TestLabelType(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec, err := FromExamples(mem, []*examplepb.Example{{Label: []float32{1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
	defer b.Release()
	b.Append(true)
	b.ValueBuilder().(*array.Int32Builder).Append(1)
	lab := b.NewArray()
	defer lab.Release()
	bad := withColumn(t, rec, ColLabel, lab)
	defer bad.Release()
	expectLayoutError(t, bad, ColLabel)
}

// TestSharedColumnOneRun: a shared (run-end encoded) column of several runs is a layout
// error: the readers would keep its first cell for every row.
func TestSharedColumnOneRun(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fid := &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{1}}}}
	rec, err := FromExampleBatch(mem, &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{
		{Name: "s", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{fid}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	col := rec.Column(rec.Schema().FieldIndices("s")[0]).(*array.RunEndEncoded)
	eb := array.NewInt32Builder(mem)
	defer eb.Release()
	eb.AppendValues([]int32{1, 2}, nil)
	ends := eb.NewArray()
	defer ends.Release()
	vals, err := array.Concatenate([]arrow.Array{col.Values(), col.Values()}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer vals.Release()
	two := array.NewRunEndEncodedArray(ends, vals, 2, 0)
	defer two.Release()
	bad := withColumn(t, rec, "s", two)
	defer bad.Release()
	expectLayoutError(t, bad, `"s"`, "runs")
}

// TestZeroRowSharedView: the view of a shared column of a batch without rows has no cells.
func TestZeroRowSharedView(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fid := &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{1}}}}
	flt := &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{1}}}}
	two, err := FromExampleBatch(mem, &examplepb.ExampleBatch{BatchSize: 2, NamedFeatureList: []*examplepb.NamedFeatureList{
		{Name: "s", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{fid}},
		{Name: "d", Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{flt}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Release()
	rec, err := Take(mem, two, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	s, err := SparseColumn(rec, "s")
	if err != nil {
		t.Fatal(err)
	}
	if s.Rows != 0 || s.Cells() > 1 {
		t.Errorf("sparse view of a zero-row shared column: %+v", s)
	}
	d, err := DenseColumn(rec, "d")
	if err != nil {
		t.Fatal(err)
	}
	if d.Rows != 0 {
		t.Errorf("dense view of a zero-row shared column: %+v", d)
	}
}

// TestZeroRowViewWithoutOffsets: an empty list column without an offsets buffer (as an IPC
// stream may carry it), plain or shared, reads as a view without values.
func TestZeroRowViewWithoutOffsets(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	vals := array.MakeArrayOfNull(mem, arrow.PrimitiveTypes.Uint64, 0)
	defer vals.Release()
	d := array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Uint64), 0, []*memory.Buffer{nil, nil}, []arrow.ArrayData{vals.Data()}, 0, 0)
	defer d.Release()
	list := array.MakeFromData(d)
	defer list.Release()
	ends := array.MakeArrayOfNull(mem, arrow.PrimitiveTypes.Int32, 0)
	defer ends.Release()
	ree := array.NewRunEndEncodedArray(ends, list, 0, 0)
	defer ree.Release()
	md := arrow.NewMetadata([]string{MetaLayout, MetaSource}, []string{LayoutVersion, SourceExampleBatch.String()})
	fmd := arrow.NewMetadata([]string{MetaKind, MetaNull}, []string{KindFidV2List.String(), KindUnset.String()})
	for _, col := range []arrow.Array{list, ree} {
		s := arrow.NewSchema([]arrow.Field{{Name: "f", Type: col.DataType(), Nullable: true, Metadata: fmd}}, &md)
		rec := array.NewRecordBatch(s, []arrow.Array{col}, 0)
		v, err := SparseAt(rec, 0)
		if err != nil {
			t.Errorf("%s: %v", col.DataType(), err)
		} else if len(v.Values) != 0 || v.Cells() > 1 {
			t.Errorf("%s: view %+v", col.DataType(), v)
		}
		for name, read := range readers {
			if err := read(rec); err != nil {
				t.Errorf("%s %s: %v", col.DataType(), name, err)
			}
		}
		rec.Release()
	}
}
