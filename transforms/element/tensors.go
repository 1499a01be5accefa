package element

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// MetaShape is the field metadata key holding a tensor column's shape after the batch
// dimension, as comma-separated integers ("4,8" for [B, 4, 8]; "" for [B, 1] scalars is
// written as "1").
const MetaShape = "monolith.shape"

// Tensor is one named float32 tensor of shape [B, Shape...], stored row-major.
type Tensor struct {
	Name  string
	Shape []int // dimensions after the batch dimension
	Data  []float32
}

// RowSize returns the number of floats per row.
func (t Tensor) RowSize() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// NewTensors builds a tensor record of rows rows: one column fixed_size_list<float32>[row
// size] per tensor, named after it, with its shape in the field metadata. The record
// aliases the tensors' Data (no copy); the caller must not modify them afterwards.
func NewTensors(rows int, tensors []Tensor) (arrow.RecordBatch, error) {
	fields := make([]arrow.Field, len(tensors))
	cols := make([]arrow.Array, len(tensors))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, t := range tensors {
		rs := t.RowSize()
		if rs <= 0 || len(t.Data) != rows*rs {
			return nil, fmt.Errorf("transforms/element: tensor %q has %d floats, want %d rows × %d", t.Name, len(t.Data), rows, rs)
		}
		dims := make([]string, len(t.Shape))
		for j, d := range t.Shape {
			dims[j] = strconv.Itoa(d)
		}
		typ := arrow.FixedSizeListOf(int32(rs), arrow.PrimitiveTypes.Float32)
		fields[i] = arrow.Field{Name: t.Name, Type: typ,
			Metadata: arrow.NewMetadata([]string{MetaShape}, []string{strings.Join(dims, ",")})}
		vals := array.NewData(arrow.PrimitiveTypes.Float32, len(t.Data),
			[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Float32Traits.CastToBytes(t.Data))}, nil, 0, 0)
		data := array.NewData(typ, rows, []*memory.Buffer{nil}, []arrow.ArrayData{vals}, 0, 0)
		vals.Release()
		cols[i] = array.MakeFromData(data)
		data.Release()
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(rows)), nil
}

// Tensors returns zero-copy views of the columns of a tensor record, in column order. The
// views are valid while rec is.
func Tensors(rec arrow.RecordBatch) ([]Tensor, error) {
	out := make([]Tensor, rec.NumCols())
	rows := int(rec.NumRows())
	for i, col := range rec.Columns() {
		f := rec.Schema().Field(i)
		fl, ok := col.(*array.FixedSizeList)
		if !ok {
			return nil, fmt.Errorf("transforms/element: tensor column %q has type %s", f.Name, col.DataType())
		}
		vals, ok := fl.ListValues().(*array.Float32)
		if !ok || fl.NullN() > 0 {
			return nil, fmt.Errorf("transforms/element: tensor column %q must be non-null float32 lists", f.Name)
		}
		rs := int(fl.DataType().(*arrow.FixedSizeListType).Len())
		all := vals.Float32Values()
		lo, hi := fl.Offset()*rs, (fl.Offset()+rows)*rs
		if lo > len(all) || hi > len(all) {
			return nil, fmt.Errorf("transforms/element: tensor column %q is shorter than its rows", f.Name)
		}
		t := Tensor{Name: f.Name, Data: all[lo:hi]}
		if s, ok := f.Metadata.GetValue(MetaShape); ok && s != "" {
			n := 1
			for _, p := range strings.Split(s, ",") {
				d, err := strconv.Atoi(p)
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("transforms/element: tensor column %q has shape %q", f.Name, s)
				}
				t.Shape = append(t.Shape, d)
				n *= d
			}
			if n != rs {
				return nil, fmt.Errorf("transforms/element: tensor column %q has shape %q but %d floats per row", f.Name, s, rs)
			}
		} else {
			t.Shape = []int{rs}
		}
		out[i] = t
	}
	return out, nil
}
