package batch

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/fid"
)

// Field numbers of monolith.io.proto messages read by the wire decoder (frozen).
const (
	ebNamedFeatureList    = 1
	ebNamedRawFeatureList = 2
	ebBatchSize           = 3
	ebDataSourceKey       = 100
	nflName               = 1
	nflFeature            = 2
	nflType               = 3
	nflID                 = 4
)

// DecodeExampleBatch converts a serialized ExampleBatch straight into a batch, without
// building the intermediate protobuf objects. The result is identical to
// FromExampleBatch(mem, proto.Unmarshal(payload)), errors included: lists of the common
// kinds (fid lists, float and int64 lists, unset cells) are decoded from the wire into
// Arrow builders, and any list the fast path does not cover (other kinds, unknown fields,
// unpacked encodings, repeated oneof members) is decoded through the message path.
func DecodeExampleBatch(mem memory.Allocator, payload []byte, opts ...Option) (arrow.RecordBatch, error) {
	var lists [][]byte
	var batchSize, dsk uint64
	slow := false
	for b := payload; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return slowExampleBatch(mem, payload, opts) // malformed: let the message path report it
		}
		b = b[n:]
		switch {
		case num == ebNamedFeatureList && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			lists = append(lists, v)
		case num == ebBatchSize && typ == protowire.VarintType:
			batchSize, n = protowire.ConsumeVarint(b)
		case num == ebDataSourceKey && typ == protowire.VarintType:
			dsk, n = protowire.ConsumeVarint(b)
		default:
			slow = true // raw lists, unknown fields, odd wire types
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return slowExampleBatch(mem, payload, opts)
		}
		b = b[n:]
	}
	if slow || len(lists) == 0 {
		return slowExampleBatch(mem, payload, opts)
	}
	rb := newRecordBuilder(mem, SourceExampleBatch, opts)
	n := int(int32(batchSize))
	if n <= 0 || n > rb.cfg.maxRows {
		return slowExampleBatch(mem, payload, opts) // same checks and errors as the message path
	}
	// Any failure is re-run through the message path, so that errors (and the precedence
	// between a malformed later list and a bad earlier one) are exactly the same.
	names := make(map[string]int, len(lists))
	for _, lb := range lists {
		name, col, err := rb.wireList(lb, n)
		_, dup := names[name]
		if err == errSlowList && !dup {
			l := &examplepb.NamedFeatureList{}
			if proto.Unmarshal(lb, l) == nil {
				name = l.GetName()
				if _, dup = names[name]; !dup {
					err = rb.addList(l, n)
				}
			}
		} else if err == nil && !dup {
			if col != nil {
				rb.cols = append(rb.cols, col)
			}
		} else if col != nil {
			col.release()
		}
		if err != nil || dup {
			rb.release()
			return slowExampleBatch(mem, payload, opts)
		}
		names[name] = len(names)
	}
	c := rb.simple(ColDataSourceKey, RoleDataSourceKey, arrow.PrimitiveTypes.Uint32, false)
	if rb.cfg.dsk != nil {
		dsk = uint64(*rb.cfg.dsk)
	}
	c.b.(*array.Uint32Builder).Append(uint32(dsk))
	c.shared = true
	return rb.finish(n)
}

func slowExampleBatch(mem memory.Allocator, payload []byte, opts []Option) (arrow.RecordBatch, error) {
	eb := &examplepb.ExampleBatch{}
	if err := proto.Unmarshal(payload, eb); err != nil {
		return nil, fmt.Errorf("schemas/batch: parse ExampleBatch: %w", err)
	}
	return FromExampleBatch(mem, eb, opts...)
}

// errSlowList asks for the message path for one list.
var errSlowList = fmt.Errorf("schemas/batch: list needs the message path")

// wireCell is one validated Feature cell: its kind and the packed bytes of its values.
type wireCell struct {
	kind Kind
	data []byte
}

