package hostcall

import (
	"errors"
	"fmt"
)

// GlobalStepName is the name of the first tensor of every host call.
const GlobalStepName = "global_step"

// ErrInput is wrapped by every error about the inputs.
var ErrInput = errors.New("hostcall: bad input")

// DType names the element type of a tensor as TensorFlow does.
type DType string

// The element types a host call carries.
const (
	Float32 DType = "float32"
	Float64 DType = "float64"
	Int32   DType = "int32"
	Int64   DType = "int64"
	Bool    DType = "bool"
)

// Tensor is one recorded tensor of one core: a name and a []float32, []float64, []int32,
// []int64 or []bool (a scalar is a slice of one).
type Tensor struct {
	Name string
	Data any
}

// dtypeOf returns the element type and length of data.
func dtypeOf(data any) (DType, int, error) {
	switch x := data.(type) {
	case []float32:
		return Float32, len(x), nil
	case []float64:
		return Float64, len(x), nil
	case []int32:
		return Int32, len(x), nil
	case []int64:
		return Int64, len(x), nil
	case []bool:
		return Bool, len(x), nil
	}
	return "", 0, fmt.Errorf("%w: unsupported tensor type %T (want a slice of float32, float64, int32, int64 or bool)", ErrInput, data)
}

// asSlice turns a scalar of a supported type into a slice of one.
func asSlice(v any) any {
	switch x := v.(type) {
	case float32:
		return []float32{x}
	case float64:
		return []float64{x}
	case int32:
		return []int32{x}
	case int64:
		return []int64{x}
	case bool:
		return []bool{x}
	}
	return v
}

// Recorder collects the tensors of a host call (BaseHostCall): the global step first, then
// every tensor recorded by name. A disabled Recorder records nothing.
type Recorder struct {
	enabled bool
	tensors []Tensor
	names   map[string]bool
}

// NewRecorder returns a Recorder holding the global step.
func NewRecorder(enabled bool, globalStep int64) *Recorder {
	return &Recorder{
		enabled: enabled,
		tensors: []Tensor{{Name: GlobalStepName, Data: []int64{globalStep}}},
		names:   map[string]bool{GlobalStepName: true},
	}
}

// Record adds a scalar or a rank-1 slice under a new name; it does nothing when the
// Recorder is disabled. The data is not copied.
func (r *Recorder) Record(name string, data any) error {
	if !r.enabled {
		return nil
	}
	if r.names[name] {
		return fmt.Errorf("%w: tensor %q recorded twice", ErrInput, name)
	}
	data = asSlice(data)
	if _, _, err := dtypeOf(data); err != nil {
		return fmt.Errorf("tensor %q: %w", name, err)
	}
	r.names[name] = true
	r.tensors = append(r.tensors, Tensor{Name: name, Data: data})
	return nil
}

// Tensors returns the recorded tensors, the global step first.
func (r *Recorder) Tensors() []Tensor { return r.tensors }

// Layout is what Compress learned and Decompress needs: per compressed tensor its element
// type and the names and lengths of the tensors concatenated in it.
type Layout struct {
	DTypes []DType
	Names  [][]string
	Sizes  [][]int
}

// AllNames returns every tensor name in compressed order (the order Decompress returns).
func (l Layout) AllNames() []string {
	var out []string
	for _, ns := range l.Names {
		out = append(out, ns...)
	}
	return out
}

