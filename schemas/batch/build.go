package batch

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// Option configures batch construction.
type Option func(*config)

type config struct {
	skipLineIDFields bool
	maxRows          int
	dsk              *uint32
}

// WithDataSourceKey makes an ExampleBatch's data_source_key k, whatever the message says
// (the readers' header override, io.md §1.2.4).
func WithDataSourceKey(k uint32) Option { return func(c *config) { c.dsk = &k } }

// DefaultMaxRows bounds the batch_size of one ExampleBatch. A corrupt record claiming
// billions of rows is rejected instead of exhausting memory; see WithMaxRows.
const DefaultMaxRows = 1 << 22

// WithMaxRows sets the largest accepted ExampleBatch batch_size (default DefaultMaxRows).
func WithMaxRows(n int) Option { return func(c *config) { c.maxRows = n } }

// WithoutLineIDFields leaves out the decoded "__line_id__.<field>" columns. The raw
// LineId bytes are always kept.
func WithoutLineIDFields() Option { return func(c *config) { c.skipLineIDFields = true } }

var marshalDet = proto.MarshalOptions{Deterministic: true}

// simpleCol is a canonical (non-feature) column.
type simpleCol struct {
	name     string
	role     Role
	b        array.Builder
	built    arrow.Array // the finished array, when a fast path built it directly
	shared   bool
	optional bool // left out of the record when every value is null
	list     string
	id       int32
	valid    bool // saw a non-null value
}

func (c *simpleCol) finish(mem memory.Allocator, n int) ([]arrow.Field, []arrow.Array, error) {
	var arr arrow.Array
	if c.built != nil {
		arr, c.built = c.built, nil
	} else {
		arr = c.b.NewArray()
		c.b.Release()
	}
	if c.optional && !c.valid {
		arr.Release()
		return nil, nil, nil
	}
	keys, vals := []string{MetaRole}, []string{string(c.role)}
	if c.list != "" {
		keys, vals = append(keys, MetaList), append(vals, c.list)
	}
	if c.id != 0 {
		keys, vals = append(keys, MetaID), append(vals, strconv.Itoa(int(c.id)))
	}
	if c.shared {
		ree, err := runEndEncode(mem, arr, n)
		arr.Release()
		if err != nil {
			return nil, nil, err
		}
		arr = ree
	}
	return []arrow.Field{{Name: c.name, Type: arr.DataType(), Nullable: true, Metadata: arrow.NewMetadata(keys, vals)}},
		[]arrow.Array{arr}, nil
}

// column is one entry of the schema under construction.
type column interface {
	finish(mem memory.Allocator, n int) ([]arrow.Field, []arrow.Array, error)
}

// recordBuilder assembles a batch from columns in schema order.
type recordBuilder struct {
	mem   memory.Allocator
	cfg   config
	src   Source
	cols  []column
	feats map[string]*featureCol
	extra string     // base64 batch-level unmodelled bytes
	cells []wireCell // scratch of the wire decoder, reused across lists
}

func newRecordBuilder(mem memory.Allocator, src Source, opts []Option) *recordBuilder {
	rb := &recordBuilder{mem: mem, src: src, feats: map[string]*featureCol{}, cfg: config{maxRows: DefaultMaxRows}}
	for _, o := range opts {
		o(&rb.cfg)
	}
	return rb
}

func (rb *recordBuilder) release() {
	for _, c := range rb.cols {
		switch c := c.(type) {
		case *featureCol:
			c.release()
		case *simpleCol:
			if c.b != nil {
				c.b.Release()
			}
			if c.built != nil {
				c.built.Release()
			}
		}
	}
}

func (rb *recordBuilder) simple(name string, role Role, dt arrow.DataType, optional bool) *simpleCol {
	c := &simpleCol{name: name, role: role, b: array.NewBuilder(rb.mem, dt), optional: optional}
	rb.cols = append(rb.cols, c)
	return c
}

// feature returns the feature column called name, creating it (with rows absent cells) on
// first use; isNew reports the creation.
func (rb *recordBuilder) feature(name string, rows int) (c *featureCol, isNew bool) {
	if c, ok := rb.feats[name]; ok {
		return c, false
	}
	c = newFeatureCol(name)
	for i := 0; i < rows; i++ {
		c.null(KindAbsent)
	}
	rb.feats[name] = c
	rb.cols = append(rb.cols, c)
	return c, true
}

