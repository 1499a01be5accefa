package filter

import (
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
)

// Operands are the right-hand side of a comparison. Exactly one list is used, chosen by
// the type of the field compared: Ints for integer fields (reinterpreted as uint64 for
// uint64 fields), Floats for float and double fields, Strings for string and bytes fields.
// Setting a list that does not fit the field is a configuration error.
type Operands struct {
	Ints    []int64
	Floats  []float64
	Strings []string
}

func (o Operands) empty() bool { return len(o.Ints) == 0 && len(o.Floats) == 0 && len(o.Strings) == 0 }

// OperandsFromFilterValues returns the operands held by a FilterValues message (the
// operand file of filter_by_value and filter_by_feature_value): float_list values become
// Floats, int64_list Ints and bytes_list Strings.
func OperandsFromFilterValues(fv *examplepb.FilterValues) (Operands, error) {
	var o Operands
	switch {
	case fv.GetFloatList() != nil:
		for _, v := range fv.GetFloatList().GetValue() {
			o.Floats = append(o.Floats, float64(v))
		}
		if o.Floats == nil {
			o.Floats = []float64{}
		}
	case fv.GetInt64List() != nil:
		o.Ints = append([]int64{}, fv.GetInt64List().GetValue()...)
	case fv.GetBytesList() != nil:
		o.Strings = []string{}
		for _, v := range fv.GetBytesList().GetValue() {
			o.Strings = append(o.Strings, string(v))
		}
	default:
		return o, fmt.Errorf("%w: FilterValues holds no list", ErrConfig)
	}
	return o, nil
}

// LoadFilterValues reads a file holding one serialized FilterValues message and returns
// its operands (see OperandsFromFilterValues).
func LoadFilterValues(path string) (Operands, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Operands{}, fmt.Errorf("%w: operand file: %v", ErrConfig, err)
	}
	var fv examplepb.FilterValues
	if err := proto.Unmarshal(b, &fv); err != nil {
		return Operands{}, fmt.Errorf("%w: operand file %s: %v", ErrConfig, path, err)
	}
	o, err := OperandsFromFilterValues(&fv)
	if err != nil {
		return o, fmt.Errorf("operand file %s: %w", path, err)
	}
	return o, nil
}

// loadOperands resolves an operand file (allowed with in / not-in only).
func loadOperands(op string, o cmpOp, ops Operands, path string) (Operands, error) {
	if path == "" {
		return ops, nil
	}
	if !o.isMember() {
		return ops, configError(op, "an operand file is only allowed with in and not-in, not %s", o)
	}
	if !ops.empty() {
		return ops, configError(op, "give operands either inline or in a file, not both")
	}
	loaded, err := LoadFilterValues(path)
	if err != nil {
		return ops, fmt.Errorf("%s: %w", op, err)
	}
	return loaded, nil
}

// fieldPred is a compiled comparison for one field class.
type fieldPred struct {
	class fieldClass
	ip    scalarPred[int64]
	up    scalarPred[uint64]
	fp    scalarPred[float64]
	sp    stringPred
	set   setPred
}

