package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/monolith-go/monolith/io/pqfile"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// readBatchRows is the number of rows the ParquetReader decodes at a time.
const readBatchRows = 1024

func floatList() *arrow.ListType {
	return arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Float32})
}

// Column indexes of ParquetSchema: the entry's columns, then the optimizer state as
// parallel lists (one element per SingleOptimizerDump): kind, the float lists, the
// optional floats, the optional longs.
const (
	colTable = iota
	colID
	colEmbedding
	colLastUpdate
	colKind
	colList0
	colF320 = colList0 + numLists
	colI640 = colF320 + numF32
	numCols = colI640 + numI64
)

// ParquetSchema is the Arrow schema of a Parquet export file. Frozen.
//
// The optimizer state is stored as parallel lists rather than a list of structs, so that
// reading never runs arrow-go's struct column readers, which start goroutines where a
// decoder panic on a damaged file could not be recovered.
var ParquetSchema = func() *arrow.Schema {
	fields := []arrow.Field{
		{Name: "table", Type: arrow.BinaryTypes.String},
		{Name: "id", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "embedding", Type: floatList()},
		{Name: "last_update_ts_sec", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "opt_kind", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.BinaryTypes.String}), Nullable: true},
	}
	for _, n := range listNames {
		fields = append(fields, arrow.Field{Name: "opt_" + n, Type: arrow.ListOfField(arrow.Field{Name: "element", Type: floatList()}), Nullable: true})
	}
	for _, n := range f32Names {
		fields = append(fields, arrow.Field{Name: "opt_" + n, Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Float32, Nullable: true}), Nullable: true})
	}
	for _, n := range i64Names {
		fields = append(fields, arrow.Field{Name: "opt_" + n, Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}()

// ParquetWriter writes entries to a Parquet file with ParquetSchema, one row group per
// WithRowGroupSize rows or bytes.
type ParquetWriter struct {
	fw       *pqarrow.FileWriter
	rb       *array.RecordBuilder
	info     TableInfo
	maxRows  int
	maxBytes int64
	rows     int
	bytes    int64
	closed   bool
	err      error // sticky
	table    *array.StringBuilder
	id       *array.Uint64Builder
	emb      *array.ListBuilder
	embVals  *array.Float32Builder
	lastTs   *array.Int64Builder
	kind     *array.ListBuilder
	kindVals *array.StringBuilder
	lists    [numLists]*array.ListBuilder // list<list<float>>
	listsMid [numLists]*array.ListBuilder // list<float>
	listVals [numLists]*array.Float32Builder
	f32      [numF32]*array.ListBuilder
	f32Vals  [numF32]*array.Float32Builder
	i64      [numI64]*array.ListBuilder
	i64Vals  [numI64]*array.Int64Builder
}

// NewParquetWriter returns a writer of info's entries to w. Dictionary encoding is off for
// every column but table and opt_kind (Parquet dictionaries treat all NaNs as one value).
func NewParquetWriter(w io.Writer, info TableInfo, opts ...Option) (*ParquetWriter, error) {
	c := newConfig(opts)
	props := parquet.NewWriterProperties(
		parquet.WithCompression(c.parquetCodec),
		parquet.WithAllocator(c.mem),
		parquet.WithDictionaryDefault(false),
		parquet.WithDictionaryFor("table", true),
		parquet.WithDictionaryFor("opt_kind.list.element", true),
		parquet.WithMaxRowGroupLength(int64(c.rowGroupRows)),
	)
	// Hide an io.Closer: pqarrow's Close would close w.
	fw, err := pqarrow.NewFileWriter(ParquetSchema, struct{ io.Writer }{w}, props,
		pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(c.mem)))
	if err != nil {
		return nil, fmt.Errorf("%snew Parquet writer: %w", errPrefix, err)
	}
	pw := &ParquetWriter{fw: fw, rb: array.NewRecordBuilder(c.mem, ParquetSchema), info: info,
		maxRows: c.rowGroupRows, maxBytes: c.rowGroupBytes}
	pw.table = pw.rb.Field(colTable).(*array.StringBuilder)
	pw.id = pw.rb.Field(colID).(*array.Uint64Builder)
	pw.emb = pw.rb.Field(colEmbedding).(*array.ListBuilder)
	pw.embVals = pw.emb.ValueBuilder().(*array.Float32Builder)
	pw.lastTs = pw.rb.Field(colLastUpdate).(*array.Int64Builder)
	pw.kind = pw.rb.Field(colKind).(*array.ListBuilder)
	pw.kindVals = pw.kind.ValueBuilder().(*array.StringBuilder)
	for i := range numLists {
		pw.lists[i] = pw.rb.Field(colList0 + i).(*array.ListBuilder)
		pw.listsMid[i] = pw.lists[i].ValueBuilder().(*array.ListBuilder)
		pw.listVals[i] = pw.listsMid[i].ValueBuilder().(*array.Float32Builder)
	}
	for i := range numF32 {
		pw.f32[i] = pw.rb.Field(colF320 + i).(*array.ListBuilder)
		pw.f32Vals[i] = pw.f32[i].ValueBuilder().(*array.Float32Builder)
	}
	for i := range numI64 {
		pw.i64[i] = pw.rb.Field(colI640 + i).(*array.ListBuilder)
		pw.i64Vals[i] = pw.i64[i].ValueBuilder().(*array.Int64Builder)
	}
	return pw, nil
}

// Write appends d to the current row group, writing the row group out when it is full.
// An entry without id or with unknown proto fields is an error wrapping ErrUnsupported,
// which does not break the writer.
func (w *ParquetWriter) Write(d *hashtablepb.EntryDump) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New(errPrefix + "write on a closed writer")
	}
	if err := storable(d); err != nil {
		return err
	}
	w.table.Append(w.info.Name)
	w.id.Append(uint64(d.GetId()))
	w.emb.Append(true)
	w.embVals.AppendValues(d.GetNum(), nil)
	size := int64(32 + len(w.info.Name) + 4*len(d.GetNum()))
	if d.LastUpdateTsSec != nil {
		w.lastTs.Append(*d.LastUpdateTsSec)
	} else {
		w.lastTs.AppendNull()
	}
	present := d.Opt != nil
	w.kind.Append(present)
	for i := range numLists {
		w.lists[i].Append(present)
	}
	for i := range numF32 {
		w.f32[i].Append(present)
	}
	for i := range numI64 {
		w.i64[i].Append(present)
	}
	for _, od := range d.Opt.GetDump() {
		s := flatten(od)
		w.kindVals.Append(s.kind.String())
		for i := range numLists {
			w.listsMid[i].Append(true)
			w.listVals[i].AppendValues(s.lists[i], nil)
			size += int64(4 * len(s.lists[i]))
		}
		for i := range numF32 {
			if s.hasF[i] {
				w.f32Vals[i].Append(s.f32[i])
			} else {
				w.f32Vals[i].AppendNull()
			}
		}
		for i := range numI64 {
			if s.hasI[i] {
				w.i64Vals[i].Append(s.i64[i])
			} else {
				w.i64Vals[i].AppendNull()
			}
		}
		size += 64
	}
	w.rows++
	w.bytes += size
	if w.rows >= w.maxRows || w.bytes >= w.maxBytes {
		return w.flush()
	}
	return nil
}