// finish builds the record. On error every partial array is released.
func (rb *recordBuilder) finish(n int) (arrow.RecordBatch, error) {
	var fields []arrow.Field
	var arrs []arrow.Array
	fail := func(err error) (arrow.RecordBatch, error) {
		releaseAll(arrs)
		rb.release()
		return nil, err
	}
	for i, c := range rb.cols {
		f, a, err := c.finish(rb.mem, n)
		if fc, ok := c.(*featureCol); ok {
			fc.release()
		}
		rb.cols[i] = nil
		if err != nil {
			rb.cols = rb.cols[i+1:]
			return fail(err)
		}
		fields, arrs = append(fields, f...), append(arrs, a...)
	}
	rb.cols = nil
	if !rb.cfg.skipLineIDFields {
		for i, f := range fields {
			if RoleOf(f) == RoleLineID {
				lf, la, err := lineIDColumns(rb.mem, arrs[i])
				if err != nil {
					return fail(err)
				}
				fields, arrs = append(fields, lf...), append(arrs, la...)
				break
			}
		}
	}
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if seen[f.Name] {
			return fail(fmt.Errorf("%w: two columns are named %q", ErrUnrepresentable, f.Name))
		}
		seen[f.Name] = true
	}
	keys := []string{MetaLayout, MetaSource}
	vals := []string{LayoutVersion, rb.src.String()}
	if rb.extra != "" {
		keys, vals = append(keys, MetaExtra), append(vals, rb.extra)
	}
	schema := arrow.NewSchema(fields, func() *arrow.Metadata { m := arrow.NewMetadata(keys, vals); return &m }())
	rec := array.NewRecordBatch(schema, arrs, int64(n))
	releaseAll(arrs)
	return rec, nil
}

// FromExampleBatch converts one ExampleBatch into a batch of eb.batch_size rows.
//
// Lists keep their order. SHARED lists become run-end encoded columns. The reserved lists
// __LABEL__, __LINE_ID__ and instance_weight become the label, line_id and instance_weight
// columns when their cells have the expected shape (float_list; bytes_list with one value;
// float_list with one value; or unset) and stay ordinary feature columns otherwise.
// Errors (wrapping ErrUnrepresentable) name the offending list: an INDIVIDUAL list whose
// length is not batch_size (D6), a SHARED list without exactly one cell, two lists with
// one name, or cells of incompatible kinds in one list.
func FromExampleBatch(mem memory.Allocator, eb *examplepb.ExampleBatch, opts ...Option) (arrow.RecordBatch, error) {
	rb := newRecordBuilder(mem, SourceExampleBatch, opts)
	n := int(eb.GetBatchSize())
	if n < 0 || n > rb.cfg.maxRows {
		return nil, fmt.Errorf("%w: batch_size %d is outside [0, %d]", ErrUnrepresentable, n, rb.cfg.maxRows)
	}
	if n == 0 {
		// Nothing can be laid out in zero rows: keep the whole message as batch-level bytes.
		b, err := marshalDet.Marshal(eb)
		if err != nil {
			return nil, fmt.Errorf("schemas/batch: %w", err)
		}
		if len(b) > 0 {
			rb.extra = base64.StdEncoding.EncodeToString(b)
		}
		return rb.finish(0)
	}
	names := make(map[string]int, len(eb.GetNamedFeatureList()))
	for li, l := range eb.GetNamedFeatureList() {
		name := l.GetName()
		if prev, dup := names[name]; dup {
			rb.release()
			return nil, fmt.Errorf("%w: lists %d and %d are both named %q", ErrUnrepresentable, prev, li, name)
		}
		names[name] = li
		if err := rb.addList(l, n); err != nil {
			rb.release()
			return nil, fmt.Errorf("list %d %q: %w", li, name, err)
		}
	}
	dsk := rb.simple(ColDataSourceKey, RoleDataSourceKey, arrow.PrimitiveTypes.Uint32, false)
	key := eb.GetDataSourceKey()
	if rb.cfg.dsk != nil {
		key = *rb.cfg.dsk
	}
	dsk.b.(*array.Uint32Builder).Append(key)
	dsk.shared = true
	// Batch-level fields the layout does not model.
	if len(eb.GetNamedRawFeatureList()) > 0 || len(eb.ProtoReflect().GetUnknown()) > 0 {
		rest := &examplepb.ExampleBatch{NamedRawFeatureList: eb.GetNamedRawFeatureList()}
		rest.ProtoReflect().SetUnknown(eb.ProtoReflect().GetUnknown())
		b, err := marshalDet.Marshal(rest)
		if err != nil {
			rb.release()
			return nil, fmt.Errorf("schemas/batch: %w", err)
		}
		rb.extra = base64.StdEncoding.EncodeToString(b)
	}
	return rb.finish(n)
}

