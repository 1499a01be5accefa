package batch

import (
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
)

// Field numbers of monolith.io.proto.Example and NamedFeature read by the wire decoder
// (frozen).
const (
	exNamedFeature   = 1
	exLineID         = 100
	exLabel          = 101
	exInstanceWeight = 102
	exDataSourceKey  = 103
	nfName           = 1
	nfFeature        = 2
	nfID             = 3
	nfSortedID       = 6
)

// RecordError is the error of DecodeExamples and DecodeInstances for a record that is not
// a serialized Example or Instance.
type RecordError struct {
	Record int   // index of the record in the records passed
	Err    error // "parse Example: ..." or "parse Instance: ..."
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("schemas/batch: record %d: %v", e.Record, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// DecodeExamples converts serialized Examples, one per record, into a batch with one row
// per record, without building the intermediate protobuf objects. keys, unless nil, holds
// one data_source_key per record that replaces the message's (the readers' header
// override, io.md §1.2.4).
//
// The result is identical to unmarshalling every record into an Example, setting its
// data_source_key from keys and calling FromExamples(mem, exs, opts...), errors included; a
// record that does not parse is a *RecordError naming it. Named features whose cells are
// of the common kinds (fid lists, float and int64 lists, unset cells, missing Features or
// features) and the label, instance_weight, LineId and data_source_key fields are decoded
// from the wire into Arrow buffers. A feature with other cells is built through Feature
// messages for that column only, and a LineId that is not in canonical encoding is
// re-encoded through a message for that row only. Anything else the fast path does not
// cover (raw features, unknown fields, repeated or unpacked fields, malformed input, and
// every error) sends all the records through the message path.
func DecodeExamples(mem memory.Allocator, records [][]byte, keys []uint32, opts ...Option) (arrow.RecordBatch, error) {
	return decodeRows(mem, records, keys, opts, decodeExamplesWire, slowExamples)
}

// slowExamples is the message path of DecodeExamples.
func slowExamples(mem memory.Allocator, records [][]byte, keys []uint32, opts []Option) (arrow.RecordBatch, error) {
	exs, err := unmarshalRecords(records, func() *examplepb.Example { return &examplepb.Example{} })
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		exs[i].DataSourceKey = k
	}
	return FromExamples(mem, exs, opts...)
}

// exampleWire decodes the records of one batch of Examples.
type exampleWire struct{ rowWire }

// decodeExamplesWire is the fast path of DecodeExamples; it reports false when the message
// path must decode the records instead.
func decodeExamplesWire(mem memory.Allocator, records [][]byte, keys []uint32, opts []Option) (arrow.RecordBatch, bool) {
	d := &exampleWire{newRowWire(SourceExample, records)}
	return d.decode(mem, keys, opts, d.record, nil)
}

// record reads the fields of one serialized Example into row r.
func (d *exampleWire) record(r int, rec []byte) bool {
	row := &d.rows[r]
	sawLineID, sawLabel := false, false
	d.next = 0
	for b := rec; len(b) > 0; {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == exNamedFeature && typ == protowire.BytesType:
			var v []byte
			v, n = consumeBytes(b)
			if n >= 0 && !d.namedFeature(r, v, len(rec)-len(b)+n-len(v)) {
				return false
			}
		case num == exLineID && typ == protowire.BytesType && !sawLineID: // a second one is merged
			row.lineID, n = consumeBytes(b)
			row.hasLineID, sawLineID = true, true
		case num == exLabel && typ == protowire.BytesType && !sawLabel: // packed, once
			row.label, n = consumeBytes(b)
			sawLabel = true
			if len(row.label)%4 != 0 {
				return false
			}
		case num == exInstanceWeight && typ == protowire.Fixed32Type:
			_, n = protowire.ConsumeFixed32(b)
			if n >= 0 {
				row.iw = b[:n]
			}
		case num == exDataSourceKey && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			row.dsk = uint32(v)
		default:
			return false // raw features, unknown fields, odd wire types
		}
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

// namedFeature reads one serialized NamedFeature of row r, at offset base of its record,
// into its column.
func (d *exampleWire) namedFeature(r int, b []byte, base int) bool {
	var name, feat []byte
	var id, sorted uint64
	featOff, names := -1, 0
	for end := base + len(b); len(b) > 0; {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == nfName && typ == protowire.BytesType:
			// Every occurrence must be UTF-8 (the message path reports it). A lone name
			// is checked below, only when it names no column yet.
			if names++; names == 2 && !utf8.Valid(name) {
				return false
			}
			name, n = consumeBytes(b)
			if names >= 2 && n >= 0 && !utf8.Valid(name) {
				return false
			}
		case num == nfFeature && typ == protowire.BytesType && featOff < 0: // a second one is merged
			feat, n = consumeBytes(b)
			featOff = end - len(b) + n - len(feat)
		case num == nfID && typ == protowire.VarintType:
			id, n = protowire.ConsumeVarint(b)
		case num == nfSortedID && typ == protowire.VarintType:
			sorted, n = protowire.ConsumeVarint(b)
		default:
			return false // unknown fields, odd wire types
		}
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	c, isNew := d.columnNew(name)
	if isNew && names == 1 && !utf8.Valid(name) {
		return false
	}
	switch {
	case c.lastRow < 0:
		c.id, c.sorted = int32(id), int32(sorted)
	case c.lastRow == r || c.id != int32(id) || c.sorted != int32(sorted):
		return false // a name twice in a row, or ids that change: errors of the message path
	}
	c.lastRow = r
	if featOff >= 0 {
		c.cells[r] = wireRef{kind: KindUnset, off: uint32(featOff), size: uint32(len(feat))}
	} else {
		c.cells[r] = wireRef{kind: KindNoFeature}
	}
	return true
}

// reencodeLineID returns the bytes the message path stores for a serialized LineId: the
// deterministic encoding of its message. m is scratch.
func reencodeLineID(m *matrixpb.LineId, b []byte) ([]byte, error) {
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("schemas/batch: parse LineId: %w", err)
	}
	out, err := marshalDet.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("schemas/batch: encode LineId: %w", err)
	}
	return out, nil
}

