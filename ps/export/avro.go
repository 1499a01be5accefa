package export

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/monolith-go/monolith/io/ocf"
	"github.com/monolith-go/monolith/schemas/avsc"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// minEntrySize is the encoded size of the smallest entry: five one-byte fields.
const minEntrySize = 5

// AvroWriter writes entries to an Avro object container file of avsc.EntryDump records.
// The encoding is done here, not by goavro (which would box every float), and keeps the
// exact bits of every float.
type AvroWriter struct {
	ocf    *ocf.Writer
	block  []byte // encoded entries of the current block
	count  int64  // entries in block
	size   int    // block size at which to write the block
	table  string
	closed bool
	err    error // sticky
}

// NewAvroWriter writes the file header (schema avsc.EntryDump, the codec, MetaTable and
// MetaDim) to w and returns a writer of info's entries.
func NewAvroWriter(w io.Writer, info TableInfo, opts ...Option) (*AvroWriter, error) {
	c := newConfig(opts)
	if !ocf.KnownCodec(c.avroCodec) {
		return nil, fmt.Errorf("%sunknown Avro codec %q (want null, deflate or snappy)", errPrefix, c.avroCodec)
	}
	meta := [][2]string{{MetaTable, info.Name}}
	if info.Dim > 0 {
		meta = append(meta, [2]string{MetaDim, strconv.Itoa(info.Dim)})
	}
	ow, err := ocf.NewWriter(w, avsc.EntryDump, c.avroCodec, meta...)
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	return &AvroWriter{ocf: ow, size: max(c.avroBlock, 1), table: info.Name}, nil
}

// Write appends d. An entry without id or with unknown proto fields is an error wrapping
// ErrUnsupported, which does not break the writer.
func (w *AvroWriter) Write(d *hashtablepb.EntryDump) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New(errPrefix + "write on a closed writer")
	}
	if err := storable(d); err != nil {
		return err
	}
	w.block = appendEntry(w.block, w.table, d)
	w.count++
	if len(w.block) >= w.size {
		return w.flush()
	}
	return nil
}

// flush writes the current block.
func (w *AvroWriter) flush() error {
	if w.count == 0 {
		return nil
	}
	if err := w.ocf.WriteBlock(w.count, w.block); err != nil {
		w.err = fmt.Errorf("%swrite block: %w", errPrefix, err)
		return w.err
	}
	w.block, w.count = w.block[:0], 0
	return nil
}

// Close writes the last block. It does not close the underlying writer.
func (w *AvroWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	return w.flush()
}

// appendEntry encodes one avsc.EntryDump record.
func appendEntry(b []byte, table string, d *hashtablepb.EntryDump) []byte {
	b = ocf.AppendString(b, table)
	b = ocf.AppendLong(b, d.GetId())
	b = ocf.AppendFloats(b, d.GetNum())
	if d.LastUpdateTsSec == nil {
		b = append(b, 0)
	} else {
		b = ocf.AppendLong(append(b, 2), *d.LastUpdateTsSec)
	}
	if d.Opt == nil {
		return append(b, 0)
	}
	b = append(b, 2)
	if dumps := d.Opt.GetDump(); len(dumps) > 0 {
		b = ocf.AppendLong(b, int64(len(dumps)))
		for _, od := range dumps {
			s := flatten(od)
			b = appendState(b, &s)
		}
	}
	return append(b, 0)
}

// appendState encodes one OptimizerState record.
func appendState(b []byte, s *optState) []byte {
	b = ocf.AppendLong(b, int64(s.kind))
	for i := range numLists {
		b = ocf.AppendFloats(b, s.lists[i])
	}
	for i := range numF32 {
		if s.hasF[i] {
			b = ocf.AppendFloat(append(b, 2), s.f32[i])
		} else {
			b = append(b, 0)
		}
	}
	for i := range numI64 {
		if s.hasI[i] {
			b = ocf.AppendLong(append(b, 2), s.i64[i])
		} else {
			b = append(b, 0)
		}
	}
	return b
}

// avroFormat describes export files to the ocf Reader.
var avroFormat = ocf.Config{
	ErrFormat:    ErrFormat,
	ErrTruncated: ErrTruncated,
	Item:         "entry",
	Items:        "entries",
	MinItemSize:  minEntrySize,
	MaxBlockSize: MaxAvroBlockSize,
}

// AvroReader reads an Avro object container file of avsc.EntryDump records. It decodes
// the container (io/ocf) and the records itself and checks every count against
// the bytes left before allocating, so a corrupt file cannot exhaust memory.
type AvroReader struct {
	ocf      *ocf.Reader
	file     string
	table    string
	hasTable bool // table is known (from the header or the first entry)
	d        hashtablepb.EntryDump
	err      error // sticky
}