func (rb *recordBuilder) addList(l *examplepb.NamedFeatureList, n int) error {
	if len(l.ProtoReflect().GetUnknown()) > 0 {
		return fmt.Errorf("%w: the list carries unknown fields", ErrUnrepresentable)
	}
	cells := l.GetFeature()
	shared := l.GetType() == examplepb.FeatureListType_SHARED
	switch {
	case l.GetType() != examplepb.FeatureListType_INDIVIDUAL && !shared:
		return fmt.Errorf("%w: unknown list type %d", ErrUnrepresentable, l.GetType())
	case shared && len(cells) != 1:
		return fmt.Errorf("%w: SHARED list has %d cells, want exactly 1", ErrUnrepresentable, len(cells))
	case !shared && len(cells) != n:
		return fmt.Errorf("%w: INDIVIDUAL list has %d cells but batch_size is %d", ErrUnrepresentable, len(cells), n)
	}
	if c := rb.canonicalList(l); c != nil {
		c.shared, c.list, c.id = shared, l.GetName(), l.GetId()
		return nil
	}
	c := newFeatureCol(l.GetName())
	rb.cols = append(rb.cols, c)
	c.shared = shared
	c.id, c.idSet = l.GetId(), true
	for _, f := range cells {
		if err := appendExampleCell(rb.mem, c, f); err != nil {
			return err
		}
	}
	return nil
}

// canonicalList turns a reserved list into its canonical column when every cell fits.
func (rb *recordBuilder) canonicalList(l *examplepb.NamedFeatureList) *simpleCol {
	cells := l.GetFeature()
	fits := func(ok func(f *examplepb.Feature) bool) bool {
		for _, f := range cells {
			if f.GetType() != nil && !ok(f) || len(f.ProtoReflect().GetUnknown()) > 0 {
				return false
			}
		}
		return true
	}
	switch l.GetName() {
	case ListLabel:
		if !fits(func(f *examplepb.Feature) bool { return f.GetFloatList() != nil && clean(f.GetFloatList()) }) {
			return nil
		}
		c := rb.simple(ColLabel, RoleLabel, arrow.ListOf(arrow.PrimitiveTypes.Float32), false)
		b := c.b.(*array.ListBuilder)
		for _, f := range cells {
			if fl := f.GetFloatList(); fl != nil {
				b.Append(true)
				b.ValueBuilder().(*array.Float32Builder).AppendValues(fl.GetValue(), nil)
			} else {
				b.AppendNull()
			}
		}
		return c
	case ListLineID:
		if !fits(func(f *examplepb.Feature) bool {
			return f.GetBytesList() != nil && len(f.GetBytesList().GetValue()) == 1 && clean(f.GetBytesList())
		}) {
			return nil
		}
		c := rb.simple(ColLineID, RoleLineID, arrow.BinaryTypes.Binary, false)
		b := c.b.(*array.BinaryBuilder)
		for _, f := range cells {
			if bl := f.GetBytesList(); bl != nil {
				b.Append(bl.GetValue()[0])
			} else {
				b.AppendNull()
			}
		}
		return c
	case ListInstanceWeight:
		if !fits(func(f *examplepb.Feature) bool {
			return f.GetFloatList() != nil && len(f.GetFloatList().GetValue()) == 1 && clean(f.GetFloatList())
		}) {
			return nil
		}
		c := rb.simple(ColInstanceWeight, RoleInstanceWeight, arrow.PrimitiveTypes.Float32, false)
		b := c.b.(*array.Float32Builder)
		for _, f := range cells {
			if fl := f.GetFloatList(); fl != nil {
				b.Append(fl.GetValue()[0])
			} else {
				b.AppendNull()
			}
		}
		return c
	}
	return nil
}

// clean reports whether a message carries no unknown fields.
func clean(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) == 0 }