// flush writes the buffered rows as one row group.
func (w *ParquetWriter) flush() error {
	if w.rows == 0 {
		return nil
	}
	rec := w.rb.NewRecordBatch()
	defer rec.Release()
	w.rows, w.bytes = 0, 0
	if err := w.fw.Write(rec); err != nil {
		w.err = fmt.Errorf("%swrite row group: %w", errPrefix, err)
		return w.err
	}
	return nil
}

// Close writes the last row group and the footer, with MetaTable and MetaDim in the
// key-value metadata. It does not close the underlying writer.
func (w *ParquetWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	defer w.rb.Release()
	errs := []error{w.err}
	if w.err == nil {
		errs = append(errs, w.flush())
	}
	errs = append(errs, w.fw.AppendKeyValueMetadata(MetaTable, w.info.Name))
	if w.info.Dim > 0 {
		errs = append(errs, w.fw.AppendKeyValueMetadata(MetaDim, strconv.Itoa(w.info.Dim)))
	}
	if err := w.fw.Close(); err != nil {
		errs = append(errs, fmt.Errorf("%sclose Parquet writer: %w", errPrefix, err))
	}
	return errors.Join(errs...)
}

// ParquetReader reads a Parquet file with ParquetSchema, row group by row group.
type ParquetReader struct {
	pf       *pqfile.File
	rr       pqarrow.RecordReader
	file     string
	table    string
	hasTable bool
	rg       int   // current row group; -1 before the first
	rgRows   int64 // rows read from the current row group
	rec      arrow.RecordBatch
	row      int   // next row of rec
	record   int64 // index of the next entry in the file
	cols     parquetCols
	d        hashtablepb.EntryDump
	num      []float32
	err      error // sticky
}

