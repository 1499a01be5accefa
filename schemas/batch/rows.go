package batch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Row is one row of a batch in a self-contained, row-oriented form: the shape of a record
// in the Avro and JSON-lines files (schemas/avsc/row.avsc). The first row of every batch
// carries the batch's exact schema, so FromRows rebuilds the batch column for column.
type Row struct {
	// BatchSchema is EncodeSchema of the batch; set on its first row only.
	BatchSchema []byte `json:"batch_schema,omitempty"`
	// BatchRows is the number of rows of the batch; set on its first row only.
	BatchRows int `json:"batch_rows,omitempty"`
	// Features holds the cells of the row in column order; absent cells are left out.
	Features []Cell `json:"features"`
	// Nullable canonical columns: nil means null (or a column the batch does not have).
	Label          Float32s `json:"label"`
	InstanceWeight *float32 `json:"instance_weight"`
	LineID         []byte   `json:"line_id"`
	DataSourceKey  *uint32  `json:"data_source_key"`
	Extra          []byte   `json:"extra,omitzero"`
	FidOrder       []int32  `json:"fid_order,omitzero"`
}

// Cell is one feature cell of a Row. Kind says which value field holds data; fid_v1_list
// cells hold the original v1 fids. Scalar kinds use element 0 of their list.
type Cell struct {
	Name        string     `json:"name"`
	Kind        Kind       `json:"kind"`
	Fids        []uint64   `json:"fids,omitempty"`
	Floats      Float32s   `json:"floats,omitempty"`
	Doubles     Float64s   `json:"doubles,omitempty"`
	Int64s      []int64    `json:"int64s,omitempty"`
	Bytes       [][]byte   `json:"bytes,omitempty"`
	FidLists    [][]uint64 `json:"fid_lists,omitempty"`
	FloatLists  []Float32s `json:"float_lists,omitempty"`
	DoubleLists []Float64s `json:"double_lists,omitempty"`
	Int64Lists  [][]int64  `json:"int64_lists,omitempty"`
	BytesLists  [][][]byte `json:"bytes_lists,omitempty"`
}

// MarshalJSON writes the kind by name.
func (k Kind) MarshalJSON() ([]byte, error) { return json.Marshal(k.String()) }

// UnmarshalJSON reads a kind name.
func (k *Kind) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseKind(s)
	*k = v
	return err
}

// Float32s is a float32 slice whose JSON form writes NaN and infinities as the strings
// "NaN", "Infinity" and "-Infinity" (as protobuf JSON does), so every value round-trips.
type Float32s []float32

// Float64s is the float64 counterpart of Float32s.
type Float64s []float64

func marshalFloats[T float32 | float64](v []T, bits int) ([]byte, error) {
	if v == nil {
		return []byte("null"), nil
	}
	b := []byte{'['}
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		f := float64(x)
		switch {
		case math.IsNaN(f):
			b = append(b, `"NaN"`...)
		case math.IsInf(f, 1):
			b = append(b, `"Infinity"`...)
		case math.IsInf(f, -1):
			b = append(b, `"-Infinity"`...)
		default:
			b = strconv.AppendFloat(b, f, 'g', -1, bits)
		}
	}
	return append(b, ']'), nil
}

func unmarshalFloats[T float32 | float64](b []byte, bits int) ([]T, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, nil
	}
	out := make([]T, len(raw))
	for i, r := range raw {
		s := string(r)
		if len(s) > 0 && s[0] == '"' {
			if err := json.Unmarshal(r, &s); err != nil {
				return nil, err
			}
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil {
			return nil, fmt.Errorf("float %q: %w", s, err)
		}
		out[i] = T(f)
	}
	return out, nil
}

// MarshalJSON implements json.Marshaler.
func (v Float32s) MarshalJSON() ([]byte, error) { return marshalFloats(v, 32) }

// UnmarshalJSON implements json.Unmarshaler.
func (v *Float32s) UnmarshalJSON(b []byte) (err error) {
	*v, err = unmarshalFloats[float32](b, 32)
	return
}

// MarshalJSON implements json.Marshaler.
func (v Float64s) MarshalJSON() ([]byte, error) { return marshalFloats(v, 64) }

// UnmarshalJSON implements json.Unmarshaler.
func (v *Float64s) UnmarshalJSON(b []byte) (err error) {
	*v, err = unmarshalFloats[float64](b, 64)
	return
}