// cleanFeature reports whether a Feature and the value messages inside it carry no unknown
// fields (the layout has nowhere to keep them per cell).
func cleanFeature(f *examplepb.Feature) bool {
	if !clean(f) {
		return false
	}
	var m proto.Message
	switch v := f.GetType().(type) {
	case *examplepb.Feature_FidV1List:
		m = v.FidV1List
	case *examplepb.Feature_FidV2List:
		m = v.FidV2List
	case *examplepb.Feature_FloatList:
		m = v.FloatList
	case *examplepb.Feature_DoubleList:
		m = v.DoubleList
	case *examplepb.Feature_Int64List:
		m = v.Int64List
	case *examplepb.Feature_BytesList:
		m = v.BytesList
	case *examplepb.Feature_FidV1Lists:
		return cleanLists(v.FidV1Lists, v.FidV1Lists.GetList())
	case *examplepb.Feature_FidV2Lists:
		return cleanLists(v.FidV2Lists, v.FidV2Lists.GetList())
	case *examplepb.Feature_FloatLists:
		return cleanLists(v.FloatLists, v.FloatLists.GetList())
	case *examplepb.Feature_DoubleLists:
		return cleanLists(v.DoubleLists, v.DoubleLists.GetList())
	case *examplepb.Feature_Int64Lists:
		return cleanLists(v.Int64Lists, v.Int64Lists.GetList())
	case *examplepb.Feature_BytesLists:
		return cleanLists(v.BytesLists, v.BytesLists.GetList())
	default:
		return true
	}
	return m == nil || clean(m)
}

func cleanLists[T proto.Message](outer proto.Message, inner []T) bool {
	if !clean(outer) {
		return false
	}
	for _, l := range inner {
		if !clean(l) {
			return false
		}
	}
	return true
}

// appendExampleCell appends one monolith.io.proto.Feature cell (nil = no Feature message).
func appendExampleCell(mem memory.Allocator, c *featureCol, f *examplepb.Feature) error {
	if f != nil && !cleanFeature(f) {
		return fmt.Errorf("%w: feature %q cell %d carries unknown fields", ErrUnrepresentable, c.name, len(c.kinds))
	}
	if f == nil {
		c.null(KindNoFeature)
		return nil
	}
	switch v := f.GetType().(type) {
	case nil:
		c.null(KindUnset)
		return nil
	case *examplepb.Feature_FidV1List:
		return c.fids(mem, KindFidV1List, v.FidV1List.GetValue())
	case *examplepb.Feature_FidV2List:
		return c.fids(mem, KindFidV2List, v.FidV2List.GetValue())
	case *examplepb.Feature_FloatList:
		return c.list(mem, KindFloatList, func(b array.Builder) {
			b.(*array.Float32Builder).AppendValues(v.FloatList.GetValue(), nil)
		})
	case *examplepb.Feature_DoubleList:
		return c.list(mem, KindDoubleList, func(b array.Builder) {
			b.(*array.Float64Builder).AppendValues(v.DoubleList.GetValue(), nil)
		})
	case *examplepb.Feature_Int64List:
		return c.list(mem, KindInt64List, func(b array.Builder) {
			b.(*array.Int64Builder).AppendValues(v.Int64List.GetValue(), nil)
		})
	case *examplepb.Feature_BytesList:
		return c.list(mem, KindBytesList, func(b array.Builder) {
			b.(*array.BinaryBuilder).AppendValues(v.BytesList.GetValue(), nil)
		})
	case *examplepb.Feature_FidV2Lists:
		ls := v.FidV2Lists.GetList()
		return c.nested(mem, KindFidV2Lists, len(ls), func(i int, b array.Builder) {
			b.(*array.Uint64Builder).AppendValues(ls[i].GetValue(), nil)
		})
	case *examplepb.Feature_FidV1Lists:
		ls := v.FidV1Lists.GetList()
		return c.nested(mem, KindFidV1Lists, len(ls), func(i int, b array.Builder) {
			b.(*array.Uint64Builder).AppendValues(ls[i].GetValue(), nil)
		})
	case *examplepb.Feature_FloatLists:
		ls := v.FloatLists.GetList()
		return c.nested(mem, KindFloatLists, len(ls), func(i int, b array.Builder) {
			b.(*array.Float32Builder).AppendValues(ls[i].GetValue(), nil)
		})
	case *examplepb.Feature_DoubleLists:
		ls := v.DoubleLists.GetList()
		return c.nested(mem, KindDoubleLists, len(ls), func(i int, b array.Builder) {
			b.(*array.Float64Builder).AppendValues(ls[i].GetValue(), nil)
		})
	case *examplepb.Feature_Int64Lists:
		ls := v.Int64Lists.GetList()
		return c.nested(mem, KindInt64Lists, len(ls), func(i int, b array.Builder) {
			b.(*array.Int64Builder).AppendValues(ls[i].GetValue(), nil)
		})
	case *examplepb.Feature_BytesLists:
		ls := v.BytesLists.GetList()
		return c.nested(mem, KindBytesLists, len(ls), func(i int, b array.Builder) {
			b.(*array.BinaryBuilder).AppendValues(ls[i].GetValue(), nil)
		})
	case *examplepb.Feature_Int64Value:
		return c.scalar(mem, KindInt64Value, func(b array.Builder) { b.(*array.Int64Builder).Append(v.Int64Value) })
	case *examplepb.Feature_FloatValue:
		return c.scalar(mem, KindFloatValue, func(b array.Builder) { b.(*array.Float32Builder).Append(v.FloatValue) })
	case *examplepb.Feature_DoubleValue:
		return c.scalar(mem, KindDoubleValue, func(b array.Builder) { b.(*array.Float64Builder).Append(v.DoubleValue) })
	case *examplepb.Feature_BytesValue:
		return c.scalar(mem, KindBytesValue, func(b array.Builder) { b.(*array.BinaryBuilder).Append(v.BytesValue) })
	}
	return fmt.Errorf("%w: feature %q: unsupported oneof member %T", ErrUnrepresentable, c.name, f.GetType())
}