// parquetCols are the typed columns of the current record.
type parquetCols struct {
	table    *array.String
	id       *array.Uint64
	emb      *array.List
	embVals  []float32
	lastTs   *array.Int64
	kind     *array.List
	kindVals *array.String
	lists    [numLists]*array.List // list<list<float>>
	listsMid [numLists]*array.List // list<float>
	listVals [numLists][]float32
	f32      [numF32]*array.List
	f32Vals  [numF32]*array.Float32
	i64      [numI64]*array.List
	i64Vals  [numI64]*array.Int64
}

// NewParquetReader opens a Parquet export file and checks its schema against
// ParquetSchema. Close the reader when done; it does not close r. Decoding never panics:
// arrow-go's decoder can panic on damaged pages, and those panics become errors (memory
// the decoder held at that point may not be returned to the allocator).
func NewParquetReader(r parquet.ReaderAtSeeker, opts ...Option) (pr *ParquetReader, err error) {
	c := newConfig(opts)
	pr = &ParquetReader{file: c.fileName, rg: -1}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: decoder panic: %v", ErrFormat, p)
		}
		if err != nil {
			pr.Close()
			pr, err = nil, &CorruptError{File: c.fileName, Record: -1, Offset: -1, RowGroup: -1, Err: err}
		}
	}()
	// Every read runs on this goroutine (pqfile), where panics are recovered.
	if pr.pf, err = pqfile.Open(r, c.mem, readBatchRows); err != nil {
		return pr, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	sc, err := pr.pf.Arrow.Schema()
	if err != nil {
		return pr, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if sc.NumFields() != numCols {
		return pr, fmt.Errorf("%w: %d columns, an export file has %d", ErrFormat, sc.NumFields(), numCols)
	}
	for i, want := range ParquetSchema.Fields() {
		got := sc.Field(i)
		if got.Name != want.Name || got.Nullable != want.Nullable || !arrow.TypeEqual(got.Type, want.Type) {
			return pr, fmt.Errorf("%w: column %d is %s, an export file has %s", ErrFormat, i, got, want)
		}
	}
	if v := pr.pf.Parquet.MetaData().KeyValueMetadata().FindValue(MetaTable); v != nil {
		pr.table, pr.hasTable = *v, true
	}
	return pr, nil
}

// Table returns the table named in the file's metadata (MetaTable).
func (r *ParquetReader) Table() string { return r.table }

// Next returns the next entry, or (nil, io.EOF) after the last.
func (r *ParquetReader) Next() (d *hashtablepb.EntryDump, err error) {
	if r.err != nil {
		return nil, r.err
	}
	defer func() {
		if p := recover(); p != nil {
			d, err = nil, fmt.Errorf("%w: decoder panic: %v", ErrFormat, p)
		}
		if err != nil && err != io.EOF {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				err = &CorruptError{File: r.file, Record: r.record, Offset: -1, RowGroup: max(r.rg, 0), Err: err}
			}
		}
		if err != nil {
			r.err = err
		}
	}()
	for r.rec == nil || r.row >= int(r.rec.NumRows()) {
		if err := r.nextRecord(); err != nil {
			return nil, err
		}
	}
	if err := r.decode(r.row); err != nil {
		return nil, err
	}
	r.row++
	r.record++
	return &r.d, nil
}

