package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// File formats without run-end encoding (Parquet, Avro, JSON lines) store a batch in its
// flat form: every run-end encoded column expanded to one value per row, the decoded LineId
// columns included (handy for analysts, re-derived on read), and the exact batch schema kept
// beside the rows (see EncodeSchema). Conform turns the flat rows back into the batch.

// schemaJSON is the stored form of a batch schema: field order, names, types (by their
// Arrow type string, from the closed set the layout uses), nullability and metadata, with
// metadata as ordered key/value pairs.
type schemaJSON struct {
	Metadata [][2]string `json:"metadata,omitempty"`
	Fields   []fieldJSON `json:"fields"`
}

type fieldJSON struct {
	Name     string      `json:"name"`
	Type     string      `json:"type"`
	Nullable bool        `json:"nullable,omitempty"`
	Metadata [][2]string `json:"metadata,omitempty"`
}

func pairs(md arrow.Metadata) [][2]string {
	out := make([][2]string, md.Len())
	for i := range out {
		out[i] = [2]string{md.Keys()[i], md.Values()[i]}
	}
	return out
}

func unpairs(p [][2]string) arrow.Metadata {
	keys, vals := make([]string, len(p)), make([]string, len(p))
	for i, kv := range p {
		keys[i], vals[i] = kv[0], kv[1]
	}
	return arrow.NewMetadata(keys, vals)
}

// layoutTypes maps the type string of every Arrow type a batch column can have (plain
// and run-end encoded) to the type. DecodeSchema accepts nothing else.
var layoutTypes = func() map[string]arrow.DataType {
	base := []arrow.DataType{arrow.Null, arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint32,
		arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Uint64, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64, arrow.BinaryTypes.Binary,
		arrow.BinaryTypes.String, arrow.FixedWidthTypes.Boolean,
		arrow.ListOf(arrow.PrimitiveTypes.Uint8), arrow.ListOf(arrow.PrimitiveTypes.Int32)}
	for f := famFid; f <= famFidV1Lists; f++ {
		base = append(base, f.arrowType())
	}
	m := map[string]arrow.DataType{}
	for _, t := range base {
		m[t.String()] = t
		ree := arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, t)
		m[ree.String()] = ree
	}
	return m
}()

// roleTypes are the flat types of the canonical columns.
var roleTypes = map[Role]arrow.DataType{
	RoleLabel:          arrow.ListOf(arrow.PrimitiveTypes.Float32),
	RoleInstanceWeight: arrow.PrimitiveTypes.Float32,
	RoleLineID:         arrow.BinaryTypes.Binary,
	RoleDataSourceKey:  arrow.PrimitiveTypes.Uint32,
	RoleExtra:          arrow.BinaryTypes.Binary,
	RoleFidOrder:       arrow.ListOf(arrow.PrimitiveTypes.Int32),
	RoleCell:           arrow.PrimitiveTypes.Uint8,
	RoleV1Hi:           arrow.ListOf(arrow.PrimitiveTypes.Uint8),
}

// EncodeSchema serializes a batch schema (types, field and schema metadata) for files that
// store batches in flat form. The encoding is a small JSON document (see DecodeSchema).
func EncodeSchema(s *arrow.Schema) ([]byte, error) {
	js := schemaJSON{Metadata: pairs(s.Metadata()), Fields: make([]fieldJSON, len(s.Fields()))}
	for i, f := range s.Fields() {
		if _, ok := layoutTypes[f.Type.String()]; !ok {
			return nil, fmt.Errorf("%w: column %q has type %s, which is not a batch layout type", ErrLayout, f.Name, f.Type)
		}
		js.Fields[i] = fieldJSON{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable, Metadata: pairs(f.Metadata)}
	}
	b, err := json.Marshal(js)
	if err != nil {
		return nil, fmt.Errorf("schemas/batch: encode schema: %w", err)
	}
	return b, nil
}