// rowCols holds the canonical columns of a row-major source.
type rowCols struct {
	label  *array.ListBuilder
	iw     *simpleCol
	lineID *simpleCol
	dsk    *simpleCol
	extra  *simpleCol
}

func (rb *recordBuilder) rowColumns() rowCols {
	rc := rowCols{}
	rc.label = rb.simple(ColLabel, RoleLabel, arrow.ListOf(arrow.PrimitiveTypes.Float32), false).b.(*array.ListBuilder)
	rc.iw = rb.simple(ColInstanceWeight, RoleInstanceWeight, arrow.PrimitiveTypes.Float32, false)
	rc.lineID = rb.simple(ColLineID, RoleLineID, arrow.BinaryTypes.Binary, false)
	rc.dsk = rb.simple(ColDataSourceKey, RoleDataSourceKey, arrow.PrimitiveTypes.Uint32, false)
	rc.extra = rb.simple(ColExtra, RoleExtra, arrow.BinaryTypes.Binary, true)
	return rc
}

func (rc rowCols) appendLineID(m *matrixpb.LineId) error {
	b := rc.lineID.b.(*array.BinaryBuilder)
	if m == nil {
		b.AppendNull()
		return nil
	}
	bs, err := marshalDet.Marshal(m)
	if err != nil {
		return err
	}
	b.Append(bs)
	return nil
}

func (rc rowCols) appendExtra(m proto.Message, empty bool) error {
	b := rc.extra.b.(*array.BinaryBuilder)
	if empty {
		b.AppendNull()
		return nil
	}
	bs, err := marshalDet.Marshal(m)
	if err != nil {
		return err
	}
	b.Append(bs)
	rc.extra.valid = true
	return nil
}

// endRow appends an absent cell to every feature column the row did not touch.
func (rb *recordBuilder) endRow(row int) {
	for _, c := range rb.cols {
		if fc, ok := c.(*featureCol); ok && fc.lastRow != row {
			fc.null(KindAbsent)
			fc.lastRow = row
		}
	}
}