// Compress groups tensors by element type, in the order each type first appears, and
// concatenates each group: one row of Σk values per type, the row a core sends (the
// reference's compress_tensors, whose (1, Σk) tensors these are).
func Compress(ts []Tensor) (Layout, []any, error) {
	var l Layout
	var rows []any
	group := map[DType]int{}
	for _, t := range ts {
		dt, n, err := dtypeOf(t.Data)
		if err != nil {
			return Layout{}, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		g, ok := group[dt]
		if !ok {
			g = len(l.DTypes)
			group[dt] = g
			l.DTypes = append(l.DTypes, dt)
			l.Names = append(l.Names, nil)
			l.Sizes = append(l.Sizes, nil)
			rows = append(rows, emptyOf(dt))
		}
		l.Names[g] = append(l.Names[g], t.Name)
		l.Sizes[g] = append(l.Sizes[g], n)
		rows[g] = appendData(rows[g], t.Data)
	}
	return l, rows, nil
}

func emptyOf(dt DType) any {
	switch dt {
	case Float32:
		return []float32{}
	case Float64:
		return []float64{}
	case Int32:
		return []int32{}
	case Int64:
		return []int64{}
	}
	return []bool{}
}

// appendData appends src to dst, two slices of the same type.
func appendData(dst, src any) any {
	switch d := dst.(type) {
	case []float32:
		return append(d, src.([]float32)...)
	case []float64:
		return append(d, src.([]float64)...)
	case []int32:
		return append(d, src.([]int32)...)
	case []int64:
		return append(d, src.([]int64)...)
	}
	return append(dst.([]bool), src.([]bool)...)
}

// Column is one decompressed tensor: Cores rows of Width values, row-major (the reference
// squeezes it to (Cores·Width) values in the same order).
type Column struct {
	Name         string
	Cores, Width int
	Data         any
}

// Decompress splits the gathered compressed tensors, one per Layout group: the rows of
// every core, cores·Σk values row-major, of the group's type. The first column must be the
// global step.
func (l Layout) Decompress(gathered []any, cores int) ([]Column, error) {
	if len(gathered) != len(l.DTypes) {
		return nil, fmt.Errorf("%w: %d compressed tensors, the layout has %d", ErrInput, len(gathered), len(l.DTypes))
	}
	if cores < 1 {
		return nil, fmt.Errorf("%w: %d cores", ErrInput, cores)
	}
	var cols []Column
	for g, data := range gathered {
		dt, n, err := dtypeOf(data)
		if err != nil {
			return nil, fmt.Errorf("compressed tensor %d: %w", g, err)
		}
		if dt != l.DTypes[g] {
			return nil, fmt.Errorf("%w: compressed tensor %d is %s, the layout says %s", ErrInput, g, dt, l.DTypes[g])
		}
		total := 0
		for _, k := range l.Sizes[g] {
			total += k
		}
		if n != cores*total {
			return nil, fmt.Errorf("%w: compressed tensor %d has %d values, want %d cores × %d", ErrInput, g, n, cores, total)
		}
		off := 0
		for i, k := range l.Sizes[g] {
			cols = append(cols, Column{Name: l.Names[g][i], Cores: cores, Width: k, Data: split(data, cores, total, off, k)})
			off += k
		}
	}
	if len(cols) == 0 || cols[0].Name != GlobalStepName {
		first := ""
		if len(cols) > 0 {
			first = cols[0].Name
		}
		return nil, fmt.Errorf("%w: the first tensor name must be %s, got %q", ErrInput, GlobalStepName, first)
	}
	return cols, nil
}

// split copies columns [off, off+k) of every row of a rows×total matrix.
func split(data any, rows, total, off, k int) any {
	switch d := data.(type) {
	case []float32:
		return splitOf(d, rows, total, off, k)
	case []float64:
		return splitOf(d, rows, total, off, k)
	case []int32:
		return splitOf(d, rows, total, off, k)
	case []int64:
		return splitOf(d, rows, total, off, k)
	}
	return splitOf(data.([]bool), rows, total, off, k)
}

func splitOf[T any](d []T, rows, total, off, k int) []T {
	out := make([]T, 0, rows*k)
	for r := 0; r < rows; r++ {
		out = append(out, d[r*total+off:r*total+off+k]...)
	}
	return out
}

// GlobalStep returns the global step of core 0 from decompressed columns.
func GlobalStep(cols []Column) (int64, error) {
	if len(cols) == 0 || cols[0].Name != GlobalStepName {
		return 0, fmt.Errorf("%w: no %s column first", ErrInput, GlobalStepName)
	}
	steps, ok := cols[0].Data.([]int64)
	if !ok || len(steps) == 0 {
		return 0, fmt.Errorf("%w: %s is not a non-empty int64 column", ErrInput, GlobalStepName)
	}
	return steps[0], nil
}
