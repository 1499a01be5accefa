package codec

import (
	"encoding/binary"
	"math"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/schemas/pspb"
)

// minBulkFloats is the smallest float field the codec writes and reads in bulk.
const minBulkFloats = 256

// littleEndian: the machine's float32 memory layout is the wire's (packed fixed32 is
// little-endian), so a float slice is copied as bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// bulkFloats names the big float field of the messages that carry embeddings or
// gradients: LookupResponse.embeddings and ApplyGradientsRequest.gradients.
func bulkFloats(m proto.Message) (protowire.Number, *[]float32) {
	switch m := m.(type) {
	case *pspb.LookupResponse:
		return 1, &m.Embeddings
	case *pspb.ApplyGradientsRequest:
		return 4, &m.Gradients
	}
	return 0, nil
}

// marshalBulk marshals m with its float field (number num, values fs: at least
// minBulkFloats) first, as one packed record copied in bulk, then the other fields as
// proto.Marshal writes them: the same wire format as proto.Marshal's, whose per-element
// loop this replaces. m itself is not modified: its other fields are marshalled from a
// shallow copy without the float field (the caller may read m meanwhile).
func marshalBulk(m proto.Message, num protowire.Number, fs []float32) ([]byte, *[]byte, error) {
	src := m.ProtoReflect()
	rest := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Number() != num {
			rest.Set(fd, v)
		}
		return true
	})
	rest.SetUnknown(src.GetUnknown())
	n := 4 * len(fs)
	size := protowire.SizeTag(num) + protowire.SizeBytes(n) + proto.Size(rest.Interface())
	buf := pool.Get(size)
	b := protowire.AppendTag((*buf)[:0], num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = appendFloats(b, fs)
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, rest.Interface())
	if err != nil {
		pool.Put(buf)
		return nil, nil, err
	}
	*buf = b
	return b, buf, nil
}

// appendFloats appends fs as little-endian fixed32 values.
func appendFloats(b []byte, fs []float32) []byte {
	if littleEndian && len(fs) > 0 {
		return append(b, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(fs))), 4*len(fs))...)
	}
	for _, x := range fs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// unmarshalBulk reads b into m, decoding the packed records of float field num in bulk
// and the other fields with proto.Unmarshal. ok is false when b holds anything it does not
// read exactly as proto.Unmarshal would (an unpacked or malformed record of the field, a
// bad tag): the caller then uses proto.Unmarshal, which reports the error.
func unmarshalBulk(b []byte, m proto.Message, num protowire.Number, f *[]float32) (ok bool, err error) {
	var floats []float32
	var rest []byte
	for in := b; len(in) > 0; {
		n, typ, k := protowire.ConsumeTag(in)
		if k < 0 {
			return false, nil
		}
		if n == num {
			if typ != protowire.BytesType {
				return false, nil
			}
			v, l := protowire.ConsumeBytes(in[k:])
			if l < 0 || len(v)%4 != 0 {
				return false, nil
			}
			floats = appendDecoded(floats, v)
			in = in[k+l:]
			continue
		}
		l := protowire.ConsumeFieldValue(n, typ, in[k:])
		if l < 0 {
			return false, nil
		}
		rest = append(rest, in[:k+l]...)
		in = in[k+l:]
	}
	if err := proto.Unmarshal(rest, m); err != nil {
		return true, err
	}
	*f = floats
	return true, nil
}

// appendDecoded appends the little-endian fixed32 values of v (len a multiple of 4). When
// v is aligned for float32 it is appended as floats: append copies into memory it does not
// clear first, where make-then-copy wrote the 128 KiB of a lookup response twice.
func appendDecoded(dst []float32, v []byte) []float32 {
	n := len(v) / 4
	if littleEndian && n > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(v)))%unsafe.Alignof(float32(0)) == 0 {
		return append(dst, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(v))), n)...)
	}
	l := len(dst)
	dst = append(dst, make([]float32, n)...)
	if littleEndian && n > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst[l:]))), len(v)), v)
		return dst
	}
	for i := range dst[l:] {
		dst[l+i] = math.Float32frombits(binary.LittleEndian.Uint32(v[4*i:]))
	}
	return dst
}