// DecodeSchema is the inverse of EncodeSchema. It is safe on untrusted input: it accepts
// only the column types of the layout, checks the layout version and source, the types of
// the canonical columns and the feature metadata, and allocates nothing beyond the size of
// its input.
func DecodeSchema(b []byte) (*arrow.Schema, error) {
	var js schemaJSON
	if err := json.Unmarshal(b, &js); err != nil {
		return nil, fmt.Errorf("%w: batch schema: %v", ErrLayout, err)
	}
	fields := make([]arrow.Field, len(js.Fields))
	for i, f := range js.Fields {
		dt, ok := layoutTypes[f.Type]
		if !ok {
			return nil, fmt.Errorf("%w: batch schema: column %q has type %q, which is not a batch layout type", ErrLayout, f.Name, f.Type)
		}
		fields[i] = arrow.Field{Name: f.Name, Type: dt, Nullable: f.Nullable, Metadata: unpairs(f.Metadata)}
	}
	md := unpairs(js.Metadata)
	s := arrow.NewSchema(fields, &md)
	if err := CheckSchema(s); err != nil {
		return nil, err
	}
	return s, nil
}

// CheckSchema reports whether s follows the batch layout closely enough for the readers
// (ToExampleBatch and friends, Conform, FromRows): layout version and source, canonical
// column types, feature kinds that match their column types, unique names.
func CheckSchema(s *arrow.Schema) error {
	if _, err := SourceOf(s); err != nil {
		return err
	}
	seen := make(map[string]bool, len(s.Fields()))
	for _, f := range s.Fields() {
		if seen[f.Name] {
			return fmt.Errorf("%w: two columns are named %q", ErrLayout, f.Name)
		}
		seen[f.Name] = true
		flat := FlatType(f.Type)
		if ree, ok := f.Type.(*arrow.RunEndEncodedType); ok && ree.RunEnds().ID() != arrow.INT32 {
			return fmt.Errorf("%w: column %q: run ends must be int32", ErrLayout, f.Name)
		}
		role := RoleOf(f)
		if want, ok := roleTypes[role]; ok && !arrow.TypeEqual(flat, want) {
			return fmt.Errorf("%w: column %q (role %s) has type %s, want %s", ErrLayout, f.Name, role, flat, want)
		}
		switch role {
		case RoleFeature:
			if _, err := newFeatureReaderType(f); err != nil {
				return err
			}
		case RoleLineIDField:
			name, _ := strings.CutPrefix(f.Name, lineIDFieldPrefix)
			ok := false
			for _, lf := range LineIDFields {
				ok = ok || lf.Name == name && arrow.TypeEqual(flat, lf.Type)
			}
			if !ok {
				return fmt.Errorf("%w: column %q is not a decoded LineId field of the layout", ErrLayout, f.Name)
			}
		case RoleCell, RoleV1Hi:
			// A companion is named after its role and its feature, which readers (Conform,
			// FromRows) look it up by.
			of, _ := f.Metadata.GetValue(MetaOf)
			prefix := v1hiPrefix
			if role == RoleCell {
				prefix = cellPrefix
			}
			if f.Name != prefix+of {
				return fmt.Errorf("%w: companion column %q (role %s) of feature %q must be named %q", ErrLayout, f.Name, role, of, prefix+of)
			}
			if i := s.FieldIndices(of); len(i) != 1 || RoleOf(s.Field(i[0])) != RoleFeature {
				return fmt.Errorf("%w: companion column %q of missing feature %q", ErrLayout, f.Name, of)
			}
		case RoleLabel, RoleInstanceWeight, RoleLineID, RoleDataSourceKey, RoleExtra, RoleFidOrder:
		default:
			return fmt.Errorf("%w: column %q has unknown role %q", ErrLayout, f.Name, role)
		}
	}
	return nil
}

// FlatType returns the type a column of type dt has in the flat form.
func FlatType(dt arrow.DataType) arrow.DataType {
	if ree, ok := dt.(*arrow.RunEndEncodedType); ok {
		return ree.Encoded()
	}
	return dt
}