// compilePred checks the op and operands against the class of the field called name.
func compilePred(op, name string, class fieldClass, o cmpOp, ops Operands) (fieldPred, error) {
	p := fieldPred{class: class}
	var want string
	var n int
	switch class {
	case classInts, classInt, classUint:
		want, n = "Ints", len(ops.Ints)
		if ops.Floats != nil || ops.Strings != nil {
			return p, configError(op, "field %q is %s: give Ints operands", name, class)
		}
	case classFloat:
		want, n = "Floats", len(ops.Floats)
		if ops.Ints != nil || ops.Strings != nil {
			return p, configError(op, "field %q is %s: give Floats operands", name, class)
		}
		if hasNaN(ops.Floats) {
			return p, configError(op, "field %q: NaN operand", name)
		}
	case classString:
		want, n = "Strings", len(ops.Strings)
		if ops.Ints != nil || ops.Floats != nil {
			return p, configError(op, "field %q is %s: give Strings operands", name, class)
		}
	default:
		return p, configError(op, "field %q has an unsupported type", name)
	}
	if class == classInts {
		if !o.isSet() {
			return p, configError(op, "field %q is repeated: only any, all and diff apply, not %s", name, o)
		}
		if n == 0 {
			return p, configError(op, "%s needs at least 1 %s operand", o, want)
		}
		p.set = newSetPred(o, ops.Ints)
		return p, nil
	}
	if o.isSet() {
		return p, configError(op, "%s applies to repeated fields only; field %q is not repeated", o, name)
	}
	if o.isString() && class != classString {
		return p, configError(op, "%s applies to string fields only; field %q is %s", o, name, class)
	}
	if err := checkArity(op, o, n); err != nil {
		return p, err
	}
	switch class {
	case classInt:
		p.ip = newScalarPred(o, ops.Ints)
	case classUint:
		u := make([]uint64, len(ops.Ints))
		for i, v := range ops.Ints {
			u[i] = uint64(v)
		}
		p.up = newScalarPred(o, u)
	case classFloat:
		p.fp = newScalarPred(o, ops.Floats)
	case classString:
		p.sp = newStringPred(o, ops.Strings)
	}
	return p, nil
}

// evalLineID evaluates the predicate on row r of a LineId field.
func (p *fieldPred) evalLineID(c *lidCol, r int, keepEmpty bool, buf *[]int64, s *setScratch) (bool, error) {
	switch p.class {
	case classInt:
		v, err := c.int64At(r)
		return err == nil && p.ip.match(v), err
	case classUint:
		v, err := c.uint64At(r)
		return err == nil && p.up.match(v), err
	case classFloat:
		v, err := c.float64At(r)
		return err == nil && p.fp.match(v), err
	case classString:
		v, err := c.stringAt(r)
		return err == nil && p.sp.match(v), err
	}
	vals, err := c.intsAt(r, (*buf)[:0])
	*buf = vals
	if err != nil {
		return false, err
	}
	if len(vals) == 0 {
		return keepEmpty, nil
	}
	return p.set.match(vals, s), nil
}

// ValueOptions configures filter_by_value (io.md §3.7.2).
type ValueOptions struct {
	// Field is the LineId field name, e.g. "req_time", "chnid", "actions".
	Field string
	// Op is one of gt, ge, eq, lt, le, neq, between, in, not-in (scalar fields),
	// startswith, endswith (string fields), any, all, diff (repeated fields).
	Op string
	// Operands: one for the comparisons, two for between (lower ≤ v < upper), any number
	// for in / not-in, at least one for startswith / endswith and the set ops.
	Operands Operands
	// OperandFile names a file holding a serialized FilterValues whose list replaces
	// Operands (in and not-in only). It is read once, at construction.
	OperandFile string
	// KeepEmpty is the result for a repeated field without values.
	KeepEmpty bool
}

// ValueFilter is filter_by_value: it keeps the rows whose LineId field satisfies a
// comparison. It is safe for concurrent use.
type ValueFilter struct {
	field     *lidField
	pred      fieldPred
	keepEmpty bool
}

// NewFilterByValue validates o and returns the filter.
func NewFilterByValue(o ValueOptions) (*ValueFilter, error) {
	const op = "filter_by_value"
	f, err := lineIDField(op, o.Field)
	if err != nil {
		return nil, err
	}
	c, err := parseOp(op, o.Op)
	if err != nil {
		return nil, err
	}
	ops, err := loadOperands(op, c, o.Operands, o.OperandFile)
	if err != nil {
		return nil, err
	}
	p, err := compilePred(op, f.name, f.class, c, ops)
	if err != nil {
		return nil, err
	}
	return &ValueFilter{field: f, pred: p, keepEmpty: o.KeepEmpty}, nil
}