// wireList decodes one NamedFeatureList on the fast path into a new column. It returns
// errSlowList when the list needs the message path.
func (rb *recordBuilder) wireList(b []byte, n int) (string, *featureCol, error) {
	var name []byte
	var typ, id uint64
	cells := rb.cells[:0]
	defer func() { rb.cells = cells[:0] }()
	for len(b) > 0 {
		// A cell with a one-byte length, without calls (most of a list's bytes).
		if len(b) >= 2 && b[0] == nflFeature<<3|byte(protowire.BytesType) && b[1] < 0x80 && int(b[1]) <= len(b)-2 {
			end := 2 + int(b[1])
			c, ok := parseWireCell(b[2:end])
			if !ok {
				return "", nil, errSlowList
			}
			cells = append(cells, c)
			b = b[end:]
			continue
		}
		num, wt, m := consumeTag(b)
		if m < 0 {
			return "", nil, errSlowList
		}
		b = b[m:]
		switch {
		case num == nflName && wt == protowire.BytesType:
			name, m = consumeBytes(b)
			if m >= 0 && !utf8.Valid(name) {
				return "", nil, errSlowList // every occurrence must be UTF-8; the message path reports it
			}
		case num == nflFeature && wt == protowire.BytesType:
			var f []byte
			f, m = consumeBytes(b)
			if m >= 0 {
				c, ok := parseWireCell(f)
				if !ok {
					return "", nil, errSlowList
				}
				cells = append(cells, c)
			}
		case num == nflType && wt == protowire.VarintType:
			typ, m = protowire.ConsumeVarint(b)
		case num == nflID && wt == protowire.VarintType:
			id, m = protowire.ConsumeVarint(b)
		default:
			return "", nil, errSlowList
		}
		if m < 0 {
			return "", nil, errSlowList
		}
		b = b[m:]
	}
	sname := string(name)
	shared := examplepb.FeatureListType(int32(typ)) == examplepb.FeatureListType_SHARED
	if !shared && typ != 0 {
		return sname, nil, errSlowList
	}
	switch sname {
	case ListLabel, ListLineID, ListInstanceWeight:
		if shared && len(cells) != 1 || !shared && len(cells) != n {
			return sname, nil, errSlowList // the message path reports the bad length
		}
		sc, ok := rb.wireCanonical(sname, cells)
		if !ok {
			return sname, nil, errSlowList // not canonical: an ordinary column, built by the message path
		}
		sc.shared, sc.list, sc.id = shared, sname, int32(id)
		return sname, nil, nil
	}
	switch {
	case shared && len(cells) != 1:
		return sname, nil, fmt.Errorf("%w: SHARED list has %d cells, want exactly 1", ErrUnrepresentable, len(cells))
	case !shared && len(cells) != n:
		return sname, nil, fmt.Errorf("%w: INDIVIDUAL list has %d cells but batch_size is %d", ErrUnrepresentable, len(cells), n)
	}
	c := newFeatureCol(sname)
	c.shared = shared
	c.id, c.idSet = int32(id), true
	if err := c.buildWire(rb.mem, cells); err != nil {
		c.release()
		return sname, nil, err
	}
	return sname, c, nil
}