// FromExamples converts Examples into a batch with one row per Example.
//
// Feature columns appear in the order their names are first seen. A row without a feature
// holds an absent cell; a NamedFeature without a value holds an unset cell. The reserved
// named features (__LABEL__, __LINE_ID__, instance_weight) are kept as ordinary feature
// columns: applying them to label/line_id/instance_weight (Monolith's ExtendExample) is the
// parser's job, not the layout's. Errors (wrapping ErrUnrepresentable) name the row and
// feature: a name used twice in one Example, ids that differ between rows, or cells of
// incompatible kinds under one name.
func FromExamples(mem memory.Allocator, exs []*examplepb.Example, opts ...Option) (arrow.RecordBatch, error) {
	rb := newRecordBuilder(mem, SourceExample, opts)
	// Canonical columns go after the features; they are created once the feature set is
	// known, so buffer their values per row first.
	type canon struct {
		label  []float32
		iw     float32
		lineID *matrixpb.LineId
		dsk    uint32
		extra  *examplepb.Example
	}
	rows := make([]canon, len(exs))
	for r, ex := range exs {
		for _, nf := range ex.GetNamedFeature() {
			c, _ := rb.feature(nf.GetName(), r)
			if c.lastRow == r {
				rb.release()
				return nil, fmt.Errorf("%w: example %d: feature %q appears twice", ErrUnrepresentable, r, nf.GetName())
			}
			c.lastRow = r
			if !clean(nf) {
				rb.release()
				return nil, fmt.Errorf("%w: example %d: feature %q carries unknown fields", ErrUnrepresentable, r, nf.GetName())
			}
			err := c.setIDs(nf.GetId(), nf.GetSortedId(), r)
			if err == nil {
				err = appendExampleCell(mem, c, nf.GetFeature())
			}
			if err != nil {
				rb.release()
				return nil, fmt.Errorf("example %d: %w", r, err)
			}
		}
		rb.endRow(r)
		cr := canon{label: ex.GetLabel(), iw: ex.GetInstanceWeight(), lineID: ex.GetLineId(), dsk: ex.GetDataSourceKey()}
		if len(ex.GetNamedRawFeature()) > 0 || len(ex.ProtoReflect().GetUnknown()) > 0 {
			cr.extra = &examplepb.Example{NamedRawFeature: ex.GetNamedRawFeature()}
			cr.extra.ProtoReflect().SetUnknown(ex.ProtoReflect().GetUnknown())
		}
		rows[r] = cr
	}
	rc := rb.rowColumns()
	for r, cr := range rows {
		rc.label.Append(true)
		rc.label.ValueBuilder().(*array.Float32Builder).AppendValues(cr.label, nil)
		rc.iw.b.(*array.Float32Builder).Append(cr.iw)
		rc.dsk.b.(*array.Uint32Builder).Append(cr.dsk)
		err := rc.appendLineID(cr.lineID)
		if err == nil {
			err = rc.appendExtra(cr.extra, cr.extra == nil)
		}
		if err != nil {
			rb.release()
			return nil, fmt.Errorf("schemas/batch: example %d: %w", r, err)
		}
	}
	return rb.finish(len(exs))
}

// SlotFeatureName is the column name of an Instance's top-level fids of one v1 slot, as
// Monolith's Instance→Example conversion names them.
func SlotFeatureName(slot uint64) string { return "fc_slot_" + strconv.FormatUint(slot, 10) }

