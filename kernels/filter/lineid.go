package filter

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/matrixpb"
)

// fieldClass says how a LineId field's values are read and compared.
type fieldClass uint8

const (
	classInt    fieldClass = iota + 1 // signed integers, uint32/fixed32, bool (0/1), enums
	classUint                         // uint64 and fixed64: operands are reinterpreted as uint64
	classFloat                        // float and double
	classString                       // string and bytes
	classInts                         // repeated integer fields (actions, pre_actions, ...)
)

func (c fieldClass) String() string {
	switch c {
	case classInt:
		return "integer"
	case classUint:
		return "uint64"
	case classFloat:
		return "floating-point"
	case classString:
		return "string"
	case classInts:
		return "repeated integer"
	}
	return "unsupported"
}

// lidField is a LineId field resolved by name at construction.
type lidField struct {
	name  string
	fd    protoreflect.FieldDescriptor
	class fieldClass
}

var lineIDDesc = (&matrixpb.LineId{}).ProtoReflect().Descriptor()

// lineIDField resolves a LineId field by its proto name.
func lineIDField(op, name string) (*lidField, error) {
	fd := lineIDDesc.Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		return nil, configError(op, "%q is not a LineId field", name)
	}
	f := &lidField{name: name, fd: fd}
	integer := false
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.BoolKind, protoreflect.EnumKind:
		f.class, integer = classInt, true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		f.class, integer = classUint, true
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f.class = classFloat
	case protoreflect.StringKind, protoreflect.BytesKind:
		f.class = classString
	default:
		return nil, configError(op, "LineId field %q has unsupported type %s", name, fd.Kind())
	}
	if fd.IsList() {
		if !integer {
			return nil, configError(op, "LineId field %q is a repeated %s field; only repeated integers are supported", name, fd.Kind())
		}
		f.class = classInts
	} else if fd.IsMap() {
		return nil, configError(op, "LineId field %q is a map", name)
	}
	return f, nil
}

// mustLineIDField resolves a field the package itself names (actions, chnid, ...).
func mustLineIDField(name string) *lidField {
	f, err := lineIDField("internal", name)
	if err != nil {
		panic(err) // invariant: the generated LineId has these fields
	}
	return f
}

var (
	fieldReqTime    = mustLineIDField("req_time")
	fieldActions    = mustLineIDField("actions")
	fieldPreActions = mustLineIDField("pre_actions")
	fieldStrategies = mustLineIDField("special_strategies")
	fieldChnid      = mustLineIDField("chnid")
)

// lidRows gives per-row access to the LineIds of one record: the decoded
// "__line_id__.<field>" columns where present, else the serialized bytes decoded with the
// generated LineId message (one row cached). It is built per call and not shared.
type lidRows struct {
	op   string
	rec  arrow.RecordBatch
	raw  *array.Binary // nil when the record has no line_id column
	rmap rowMap
	pb   matrixpb.LineId
	row  int // row decoded into pb, or -1
}

func bindLineIDs(op string, rec arrow.RecordBatch) (*lidRows, error) {
	d := &lidRows{op: op, rec: rec, row: -1}
	col, err := column(op, rec, batch.ColLineID)
	if err != nil || col == nil {
		return d, err
	}
	vals, m := physical(col)
	switch v := vals.(type) {
	case *array.Binary:
		d.raw, d.rmap = v, m
	case *array.Null:
	default:
		return nil, inputError(op, "column %q has type %s, want binary", batch.ColLineID, col.DataType())
	}
	return d, nil
}

// bytes returns a view of row r's serialized LineId (nil when absent).
func (d *lidRows) bytes(r int) []byte {
	if d.raw == nil {
		return nil
	}
	p := d.rmap.at(r)
	if d.raw.IsNull(p) {
		return nil
	}
	return d.raw.Value(p)
}