// Rows returns the rows of a batch in row form. The first row carries the batch schema; a
// batch without rows yields one row that carries only the schema (and BatchRows 0).
func Rows(rec arrow.RecordBatch) ([]Row, error) {
	cs, err := readColumns(rec)
	if err != nil {
		return nil, err
	}
	enc, err := EncodeSchema(rec.Schema())
	if err != nil {
		return nil, err
	}
	if cs.rows == 0 {
		return []Row{{BatchSchema: enc}}, nil
	}
	out := make([]Row, cs.rows)
	for r := range out {
		row := &out[r]
		for _, fr := range cs.features {
			c, ok := fr.rowCell(r)
			if ok {
				row.Features = append(row.Features, c)
			}
		}
		if v, ok := cs.labelAt(r); ok {
			if v == nil {
				v = []float32{}
			}
			row.Label = v
		}
		if v, ok := cs.iwAt(r); ok {
			row.InstanceWeight = &v
		}
		if v, ok := cs.lineIDAt(r); ok {
			if v == nil {
				v = []byte{}
			}
			row.LineID = v
		}
		if v, ok := cs.dskAt(r); ok {
			row.DataSourceKey = &v
		}
		if v, ok := cs.extraOK(r); ok {
			row.Extra = append([]byte{}, v...)
		}
		if runs, err := cs.fidRuns(r); err != nil {
			return nil, err
		} else if runs != nil {
			row.FidOrder = append([]int32{}, runs...)
		}
	}
	out[0].BatchSchema, out[0].BatchRows = enc, cs.rows
	return out, nil
}

// rowCell returns the cell of row r, or false when it is absent.
func (fr *featureReader) rowCell(r int) (Cell, bool) {
	k := fr.kindAt(r)
	c := Cell{Name: fr.name, Kind: k}
	p := fr.main.index(r)
	switch k {
	case KindAbsent:
		return c, false
	case KindUnset, KindNoFeature:
	case KindFidV1List, KindFidV2List:
		c.Fids = fr.fidsAt(r, k)
	case KindFloatList:
		c.Floats = listValues(fr, r, f32s)
	case KindDoubleList:
		c.Doubles = listValues(fr, r, f64s)
	case KindInt64List:
		c.Int64s = listValues(fr, r, i64s)
	case KindBytesList:
		c.Bytes = binaryValues(fr.main.values.(*array.List), p)
	case KindFidV2Lists, KindFidV1Lists:
		c.FidLists = nestedValues(fr, r, func(a arrow.Array, s, e int) []uint64 { return append([]uint64{}, u64s(a)[s:e]...) })
	case KindFloatLists:
		c.FloatLists = nestedValues(fr, r, func(a arrow.Array, s, e int) Float32s { return append(Float32s{}, f32s(a)[s:e]...) })
	case KindDoubleLists:
		c.DoubleLists = nestedValues(fr, r, func(a arrow.Array, s, e int) Float64s { return append(Float64s{}, f64s(a)[s:e]...) })
	case KindInt64Lists:
		c.Int64Lists = nestedValues(fr, r, func(a arrow.Array, s, e int) []int64 { return append([]int64{}, i64s(a)[s:e]...) })
	case KindBytesLists:
		c.BytesLists = nestedValues(fr, r, func(a arrow.Array, s, e int) [][]byte { return binSlice(a, s, e) })
	case KindInt64Value:
		c.Int64s = []int64{fr.main.values.(*array.Int64).Value(p)}
	case KindFloatValue:
		c.Floats = Float32s{fr.main.values.(*array.Float32).Value(p)}
	case KindDoubleValue:
		c.Doubles = Float64s{fr.main.values.(*array.Float64).Value(p)}
	case KindBytesValue:
		c.Bytes = [][]byte{append([]byte{}, fr.main.values.(*array.Binary).Value(p)...)}
	}
	return c, true
}

