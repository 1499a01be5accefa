package ocf

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Decoder decodes Avro binary values from a buffer, usually the items of one block. The first
// error stops decoding: it is kept (Err), wraps Config.ErrFormat, and every later value reads
// as zero. Bytes values alias the buffer.
//
// Methods that take a field name put it in front of their error messages; "" leaves it out.
type Decoder struct {
	buf []byte
	err error
	cfg *Config
}

// NewDecoder returns a Decoder of buf whose errors follow cfg.
func NewDecoder(buf []byte, cfg *Config) Decoder { return Decoder{buf: buf, cfg: cfg} }

// Len returns the number of bytes not decoded yet; 0 after an error.
func (d *Decoder) Len() int { return len(d.buf) }

// Err returns the first error, or nil.
func (d *Decoder) Err() error { return d.err }

// Fail records an error wrapping Config.ErrFormat, unless one is recorded already, and stops
// decoding.
func (d *Decoder) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", d.cfg.ErrFormat, fmt.Sprintf(format, args...))
	}
	d.buf = nil
}

// failField is Fail with the message prefixed by "field: " when field is not empty.
func (d *Decoder) failField(field, format string, args ...any) {
	if field != "" {
		format = "%s: " + format
		args = append([]any{field}, args...)
	}
	d.Fail(format, args...)
}

// Long decodes a long (zig-zag varint).
func (d *Decoder) Long() int64 {
	var u uint64
	for i, b := range d.buf {
		if i == 9 && b > 1 {
			d.Fail("varint overflows 64 bits")
			return 0
		}
		u |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			d.buf = d.buf[i+1:]
			return int64(u>>1) ^ -int64(u&1)
		}
	}
	d.Fail("%s ends inside a varint", d.cfg.Item)
	return 0
}

// Int decodes an int: a long in the int32 range.
func (d *Decoder) Int() int32 {
	v := d.Long()
	if v != int64(int32(v)) {
		d.Fail("int %d out of range", v)
		return 0
	}
	return int32(v)
}

// Float decodes a float (4 bytes, little endian), keeping its exact bits.
func (d *Decoder) Float() float32 {
	if len(d.buf) < 4 {
		d.Fail("%s ends inside a float", d.cfg.Item)
		return 0
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(d.buf))
	d.buf = d.buf[4:]
	return v
}

// Double decodes a double (8 bytes, little endian), keeping its exact bits.
func (d *Decoder) Double() float64 {
	if len(d.buf) < 8 {
		d.Fail("%s ends inside a double", d.cfg.Item)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.buf))
	d.buf = d.buf[8:]
	return v
}

// Bytes decodes a bytes value. It is never nil unless there is an error: a present empty
// value is empty, not null.
func (d *Decoder) Bytes() []byte { return d.lenPrefixed("bytes") }

// StringBytes decodes a string value and returns its bytes, as Bytes does.
func (d *Decoder) StringBytes() []byte { return d.lenPrefixed("string") }

func (d *Decoder) lenPrefixed(kind string) []byte {
	n := d.Long()
	if d.err != nil {
		return nil
	}
	if n < 0 || n > int64(len(d.buf)) {
		d.Fail("%s of length %d with %d bytes left", kind, n, len(d.buf))
		return nil
	}
	v := d.buf[:n:n]
	d.buf = d.buf[n:]
	return v
}

// Union decodes the branch index of a ["null", T] union and reports whether it is T.
func (d *Decoder) Union(field string) bool {
	switch i := d.Long(); i {
	case 0:
		return false
	case 1:
		return true
	default:
		d.failField(field, "union branch %d of a [null, T] union", i)
		return false
	}
}

// Count decodes the item count of the next block of an array or map: 0 at its end or after
// an error. A negative count's block size is read and ignored. The count is checked against
// the bytes left for items of at least minSize bytes, so the caller may allocate the items
// before decoding them.
func (d *Decoder) Count(field string, minSize int) int {
	if d.err != nil {
		return 0
	}
	n := d.Long()
	if n < 0 {
		if n == math.MinInt64 {
			d.failField(field, "array block count %d", n)
			return 0
		}
		n = -n
		d.Long() // block size in bytes, not needed
	}
	if d.err != nil {
		return 0
	}
	if n > int64(len(d.buf)/minSize) {
		d.failField(field, "array block of %d items with %d bytes left", n, len(d.buf))
		return 0
	}
	return int(n)
}

// Floats decodes an array<float> and appends its items to dst; nil stays nil for an empty
// array.
func (d *Decoder) Floats(field string, dst []float32) []float32 {
	for {
		n := d.Count(field, 4)
		if n == 0 {
			return dst
		}
		b := d.buf[:4*n] // Count checked that the n items are there
		d.buf = d.buf[4*n:]
		dst = slices.Grow(dst, n)
		for ; len(b) >= 4; b = b[4:] {
			dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
	}
}

// Doubles decodes an array<double> and appends its items to dst; nil stays nil for an
// empty array.
func (d *Decoder) Doubles(field string, dst []float64) []float64 {
	for {
		n := d.Count(field, 8)
		if n == 0 {
			return dst
		}
		b := d.buf[:8*n]
		d.buf = d.buf[8*n:]
		dst = slices.Grow(dst, n)
		for ; len(b) >= 8; b = b[8:] {
			dst = append(dst, math.Float64frombits(binary.LittleEndian.Uint64(b)))
		}
	}
}
