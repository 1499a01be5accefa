package peers

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// element is a type the .npy reader and writer handle, always little-endian.
type element interface {
	float32 | float64 | int32 | int64 | uint32 | uint64
}

// descr returns the NumPy dtype string of T.
func descr[T element]() string {
	var z T
	switch any(z).(type) {
	case float32:
		return "<f4"
	case float64:
		return "<f8"
	case int32:
		return "<i4"
	case int64:
		return "<i8"
	case uint32:
		return "<u4"
	default:
		return "<u8"
	}
}

var npyMagic = []byte("\x93NUMPY")

// writeNPY writes a C-order array of the given shape, whose elements are the chunks back to
// back, in .npy format 1.0 (the header padded so that the data starts at a multiple of 64).
func writeNPY[T element](w io.Writer, shape []int, chunks ...[]T) error {
	n, total := 1, 0
	for _, d := range shape {
		n *= d
	}
	for _, c := range chunks {
		total += len(c)
	}
	if n != total {
		return fmt.Errorf("npy: shape %v holds %d elements, got %d", shape, n, total)
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := "(" + strings.Join(dims, ", ") + ")"
	if len(shape) == 1 {
		tuple = "(" + dims[0] + ",)"
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr[T](), tuple)
	header += strings.Repeat(" ", (64-(len(npyMagic)+4+len(header)+1)%64)%64) + "\n"
	if len(header) > 0xFFFF {
		return fmt.Errorf("npy: header of %d bytes is too long for format 1.0", len(header))
	}
	b := append(append([]byte{}, npyMagic...), 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	if _, err := w.Write(append(b, header...)); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	for _, c := range chunks {
		if err := binary.Write(w, binary.LittleEndian, c); err != nil {
			return fmt.Errorf("npy: %w", err)
		}
	}
	return nil
}

// readNPY reads a C-order .npy array (format 1.x, 2.x or 3.x) whose dtype is T's, of at
// most maxBytes bytes of data (a header claiming more is an error, before any allocation).
func readNPY[T element](r io.Reader, maxBytes int64) (shape []int, data []T, err error) {
	pre := make([]byte, len(npyMagic)+2)
	if _, err := io.ReadFull(r, pre); err != nil {
		return nil, nil, fmt.Errorf("npy: magic: %w", err)
	}
	if string(pre[:len(npyMagic)]) != string(npyMagic) {
		return nil, nil, errors.New("npy: not a .npy file")
	}
	var hlen int
	switch major := pre[len(npyMagic)]; major {
	case 1:
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, nil, fmt.Errorf("npy: header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(l[:]))
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, nil, fmt.Errorf("npy: header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint32(l[:]))
	default:
		return nil, nil, fmt.Errorf("npy: format version %d", major)
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, nil, fmt.Errorf("npy: header: %w", err)
	}
	header := string(hb)
	if d, ok := headerValue(header, "descr"); !ok || d != "'"+descr[T]()+"'" {
		return nil, nil, fmt.Errorf("npy: dtype %s, want '%s'", d, descr[T]())
	}
	if f, ok := headerValue(header, "fortran_order"); !ok || f != "False" {
		return nil, nil, fmt.Errorf("npy: fortran_order %s, want False", f)
	}
	tuple, ok := headerValue(header, "shape")
	if !ok || !strings.HasPrefix(tuple, "(") || !strings.HasSuffix(tuple, ")") {
		return nil, nil, fmt.Errorf("npy: shape in header %q", header)
	}
	var zero T
	size := int64(binary.Size(zero))
	n := int64(1)
	shape = []int{}
	for _, f := range strings.Split(tuple[1:len(tuple)-1], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := strconv.Atoi(f)
		if err != nil || d < 0 {
			return nil, nil, fmt.Errorf("npy: shape %s", tuple)
		}
		shape = append(shape, d)
		if d > 0 && n > maxBytes/size/int64(d) {
			return nil, nil, fmt.Errorf("npy: shape %s holds more than the %d bytes of data there are", tuple, maxBytes)
		}
		n *= int64(d)
	}
	data = make([]T, n)
	if err := binary.Read(r, binary.LittleEndian, data); err != nil {
		return nil, nil, fmt.Errorf("npy: data of shape %v: %w", shape, err)
	}
	return shape, data, nil
}

// headerValue returns the text of key's value in a .npy header dict: a quoted string, a
// parenthesised tuple or a bare word.
func headerValue(header, key string) (string, bool) {
	_, rest, ok := strings.Cut(header, "'"+key+"':")
	if !ok {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	var end int
	switch {
	case strings.HasPrefix(rest, "'"):
		end = strings.IndexByte(rest[1:], '\'') + 2
	case strings.HasPrefix(rest, "("):
		end = strings.IndexByte(rest, ')') + 1
	default:
		end = strings.IndexAny(rest, ",}")
	}
	if end <= 0 {
		return "", false
	}
	return strings.TrimSpace(rest[:end]), true
}

// saveNPY writes a .npy file.
func saveNPY[T element](path string, shape []int, chunks ...[]T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = writeNPY(w, shape, chunks...)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// loadNPY reads a .npy file.
func loadNPY[T element](path string) ([]int, []T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	shape, data, err := readNPY[T](bufio.NewReaderSize(f, 1<<20), st.Size())
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	return shape, data, nil
}
