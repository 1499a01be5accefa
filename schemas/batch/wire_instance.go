package batch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/parserpb"
)

// Field numbers of parser.proto.Instance and idl.matrix.proto.Feature read by the wire
// decoder (frozen).
const (
	inFid            = 1
	inValue          = 2
	inLabel          = 3
	inInstanceWeight = 4
	inLineID         = 5
	inFeature        = 9
	inDataSourceKey  = 100
	mfName           = 1
	mfFid            = 2
	mfFloatValue     = 3
	mfInt64Value     = 4
)

// DecodeInstances converts serialized Instances, one per record, into a batch with one row
// per record, without building the intermediate protobuf objects. keys, unless nil, holds
// one data_source_key per record that replaces the message's (the readers' header
// override, io.md §1.2.4).
//
// The result is identical to unmarshalling every record into an Instance, setting its
// data_source_key from keys and calling FromInstances(mem, ins, opts...), errors included;
// a record that does not parse is a *RecordError naming it. The top-level fids (grouped
// into slot columns, with their original order when it is not the canonical one), the value,
// label, instance_weight, LineId and data_source_key fields, and named features holding one
// packed fid, float_value or int64_value list, or none, are decoded from the wire into
// Arrow buffers. A feature with other cells is built through Feature messages for that
// column only; a row with unmodelled fields (dense, label_tag, next_fid, unknown fields)
// builds its "__extra__" value through a message holding those fields only; a LineId that
// is not in canonical encoding is re-encoded through a message for that row only. Anything
// else the fast path does not cover (unpacked or repeated modelled fields, malformed input,
// and every error) sends all the records through the message path.
func DecodeInstances(mem memory.Allocator, records [][]byte, keys []uint32, opts ...Option) (arrow.RecordBatch, error) {
	return decodeRows(mem, records, keys, opts, decodeInstancesWire, slowInstances)
}

// slowInstances is the message path of DecodeInstances.
func slowInstances(mem memory.Allocator, records [][]byte, keys []uint32, opts []Option) (arrow.RecordBatch, error) {
	ins, err := unmarshalRecords(records, func() *parserpb.Instance { return &parserpb.Instance{} })
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		ins[i].DataSourceKey = proto.Uint32(k)
	}
	return FromInstances(mem, ins, opts...)
}

// instanceWire decodes the records of one batch of Instances.
type instanceWire struct {
	rowWire
	slotCol  [1 << 10]int32 // v1 slot -> 1 + index of its column in cols; 0 before its first fid
	slots    int32          // slot columns so far
	valueCol int            // 1 + index of the "value" column in cols; 0 before the first value
	inst     []instanceRow
	extra    []byte   // the rows' unmodelled fields, as they are on the wire, back to back
	orders   []int32  // fid order runs of the rows whose order is not canonical, back to back
	order    fidOrder // scratch: the row's fid order
	feats    [][2]int // scratch: the row's serialized Features, as (offset, size)
	fids     []uint64 // scratch: the row's fids, when slots must be gathered
	group    slotGrouper
}

// instanceRow locates the Instance-only values of one row.
type instanceRow struct {
	extra, extraEnd uint32 // its unmodelled fields: extra[extra:extraEnd]
	order, orderEnd uint32 // its fid order runs: orders[order:orderEnd], empty when canonical
}

// decodeInstancesWire is the fast path of DecodeInstances; it reports false when the
// message path must decode the records instead.
func decodeInstancesWire(mem memory.Allocator, records [][]byte, keys []uint32, opts []Option) (arrow.RecordBatch, bool) {
	d := &instanceWire{rowWire: newRowWire(SourceInstance, records), inst: make([]instanceRow, len(records))}
	return d.decode(mem, keys, opts, d.record, d.instanceColumns)
}