// Keep appends the indexes of the rows to keep to dst[:0].
func (f *ValueFilter) Keep(rec arrow.RecordBatch, dst []int) ([]int, error) {
	dst = dst[:0]
	d, err := bindLineIDs("filter_by_value", rec)
	if err != nil {
		return dst, err
	}
	c, err := d.bind(f.field)
	if err != nil {
		return dst, err
	}
	var buf []int64
	var s setScratch
	for r := range int(rec.NumRows()) {
		ok, err := f.pred.evalLineID(c, r, f.keepEmpty, &buf, &s)
		if err != nil {
			return dst, err
		}
		if ok {
			dst = append(dst, r)
		}
	}
	return dst, nil
}

// FeatureValueOptions configures filter_by_feature_value (io.md §3.7.3).
type FeatureValueOptions struct {
	// Feature is the name of the feature column (an Example named feature or an
	// ExampleBatch list).
	Feature string
	// FieldType is the list type the cell must have: "int64", "float", "double" or
	// "bytes" (int64_list, float_list, double_list, bytes_list).
	FieldType string
	// Op as for ValueOptions; any / all / diff need FieldType "int64", startswith /
	// endswith need "bytes".
	Op string
	// Operands: Ints for int64, Floats for float and double, Strings for bytes.
	Operands Operands
	// OperandFile as for ValueOptions.
	OperandFile string
	// KeepEmpty is the result for a row without a usable value: the feature is missing
	// from the batch or the row (I5), its cell is unset or of another type, or it holds
	// a number of values the op cannot use.
	KeepEmpty bool
}

// FeatureValueFilter is filter_by_feature_value: it keeps the rows whose feature cell
// satisfies a comparison. It is safe for concurrent use.
type FeatureValueFilter struct {
	name      string
	ftype     arrow.DataType // list child type
	pred      fieldPred
	keepEmpty bool
}

// NewFilterByFeatureValue validates o and returns the filter.
func NewFilterByFeatureValue(o FeatureValueOptions) (*FeatureValueFilter, error) {
	const op = "filter_by_feature_value"
	if o.Feature == "" {
		return nil, configError(op, "no feature name")
	}
	f := &FeatureValueFilter{name: o.Feature, keepEmpty: o.KeepEmpty}
	var class fieldClass
	switch o.FieldType {
	case "int64":
		f.ftype, class = arrow.PrimitiveTypes.Int64, classInt
	case "float":
		f.ftype, class = arrow.PrimitiveTypes.Float32, classFloat
	case "double":
		f.ftype, class = arrow.PrimitiveTypes.Float64, classFloat
	case "bytes":
		f.ftype, class = arrow.BinaryTypes.Binary, classString
	default:
		return nil, configError(op, "unknown field type %q (want int64, float, double or bytes)", o.FieldType)
	}
	c, err := parseOp(op, o.Op)
	if err != nil {
		return nil, err
	}
	ops, err := loadOperands(op, c, o.Operands, o.OperandFile)
	if err != nil {
		return nil, err
	}
	if c.isSet() && class == classInt {
		class = classInts // int64_list cells with set ops: set semantics over all values
	}
	if f.pred, err = compilePred(op, o.Feature, class, c, ops); err != nil {
		return nil, err
	}
	return f, nil
}

// Keep appends the indexes of the rows to keep to dst[:0]. Instance batches are an error
// (the op reads Example named features).
func (f *FeatureValueFilter) Keep(rec arrow.RecordBatch, dst []int) ([]int, error) {
	const op = "filter_by_feature_value"
	dst = dst[:0]
	n := int(rec.NumRows())
	src, err := batch.SourceOf(rec.Schema())
	if err != nil {
		return dst, fmt.Errorf("%s: %w", op, err)
	}
	if src == batch.SourceInstance {
		return dst, inputError(op, "Instance batches have no Example named features; convert them to Examples first")
	}
	col, err := column(op, rec, f.name)
	if err != nil {
		return dst, err
	}
	var list *array.List
	var m rowMap
	if col != nil {
		if fld, _ := rec.Schema().FieldsByName(f.name); batch.RoleOf(fld[0]) != batch.RoleFeature {
			return dst, inputError(op, "column %q is not a feature", f.name)
		}
		vals, rm := physical(col)
		if l, ok := vals.(*array.List); ok && arrow.TypeEqual(l.ListValues().DataType(), f.ftype) {
			list, m = l, rm
		}
	}
	if list == nil { // missing feature (I5) or cells of another type: every row is "empty"
		if f.keepEmpty {
			for r := range n {
				dst = append(dst, r)
			}
		}
		return dst, nil
	}
	var s setScratch
	child := list.ListValues()
	for r := range n {
		p := m.at(r)
		keep := f.keepEmpty
		if !list.IsNull(p) {
			st, en := list.ValueOffsets(p)
			if st < 0 || en < st || int(en) > child.Len() {
				return dst, &RowError{Op: op, Column: f.name, Row: r, Err: fmt.Errorf("list offsets [%d, %d) outside %d values", st, en, child.Len())}
			}
			keep = f.evalCell(child, int(st), int(en), &s)
		}
		if keep {
			dst = append(dst, r)
		}
	}
	return dst, nil
}