// NewAvroReader reads and checks the file header: the magic, the codec and a schema with
// the parsing canonical form of avsc.EntryDump.
func NewAvroReader(r io.Reader, opts ...Option) (*AvroReader, error) {
	c := newConfig(opts)
	ar := &AvroReader{file: c.fileName}
	var err error
	ar.ocf, err = ocf.NewReader(r, &avroFormat)
	if err == nil {
		err = ar.checkHeader()
	}
	if err != nil {
		return nil, &CorruptError{File: ar.file, Record: -1, Offset: 0, RowGroup: -1, Err: err}
	}
	return ar, nil
}

// checkHeader checks the schema and takes the table name from the header.
func (r *AvroReader) checkHeader() error {
	if t, ok := r.ocf.Meta(MetaTable); ok {
		r.table, r.hasTable = string(t), true
	}
	got, ok, err := r.ocf.MatchSchema(avsc.EntryDump)
	if err == nil && !ok {
		err = fmt.Errorf("%w: the file's schema is not schemas/avsc.EntryDump: %.200s", ErrFormat, got)
	}
	return err
}

// Table returns the table named in the header (MetaTable).
func (r *AvroReader) Table() string { return r.table }

// Next returns the next entry, or (nil, io.EOF) at a clean end: after the last entry of a
// file that ends at a block boundary.
func (r *AvroReader) Next() (*hashtablepb.EntryDump, error) {
	if r.err != nil {
		return nil, r.err
	}
	d, err := r.ocf.Next()
	if err == io.EOF {
		r.err = io.EOF
		return nil, io.EOF
	}
	if err != nil {
		return nil, r.fail(err)
	}
	table := decodeEntry(d, &r.d)
	if err := d.Err(); err != nil {
		return nil, r.fail(err)
	}
	if !r.hasTable {
		r.table, r.hasTable = string(table), true
	} else if string(table) != r.table {
		return nil, r.fail(fmt.Errorf("%w: the entry is of table %q, the file of table %q", ErrFormat, table, r.table))
	}
	return &r.d, nil
}

// fail makes err the sticky error, at the current entry and block.
func (r *AvroReader) fail(err error) error {
	r.err = &CorruptError{File: r.file, Record: r.ocf.Item(), Offset: r.ocf.Offset(), RowGroup: -1, Err: err}
	return r.err
}

// Close does nothing (the reader does not own its input) and returns nil.
func (r *AvroReader) Close() error {
	if r.err == nil {
		r.err = errors.New(errPrefix + "read on a closed reader")
	}
	return nil
}

// decodeEntry decodes one record into e (reusing its embedding) and returns the table
// name, which aliases the block.
func decodeEntry(d *ocf.Decoder, e *hashtablepb.EntryDump) []byte {
	table := d.StringBytes()
	id := d.Long()
	num := d.Floats("embedding", e.Num[:0])
	e.Reset()
	e.Id, e.Num = &id, num
	if d.Union("last_update_ts_sec") {
		ts := d.Long()
		e.LastUpdateTsSec = &ts
	}
	if d.Union("opt") {
		e.Opt = &hashtablepb.OptimizerDump{}
		for {
			n := d.Count("opt", 14) // an OptimizerState takes at least 14 bytes
			if n == 0 {
				break
			}
			for range n {
				if od := decodeState(d, len(e.Opt.Dump)); od != nil {
					e.Opt.Dump = append(e.Opt.Dump, od)
				}
			}
		}
	}
	return table
}

// decodeState decodes one OptimizerState record, the i-th of its entry.
func decodeState(d *ocf.Decoder, i int) *hashtablepb.SingleOptimizerDump {
	var s optState
	k := d.Long()
	if k < 0 || k >= int64(numKinds) {
		d.Fail("opt[%d]: optimizer kind %d", i, k)
		return nil
	}
	s.kind = optKind(k)
	for j := range numLists {
		s.lists[j] = d.Floats(listNames[j], nil)
	}
	for j := range numF32 {
		if d.Union(f32Names[j]) {
			s.f32[j], s.hasF[j] = d.Float(), true
		}
	}
	for j := range numI64 {
		if d.Union(i64Names[j]) {
			s.i64[j], s.hasI[j] = d.Long(), true
		}
	}
	if d.Err() != nil {
		return nil
	}
	od, err := s.proto()
	if err != nil {
		d.Fail("opt[%d]: %v", i, err)
		return nil
	}
	return od
}