// record reads the fields of one serialized Instance into row r. Like FromInstances it
// takes the value, then the fids, then the named features, whatever their order on the
// wire.
func (d *instanceWire) record(r int, rec []byte) bool {
	row, ir := &d.rows[r], &d.inst[r]
	var fids, value []byte
	fidOff, valueOff := -1, -1
	sawLabel, sawLineID := false, false
	d.feats = d.feats[:0]
	ir.extra = uint32(len(d.extra))
	for b := rec; len(b) > 0; {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		field := b
		b = b[n:]
		switch {
		case num == inFid && typ == protowire.BytesType && fidOff < 0: // packed, once
			fids, n = consumeBytes(b)
			fidOff = len(rec) - len(b) + n - len(fids)
		case num == inValue && typ == protowire.BytesType && valueOff < 0:
			value, n = consumeBytes(b)
			valueOff = len(rec) - len(b) + n - len(value)
		case num == inLabel && typ == protowire.BytesType && !sawLabel:
			row.label, n = consumeBytes(b)
			sawLabel = true
			if len(row.label)%4 != 0 {
				return false
			}
		case num == inInstanceWeight && typ == protowire.Fixed32Type:
			_, n = protowire.ConsumeFixed32(b)
			if n >= 0 {
				row.iw = b[:n]
			}
		case num == inLineID && typ == protowire.BytesType && !sawLineID: // a second one is merged
			row.lineID, n = consumeBytes(b)
			row.hasLineID, sawLineID = true, true
		case num == inFeature && typ == protowire.BytesType:
			var v []byte
			v, n = consumeBytes(b)
			d.feats = append(d.feats, [2]int{len(rec) - len(b) + n - len(v), len(v)})
		case num == inDataSourceKey && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			row.dsk, row.hasDSK = uint32(v), true
		case num <= inLineID || num == inFeature || num == inDataSourceKey:
			return false // a modelled field repeated, unpacked or of another wire type
		default:
			// dense, label_tag, next_fid and unknown fields: kept for "__extra__".
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n >= 0 {
				d.extra = append(d.extra, field[:len(field)-len(b)+n]...)
			}
		}
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	ir.extraEnd = uint32(len(d.extra))
	if len(value) > 0 && !d.value(r, value, valueOff) {
		return false
	}
	if fidOff >= 0 && !d.slotFids(r, fids, fidOff) {
		return false
	}
	d.next = 0
	for _, f := range d.feats {
		if !d.feature(r, rec[f[0]:f[0]+f[1]], f[0]) {
			return false
		}
	}
	// Cells and rows locate values in the batch's buffers with 32-bit offsets.
	return uint64(len(d.gather)) <= math.MaxUint32 && uint64(len(d.extra)) <= math.MaxUint32 && uint64(len(d.orders)) <= math.MaxUint32
}

// value puts the packed floats of row r's value field, at offset off of its record, into
// the "value" column.
func (d *instanceWire) value(r int, v []byte, off int) bool {
	if len(v)%4 != 0 {
		return false
	}
	if d.valueCol == 0 {
		if _, ok := d.index["value"]; ok {
			return false // a named feature "value" came first: the message path's D5 error
		}
		d.newColumn("value").inst = "value"
		d.valueCol = len(d.cols)
	}
	c := d.cols[d.valueCol-1]
	c.lastRow = r
	c.cells[r] = wireRef{kind: KindFloatList, off: uint32(off), size: uint32(len(v))}
	return true
}

// slotFids puts the packed fids of row r, at offset base of its record, into their slot
// columns, and records their order. A slot's fids that are not adjacent are gathered.
func (d *instanceWire) slotFids(r int, b []byte, base int) bool {
	if len(b)%8 != 0 {
		return false
	}
	o := &d.order
	o.reset()
	scattered := false
	for i := 0; i < len(b); {
		slot := binary.LittleEndian.Uint64(b[i:]) >> 54
		j := i + 8
		for j < len(b) && binary.LittleEndian.Uint64(b[j:])>>54 == slot {
			j += 8
		}
		c := d.slotColumn(slot)
		if c == nil {
			return false
		}
		if c.lastRow == r {
			scattered = true // the slot's fids are not adjacent: gathered below
		}
		c.lastRow = r
		c.cells[r] = wireRef{kind: KindFidV1List, off: uint32(base + i), size: uint32(j - i)}
		o.add(c.ord, int32((j-i)/8))
		i = j
	}
	ir := &d.inst[r]
	ir.order = uint32(len(d.orders))
	if !o.canonical {
		d.orders = append(d.orders, o.runs...)
	}
	ir.orderEnd = uint32(len(d.orders))
	if !scattered {
		return true
	}
	d.fids = d.fids[:0]
	for i := 0; i < len(b); i += 8 {
		d.fids = append(d.fids, binary.LittleEndian.Uint64(b[i:]))
	}
	for _, g := range d.group.group(d.fids) {
		off := len(d.gather)
		for _, f := range g.fids {
			d.gather = binary.LittleEndian.AppendUint64(d.gather, f)
		}
		c := d.cols[d.slotCol[g.slot]-1]
		c.cells[r] = wireRef{kind: KindFidV1List, gathered: true, off: uint32(off), size: uint32(len(d.gather) - off)}
	}
	return true
}

// slotColumn returns the column of a v1 slot, creating it on first use; nil when a named
// feature took its name first (the message path's D5 error).
func (d *instanceWire) slotColumn(slot uint64) *wireCol {
	if i := d.slotCol[slot]; i > 0 {
		return d.cols[i-1]
	}
	name := SlotFeatureName(slot)
	if _, ok := d.index[name]; ok {
		return nil
	}
	c := d.newColumn(name)
	c.inst, c.ord = "fid", d.slots
	d.slots++
	d.slotCol[slot] = int32(len(d.cols))
	return c
}

// feature reads the name of one serialized Feature of row r, at offset base of its record,
// and puts the Feature into its column; it is parsed when the column is built.
func (d *instanceWire) feature(r int, b []byte, base int) bool {
	var name []byte
	for p := b; len(p) > 0; {
		num, typ, n := consumeTag(p)
		if n < 0 {
			return false
		}
		p = p[n:]
		if num == mfName && typ == protowire.BytesType {
			name, n = consumeBytes(p) // proto2: not validated as UTF-8
		} else {
			n = protowire.ConsumeFieldValue(num, typ, p)
		}
		if n < 0 {
			return false
		}
		p = p[n:]
	}
	c := d.column(name)
	if c.lastRow == r || c.inst != "" {
		return false // twice in a row, or a slot or value column: the message path's D5 errors
	}
	c.lastRow = r
	c.cells[r] = wireRef{kind: KindUnset, off: uint32(base), size: uint32(len(b))}
	return true
}

// parseInstanceCell validates a serialized idl.matrix.proto.Feature for the fast path: a
// name and at most one non-empty packed fid, float_value or int64_value field (a Feature
// with none is unset). Anything else (bytes and list-of-list fields, two value fields, a
// field repeated or unpacked, unknown fields) needs the message path.
func parseInstanceCell(b []byte) (wireCell, bool) {
	cell := wireCell{kind: KindUnset}
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return wireCell{}, false
		}
		v, m := consumeBytes(b[n:])
		if m < 0 {
			return wireCell{}, false
		}
		b = b[n+m:]
		var k Kind
		switch num {
		case mfName:
			continue
		case mfFid:
			k = KindFidV2List
		case mfFloatValue:
			k = KindFloatList
		case mfInt64Value:
			k = KindInt64List
		default:
			return wireCell{}, false
		}
		if len(v) == 0 {
			continue // an empty packed field sets nothing
		}
		if cell.kind != KindUnset || !validPacked(k, v) {
			return wireCell{}, false
		}
		cell = wireCell{kind: k, data: v}
	}
	return cell, true
}

