package parse

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// maxCells bounds rows·dim of one output column and the fids of one sparse column (Arrow
// list offsets are int32).
const maxCells = math.MaxInt32

// newBuf allocates a zeroed buffer of n elements of T from mem and returns it with its
// typed view.
func newBuf[T uint64 | int64 | int32 | float32](mem memory.Allocator, n int) (*memory.Buffer, []T) {
	var zero T
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n * int(unsafe.Sizeof(zero)))
	b := buf.Bytes()
	clear(b)
	return buf, arrow.GetData[T](b)
}

// newBufUninit is newBuf without zeroing, for buffers that are overwritten entirely.
func newBufUninit[T uint64 | int64 | int32 | float32](mem memory.Allocator, n int) (*memory.Buffer, []T) {
	var zero T
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n * int(unsafe.Sizeof(zero)))
	return buf, arrow.GetData[T](buf.Bytes())
}

// sparseOut is a list<uint64> output column under construction.
type sparseOut struct {
	offBuf, valBuf *memory.Buffer
	offs           []int32
	vals           []uint64
}

// denseOut is a fixed_size_list<T>[dim] output column under construction: numeric columns
// are written in place (zeroed first); bytes columns are appended row by row.
type denseOut struct {
	name   string
	dim    int
	dtype  DType
	buf    *memory.Buffer
	f32    []float32
	i64    []int64
	bb     *array.BinaryBuilder
	filled bool // bytes: the rows have been appended
}

func newDenseOut(mem memory.Allocator, name string, dim int, dt DType, rows int) (*denseOut, error) {
	if int64(rows)*int64(dim) > maxCells {
		return nil, fmt.Errorf("%w: feature %q: %d rows × dim %d is too large", ErrInput, name, rows, dim)
	}
	o := &denseOut{name: name, dim: dim, dtype: dt}
	switch dt {
	case Float32:
		o.buf, o.f32 = newBuf[float32](mem, rows*dim)
	case Int64:
		o.buf, o.i64 = newBuf[int64](mem, rows*dim)
	default:
		o.bb = array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		o.bb.Reserve(rows * dim)
	}
	return o, nil
}

// fillEmpty appends empty values for every row of a bytes column nothing wrote.
func (o *denseOut) fillEmpty(rows int) {
	if o.bb != nil && !o.filled {
		o.bb.AppendEmptyValues(rows * o.dim)
		o.filled = true
	}
}

func (o *denseOut) release() {
	if o.buf != nil {
		o.buf.Release()
		o.buf = nil
	}
	if o.bb != nil {
		o.bb.Release()
		o.bb = nil
	}
}

// array builds the output array of o, of type dt (which keeps nothing afterwards).
func (o *denseOut) array(dt arrow.DataType, rows int) arrow.Array {
	var child arrow.ArrayData
	switch {
	case o.bb != nil:
		o.fillEmpty(rows)
		a := o.bb.NewArray()
		child = a.Data()
		child.Retain()
		a.Release()
	default:
		child = array.NewData(o.dtype.arrowType(), rows*o.dim, []*memory.Buffer{nil, o.buf}, nil, 0, 0)
	}
	defer child.Release()
	data := array.NewData(dt, rows, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
	defer data.Release()
	o.release()
	return array.MakeFromData(data)
}

func (o *sparseOut) release() {
	for _, b := range []*memory.Buffer{o.offBuf, o.valBuf} {
		if b != nil {
			b.Release()
		}
	}
	o.offBuf, o.valBuf = nil, nil
}

// array builds the list<uint64> output array of o, of type dt.
func (o *sparseOut) array(mem memory.Allocator, dt arrow.DataType, rows int) arrow.Array {
	if o.offBuf == nil {
		o.offBuf, o.offs = newBuf[int32](mem, rows+1)
	}
	if o.valBuf == nil {
		o.valBuf, o.vals = newBuf[uint64](mem, 0)
	}
	child := array.NewData(arrow.PrimitiveTypes.Uint64, len(o.vals), []*memory.Buffer{nil, o.valBuf}, nil, 0, 0)
	defer child.Release()
	data := array.NewData(dt, rows, []*memory.Buffer{nil, o.offBuf}, []arrow.ArrayData{child}, 0, 0)
	defer data.Release()
	o.release()
	return array.MakeFromData(data)
}