// message decodes row r's LineId (the default message when absent).
func (d *lidRows) message(r int) (protoreflect.Message, error) {
	if d.row != r {
		if err := proto.Unmarshal(d.bytes(r), &d.pb); err != nil {
			d.row = -1
			return nil, &RowError{Op: d.op, Column: batch.ColLineID, Row: r, Err: fmt.Errorf("cannot parse LineId: %w", err)}
		}
		d.row = r
	}
	return d.pb.ProtoReflect(), nil
}

// lidCol reads one LineId field of every row of a record.
type lidCol struct {
	f    *lidField
	d    *lidRows
	name string // column read: the decoded column, or __line_id__
	rmap rowMap
	// The decoded column's values; all nil when the field is decoded from the bytes.
	i64  *array.Int64
	i32  *array.Int32
	u64  *array.Uint64
	u32  *array.Uint32
	f32  *array.Float32
	f64  *array.Float64
	str  *array.String
	bin  *array.Binary
	boo  *array.Boolean
	list *array.List
	li32 []int32
}

// bind returns the accessor of field f, preferring its decoded column.
func (d *lidRows) bind(f *lidField) (*lidCol, error) {
	c := &lidCol{f: f, d: d, name: batch.ColLineID}
	colName := batch.LineIDColumn(f.name)
	col, err := column(d.op, d.rec, colName)
	if err != nil || col == nil {
		return c, err
	}
	vals, m := physical(col)
	ok := false
	switch v := vals.(type) {
	case *array.Int64:
		c.i64, ok = v, f.class == classInt
	case *array.Int32:
		c.i32, ok = v, f.class == classInt
	case *array.Uint32:
		c.u32, ok = v, f.class == classInt
	case *array.Boolean:
		c.boo, ok = v, f.class == classInt
	case *array.Uint64:
		c.u64, ok = v, f.class == classUint
	case *array.Float32:
		c.f32, ok = v, f.class == classFloat
	case *array.Float64:
		c.f64, ok = v, f.class == classFloat
	case *array.String:
		c.str, ok = v, f.class == classString
	case *array.Binary:
		c.bin, ok = v, f.class == classString
	case *array.List:
		if child, isI32 := v.ListValues().(*array.Int32); isI32 && f.class == classInts {
			c.list, c.li32, ok = v, child.Int32Values(), true
		}
	}
	if !ok {
		return nil, inputError(d.op, "column %q has type %s, which does not fit the %s LineId field %q",
			colName, col.DataType(), f.class, f.name)
	}
	c.name, c.rmap = colName, m
	return c, nil
}

// int64At reads a classInt field.
func (c *lidCol) int64At(r int) (int64, error) {
	p := c.rmap.at(r)
	switch {
	case c.i64 != nil:
		return c.i64.Value(p), nil
	case c.i32 != nil:
		return int64(c.i32.Value(p)), nil
	case c.u32 != nil:
		return int64(c.u32.Value(p)), nil
	case c.boo != nil:
		if c.boo.Value(p) {
			return 1, nil
		}
		return 0, nil
	}
	m, err := c.d.message(r)
	if err != nil {
		return 0, err
	}
	v := m.Get(c.f.fd)
	switch c.f.fd.Kind() {
	case protoreflect.BoolKind:
		if v.Bool() {
			return 1, nil
		}
		return 0, nil
	case protoreflect.EnumKind:
		return int64(v.Enum()), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return int64(v.Uint()), nil
	}
	return v.Int(), nil
}

// uint64At reads a classUint field.
func (c *lidCol) uint64At(r int) (uint64, error) {
	if c.u64 != nil {
		return c.u64.Value(c.rmap.at(r)), nil
	}
	m, err := c.d.message(r)
	if err != nil {
		return 0, err
	}
	return m.Get(c.f.fd).Uint(), nil
}

// float64At reads a classFloat field; float32 values are widened exactly.
func (c *lidCol) float64At(r int) (float64, error) {
	switch {
	case c.f32 != nil:
		return float64(c.f32.Value(c.rmap.at(r))), nil
	case c.f64 != nil:
		return c.f64.Value(c.rmap.at(r)), nil
	}
	m, err := c.d.message(r)
	if err != nil {
		return 0, err
	}
	return m.Get(c.f.fd).Float(), nil
}