// FromInstances converts Instances into a batch with one row per Instance.
//
// Top-level v1 fids are grouped by slot (fid >> 54) into "fc_slot_<slot>" columns; the
// dense "value" field becomes the float_list column "value"; every Instance feature
// becomes a column named after it, with the kind of its one non-empty value field. An
// Instance whose named feature collides with a slot column or with "value" (D5), that has a
// name twice, or whose feature sets two value fields, is an error naming the feature.
// Fields the layout does not model (dense, label_tag, next_fid, unknown fields) are kept
// as wire bytes in "__extra__".
func FromInstances(mem memory.Allocator, ins []*parserpb.Instance, opts ...Option) (arrow.RecordBatch, error) {
	rb := newRecordBuilder(mem, SourceInstance, opts)
	type canon struct {
		label  []float32
		iw     *float32
		lineID *matrixpb.LineId
		dsk    *uint32
		extra  *parserpb.Instance
	}
	rows := make([]canon, len(ins))
	slotCols := map[uint64]*featureCol{}
	slotOrd := map[uint64]int32{} // slot -> ordinal among slot columns (schema order)
	var g slotGrouper
	var o fidOrder
	order := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
	defer order.Release()
	anyOrder := false
	for r, in := range ins {
		fail := func(err error) (arrow.RecordBatch, error) {
			rb.release()
			return nil, fmt.Errorf("instance %d: %w", r, err)
		}
		if v := in.GetValue(); len(v) > 0 {
			c, isNew := rb.feature("value", r)
			if !isNew && c.inst != "value" {
				return fail(fmt.Errorf("%w: feature \"value\" collides with the Instance value field (D5)", ErrUnrepresentable))
			}
			c.inst, c.lastRow = "value", r
			if err := c.list(mem, KindFloatList, func(b array.Builder) { b.(*array.Float32Builder).AppendValues(v, nil) }); err != nil {
				return fail(err)
			}
		}
		for _, grp := range g.group(in.GetFid()) {
			c, ok := slotCols[grp.slot]
			if !ok {
				name := SlotFeatureName(grp.slot)
				var isNew bool
				c, isNew = rb.feature(name, r)
				if !isNew {
					return fail(fmt.Errorf("%w: slot %d and the named feature %q share a name (D5)", ErrUnrepresentable, grp.slot, name))
				}
				c.inst = "fid"
				slotCols[grp.slot] = c
				slotOrd[grp.slot] = int32(len(slotOrd))
			}
			c.lastRow = r
			if err := c.fids(mem, KindFidV1List, grp.fids); err != nil {
				return fail(err)
			}
		}
		// Keep the original fid order when it is not "groups in column order".
		o.reset()
		for _, f := range in.GetFid() {
			o.add(slotOrd[f>>54], 1)
		}
		if o.canonical {
			order.AppendNull()
		} else {
			order.Append(true)
			order.ValueBuilder().(*array.Int32Builder).AppendValues(o.runs, nil)
			anyOrder = true
		}
		for _, f := range in.GetFeature() {
			c, isNew := rb.feature(f.GetName(), r)
			if c.lastRow == r || (!isNew && c.inst != "") {
				return fail(fmt.Errorf("%w: feature %q appears twice or collides with a slot or value column (D5)", ErrUnrepresentable, f.GetName()))
			}
			c.lastRow = r
			if err := appendInstanceCell(mem, c, f); err != nil {
				return fail(err)
			}
		}
		rb.endRow(r)
		rows[r] = canon{label: in.GetLabel(), iw: in.InstanceWeight, lineID: in.GetLineId(), dsk: in.DataSourceKey, extra: instanceExtra(in)}
	}
	rc := rb.rowColumns()
	if anyOrder {
		rb.cols = append(rb.cols, &simpleCol{name: ColFidOrder, role: RoleFidOrder, b: order})
		order.Retain()
	}
	for r, cr := range rows {
		rc.label.Append(true)
		rc.label.ValueBuilder().(*array.Float32Builder).AppendValues(cr.label, nil)
		if cr.iw != nil {
			rc.iw.b.(*array.Float32Builder).Append(*cr.iw)
		} else {
			rc.iw.b.AppendNull()
		}
		if cr.dsk != nil {
			rc.dsk.b.(*array.Uint32Builder).Append(*cr.dsk)
		} else {
			rc.dsk.b.AppendNull()
		}
		err := rc.appendLineID(cr.lineID)
		if err == nil {
			err = rc.appendExtra(cr.extra, cr.extra == nil)
		}
		if err != nil {
			rb.release()
			return nil, fmt.Errorf("schemas/batch: instance %d: %w", r, err)
		}
	}
	return rb.finish(len(ins))
}

// instanceExtra returns the fields of an Instance the layout does not model (dense,
// label_tag, next_fid, unknown fields), kept as the row's "__extra__" value; nil when there
// are none.
func instanceExtra(in *parserpb.Instance) *parserpb.Instance {
	//lint:ignore SA1019 the deprecated dense field is kept, unmodelled, so that nothing is lost
	if len(in.GetDense()) == 0 && len(in.GetLabelTag()) == 0 && len(in.GetNextFid()) == 0 && len(in.ProtoReflect().GetUnknown()) == 0 {
		return nil
	}
	//lint:ignore SA1019 as above
	x := &parserpb.Instance{Dense: in.GetDense(), LabelTag: in.GetLabelTag(), NextFid: in.GetNextFid()}
	x.ProtoReflect().SetUnknown(in.ProtoReflect().GetUnknown())
	return x
}

// fidOrder computes a row's "__fid_order__" value: the runs of its top-level fids in their
// original order, as (ordinal of the slot column, number of fids) pairs, and whether that
// order is the canonical one (each slot's fids together, slots in column order), which the
// column stores as null.
type fidOrder struct {
	runs      []int32
	canonical bool
}

func (o *fidOrder) reset() { o.runs, o.canonical = o.runs[:0], true }

// add appends n fids of the slot column with ordinal ord.
func (o *fidOrder) add(ord, n int32) {
	if k := len(o.runs); k > 0 {
		if o.runs[k-2] == ord {
			o.runs[k-1] += n
			return
		}
		if o.runs[k-2] > ord {
			o.canonical = false
		}
	}
	o.runs = append(o.runs, ord, n)
}