// Flatten returns rec with every run-end encoded column expanded. Field metadata is kept.
// The result belongs to the caller.
func Flatten(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	s := rec.Schema()
	fields := make([]arrow.Field, len(s.Fields()))
	cols := make([]arrow.Array, len(fields))
	ctx := compute.WithAllocator(context.Background(), mem)
	for i, f := range s.Fields() {
		f.Type = FlatType(f.Type)
		fields[i] = f
		col := rec.Column(i)
		ree, ok := col.(*array.RunEndEncoded)
		if !ok {
			col.Retain()
			cols[i] = col
			continue
		}
		out, err := expand(ctx, mem, ree)
		if err != nil {
			releaseAll(cols[:i])
			return nil, fmt.Errorf("schemas/batch: flatten %q: %w", f.Name, err)
		}
		cols[i] = out
	}
	md := s.Metadata()
	out := array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows())
	releaseAll(cols)
	return out, nil
}

// expand materializes a run-end encoded column.
func expand(ctx context.Context, mem memory.Allocator, ree *array.RunEndEncoded) (arrow.Array, error) {
	if ree.Values().DataType().ID() == arrow.NULL {
		return array.NewNull(ree.Len()), nil
	}
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.Reserve(ree.Len())
	for r := 0; r < ree.Len(); r++ {
		b.UnsafeAppend(int32(ree.GetPhysicalIndex(r)))
	}
	idx := b.NewArray()
	defer idx.Release()
	return compute.TakeArray(ctx, ree.Values(), idx)
}

// Conform rebuilds a batch of schema target from its flat form: columns are taken by name
// (extra columns are ignored), run-end encoded columns are re-encoded after checking that
// every row holds the same value, null-typed columns are checked to be all null, and the
// decoded LineId columns are taken as they are. The result belongs to the caller.
func Conform(mem memory.Allocator, flat arrow.RecordBatch, target *arrow.Schema) (arrow.RecordBatch, error) {
	n := int(flat.NumRows())
	cols := make([]arrow.Array, 0, len(target.Fields()))
	fail := func(err error) (arrow.RecordBatch, error) {
		releaseAll(cols)
		return nil, err
	}
	for _, f := range target.Fields() {
		idx := flat.Schema().FieldIndices(f.Name)
		if len(idx) == 0 && RoleOf(f) == RoleV1Hi && allNull(flat, strings.TrimPrefix(f.Name, v1hiPrefix)) {
			// The row form keeps no v1 signature bits for a feature without values.
			cols = append(cols, array.MakeArrayOfNull(mem, FlatType(f.Type), n))
			continue
		}
		if len(idx) != 1 {
			return fail(fmt.Errorf("%w: column %q: found %d times in the flat rows", ErrLayout, f.Name, len(idx)))
		}
		if n == 0 {
			// No rows: nothing to check, and no value to give a column its type.
			cols = append(cols, emptyArray(mem, f.Type))
			continue
		}
		col := flat.Column(idx[0])
		want := FlatType(f.Type)
		switch {
		case want.ID() == arrow.NULL:
			if col.NullN() != col.Len() {
				return fail(fmt.Errorf("%w: column %q should be all null", ErrLayout, f.Name))
			}
			col = array.NewNull(n)
		case col.DataType().ID() == arrow.NULL && !arrow.TypeEqual(col.DataType(), want):
			// The flat form of an all-null typed column (a slice or a Take of a batch can
			// leave one) has no values to give it a type: the batch schema does.
			col = array.MakeArrayOfNull(mem, want, n)
		case !arrow.TypeEqual(col.DataType(), want):
			return fail(fmt.Errorf("%w: column %q has type %s, the batch schema says %s", ErrLayout, f.Name, col.DataType(), want))
		default:
			col.Retain()
		}
		if _, ok := f.Type.(*arrow.RunEndEncodedType); ok {
			first := array.NewSlice(col, 0, 1)
			for r := 1; r < n; r++ {
				// NaNs compare equal: a shared cell repeated row by row is the same value.
				if !array.SliceApproxEqual(col, 0, 1, col, int64(r), int64(r+1), array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
					first.Release()
					col.Release()
					return fail(fmt.Errorf("%w: shared column %q differs between rows 0 and %d", ErrLayout, f.Name, r))
				}
			}
			col.Release()
			ree, err := runEndEncode(mem, first, n)
			first.Release()
			if err != nil {
				return fail(err)
			}
			col = ree
		}
		cols = append(cols, col)
	}
	rec := array.NewRecordBatch(target, cols, int64(n))
	releaseAll(cols)
	return rec, nil
}

