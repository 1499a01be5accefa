package element

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkIPC verifies the framing and the flatbuffer metadata of an Arrow IPC stream before
// arrow-go's reader sees it: every message and body lies inside b, and every vector and
// string of the metadata fits in its message. The reader sizes allocations from these
// counts, so an unchecked corrupt count would exhaust memory instead of failing. Only what
// EncodeRecord writes is accepted: a schema message, record batch messages without
// compression, and an optional end-of-stream marker; no dictionaries.
func checkIPC(b []byte) error {
	pos, msgs := 0, 0
	for pos < len(b) {
		if len(b)-pos < 4 {
			return fmt.Errorf("message %d at offset %d: truncated length", msgs, pos)
		}
		n := binary.LittleEndian.Uint32(b[pos:])
		pos += 4
		if n == 0xFFFFFFFF { // continuation marker, then the metadata length
			if len(b)-pos < 4 {
				return fmt.Errorf("message %d at offset %d: truncated length", msgs, pos)
			}
			n = binary.LittleEndian.Uint32(b[pos:])
			pos += 4
		}
		if n == 0 { // end of stream
			if msgs == 0 {
				return errors.New("stream without a schema")
			}
			return nil
		}
		if uint64(n) > uint64(len(b)-pos) {
			return fmt.Errorf("message %d at offset %d: metadata of %d bytes past the end", msgs, pos, n)
		}
		meta := flatbuf(b[pos : pos+int(n)])
		pos += int(n)
		kind, body, err := meta.message(msgs == 0)
		if err != nil {
			return fmt.Errorf("message %d at offset %d: %w", msgs, pos-int(n), err)
		}
		_ = kind
		if body < 0 || uint64(body) > uint64(len(b)-pos) {
			return fmt.Errorf("message %d at offset %d: body of %d bytes past the end", msgs, pos, body)
		}
		pos += int(body)
		msgs++
	}
	if msgs == 0 {
		return errors.New("empty stream")
	}
	return nil
}

// flatbuf is one flatbuffer; its methods return -1 or an error for anything out of bounds.
type flatbuf []byte

// Message header types (Arrow's MessageHeader union).
const (
	headerSchema      = 1
	headerRecordBatch = 3
)

// maxDepth bounds the nesting of schema fields.
const maxDepth = 64

func (f flatbuf) u32(p int) (int, bool) {
	if p < 0 || p > len(f)-4 {
		return 0, false
	}
	return int(binary.LittleEndian.Uint32(f[p:])), true
}

// table returns the position of the table an offset at p points to, after checking its
// vtable.
func (f flatbuf) table(p int) (int, error) {
	off, ok := f.u32(p)
	if !ok {
		return 0, fmt.Errorf("offset at %d out of bounds", p)
	}
	t := p + off
	so, ok := f.u32(t)
	if !ok {
		return 0, fmt.Errorf("table at %d out of bounds", t)
	}
	vt := t - int(int32(so))
	if vt < 0 || vt > len(f)-4 {
		return 0, fmt.Errorf("vtable of table %d out of bounds", t)
	}
	vsize := int(binary.LittleEndian.Uint16(f[vt:]))
	tsize := int(binary.LittleEndian.Uint16(f[vt+2:]))
	if vsize < 4 || vsize%2 != 0 || vt+vsize > len(f) || t+tsize > len(f) {
		return 0, fmt.Errorf("table %d: sizes out of bounds", t)
	}
	return t, nil
}

// field returns the position of field i of table t, or -1 when it is absent.
func (f flatbuf) field(t, i int) int {
	so, _ := f.u32(t)
	vt := t - int(int32(so))
	vsize := int(binary.LittleEndian.Uint16(f[vt:]))
	tsize := int(binary.LittleEndian.Uint16(f[vt+2:]))
	slot := 4 + 2*i
	if slot+2 > vsize {
		return -1
	}
	off := int(binary.LittleEndian.Uint16(f[vt+slot:]))
	if off == 0 {
		return -1
	}
	if off >= tsize {
		return -2
	}
	return t + off
}