// appendRowCell appends a Row cell to a feature column.
func appendRowCell(mem memory.Allocator, c *featureCol, cell *Cell) error {
	one := func(n int) error {
		if n != 1 {
			return fmt.Errorf("%w: feature %q: %s cell holds %d values, want 1", ErrLayout, c.name, cell.Kind, n)
		}
		return nil
	}
	switch k := cell.Kind; k {
	case KindUnset, KindNoFeature, KindAbsent:
		c.null(k)
		return nil
	case KindFidV1List, KindFidV2List:
		return c.fids(mem, k, cell.Fids)
	case KindFloatList:
		return c.list(mem, k, func(b array.Builder) { b.(*array.Float32Builder).AppendValues(cell.Floats, nil) })
	case KindDoubleList:
		return c.list(mem, k, func(b array.Builder) { b.(*array.Float64Builder).AppendValues(cell.Doubles, nil) })
	case KindInt64List:
		return c.list(mem, k, func(b array.Builder) { b.(*array.Int64Builder).AppendValues(cell.Int64s, nil) })
	case KindBytesList:
		return c.list(mem, k, func(b array.Builder) { b.(*array.BinaryBuilder).AppendValues(cell.Bytes, nil) })
	case KindFidV2Lists, KindFidV1Lists:
		return c.nested(mem, k, len(cell.FidLists), func(i int, b array.Builder) { b.(*array.Uint64Builder).AppendValues(cell.FidLists[i], nil) })
	case KindFloatLists:
		return c.nested(mem, k, len(cell.FloatLists), func(i int, b array.Builder) { b.(*array.Float32Builder).AppendValues(cell.FloatLists[i], nil) })
	case KindDoubleLists:
		return c.nested(mem, k, len(cell.DoubleLists), func(i int, b array.Builder) { b.(*array.Float64Builder).AppendValues(cell.DoubleLists[i], nil) })
	case KindInt64Lists:
		return c.nested(mem, k, len(cell.Int64Lists), func(i int, b array.Builder) { b.(*array.Int64Builder).AppendValues(cell.Int64Lists[i], nil) })
	case KindBytesLists:
		return c.nested(mem, k, len(cell.BytesLists), func(i int, b array.Builder) { b.(*array.BinaryBuilder).AppendValues(cell.BytesLists[i], nil) })
	case KindInt64Value:
		if err := one(len(cell.Int64s)); err != nil {
			return err
		}
		return c.scalar(mem, k, func(b array.Builder) { b.(*array.Int64Builder).Append(cell.Int64s[0]) })
	case KindFloatValue:
		if err := one(len(cell.Floats)); err != nil {
			return err
		}
		return c.scalar(mem, k, func(b array.Builder) { b.(*array.Float32Builder).Append(cell.Floats[0]) })
	case KindDoubleValue:
		if err := one(len(cell.Doubles)); err != nil {
			return err
		}
		return c.scalar(mem, k, func(b array.Builder) { b.(*array.Float64Builder).Append(cell.Doubles[0]) })
	case KindBytesValue:
		if err := one(len(cell.Bytes)); err != nil {
			return err
		}
		return c.scalar(mem, k, func(b array.Builder) { b.(*array.BinaryBuilder).Append(cell.Bytes[0]) })
	}
	return fmt.Errorf("%w: feature %q: unknown cell kind %d", ErrLayout, c.name, cell.Kind)
}

// FromRows rebuilds one batch from its rows (as produced by Rows). rows[0] must carry the
// batch schema and BatchRows must equal len(rows).
func FromRows(mem memory.Allocator, rows []Row) (arrow.RecordBatch, error) {
	if len(rows) == 0 || rows[0].BatchSchema == nil {
		return nil, fmt.Errorf("%w: the first row of a batch carries no batch schema", ErrLayout)
	}
	target, err := DecodeSchema(rows[0].BatchSchema)
	if err != nil {
		return nil, err
	}
	src, err := SourceOf(target)
	if err != nil {
		return nil, err
	}
	n := rows[0].BatchRows
	if n == 0 && len(rows) == 1 {
		rows = nil
	} else if n != len(rows) {
		return nil, fmt.Errorf("%w: batch says %d rows, got %d", ErrLayout, n, len(rows))
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].BatchSchema != nil {
			return nil, fmt.Errorf("%w: row %d starts a new batch inside a batch", ErrLayout, i)
		}
	}
	rb := newRecordBuilder(mem, src, nil)
	var hasLineFields bool
	cursor := make([]int, len(rows))
	for _, f := range target.Fields() {
		if err := rb.addRowColumn(f, rows, cursor); err != nil {
			rb.release()
			return nil, err
		}
		hasLineFields = hasLineFields || RoleOf(f) == RoleLineIDField
	}
	rb.cfg.skipLineIDFields = !hasLineFields
	if v, ok := target.Metadata().GetValue(MetaExtra); ok {
		rb.extra = v
	}
	flat, err := rb.finish(len(rows))
	if err != nil {
		return nil, err
	}
	defer flat.Release()
	return Conform(mem, flat, target)
}