// evalCell evaluates the values [s, e) of the column's child array.
func (f *FeatureValueFilter) evalCell(child arrow.Array, s, e int, sc *setScratch) bool {
	if f.pred.class == classInts {
		if e == s {
			return f.keepEmpty
		}
		return f.pred.set.match(child.(*array.Int64).Int64Values()[s:e], sc)
	}
	if e-s != 1 {
		return f.keepEmpty
	}
	switch v := child.(type) {
	case *array.Int64:
		return f.pred.ip.match(v.Value(s))
	case *array.Float32:
		return f.pred.fp.match(float64(v.Value(s)))
	case *array.Float64:
		return f.pred.fp.match(v.Value(s))
	case *array.Binary:
		return f.pred.sp.match(v.ValueString(s))
	}
	return f.keepEmpty
}

// AddActionOptions configures add_action (io.md §3.7.6).
type AddActionOptions struct {
	// Field is a scalar LineId field.
	Field string
	// Op is one of gt, ge, eq, lt, le, neq, between, in.
	Op string
	// Operands as for ValueOptions.
	Operands Operands
	// Action is appended to line_id.actions of the matching rows.
	Action int32
}

// AddAction is add_action: it appends an action to the LineId of the rows whose field
// satisfies a comparison. It is safe for concurrent use.
type AddAction struct {
	field  *lidField
	pred   fieldPred
	action int32
}

// NewAddAction validates o and returns the op. Repeated and unknown fields are
// configuration errors (the reference leaves such samples unchanged).
func NewAddAction(o AddActionOptions) (*AddAction, error) {
	const op = "add_action"
	f, err := lineIDField(op, o.Field)
	if err != nil {
		return nil, err
	}
	if f.class == classInts {
		return nil, configError(op, "field %q is repeated; only scalar fields apply", o.Field)
	}
	c, err := parseOp(op, o.Op)
	if err != nil {
		return nil, err
	}
	if !c.isCompare() && c != opBetween && c != opIn {
		return nil, configError(op, "op %s is not one of gt, ge, eq, lt, le, neq, between, in", c)
	}
	p, err := compilePred(op, f.name, f.class, c, o.Operands)
	if err != nil {
		return nil, err
	}
	return &AddAction{field: f, pred: p, action: o.Action}, nil
}

// Apply returns rec with the action appended to the LineId of every matching row (a row
// without a LineId gets one). Other rows keep their LineId bytes unchanged; when no row
// matches, the result is rec itself, retained. The caller must Release the result.
func (a *AddAction) Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	d, err := bindLineIDs("add_action", rec)
	if err != nil {
		return nil, err
	}
	c, err := d.bind(a.field)
	if err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	var e *lidEditor
	for r := range n {
		ok, err := a.pred.evalLineID(c, r, false, nil, nil)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if e == nil {
			e = newLidEditor(d, n)
		}
		if err := e.edit(r, func(m *matrixpb.LineId) { m.Actions = append(m.Actions, a.action) }); err != nil {
			return nil, err
		}
	}
	if e == nil {
		rec.Retain()
		return rec, nil
	}
	return withLineIDs("add_action", mem, rec, e.out)
}