// buildWire builds the column of validated cells directly into Arrow buffers: it counts the
// values first, so every buffer is allocated once at its final size. Cells of a null kind
// (unset, no_feature, absent) become nulls of that kind.
func (c *featureCol) buildWire(mem memory.Allocator, cells []wireCell) error {
	if !littleEndian {
		return errSlowList // the copies below assume little-endian memory, like the wire
	}
	for _, cell := range cells {
		if cell.kind == KindBytesList {
			return errSlowList // bytes columns are built by the message path
		}
	}
	c.kinds = make([]Kind, len(cells))
	total, nulls := 0, 0
	for i, cell := range cells {
		k := cell.kind
		c.kinds[i] = k
		if !k.IsValue() { // unset, or an Example's no_feature or absent cell
			nulls++
			continue
		}
		if f := k.family(); c.fam == famNone {
			c.fam = f
		} else if f != c.fam {
			return fmt.Errorf("%w: feature %q cell %d: kind %s cannot share a column with earlier %s cells",
				ErrUnrepresentable, c.name, i, k, c.firstValueKind())
		}
		switch c.fam {
		case famFid:
			total += len(cell.data) / 8
		case famFloat:
			total += len(cell.data) / 4
		case famInt64:
			for _, b := range cell.data {
				if b < 0x80 {
					total++
				}
			}
		}
	}
	if c.fam == famNone {
		return nil // all unset: finish makes a null-typed column
	}
	n := len(cells)
	width := 8
	if c.fam == famFloat {
		width = 4
	}
	valsBuf := memory.NewResizableBuffer(mem)
	valsBuf.Resize(total * width)
	offsBuf := memory.NewResizableBuffer(mem)
	offsBuf.Resize((n + 1) * 4)
	var validBuf *memory.Buffer
	var valid []byte
	if nulls > 0 {
		validBuf = memory.NewResizableBuffer(mem)
		validBuf.Resize(int(bitutil.BytesForBits(int64(n))))
		valid = validBuf.Bytes()
		clear(valid)
	}
	offs := arrow.Int32Traits.CastFromBytes(offsBuf.Bytes())
	vb := valsBuf.Bytes()
	pos := 0
	for i, cell := range cells {
		offs[i] = int32(pos)
		if !cell.kind.IsValue() {
			continue
		}
		if valid != nil {
			bitutil.SetBit(valid, i)
		}
		d := cell.data
		switch cell.kind {
		case KindFidV2List:
			copy(vb[pos*8:], d)
			pos += len(d) / 8
		case KindFidV1List:
			u := arrow.Uint64Traits.CastFromBytes(vb[pos*8 : pos*8+len(d)])
			if c.hi == nil { // dropped below when every fid's bits are zero
				c.hiBuf = memory.NewResizableBuffer(mem)
				c.hiBuf.Resize(total)
				c.hi = c.hiBuf.Bytes()
				clear(c.hi) // the bits of the column's v2 cells stay zero
			}
			hi := c.hi[pos : pos+len(u)]
			var any uint8
			for j := range u {
				v := binary.LittleEndian.Uint64(d[8*j:])
				u[j] = V1ToV2(v)
				h := fid.V1Hi(v)
				hi[j] = h
				any |= h
			}
			c.anyHi = c.anyHi || any != 0
			pos += len(u)
		case KindFloatList:
			copy(vb[pos*4:], d)
			pos += len(d) / 4
		case KindInt64List:
			i64 := arrow.Int64Traits.CastFromBytes(vb)
			for len(d) > 0 {
				v, m := protowire.ConsumeVarint(d)
				i64[pos] = int64(v)
				pos++
				d = d[m:]
			}
		}
	}
	offs[n] = int32(pos)
	if !c.anyHi {
		c.dropHiBuf()
		c.hi = nil
	}
	var elem arrow.DataType
	switch c.fam {
	case famFid:
		elem = arrow.PrimitiveTypes.Uint64
	case famFloat:
		elem = arrow.PrimitiveTypes.Float32
	default:
		elem = arrow.PrimitiveTypes.Int64
	}
	child := array.NewData(elem, total, []*memory.Buffer{nil, valsBuf}, nil, 0, 0)
	list := array.NewData(arrow.ListOf(elem), n, []*memory.Buffer{validBuf, offsBuf}, []arrow.ArrayData{child}, nulls, 0)
	c.built = array.MakeFromData(list)
	list.Release()
	child.Release()
	valsBuf.Release()
	offsBuf.Release()
	if validBuf != nil {
		validBuf.Release()
	}
	c.nvals = total
	return nil
}

// littleEndian reports whether the machine stores integers little-endian, as the wire does.
var littleEndian = func() bool { var x uint16 = 1; return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// wireCanonical builds the label, line_id or instance_weight column of a reserved list from
// raw cells, when every cell has the canonical shape (see canonicalList); it adds the
// column to rb and reports success.
func (rb *recordBuilder) wireCanonical(name string, cells []wireCell) (*simpleCol, bool) {
	n := len(cells)
	nulls, total := 0, 0
	for _, c := range cells {
		switch {
		case c.kind == KindUnset:
			nulls++
		case name == ListLabel && c.kind == KindFloatList:
			total += len(c.data)
		case name == ListInstanceWeight && c.kind == KindFloatList && len(c.data) == 4:
		case name == ListLineID && c.kind == KindBytesList:
			total += len(c.data)
		default:
			return nil, false
		}
	}
	var validBuf *memory.Buffer
	if nulls > 0 {
		validBuf = memory.NewResizableBuffer(rb.mem)
		validBuf.Resize(int(bitutil.BytesForBits(int64(n))))
		clear(validBuf.Bytes())
		for i, c := range cells {
			if c.kind != KindUnset {
				bitutil.SetBit(validBuf.Bytes(), i)
			}
		}
		defer validBuf.Release()
	}
	valsBuf := memory.NewResizableBuffer(rb.mem)
	defer valsBuf.Release()
	sc := &simpleCol{name: ColLabel, role: RoleLabel}
	var data arrow.ArrayData
	switch name {
	case ListInstanceWeight:
		sc.name, sc.role = ColInstanceWeight, RoleInstanceWeight
		valsBuf.Resize(4 * n)
		for i, c := range cells {
			copy(valsBuf.Bytes()[4*i:], c.data)
		}
		data = array.NewData(arrow.PrimitiveTypes.Float32, n, []*memory.Buffer{validBuf, valsBuf}, nil, nulls, 0)
	default:
		if name == ListLineID {
			sc.name, sc.role = ColLineID, RoleLineID
		}
		offsBuf := memory.NewResizableBuffer(rb.mem)
		defer offsBuf.Release()
		offsBuf.Resize(4 * (n + 1))
		offs := arrow.Int32Traits.CastFromBytes(offsBuf.Bytes())
		valsBuf.Resize(total)
		pos := 0
		for i, c := range cells {
			offs[i] = int32(pos)
			pos += copy(valsBuf.Bytes()[pos:], c.data)
		}
		offs[n] = int32(pos)
		if name == ListLineID {
			data = array.NewData(arrow.BinaryTypes.Binary, n, []*memory.Buffer{validBuf, offsBuf, valsBuf}, nil, nulls, 0)
			break
		}
		for i := range offs {
			offs[i] /= 4 // byte offsets to float offsets
		}
		child := array.NewData(arrow.PrimitiveTypes.Float32, total/4, []*memory.Buffer{nil, valsBuf}, nil, 0, 0)
		defer child.Release()
		data = array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Float32), n, []*memory.Buffer{validBuf, offsBuf}, []arrow.ArrayData{child}, nulls, 0)
	}
	sc.built = array.MakeFromData(data)
	data.Release()
	rb.cols = append(rb.cols, sc)
	return sc, true
}