// addRowColumn adds the column of field f, filled from rows. cursor[r] is the next
// unread cell of row r: cells normally come in column order, so the lookup is O(1).
func (rb *recordBuilder) addRowColumn(f arrow.Field, rows []Row, cursor []int) error {
	role := RoleOf(f)
	switch role {
	case RoleFeature:
		c := newFeatureCol(f.Name)
		rb.cols = append(rb.cols, c)
		if _, mixed, err := FeatureKind(f); err != nil {
			return err
		} else if !mixed {
			c.inst, _ = f.Metadata.GetValue(MetaInstance)
		}
		for r := range rows {
			var cell *Cell
			fs := rows[r].Features
			if i := cursor[r]; i < len(fs) && fs[i].Name == f.Name {
				cell, cursor[r] = &fs[i], i+1
			} else {
				for i := range fs {
					if fs[i].Name == f.Name {
						cell = &fs[i]
						break
					}
				}
			}
			if cell == nil {
				c.null(KindAbsent)
				continue
			}
			if err := appendRowCell(rb.mem, c, cell); err != nil {
				return fmt.Errorf("row %d: %w", r, err)
			}
		}
		return nil
	case RoleV1Hi, RoleCell, RoleLineIDField:
		return nil // rebuilt with their feature / from the line_id column
	}
	c := rb.simple(f.Name, role, FlatType(f.Type), false)
	for _, row := range rows {
		switch role {
		case RoleLabel:
			b := c.b.(*array.ListBuilder)
			if row.Label == nil {
				b.AppendNull()
			} else {
				b.Append(true)
				b.ValueBuilder().(*array.Float32Builder).AppendValues(row.Label, nil)
			}
		case RoleInstanceWeight:
			if row.InstanceWeight == nil {
				c.b.AppendNull()
			} else {
				c.b.(*array.Float32Builder).Append(*row.InstanceWeight)
			}
		case RoleLineID:
			if row.LineID == nil {
				c.b.AppendNull()
			} else {
				c.b.(*array.BinaryBuilder).Append(row.LineID)
			}
		case RoleDataSourceKey:
			if row.DataSourceKey == nil {
				c.b.AppendNull()
			} else {
				c.b.(*array.Uint32Builder).Append(*row.DataSourceKey)
			}
		case RoleExtra:
			if row.Extra == nil {
				c.b.AppendNull()
			} else {
				c.b.(*array.BinaryBuilder).Append(row.Extra)
			}
		case RoleFidOrder:
			b := c.b.(*array.ListBuilder)
			if row.FidOrder == nil {
				b.AppendNull()
			} else {
				b.Append(true)
				b.ValueBuilder().(*array.Int32Builder).AppendValues(row.FidOrder, nil)
			}
		default:
			return fmt.Errorf("%w: column %q has unknown role %q", ErrLayout, f.Name, role)
		}
	}
	return nil
}

// ErrRowsEnded reports input that ends inside a batch of rows.
var ErrRowsEnded = errors.New("schemas/batch: the rows end inside a batch")

// CollectRows reads the rows of one batch from next, which yields rows in file order and
// io.EOF at the end of the input: the first row must start a batch (carry BatchSchema) and
// the batch ends after BatchRows rows. It returns io.EOF when the input ends before the
// batch starts, ErrRowsEnded when it ends inside it, ErrLayout for rows that do not fit, and
// errors of next as they are. Pass the rows to FromRows.
func CollectRows(next func() (Row, error)) ([]Row, error) {
	row, err := next()
	if err != nil {
		return nil, err // io.EOF included
	}
	if row.BatchSchema == nil {
		return nil, fmt.Errorf("%w: row carries no batch schema but no batch is open", ErrLayout)
	}
	if row.BatchRows < 0 {
		return nil, fmt.Errorf("%w: batch_rows is %d", ErrLayout, row.BatchRows)
	}
	rows := []Row{row}
	for len(rows) < row.BatchRows {
		r, err := next()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: a batch of %d rows ends after %d rows: %w", ErrRowsEnded, row.BatchRows, len(rows), io.ErrUnexpectedEOF)
		}
		if err != nil {
			return nil, err
		}
		if r.BatchSchema != nil {
			return nil, fmt.Errorf("%w: a batch of %d rows ends after %d rows: the next row starts a batch", ErrLayout, row.BatchRows, len(rows))
		}
		rows = append(rows, r)
	}
	return rows, nil
}