// appendInstanceCell appends one idl.matrix.proto.Feature; exactly one value field may be set.
func appendInstanceCell(mem memory.Allocator, c *featureCol, f *matrixpb.Feature) error {
	if !cleanLists(f, f.GetFidList()) || !cleanLists(f, f.GetFloatList()) || !cleanLists(f, f.GetInt64List()) || !cleanLists(f, f.GetBytesList()) {
		return fmt.Errorf("%w: feature %q carries unknown fields", ErrUnrepresentable, c.name)
	}
	set := 0
	for _, n := range []int{len(f.GetFid()), len(f.GetFloatValue()), len(f.GetInt64Value()), len(f.GetBytesValue()),
		len(f.GetFidList()), len(f.GetFloatList()), len(f.GetInt64List()), len(f.GetBytesList())} {
		if n > 0 {
			set++
		}
	}
	if set > 1 {
		return fmt.Errorf("%w: feature %q sets %d value fields; one column holds one", ErrUnrepresentable, c.name, set)
	}
	switch {
	case len(f.GetFid()) > 0:
		return c.fids(mem, KindFidV2List, f.GetFid())
	case len(f.GetFloatValue()) > 0:
		return c.list(mem, KindFloatList, func(b array.Builder) { b.(*array.Float32Builder).AppendValues(f.GetFloatValue(), nil) })
	case len(f.GetInt64Value()) > 0:
		return c.list(mem, KindInt64List, func(b array.Builder) { b.(*array.Int64Builder).AppendValues(f.GetInt64Value(), nil) })
	case len(f.GetBytesValue()) > 0:
		return c.list(mem, KindBytesList, func(b array.Builder) { b.(*array.BinaryBuilder).AppendValues(f.GetBytesValue(), nil) })
	case len(f.GetFidList()) > 0:
		ls := f.GetFidList()
		return c.nested(mem, KindFidV2Lists, len(ls), func(i int, b array.Builder) {
			b.(*array.Uint64Builder).AppendValues(ls[i].GetValue(), nil)
		})
	case len(f.GetFloatList()) > 0:
		ls := f.GetFloatList()
		return c.nested(mem, KindFloatLists, len(ls), func(i int, b array.Builder) {
			b.(*array.Float32Builder).AppendValues(ls[i].GetValue(), nil)
		})
	case len(f.GetInt64List()) > 0:
		ls := f.GetInt64List()
		return c.nested(mem, KindInt64Lists, len(ls), func(i int, b array.Builder) {
			b.(*array.Int64Builder).AppendValues(ls[i].GetValue(), nil)
		})
	case len(f.GetBytesList()) > 0:
		ls := f.GetBytesList()
		return c.nested(mem, KindBytesLists, len(ls), func(i int, b array.Builder) {
			b.(*array.BinaryBuilder).AppendValues(ls[i].GetValue(), nil)
		})
	}
	c.null(KindUnset)
	return nil
}

// slotGrouper groups a row's v1 fids by slot, keeping first-appearance order of slots and
// the original order within a slot, in O(fids) with reused scratch space.
type slotGrouper struct {
	slots  []uint64
	counts []int
	idx    []int32
	sorted []uint64
	groups []slotGroup
}

type slotGroup struct {
	slot uint64
	fids []uint64
}

func (g *slotGrouper) group(fids []uint64) []slotGroup {
	g.slots, g.counts, g.idx, g.groups = g.slots[:0], g.counts[:0], g.idx[:0], g.groups[:0]
	if len(fids) == 0 {
		return nil
	}
	for _, f := range fids {
		s := f >> 54
		j := -1
		// Rows hold few slots and fids of one slot are usually adjacent: check the last
		// slot first, then scan.
		if n := len(g.slots); n > 0 && g.slots[n-1] == s {
			j = n - 1
		} else {
			for k, t := range g.slots {
				if t == s {
					j = k
					break
				}
			}
		}
		if j < 0 {
			j = len(g.slots)
			g.slots = append(g.slots, s)
			g.counts = append(g.counts, 0)
		}
		g.counts[j]++
		g.idx = append(g.idx, int32(j))
	}
	if cap(g.sorted) < len(fids) {
		g.sorted = make([]uint64, len(fids))
	}
	g.sorted = g.sorted[:len(fids)]
	start := 0
	for j, n := range g.counts {
		g.counts[j] = start
		start += n
	}
	for i, f := range fids {
		j := g.idx[i]
		g.sorted[g.counts[j]] = f
		g.counts[j]++
	}
	start = 0
	for j, s := range g.slots {
		g.groups = append(g.groups, slotGroup{slot: s, fids: g.sorted[start:g.counts[j]]})
		start = g.counts[j]
	}
	return g.groups
}