// vector checks the vector (or string) that field i of table t points to, of elements of
// size elem, and returns its element count and the position of its first element.
func (f flatbuf) vector(t, i, elem int) (n, start int, err error) {
	p := f.field(t, i)
	if p == -1 {
		return 0, 0, nil
	}
	off, ok := f.u32(p)
	if p < 0 || !ok {
		return 0, 0, fmt.Errorf("table %d field %d out of bounds", t, i)
	}
	v := p + off
	n, ok = f.u32(v)
	if !ok || uint64(n)*uint64(elem) > uint64(len(f)-v-4) {
		return 0, 0, fmt.Errorf("table %d field %d: vector of %d elements past the end", t, i, n)
	}
	return n, v + 4, nil
}

// tables checks a vector of tables (field i of t) and calls fn on each.
func (f flatbuf) tables(t, i int, fn func(int) error) error {
	n, start, err := f.vector(t, i, 4)
	if err != nil {
		return err
	}
	for k := range n {
		e, err := f.table(start + 4*k)
		if err != nil {
			return err
		}
		if fn != nil {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// subtable checks the table field i of t points to, if any, and returns it or -1.
func (f flatbuf) subtable(t, i int) (int, error) {
	p := f.field(t, i)
	if p == -1 {
		return -1, nil
	}
	if p < 0 {
		return 0, fmt.Errorf("table %d field %d out of bounds", t, i)
	}
	return f.table(p)
}

func (f flatbuf) keyValues(t, i int) error {
	return f.tables(t, i, func(kv int) error {
		if _, _, err := f.vector(kv, 0, 1); err != nil {
			return err
		}
		_, _, err := f.vector(kv, 1, 1)
		return err
	})
}

func (f flatbuf) u8(p int) int {
	if p < 0 || p >= len(f) {
		return 0
	}
	return int(f[p])
}

func (f flatbuf) i64(p int) int64 {
	if p < 0 || p > len(f)-8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(f[p:]))
}

// message checks a Message table and returns its header type and body length.
func (f flatbuf) message(first bool) (kind int, body int64, err error) {
	m, err := f.table(0)
	if err != nil {
		return 0, 0, err
	}
	kind = f.u8(f.field(m, 1))
	body = f.i64(f.field(m, 3))
	if err := f.keyValues(m, 4); err != nil {
		return 0, 0, err
	}
	h, err := f.subtable(m, 2)
	if err != nil {
		return 0, 0, err
	}
	if h < 0 {
		return 0, 0, errors.New("message without a header")
	}
	switch {
	case first && kind == headerSchema:
		if err := f.tables(h, 1, func(fl int) error { return f.fieldTable(fl, 0) }); err != nil {
			return 0, 0, err
		}
		if err := f.keyValues(h, 2); err != nil {
			return 0, 0, err
		}
		_, _, err = f.vector(h, 3, 8)
	case !first && kind == headerRecordBatch:
		if _, _, err = f.vector(h, 1, 16); err != nil {
			return 0, 0, err
		}
		if _, _, err = f.vector(h, 2, 16); err != nil {
			return 0, 0, err
		}
		if f.field(h, 3) != -1 {
			return 0, 0, errors.New("compressed record batch (not written by this coder)")
		}
		_, _, err = f.vector(h, 4, 8)
	default:
		return 0, 0, fmt.Errorf("unexpected message header type %d", kind)
	}
	return kind, body, err
}

// fieldTable checks a schema Field: name, type, dictionary, children and metadata.
func (f flatbuf) fieldTable(t, depth int) error {
	if depth > maxDepth {
		return errors.New("schema nested too deeply")
	}
	if _, _, err := f.vector(t, 0, 1); err != nil {
		return err
	}
	typ, err := f.subtable(t, 3)
	if err != nil {
		return err
	}
	if typ >= 0 {
		switch f.u8(f.field(t, 2)) {
		case 10: // Timestamp: timezone string
			if _, _, err := f.vector(typ, 1, 1); err != nil {
				return err
			}
		case 14: // Union: type ids
			if _, _, err := f.vector(typ, 1, 4); err != nil {
				return err
			}
		}
	}
	if f.field(t, 4) != -1 {
		return errors.New("dictionary-encoded field (not written by this coder)")
	}
	if err := f.tables(t, 5, func(c int) error { return f.fieldTable(c, depth+1) }); err != nil {
		return err
	}
	return f.keyValues(t, 6)
}
