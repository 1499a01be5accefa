package batch

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Take returns a batch with the rows of rec at the given indexes, in that order; an index
// may repeat (replicated rows) and rows may be dropped. Shared (run-end encoded) columns
// stay shared. The result belongs to the caller.
func Take(mem memory.Allocator, rec arrow.RecordBatch, rows []int) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	ib.Reserve(len(rows))
	for _, r := range rows {
		if r < 0 || r >= n {
			return nil, fmt.Errorf("schemas/batch: take: row %d of %d", r, n)
		}
		ib.UnsafeAppend(int64(r))
	}
	idx := ib.NewArray()
	defer idx.Release()
	ctx := compute.WithAllocator(context.Background(), mem)
	s := rec.Schema()
	cols := make([]arrow.Array, 0, s.NumFields())
	fail := func(err error) (arrow.RecordBatch, error) {
		releaseAll(cols)
		return nil, err
	}
	for i, f := range s.Fields() {
		col := rec.Column(i)
		var out arrow.Array
		var err error
		switch {
		case f.Type.ID() == arrow.NULL:
			out = array.NewNull(len(rows))
		case f.Type.ID() == arrow.RUN_END_ENCODED:
			lv := logicalOf(col)
			if len(rows) == 0 {
				out = emptyArray(mem, f.Type)
				break
			}
			one := array.NewSlice(lv.values, int64(lv.index(0)), int64(lv.index(0)+1))
			out, err = runEndEncode(mem, one, len(rows))
			one.Release()
		default:
			out, err = compute.TakeArray(ctx, col, idx)
		}
		if err != nil {
			return fail(fmt.Errorf("schemas/batch: take %q: %w", f.Name, err))
		}
		cols = append(cols, out)
	}
	res := array.NewRecordBatch(s, cols, int64(len(rows)))
	releaseAll(cols)
	return res, nil
}

// replaceColumn returns rec with the column called name (role role) replaced by arr, or
// appended with the given field when absent. arr is retained.
func replaceColumn(rec arrow.RecordBatch, name string, field arrow.Field, arr arrow.Array) arrow.RecordBatch {
	s := rec.Schema()
	fields := s.Fields()
	cols := make([]arrow.Array, 0, len(fields)+1)
	for i := range fields {
		cols = append(cols, rec.Column(i))
	}
	if idx := s.FieldIndices(name); len(idx) > 0 {
		i := idx[0]
		fields[i].Type = arr.DataType()
		cols[i] = arr
	} else {
		fields = append(fields, field)
		cols = append(cols, arr)
	}
	md := s.Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows())
}

// WithLabels returns rec with its labels replaced: row r's labels are
// values[offsets[r]:offsets[r+1]]. An existing label column keeps its metadata (so an
// ExampleBatch's __LABEL__ list keeps its position and id), but becomes one cell per row.
func WithLabels(mem memory.Allocator, rec arrow.RecordBatch, offsets []int32, values []float32) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	if len(offsets) != n+1 {
		return nil, fmt.Errorf("schemas/batch: labels: %d offsets for %d rows", len(offsets), n)
	}
	b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float32)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Float32Builder)
	for r := 0; r < n; r++ {
		s, e := offsets[r], offsets[r+1]
		if s < 0 || e < s || int(e) > len(values) {
			return nil, fmt.Errorf("schemas/batch: labels: bad offsets for row %d", r)
		}
		b.Append(true)
		vb.AppendValues(values[s:e], nil)
	}
	arr := b.NewArray()
	defer arr.Release()
	field := arrow.Field{Name: ColLabel, Type: arr.DataType(), Nullable: true,
		Metadata: arrow.NewMetadata([]string{MetaRole}, []string{string(RoleLabel)})}
	return replaceColumn(rec, ColLabel, field, arr), nil
}

// WithInstanceWeights returns rec with one instance weight per row.
func WithInstanceWeights(mem memory.Allocator, rec arrow.RecordBatch, w []float32) (arrow.RecordBatch, error) {
	if len(w) != int(rec.NumRows()) {
		return nil, fmt.Errorf("schemas/batch: instance weights: %d values for %d rows", len(w), rec.NumRows())
	}
	b := array.NewFloat32Builder(mem)
	defer b.Release()
	b.AppendValues(w, nil)
	arr := b.NewArray()
	defer arr.Release()
	field := arrow.Field{Name: ColInstanceWeight, Type: arr.DataType(), Nullable: true,
		Metadata: arrow.NewMetadata([]string{MetaRole}, []string{string(RoleInstanceWeight)})}
	return replaceColumn(rec, ColInstanceWeight, field, arr), nil
}

// WithLineIDs returns rec with the serialized LineId of every row replaced (nil = absent)
// and the decoded LineId columns rebuilt from them.
func WithLineIDs(mem memory.Allocator, rec arrow.RecordBatch, lineIDs [][]byte) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	if len(lineIDs) != n {
		return nil, fmt.Errorf("schemas/batch: line ids: %d values for %d rows", len(lineIDs), n)
	}
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer b.Release()
	for _, l := range lineIDs {
		if l == nil {
			b.AppendNull()
		} else {
			b.Append(l)
		}
	}
	arr := b.NewArray()
	defer arr.Release()
	field := arrow.Field{Name: ColLineID, Type: arr.DataType(), Nullable: true,
		Metadata: arrow.NewMetadata([]string{MetaRole}, []string{string(RoleLineID)})}
	out := replaceColumn(rec, ColLineID, field, arr)
	fields, cols, err := lineIDColumns(mem, arr)
	if err != nil {
		out.Release()
		return nil, err
	}
	for i, f := range fields {
		next := replaceColumn(out, f.Name, f, cols[i])
		out.Release()
		cols[i].Release()
		out = next
	}
	return out, nil
}

// LineIDBytes returns a copy-free view of row r's serialized LineId (nil when absent).
func LineIDBytes(rec arrow.RecordBatch, r int) ([]byte, error) {
	idx := rec.Schema().FieldIndices(ColLineID)
	if len(idx) == 0 {
		return nil, nil
	}
	col := rec.Column(idx[0])
	lv := logicalOf(col)
	b, ok := lv.values.(*array.Binary)
	if !ok {
		return nil, fmt.Errorf("%w: %s has type %s", ErrLayout, ColLineID, col.DataType())
	}
	if r < 0 || r >= col.Len() {
		// A row outside the column (or a column shorter than the batch) is an error, not
		// an index out of range.
		return nil, fmt.Errorf("%w: %s: row %d of %d", ErrLayout, ColLineID, r, col.Len())
	}
	p := lv.index(r)
	if b.IsNull(p) {
		return nil, nil
	}
	return b.Value(p), nil
}