// lineIDEnc is how deterministic marshalling writes one LineId field.
type lineIDEnc uint8

const (
	encOther      lineIDEnc = iota // not checked: a LineId holding it is re-encoded
	encVarint                      // int64, uint64: a minimal varint
	encInt32                       // int32: a minimal varint of the sign-extended value
	encUint32                      // uint32: a minimal varint below 2^32
	encBool                        // 0 or 1
	encFixed32                     // fixed32, sfixed32, float
	encFixed64                     // fixed64, sfixed64, double
	encBytes                       // string (not validated in proto2), bytes
	encPacked32                    // packed repeated int32: one non-empty field
	encRepeated32                  // unpacked repeated int32: one field per value, adjacent
)

// lineIDEncs maps every LineId field number to its encoding, from the message descriptor.
var lineIDEncs = func() map[protowire.Number]lineIDEnc {
	md := (&matrixpb.LineId{}).ProtoReflect().Descriptor()
	fields := md.Fields()
	encs := make(map[protowire.Number]lineIDEnc, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		enc := encOther
		switch {
		case fd.IsList():
			if fd.Kind() == protoreflect.Int32Kind && fd.IsPacked() {
				enc = encPacked32
			} else if fd.Kind() == protoreflect.Int32Kind {
				enc = encRepeated32
			}
		case fd.IsMap() || !fd.HasPresence() || fd.ContainingOneof() != nil:
			// Implicit presence drops zero values; oneofs and maps are not checked.
		default:
			switch fd.Kind() {
			case protoreflect.Int64Kind, protoreflect.Uint64Kind:
				enc = encVarint
			case protoreflect.Int32Kind:
				enc = encInt32
			case protoreflect.Uint32Kind:
				enc = encUint32
			case protoreflect.BoolKind:
				enc = encBool
			case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
				enc = encFixed32
			case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
				enc = encFixed64
			case protoreflect.StringKind, protoreflect.BytesKind:
				enc = encBytes
			}
		}
		encs[fd.Number()] = enc
	}
	if md.ExtensionRanges().Len() > 0 {
		return nil // extensions are written first: check nothing
	}
	return encs
}()

