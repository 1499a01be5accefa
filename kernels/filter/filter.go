package filter

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
)

// InvalidLabel is Monolith's INVALID_LABEL: the lowest finite float32 (-3.4028235e38).
// Label ops write it for tasks a sample carries no label for.
const InvalidLabel float32 = -math.MaxFloat32

// DefaultSeed is the seed a random op uses when its Seed option is 0 (I7).
const DefaultSeed uint64 = 0x5eed

// pcgStream is the second PCG seed word; fixed, so that a Seed alone fixes the sequence.
const pcgStream uint64 = 0x9e3779b97f4a7c15

// Errors. Configuration errors wrap ErrConfig; a record that lacks the layout an op
// needs wraps ErrInput; a problem with one row of a batch is a *RowError.
var (
	ErrConfig = errors.New("kernels/filter: invalid configuration")
	ErrInput  = errors.New("kernels/filter: unusable input")
)

// RowError reports a problem with one row of a batch: the op (Monolith's name, such as
// "filter_by_value"), the column and the row index.
type RowError struct {
	Op     string
	Column string
	Row    int
	Err    error
}

// Error implements error.
func (e *RowError) Error() string {
	return fmt.Sprintf("kernels/filter: %s: column %q row %d: %v", e.Op, e.Column, e.Row, e.Err)
}

// Unwrap returns the underlying error.
func (e *RowError) Unwrap() error { return e.Err }

// configError builds an ErrConfig error prefixed with the op name.
func configError(op, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, op, fmt.Sprintf(format, args...))
}

// inputError builds an ErrInput error prefixed with the op name.
func inputError(op, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInput, op, fmt.Sprintf(format, args...))
}

// Filter is a sample filter: Keep appends to dst[:0] the indexes of the rows of rec that
// pass, in ascending order, and returns the extended slice. rec is only read.
type Filter interface {
	Keep(rec arrow.RecordBatch, dst []int) ([]int, error)
}

// Op is a label (or line_id) op: Apply returns a record that the caller owns and must
// Release; rec is neither modified nor released.
type Op interface {
	Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error)
}

// Compile-time checks that every filter and op has the common shape.
var (
	_ Filter = (*FidsFilter)(nil)
	_ Filter = (*ValueFilter)(nil)
	_ Filter = (*FeatureValueFilter)(nil)
	_ Filter = (*SpecialStrategy)(nil)
	_ Filter = (*NegativeSample)(nil)
	_ Filter = (*LabelFilter)(nil)
	_ Op     = (*SpecialStrategy)(nil)
	_ Op     = (*AddAction)(nil)
	_ Op     = (*AddLabel)(nil)
	_ Op     = (*ScatterLabel)(nil)
	_ Op     = (*LabelUpperBound)(nil)
	_ Op     = (*LabelNormalization)(nil)
	_ Op     = (*FieldAsLabel)(nil)
	_ Op     = (*MultiLabelGen)(nil)
	_ Op     = (*InstanceReweight)(nil)
)

// Apply returns the rows of rec listed in keep (as returned by a Filter). When keep lists
// every row in order, the result is rec itself, retained (no copy); otherwise it is
// batch.Take. Either way the caller owns the result and must Release it.
func Apply(mem memory.Allocator, rec arrow.RecordBatch, keep []int) (arrow.RecordBatch, error) {
	if allRows(keep, int(rec.NumRows())) {
		rec.Retain()
		return rec, nil
	}
	return batch.Take(mem, rec, keep)
}

// Select runs f over rec and returns the kept rows as Apply does.
func Select(mem memory.Allocator, f Filter, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	keep, err := f.Keep(rec, nil)
	if err != nil {
		return nil, err
	}
	return Apply(mem, rec, keep)
}

func allRows(keep []int, n int) bool {
	if len(keep) != n {
		return false
	}
	for i, r := range keep {
		if r != i {
			return false
		}
	}
	return true
}

// source is a seeded, mutex-guarded generator shared by the calls of one random op.
type source struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newSource(seed uint64) *source {
	if seed == 0 {
		seed = DefaultSeed
	}
	return &source{r: rand.New(rand.NewPCG(seed, pcgStream))}
}

// rowMap maps the logical rows of a column onto its physical values (a run-end encoded
// column holds one value for many rows).
type rowMap struct{ ree *array.RunEndEncoded }

func (m rowMap) at(r int) int {
	if m.ree == nil {
		return r
	}
	return m.ree.GetPhysicalIndex(r)
}

// physical returns the array holding the values of col and the map from its rows.
func physical(col arrow.Array) (arrow.Array, rowMap) {
	if r, ok := col.(*array.RunEndEncoded); ok {
		return r.Values(), rowMap{ree: r}
	}
	return col, rowMap{}
}

// column returns the column called name, or nil when rec has none; two columns with that
// name are an error.
func column(op string, rec arrow.RecordBatch, name string) (arrow.Array, error) {
	idx := rec.Schema().FieldIndices(name)
	switch len(idx) {
	case 0:
		return nil, nil
	case 1:
		return rec.Column(idx[0]), nil
	}
	return nil, inputError(op, "%d columns are named %q", len(idx), name)
}
