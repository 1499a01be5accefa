package element

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestEmptyArrayOffsets: an empty binary or list array whose offsets buffer holds part of
// an offset is corrupt (Arrow's validation passes it and the IPC writer crashes on it, a
// fuzz-found case); no offsets buffer, an empty one or a whole offset is fine, and every
// array that validates re-encodes.
func TestEmptyArrayOffsets(t *testing.T) {
	types := []arrow.DataType{arrow.BinaryTypes.Binary, arrow.ListOf(arrow.PrimitiveTypes.Int32)}
	for _, dt := range types {
		for _, n := range []int{-1, 0, 1, 2, 3, 4} {
			var off *memory.Buffer
			if n >= 0 {
				off = memory.NewBufferBytes(make([]byte, 8)[:n]) // within one allocation, as IPC buffers are (checkptr)
			}
			var d *array.Data
			if dt.ID() == arrow.BINARY {
				d = array.NewData(dt, 0, []*memory.Buffer{nil, off, memory.NewBufferBytes(nil)}, nil, 0, 0)
			} else {
				child := array.NewData(arrow.PrimitiveTypes.Int32, 0, []*memory.Buffer{nil, memory.NewBufferBytes(nil)}, nil, 0, 0)
				d = array.NewData(dt, 0, []*memory.Buffer{nil, off}, []arrow.ArrayData{child}, 0, 0)
			}
			a := array.MakeFromData(d)
			err := validateArray(a)
			if bad := n >= 1 && n <= 3; (err != nil) != bad {
				t.Errorf("%s, offsets buffer of %d bytes: validate says %v, want an error: %v", dt, n, err, bad)
			}
			if err == nil {
				sc := arrow.NewSchema([]arrow.Field{{Name: "c", Type: dt, Nullable: true}}, nil)
				if _, err := EncodeRecord(array.NewRecordBatch(sc, []arrow.Array{a}, 0)); err != nil {
					t.Errorf("%s, offsets buffer of %d bytes: validates but does not encode: %v", dt, n, err)
				}
			}
		}
	}
}