// canonicalLineID reports whether serialized LineId bytes are exactly what unmarshalling
// and deterministic marshalling give back, so that the message path would store them
// unchanged: known fields in field-number order, each once (adjacent for an unpacked
// repeated field) in its canonical encoding, then unknown fields, kept as they are. It
// also reports false for bytes that do not parse.
func canonicalLineID(b []byte) bool {
	if lineIDEncs == nil {
		return false
	}
	var last protowire.Number
	unknown := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return false
		}
		enc, known := lineIDEncs[num]
		if !known {
			// The message path keeps an unknown field's value bytes but writes its tag
			// afresh, in the shortest form.
			if n != protowire.SizeTag(num) {
				return false
			}
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if m < 0 {
				return false
			}
			b, unknown = b[n+m:], true
			continue
		}
		if unknown || n != protowire.SizeTag(num) || num < last || num == last && enc != encRepeated32 {
			return false
		}
		last = num
		m := consumeCanonical(enc, typ, b[n:])
		if m < 0 {
			return false
		}
		b = b[n+m:]
	}
	return true
}

// consumeCanonical returns the length of a field value in its canonical encoding, or -1.
func consumeCanonical(enc lineIDEnc, typ protowire.Type, b []byte) int {
	switch enc {
	case encVarint, encInt32, encUint32, encBool, encRepeated32:
		if typ != protowire.VarintType {
			return -1
		}
		v, n := protowire.ConsumeVarint(b)
		if n < 0 || !canonicalVarint(enc, v, n) {
			return -1
		}
		return n
	case encFixed32:
		if typ != protowire.Fixed32Type {
			return -1
		}
		_, n := protowire.ConsumeFixed32(b)
		return n
	case encFixed64:
		if typ != protowire.Fixed64Type {
			return -1
		}
		_, n := protowire.ConsumeFixed64(b)
		return n
	case encBytes, encPacked32:
		if typ != protowire.BytesType {
			return -1
		}
		l, n := protowire.ConsumeVarint(b)
		if n < 0 || n != protowire.SizeVarint(l) {
			return -1
		}
		p, m := protowire.ConsumeBytes(b)
		if m < 0 || enc == encBytes {
			return m
		}
		if len(p) == 0 {
			return -1 // an empty packed field is not written
		}
		for len(p) > 0 {
			v, k := protowire.ConsumeVarint(p)
			if k < 0 || !canonicalVarint(encInt32, v, k) {
				return -1
			}
			p = p[k:]
		}
		return m
	}
	return -1
}

// canonicalVarint reports whether the n-byte varint v is how its field's value is written.
func canonicalVarint(enc lineIDEnc, v uint64, n int) bool {
	if n != protowire.SizeVarint(v) {
		return false
	}
	switch enc {
	case encInt32, encRepeated32:
		return v == uint64(int64(int32(v)))
	case encUint32:
		return v <= 1<<32-1
	case encBool:
		return v <= 1
	}
	return true
}

// consumeTag is protowire.ConsumeTag with a fast path for one-byte tags.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	if len(b) > 0 && b[0] < 0x80 && b[0] >= 1<<3 {
		return protowire.Number(b[0] >> 3), protowire.Type(b[0] & 7), 1
	}
	return protowire.ConsumeTag(b)
}

// consumeBytes is protowire.ConsumeBytes with a fast path for one-byte lengths.
func consumeBytes(b []byte) ([]byte, int) {
	if len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b) {
		n := 1 + int(b[0])
		return b[1:n], n
	}
	return protowire.ConsumeBytes(b)
}
