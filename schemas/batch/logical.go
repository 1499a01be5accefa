package batch

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// logical maps the logical rows of a column onto the physical values that hold them, so
// that plain and run-end encoded (shared) columns are read the same way.
type logical struct {
	values arrow.Array
	ree    *array.RunEndEncoded
}

func logicalOf(col arrow.Array) logical {
	if r, ok := col.(*array.RunEndEncoded); ok {
		return logical{values: r.Values(), ree: r}
	}
	return logical{values: col}
}

// index returns the physical index in values of logical row r.
func (l logical) index(r int) int {
	if l.ree == nil {
		return r
	}
	return l.ree.GetPhysicalIndex(r)
}

// shared reports whether the column is run-end encoded.
func (l logical) shared() bool { return l.ree != nil }