// emptyArray returns an array of type dt without elements.
func emptyArray(mem memory.Allocator, dt arrow.DataType) arrow.Array {
	if ree, ok := dt.(*arrow.RunEndEncodedType); ok {
		ends := array.MakeArrayOfNull(mem, ree.RunEnds(), 0)
		vals := emptyArray(mem, ree.Encoded())
		defer ends.Release()
		defer vals.Release()
		return array.NewRunEndEncodedArray(ends, vals, 0, 0)
	}
	return array.MakeArrayOfNull(mem, dt, 0)
}

// UnionSchema merges the flat schemas of several batches into one file schema: columns in
// first-appearance order, a null-typed column giving way to a typed one, batch metadata
// dropped (each batch keeps its own through EncodeSchema). Two batches that give one column
// different types are an error.
func UnionSchema(schemas ...*arrow.Schema) (*arrow.Schema, error) {
	var fields []arrow.Field
	pos := map[string]int{}
	for _, s := range schemas {
		for _, f := range s.Fields() {
			f.Type = FlatType(f.Type)
			f.Nullable = true
			i, ok := pos[f.Name]
			if !ok {
				pos[f.Name] = len(fields)
				fields = append(fields, f)
				continue
			}
			have := fields[i].Type
			switch {
			case arrow.TypeEqual(have, f.Type) || f.Type.ID() == arrow.NULL:
			case have.ID() == arrow.NULL:
				fields[i].Type = f.Type
			default:
				return nil, fmt.Errorf("%w: column %q is %s in one batch and %s in another", ErrUnrepresentable, f.Name, have, f.Type)
			}
		}
	}
	for i := range fields {
		fields[i].Metadata = arrow.Metadata{}
	}
	return arrow.NewSchema(fields, nil), nil
}

// Widen returns the flat record laid out on the file schema: columns in file order, missing
// ones all null, null-typed ones cast to the file type. The result belongs to the caller.
func Widen(mem memory.Allocator, flat arrow.RecordBatch, file *arrow.Schema) (arrow.RecordBatch, error) {
	n := int(flat.NumRows())
	cols := make([]arrow.Array, 0, len(file.Fields()))
	for _, f := range file.Fields() {
		idx := flat.Schema().FieldIndices(f.Name)
		var col arrow.Array
		switch {
		case len(idx) == 1 && arrow.TypeEqual(flat.Column(idx[0]).DataType(), f.Type):
			col = flat.Column(idx[0])
			col.Retain()
		case len(idx) == 0 || flat.Column(idx[0]).DataType().ID() == arrow.NULL:
			col = array.MakeArrayOfNull(mem, f.Type, n)
		default:
			releaseAll(cols)
			return nil, fmt.Errorf("%w: column %q has type %s, the file schema says %s", ErrUnrepresentable, f.Name, flat.Column(idx[0]).DataType(), f.Type)
		}
		cols = append(cols, col)
	}
	rec := array.NewRecordBatch(file, cols, int64(n))
	releaseAll(cols)
	return rec, nil
}

// allNull reports whether the flat rows hold column name with only null cells (or not at
// all).
func allNull(flat arrow.RecordBatch, name string) bool {
	idx := flat.Schema().FieldIndices(name)
	if len(idx) == 0 {
		return true
	}
	col := flat.Column(idx[0])
	return col.NullN() == col.Len()
}