// stringAt reads a classString field. The string aliases the record (or the decoded row)
// and is valid until the next call.
func (c *lidCol) stringAt(r int) (string, error) {
	switch {
	case c.str != nil:
		return c.str.Value(c.rmap.at(r)), nil
	case c.bin != nil:
		return c.bin.ValueString(c.rmap.at(r)), nil
	}
	m, err := c.d.message(r)
	if err != nil {
		return "", err
	}
	v := m.Get(c.f.fd)
	if c.f.fd.Kind() == protoreflect.BytesKind {
		return string(v.Bytes()), nil
	}
	return v.String(), nil
}

// numberAt reads any numeric scalar field as float64 (uint64 values above 2^53 round).
func (c *lidCol) numberAt(r int) (float64, error) {
	switch c.f.class {
	case classInt:
		v, err := c.int64At(r)
		return float64(v), err
	case classUint:
		v, err := c.uint64At(r)
		return float64(v), err
	}
	return c.float64At(r)
}

// intsAt appends the values of a classInts field to dst.
func (c *lidCol) intsAt(r int, dst []int64) ([]int64, error) {
	if c.list != nil {
		p := c.rmap.at(r)
		if c.list.IsNull(p) {
			return dst, nil
		}
		s, e := c.list.ValueOffsets(p)
		if s < 0 || e < s || int(e) > len(c.li32) {
			return dst, &RowError{Op: c.d.op, Column: c.name, Row: r, Err: fmt.Errorf("list offsets [%d, %d) outside %d values", s, e, len(c.li32))}
		}
		for _, v := range c.li32[s:e] {
			dst = append(dst, int64(v))
		}
		return dst, nil
	}
	m, err := c.d.message(r)
	if err != nil {
		return dst, err
	}
	l := m.Get(c.f.fd).List()
	kind := c.f.fd.Kind()
	for i := 0; i < l.Len(); i++ {
		v := l.Get(i)
		switch kind {
		case protoreflect.BoolKind:
			if v.Bool() {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
			}
		case protoreflect.EnumKind:
			dst = append(dst, int64(v.Enum()))
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			dst = append(dst, int64(v.Uint()))
		default:
			dst = append(dst, v.Int())
		}
	}
	return dst, nil
}

// lidEditor rewrites the LineIds of some rows of a record and keeps the others' bytes.
type lidEditor struct {
	d       *lidRows
	out     [][]byte
	msg     matrixpb.LineId
	changed bool
}

func newLidEditor(d *lidRows, n int) *lidEditor {
	e := &lidEditor{d: d, out: make([][]byte, n)}
	for r := range e.out {
		e.out[r] = d.bytes(r)
	}
	return e
}

var marshalDet = proto.MarshalOptions{Deterministic: true}

// edit decodes row r's LineId (unknown fields kept, I3), applies fn and re-encodes it.
func (e *lidEditor) edit(r int, fn func(m *matrixpb.LineId)) error {
	if err := proto.Unmarshal(e.out[r], &e.msg); err != nil {
		return &RowError{Op: e.d.op, Column: batch.ColLineID, Row: r, Err: fmt.Errorf("cannot parse LineId: %w", err)}
	}
	fn(&e.msg)
	b, err := marshalDet.Marshal(&e.msg)
	if err != nil {
		return &RowError{Op: e.d.op, Column: batch.ColLineID, Row: r, Err: err}
	}
	if b == nil {
		b = []byte{} // present but empty, not absent
	}
	e.out[r] = b
	e.changed = true
	return nil
}

// withLineIDs wraps batch.WithLineIDs with the op's name.
func withLineIDs(op string, mem memory.Allocator, rec arrow.RecordBatch, lineIDs [][]byte) (arrow.RecordBatch, error) {
	out, err := batch.WithLineIDs(mem, rec, lineIDs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}