// nextRecord reads the next batch of rows, moving to the next row group when the current
// one is done; io.EOF after the last.
func (r *ParquetReader) nextRecord() error {
	r.rec = nil
	if r.rr != nil {
		rec, err := r.rr.Read()
		if err != nil && err != io.EOF {
			return fmt.Errorf("%w: %v", ErrFormat, err)
		}
		if rec != nil && rec.NumRows() > 0 {
			r.rgRows += rec.NumRows()
			r.rec, r.row = rec, 0
			return r.bind()
		}
		if want := r.pf.Parquet.MetaData().RowGroup(r.rg).NumRows(); r.rgRows != want {
			return fmt.Errorf("%w: row group %d has %d rows, its metadata says %d", ErrFormat, r.rg, r.rgRows, want)
		}
		r.rr.Release()
		r.rr = nil
	}
	if r.rg+1 >= r.pf.Parquet.NumRowGroups() {
		if r.record != r.pf.Parquet.NumRows() {
			return &CorruptError{File: r.file, Record: -1, Offset: -1, RowGroup: -1,
				Err: fmt.Errorf("%w: the file has %d rows, its row groups %d", ErrFormat, r.pf.Parquet.NumRows(), r.record)}
		}
		return io.EOF
	}
	r.rg++
	r.rgRows = 0
	rr, err := r.pf.Arrow.GetRecordReader(context.Background(), nil, []int{r.rg})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	r.rr = rr
	return nil
}

// bind takes the typed columns of r.rec and checks that required values are not null.
func (r *ParquetReader) bind() error {
	c := &r.cols
	rec := r.rec
	var ok bool
	var err error
	bad := func(what string) error { return fmt.Errorf("%w: %s has an unexpected type or nulls", ErrFormat, what) }
	if c.table, ok = rec.Column(colTable).(*array.String); !ok || c.table.NullN() > 0 {
		return bad("table")
	}
	if c.id, ok = rec.Column(colID).(*array.Uint64); !ok || c.id.NullN() > 0 {
		return bad("id")
	}
	if c.emb, ok = rec.Column(colEmbedding).(*array.List); !ok || c.emb.NullN() > 0 {
		return bad("embedding")
	}
	if c.embVals, err = floatsOf(c.emb.ListValues(), "embedding"); err != nil {
		return err
	}
	if c.lastTs, ok = rec.Column(colLastUpdate).(*array.Int64); !ok {
		return bad("last_update_ts_sec")
	}
	if c.kind, ok = rec.Column(colKind).(*array.List); !ok {
		return bad("opt_kind")
	}
	if c.kindVals, ok = c.kind.ListValues().(*array.String); !ok || c.kindVals.NullN() > 0 {
		return bad("opt_kind values")
	}
	for i := range numLists {
		name := "opt_" + listNames[i]
		if c.lists[i], ok = rec.Column(colList0 + i).(*array.List); !ok {
			return bad(name)
		}
		if c.listsMid[i], ok = c.lists[i].ListValues().(*array.List); !ok || c.listsMid[i].NullN() > 0 {
			return bad(name + " values")
		}
		if c.listVals[i], err = floatsOf(c.listsMid[i].ListValues(), name); err != nil {
			return err
		}
	}
	for i := range numF32 {
		if c.f32[i], ok = rec.Column(colF320 + i).(*array.List); !ok {
			return bad("opt_" + f32Names[i])
		}
		if c.f32Vals[i], ok = c.f32[i].ListValues().(*array.Float32); !ok {
			return bad("opt_" + f32Names[i] + " values")
		}
	}
	for i := range numI64 {
		if c.i64[i], ok = rec.Column(colI640 + i).(*array.List); !ok {
			return bad("opt_" + i64Names[i])
		}
		if c.i64Vals[i], ok = c.i64[i].ListValues().(*array.Int64); !ok {
			return bad("opt_" + i64Names[i] + " values")
		}
	}
	return nil
}

// floatsOf returns the values of a float32 array without nulls.
func floatsOf(a arrow.Array, what string) ([]float32, error) {
	v, ok := a.(*array.Float32)
	if !ok || v.NullN() > 0 {
		return nil, fmt.Errorf("%w: %s values have an unexpected type or nulls", ErrFormat, what)
	}
	return v.Float32Values(), nil
}

// span returns the value range of row i of a list, checked against the n values.
func span(l *array.List, i, n int, what string) (int, int, error) {
	s, e := l.ValueOffsets(i)
	if s < 0 || e < s || e > int64(n) {
		return 0, 0, fmt.Errorf("%w: %s: list offsets [%d, %d) outside %d values", ErrFormat, what, s, e, n)
	}
	return int(s), int(e), nil
}