// parseWireCell validates a serialized Feature for the fast path: no field at all (unset),
// or exactly one fid_v1_list, fid_v2_list, float_list or int64_list whose list message is a
// single packed field 1 (or empty), or a bytes_list holding exactly one value.
func parseWireCell(b []byte) (wireCell, bool) {
	if len(b) == 0 {
		return wireCell{kind: KindUnset}, true
	}
	// The common shape, without calls: a one-byte tag and length, then the list's one-byte
	// tag of field 1 and length, and the packed values; the same result as
	// parseWireCellAny for such bytes.
	if len(b) >= 4 && b[0] < 0x80 && b[0]&7 == byte(protowire.BytesType) && b[1] < 0x80 && int(b[1]) == len(b)-2 &&
		b[2] == 1<<3|byte(protowire.BytesType) && b[3] < 0x80 && int(b[3]) == len(b)-4 {
		k := Kind(b[0] >> 3)
		if !wireKind(k) {
			return wireCell{}, false
		}
		data := b[4:]
		if !validPacked(k, data) {
			return wireCell{}, false
		}
		return wireCell{kind: k, data: data}, true
	}
	return parseWireCellAny(b)
}

// parseWireCellAny is parseWireCell for any encoding of the cell (multi-byte tags and
// lengths, empty lists); FuzzParseWireCell checks that parseWireCell's fast path agrees
// with it.
func parseWireCellAny(b []byte) (wireCell, bool) {
	if len(b) == 0 {
		return wireCell{kind: KindUnset}, true
	}
	num, wt, n := consumeTag(b)
	if n < 0 || wt != protowire.BytesType {
		return wireCell{}, false
	}
	k := Kind(num)
	if !wireKind(k) {
		return wireCell{}, false
	}
	list, m := consumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return wireCell{}, false // malformed, or a second field (a repeated oneof member)
	}
	if len(list) == 0 {
		if k == KindBytesList {
			return wireCell{}, false // no value: not the single value the fast path takes
		}
		return wireCell{kind: k}, true
	}
	num, wt, n = consumeTag(list)
	if n < 0 || num != 1 || wt != protowire.BytesType {
		return wireCell{}, false
	}
	data, m := consumeBytes(list[n:])
	if m < 0 || n+m != len(list) {
		return wireCell{}, false
	}
	// A bytes_list takes the fast path only with a single value (a serialized LineId); data
	// is that value.
	if !validPacked(k, data) {
		return wireCell{}, false
	}
	return wireCell{kind: k, data: data}, true
}

// wireKind reports whether a Feature's list kind k can take the fast path.
func wireKind(k Kind) bool {
	return k == KindFidV1List || k == KindFidV2List || k == KindFloatList || k == KindInt64List || k == KindBytesList
}

// validPacked reports whether data holds whole packed values of a fid, float or int64 list
// cell of kind k (other kinds are not checked).
func validPacked(k Kind, data []byte) bool {
	switch k {
	case KindFidV1List, KindFidV2List:
		return len(data)%8 == 0
	case KindFloatList:
		return len(data)%4 == 0
	case KindInt64List:
		for p := data; len(p) > 0; {
			_, m := protowire.ConsumeVarint(p)
			if m < 0 {
				return false
			}
			p = p[m:]
		}
	}
	return true
}
