package batch

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/schemas/matrixpb"
)

// randomLineID sets each field of LineIDFields with probability ½, repeated ones to 0–3
// values, and adds an unknown field.
func randomLineID(rng *rand.Rand) *matrixpb.LineId {
	m := &matrixpb.LineId{}
	half := func() bool { return rng.IntN(2) == 0 }
	ints := func() []int32 {
		v := make([]int32, rng.IntN(4))
		for i := range v {
			v[i] = rng.Int32N(1000) - 10
		}
		return v
	}
	if half() {
		m.Uid = proto.Uint64(rng.Uint64())
	}
	if half() {
		m.ReqTime = proto.Int64(rng.Int64N(1 << 40))
	}
	if half() {
		m.ItemId = proto.Uint64(rng.Uint64())
	}
	if half() {
		m.Chnid = proto.Int64(rng.Int64N(100))
	}
	if half() {
		m.SampleRate = proto.Float32(rng.Float32())
	}
	if half() {
		m.Rank = proto.Int32(rng.Int32N(50))
	}
	if half() {
		m.IsDraw = proto.Bool(half())
	}
	m.Actions, m.PreActions, m.SpecialStrategies = ints(), ints(), ints()
	for _, p := range []**string{&m.DeviceType, &m.Cid, &m.UserId, &m.DataSourceName} {
		if half() {
			*p = proto.String(fmt.Sprintf("s%x", rng.Uint32()))
		}
	}
	return m
}

// fieldValue is row r of a decoded LineId column as a protoreflect-comparable Go value.
func fieldValue(a arrow.Array, r int) any {
	switch a := a.(type) {
	case *array.Uint64:
		return a.Value(r)
	case *array.Int64:
		return a.Value(r)
	case *array.Int32:
		return a.Value(r)
	case *array.Float32:
		return a.Value(r)
	case *array.Boolean:
		return a.Value(r)
	case *array.String:
		return a.Value(r)
	case *array.List:
		lo, hi := a.ValueOffsets(r)
		return fmt.Sprint(a.ListValues().(*array.Int32).Int32Values()[lo:hi])
	case *array.RunEndEncoded:
		return fieldValue(a.Values(), a.GetPhysicalIndex(r))
	}
	return fmt.Sprintf("unexpected %T", a)
}

// want is field f of m as fieldValue returns it: the proto default when unset.
func want(m *matrixpb.LineId, f LineIDField) any {
	fd := m.ProtoReflect().Descriptor().Fields().ByNumber(f.Number)
	v := m.ProtoReflect().Get(fd)
	if fd.IsList() {
		out := make([]int32, v.List().Len())
		for i := range out {
			out[i] = int32(v.List().Get(i).Int())
		}
		return fmt.Sprint(out)
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.FloatKind:
		return float32(v.Float())
	case protoreflect.Int32Kind:
		return int32(v.Int())
	case protoreflect.Int64Kind:
		return v.Int()
	}
	return v.Uint()
}

// TestLineIDColumns decodes random LineIds, null rows among them, per row and shared, and
// checks every column of LineIDFields, row by row, against the message's own field
// (its proto default when unset; sample_rate's is 1).
func TestLineIDColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name   string
		rows   int
		shared bool
	}{
		{"one row", 1, false},
		{"rows with nulls", 200, false},
		{"shared", 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			msgs := make([]*matrixpb.LineId, tc.rows)
			b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
			defer b.Release()
			for r := range msgs {
				if r > 0 && tc.shared {
					msgs[r] = msgs[0]
					continue
				}
				if r%7 == 3 {
					msgs[r] = &matrixpb.LineId{}
					b.AppendNull()
					continue
				}
				msgs[r] = randomLineID(rng)
				raw, err := proto.Marshal(msgs[r])
				if err != nil {
					t.Fatal(err)
				}
				b.Append(append(raw, 0x5a, 0x01, 'a')) // unknown field 11
			}
			col := arrow.Array(b.NewArray())
			if tc.shared {
				ree, err := runEndEncode(mem, col, tc.rows)
				col.Release()
				if err != nil {
					t.Fatal(err)
				}
				col = ree
			}
			defer col.Release()
			fields, arrs, err := lineIDColumns(mem, col)
			if err != nil {
				t.Fatal(err)
			}
			defer releaseAll(arrs)
			for i, f := range LineIDFields {
				if fields[i].Name != LineIDColumn(f.Name) || arrs[i].Len() != tc.rows {
					t.Fatalf("column %d is %s of %d rows, want %s of %d", i, fields[i].Name, arrs[i].Len(), LineIDColumn(f.Name), tc.rows)
				}
				if arrs[i].NullN() != 0 {
					t.Errorf("%s has %d nulls, want none", f.Name, arrs[i].NullN())
				}
				for r, m := range msgs {
					if got, w := fieldValue(arrs[i], r), want(m, f); got != w {
						t.Fatalf("%s row %d = %v, want %v", f.Name, r, got, w)
					}
				}
			}
		})
	}
}
