package pqfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet"
)

// checkFooter walks the Thrift FileMetaData of a plaintext Parquet footer before arrow-go
// decodes it, so that sizes the footer claims cannot make the decoder allocate more than
// the footer could hold:
//
//   - every list, set and map holds at most as many elements as the bytes left could encode
//     (Thrift's own check allows 100 MiB of elements, whatever the input's size);
//   - the schema's num_children describe a tree within the schema elements: arrow-go
//     allocates num_children nodes per group before reading them (a fuzz-found footer of
//     1.2 KB claimed 2^30 children and ran the reader out of memory).
//
// Footers it cannot find (no "PAR1" trailer, a length past the file) are left to arrow-go,
// which reports them. Errors name the byte offset in the file.
func checkFooter(r parquet.ReaderAtSeeker) error {
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil || size < 12 {
		return nil // arrow-go reports it
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil && err != io.EOF {
		return nil
	}
	if string(tail[4:]) != "PAR1" {
		return nil // encrypted footer ("PARE") or not Parquet: arrow-go's checks apply
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n+8 > size {
		return nil
	}
	start := size - 8 - n
	buf := make([]byte, n) // at most the file's size
	if k, err := r.ReadAt(buf, start); k != len(buf) {
		return fmt.Errorf("parquet footer at offset %d: %w", start, err)
	}
	w := &thriftWalker{b: buf}
	children, err := w.fileMetaData()
	if err != nil {
		return fmt.Errorf("parquet footer at offset %d: byte %d: %w", start, start+int64(w.pos), err)
	}
	if err := checkSchemaTree(children); err != nil {
		return fmt.Errorf("parquet footer at offset %d: %w", start, err)
	}
	return nil
}

// checkSchemaTree checks that the schema elements' num_children (in the file's depth-first
// order) describe one tree that the elements hold.
func checkSchemaTree(children []int32) error {
	need := 1 // elements still to read
	for i, c := range children {
		if need == 0 {
			break // trailing elements: arrow-go ignores them
		}
		need--
		left := len(children) - i - 1
		if c < 0 || int(c) > left-need {
			return fmt.Errorf("schema element %d claims %d children, %d elements are left for them", i, c, left-need)
		}
		need += int(c)
	}
	if need > 0 {
		return fmt.Errorf("the schema needs %d more elements than its %d", need, len(children))
	}
	return nil
}

// Thrift compact protocol types.
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
	tUUID   = 13
)

// maxDepth bounds struct and container nesting (Thrift's skip depth).
const maxDepth = 64

var errTruncated = errors.New("truncated")

// thriftWalker reads Thrift compact-protocol values without building them.
type thriftWalker struct {
	b   []byte
	pos int
}

func (w *thriftWalker) byte() (byte, error) {
	if w.pos >= len(w.b) {
		return 0, errTruncated
	}
	c := w.b[w.pos]
	w.pos++
	return c, nil
}

func (w *thriftWalker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.pos:])
	if n <= 0 {
		if n == 0 {
			return 0, errTruncated
		}
		return 0, errors.New("varint overflows 64 bits")
	}
	w.pos += n
	return v, nil
}

func (w *thriftWalker) skip(n uint64) error {
	if n > uint64(len(w.b)-w.pos) {
		return fmt.Errorf("%d bytes claimed, %d left", n, len(w.b)-w.pos)
	}
	w.pos += int(n)
	return nil
}

// minSize is the fewest bytes a value of type t takes (as Thrift counts it).
func minSize(t byte) uint64 {
	switch t {
	case tDouble:
		return 8
	case tUUID:
		return 16
	}
	return 1
}

// container checks that count elements of the given minimum sizes fit in the bytes left.
func (w *thriftWalker) container(count, elem uint64) error {
	if left := uint64(len(w.b) - w.pos); count > left/elem {
		return fmt.Errorf("container of %d elements in %d bytes", count, left)
	}
	return nil
}

// value skips a value of type t; inList is set for list, set and map elements, where a
// bool takes a byte.
func (w *thriftWalker) value(t byte, inList bool, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	switch t {
	case tTrue, tFalse:
		if inList {
			return w.skip(1)
		}
		return nil
	case tByte:
		return w.skip(1)
	case tI16, tI32, tI64:
		_, err := w.uvarint()
		return err
	case tDouble:
		return w.skip(8)
	case tUUID:
		return w.skip(16)
	case tBinary:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case tList, tSet:
		count, elem, err := w.listHeader()
		if err != nil {
			return err
		}
		for range count {
			if err := w.value(elem, true, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tMap:
		count, err := w.uvarint()
		if err != nil || count == 0 {
			return err
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		k, v := kv>>4, kv&0x0f
		if err := w.container(count, minSize(k)+minSize(v)); err != nil {
			return err
		}
		for range count {
			if err := w.value(k, true, depth+1); err != nil {
				return err
			}
			if err := w.value(v, true, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tStruct:
		return w.structFields(depth+1, nil)
	}
	return fmt.Errorf("unknown Thrift type %d", t)
}

// listHeader reads a list or set header and checks its count against the bytes left.
func (w *thriftWalker) listHeader() (count uint64, elem byte, err error) {
	h, err := w.byte()
	if err != nil {
		return 0, 0, err
	}
	count, elem = uint64(h>>4), h&0x0f
	if count == 15 {
		if count, err = w.uvarint(); err != nil {
			return 0, 0, err
		}
	}
	return count, elem, w.container(count, minSize(elem))
}

// structFields walks the fields of a struct up to its stop byte. field, when not nil, is
// called for every field with its id and type and reads the value itself when it returns
// true.
func (w *thriftWalker) structFields(depth int, field func(id int16, t byte) (bool, error)) error {
	if depth > maxDepth {
		return fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	var id int16
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		if h == tStop {
			return nil
		}
		t := h & 0x0f
		if delta := h >> 4; delta != 0 {
			id += int16(delta)
		} else {
			v, err := w.uvarint()
			if err != nil {
				return err
			}
			id = int16(int64(v>>1) ^ -int64(v&1))
		}
		if field != nil {
			done, err := field(id, t)
			if err != nil {
				return err
			}
			if done {
				continue
			}
		}
		if err := w.value(t, false, depth); err != nil {
			return fmt.Errorf("field %d: %w", id, err)
		}
	}
}

// fileMetaData walks a FileMetaData and returns the num_children of its schema elements
// (field 2, list<SchemaElement>; SchemaElement field 5, i32).
func (w *thriftWalker) fileMetaData() ([]int32, error) {
	var children []int32
	err := w.structFields(0, func(id int16, t byte) (bool, error) {
		if id != 2 || t != tList {
			return false, nil
		}
		count, elem, err := w.listHeader()
		if err != nil {
			return false, fmt.Errorf("schema: %w", err)
		}
		if elem != tStruct {
			return false, fmt.Errorf("schema: list of Thrift type %d, want structs", elem)
		}
		children = make([]int32, 0, count) // count ≤ the bytes left (listHeader)
		for i := range count {
			var c int32
			err := w.structFields(1, func(id int16, t byte) (bool, error) {
				if id != 5 || t != tI32 {
					return false, nil
				}
				v, err := w.uvarint()
				c = int32(int64(v>>1) ^ -int64(v&1))
				return true, err
			})
			if err != nil {
				return false, fmt.Errorf("schema element %d: %w", i, err)
			}
			children = append(children, c)
		}
		return true, nil
	})
	return children, err
}
