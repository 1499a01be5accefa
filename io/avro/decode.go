package avro

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/monolith-go/monolith/schemas/batch"
)

const minLong = math.MinInt64

// decoder decodes rows of the avsc.Row schema from Avro binary data. The first error stops
// decoding and is kept in err. Decoded bytes values alias buf.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
	}
	d.buf = nil
}

func (d *decoder) long() int64 {
	var u uint64
	for i, b := range d.buf {
		if i == 9 && b > 1 {
			d.fail("varint overflows 64 bits")
			return 0
		}
		u |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			d.buf = d.buf[i+1:]
			return int64(u>>1) ^ -int64(u&1)
		}
	}
	d.fail("row ends inside a varint")
	return 0
}

func (d *decoder) int() int32 {
	v := d.long()
	if v != int64(int32(v)) {
		d.fail("int %d out of range", v)
		return 0
	}
	return int32(v)
}

func (d *decoder) float() float32 {
	if len(d.buf) < 4 {
		d.fail("row ends inside a float")
		return 0
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(d.buf))
	d.buf = d.buf[4:]
	return v
}

func (d *decoder) double() float64 {
	if len(d.buf) < 8 {
		d.fail("row ends inside a double")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.buf))
	d.buf = d.buf[8:]
	return v
}

// bytes returns a bytes value, never nil (a present empty value is empty, not null).
func (d *decoder) bytes() []byte {
	n := d.long()
	if d.err != nil {
		return nil
	}
	if n < 0 || n > int64(len(d.buf)) {
		d.fail("bytes of length %d with %d bytes left", n, len(d.buf))
		return nil
	}
	v := d.buf[:n:n]
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) string() string { return string(d.bytes()) }

// union reads a union branch index of a ["null", T] union and reports whether it is T.
func (d *decoder) union() bool {
	switch i := d.long(); i {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("union branch %d of a [null, T] union", i)
		return false
	}
}

// readArray decodes an Avro array whose items take at least minSize bytes each. Block counts are
// checked against the bytes left before anything is allocated. An empty array is nil.
func readArray[T any](d *decoder, minSize int, item func(*decoder) T) []T {
	var out []T
	for d.err == nil {
		n := d.long()
		if n == 0 || d.err != nil {
			break
		}
		if n < 0 {
			if n == minLong {
				d.fail("array block count %d", n)
				break
			}
			n = -n
			d.long() // block size in bytes, not needed
		}
		if n > int64(len(d.buf)/minSize) {
			d.fail("array block of %d items with %d bytes left", n, len(d.buf))
			break
		}
		out = slices.Grow(out, int(n)) // amortized: many one-item blocks stay linear
		for range n {
			out = append(out, item(d))
		}
	}
	if d.err != nil {
		return nil
	}
	return out
}

func long(d *decoder) int64      { return d.long() }
func fid(d *decoder) uint64      { return uint64(d.long()) } // bit-cast, see avsc.Row
func float(d *decoder) float32   { return d.float() }
func double(d *decoder) float64  { return d.double() }
func int32Item(d *decoder) int32 { return d.int() }
func bytesItem(d *decoder) []byte {
	return d.bytes()
}
func fids(d *decoder) []uint64           { return readArray(d, 1, fid) }
func floats(d *decoder) batch.Float32s   { return readArray(d, 4, float) }
func doubles(d *decoder) batch.Float64s  { return readArray(d, 8, double) }
func longs(d *decoder) []int64           { return readArray(d, 1, long) }
func bytesList(d *decoder) [][]byte      { return readArray(d, 1, bytesItem) }
func cellItem(d *decoder) (c batch.Cell) { d.cell(&c); return c }

// cell decodes a Cell record (field order of avsc.Row).
func (d *decoder) cell(c *batch.Cell) {
	c.Name = d.string()
	k := d.int()
	if k < 0 || k > math.MaxUint8 {
		d.fail("cell kind %d", k)
	}
	c.Kind = batch.Kind(k)
	c.Fids = fids(d)
	c.Floats = floats(d)
	c.Doubles = doubles(d)
	c.Int64s = longs(d)
	c.Bytes = bytesList(d)
	c.FidLists = readArray(d, 1, fids)
	c.FloatLists = readArray(d, 1, floats)
	c.DoubleLists = readArray(d, 1, doubles)
	c.Int64Lists = readArray(d, 1, longs)
	c.BytesLists = readArray(d, 1, bytesList)
}

// row decodes one Row record (field order of avsc.Row).
func (d *decoder) row() (batch.Row, error) {
	var r batch.Row
	if d.union() {
		r.BatchSchema = d.bytes()
	}
	n := d.long()
	if n < 0 || n > math.MaxInt32 {
		d.fail("batch_rows %d", n)
	}
	r.BatchRows = int(n)
	r.Features = readArray(d, 12, cellItem) // a cell takes at least 12 bytes
	if d.union() {
		r.Label = floats(d)
		if r.Label == nil {
			r.Label = batch.Float32s{}
		}
	}
	if d.union() {
		v := d.float()
		r.InstanceWeight = &v
	}
	if d.union() {
		r.LineID = d.bytes()
	}
	if d.union() {
		v := d.long()
		if v < 0 || v > math.MaxUint32 {
			d.fail("data_source_key %d out of the uint32 range", v)
		}
		u := uint32(v)
		r.DataSourceKey = &u
	}
	if d.union() {
		r.Extra = d.bytes()
	}
	if d.union() {
		r.FidOrder = readArray(d, 1, int32Item)
		if r.FidOrder == nil {
			r.FidOrder = []int32{}
		}
	}
	if d.err != nil {
		return batch.Row{}, d.err
	}
	return r, nil
}