// decode fills r.d from row i of the current record.
func (r *ParquetReader) decode(i int) error {
	c := &r.cols
	table := c.table.Value(i)
	if !r.hasTable {
		r.table, r.hasTable = table, true
	} else if table != r.table {
		return fmt.Errorf("%w: the entry is of table %q, the file of table %q", ErrFormat, table, r.table)
	}
	s, e, err := span(c.emb, i, len(c.embVals), "embedding")
	if err != nil {
		return err
	}
	r.num = append(r.num[:0], c.embVals[s:e]...)
	r.d.Reset()
	id := int64(c.id.Value(i))
	r.d.Id, r.d.Num = &id, r.num
	if c.lastTs.IsValid(i) {
		ts := c.lastTs.Value(i)
		r.d.LastUpdateTsSec = &ts
	}
	// The opt_ columns are all null (no opt message) or all lists of one length.
	present := c.kind.IsValid(i)
	ks, ke, err := span(c.kind, i, c.kindVals.Len(), "opt_kind")
	if err != nil {
		return err
	}
	n := ke - ks
	var lists [numLists]int
	var f32s [numF32]int
	var i64s [numI64]int
	check := func(l *array.List, vals int, name string) (int, error) {
		s, e, err := span(l, i, vals, name)
		switch {
		case err != nil:
			return 0, err
		case l.IsValid(i) != present:
			return 0, fmt.Errorf("%w: %s is null where opt_kind is not, or the other way round", ErrFormat, name)
		case e-s != n:
			return 0, fmt.Errorf("%w: %s has %d elements, opt_kind %d", ErrFormat, name, e-s, n)
		}
		return s, nil
	}
	for f := range numLists {
		if lists[f], err = check(c.lists[f], c.listsMid[f].Len(), "opt_"+listNames[f]); err != nil {
			return err
		}
	}
	for f := range numF32 {
		if f32s[f], err = check(c.f32[f], c.f32Vals[f].Len(), "opt_"+f32Names[f]); err != nil {
			return err
		}
	}
	for f := range numI64 {
		if i64s[f], err = check(c.i64[f], c.i64Vals[f].Len(), "opt_"+i64Names[f]); err != nil {
			return err
		}
	}
	if !present {
		return nil
	}
	r.d.Opt = &hashtablepb.OptimizerDump{}
	for j := range n {
		var st optState
		k, ok := kindOf(c.kindVals.Value(ks + j))
		if !ok {
			return fmt.Errorf("%w: opt[%d]: unknown optimizer kind %q", ErrFormat, j, c.kindVals.Value(ks+j))
		}
		st.kind = k
		for f := range numLists {
			ls, le, err := span(c.listsMid[f], lists[f]+j, len(c.listVals[f]), "opt_"+listNames[f])
			if err != nil {
				return err
			}
			if le > ls {
				st.lists[f] = append([]float32(nil), c.listVals[f][ls:le]...)
			}
		}
		for f := range numF32 {
			if v := c.f32Vals[f]; v.IsValid(f32s[f] + j) {
				st.f32[f], st.hasF[f] = v.Value(f32s[f]+j), true
			}
		}
		for f := range numI64 {
			if v := c.i64Vals[f]; v.IsValid(i64s[f] + j) {
				st.i64[f], st.hasI[f] = v.Value(i64s[f]+j), true
			}
		}
		od, err := st.proto()
		if err != nil {
			return fmt.Errorf("%w: opt[%d]: %v", ErrFormat, j, err)
		}
		r.d.Opt.Dump = append(r.d.Opt.Dump, od)
	}
	return nil
}

// Close releases the reader's buffers. It does not close the file.
func (r *ParquetReader) Close() error {
	r.rec = nil
	if r.rr != nil {
		r.rr.Release()
		r.rr = nil
	}
	if r.err == nil {
		r.err = errors.New(errPrefix + "read on a closed reader")
	}
	if err := r.pf.Close(); err != nil {
		return fmt.Errorf("%sclose: %w", errPrefix, err)
	}
	return nil
}