// instanceColumns adds the columns FromInstances puts after the data_source_key:
// "__extra__" (left out when no row has unmodelled fields), then "__fid_order__" when a row's
// fids are not in canonical order.
func (d *instanceWire) instanceColumns(rb *recordBuilder) error {
	ec := rb.simple(ColExtra, RoleExtra, arrow.BinaryTypes.Binary, true)
	eb := ec.b.(*array.BinaryBuilder)
	var in *parserpb.Instance
	anyOrder := false
	for r := range d.inst {
		ir := &d.inst[r]
		anyOrder = anyOrder || ir.orderEnd > ir.order
		if ir.extraEnd == ir.extra {
			eb.AppendNull()
			continue
		}
		// Unmarshalling the row's unmodelled fields alone gives the message path's
		// dense, label_tag, next_fid and unknown fields.
		if in == nil {
			in = &parserpb.Instance{}
		}
		if err := proto.Unmarshal(d.extra[ir.extra:ir.extraEnd], in); err != nil {
			return fmt.Errorf("schemas/batch: instance %d: parse Instance: %w", r, err)
		}
		x := instanceExtra(in)
		if x == nil {
			eb.AppendNull()
			continue
		}
		b, err := marshalDet.Marshal(x)
		if err != nil {
			return fmt.Errorf("schemas/batch: instance %d: %w", r, err)
		}
		eb.Append(b)
		ec.valid = true
	}
	if !anyOrder {
		return nil
	}
	lb := array.NewListBuilder(rb.mem, arrow.PrimitiveTypes.Int32)
	rb.cols = append(rb.cols, &simpleCol{name: ColFidOrder, role: RoleFidOrder, b: lb})
	vb := lb.ValueBuilder().(*array.Int32Builder)
	for r := range d.inst {
		ir := &d.inst[r]
		if ir.orderEnd == ir.order {
			lb.AppendNull()
			continue
		}
		lb.Append(true)
		vb.AppendValues(d.orders[ir.order:ir.orderEnd], nil)
	}
	return nil
}
