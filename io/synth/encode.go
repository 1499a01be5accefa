package synth

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"
)

// The generator writes protobuf wire bytes directly from its buffers instead of building
// examplepb/parserpb messages: a message tree costs several allocations per cell and the
// reflection-driven marshaller dominated the profile. The bytes are the canonical encoding
// proto.Marshal produces for the same messages (fields in number order, packed numeric
// lists, zero proto3 scalars omitted); synth tests check that by re-marshalling decoded
// records.

// Wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// Field numbers (schemas/proto).
const (
	// ExampleBatch
	ebNamedFeatureList = 1
	ebBatchSize        = 3
	// NamedFeatureList
	nflName    = 1
	nflFeature = 2
	nflType    = 3
	nflID      = 4
	// Example
	exNamedFeature = 1
	exLineID       = 100
	exLabel        = 101
	// NamedFeature
	nfName    = 1
	nfFeature = 2
	nfID      = 3
	// Feature oneof members
	featFidV1List = 1
	featFidV2List = 2
	featFloatList = 3
	featBytesList = 6
	// *List.value
	listValue = 1
	// Instance
	inFid     = 1
	inLabel   = 3
	inLineID  = 5
	inFeature = 9
	// idl.matrix.proto.Feature
	mfName       = 1
	mfFid        = 2
	mfFloatValue = 3
	// LineId
	lidUID        = 2
	lidReqTime    = 3
	lidActions    = 6
	lidChnid      = 19
	lidSampleRate = 27
	lidUserID     = 49
)

// sizeVarint returns the encoded length of v.
func sizeVarint(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// sizeTag returns the encoded length of a tag of field num.
func sizeTag(num int) int { return sizeVarint(uint64(num) << 3) }

// sizeField returns the length of a length-delimited field of field num with an n-byte body.
func sizeField(num, n int) int { return sizeTag(num) + sizeVarint(uint64(n)) + n }

// sizePacked returns the length of a packed field of count elements of width bytes (0
// when count is 0: proto.Marshal omits empty packed lists).
func sizePacked(num, count, width int) int {
	if count == 0 {
		return 0
	}
	return sizeField(num, count*width)
}

func appendTag(b []byte, num, typ int) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(typ))
}

// appendLen appends the tag of a length-delimited field and its length.
func appendLen(b []byte, num, n int) []byte {
	return binary.AppendUvarint(appendTag(b, num, wireBytes), uint64(n))
}

func appendString(b []byte, num int, s []byte) []byte {
	return append(appendLen(b, num, len(s)), s...)
}

// appendVarintField appends a varint field.
func appendVarintField(b []byte, num int, v uint64) []byte {
	return binary.AppendUvarint(appendTag(b, num, wireVarint), v)
}

// littleEndian is set on little-endian hosts, where a []uint64 is already its fixed64
// wire bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// appendFixed64s appends vs as little-endian 64-bit words.
func appendFixed64s(b []byte, vs []uint64) []byte {
	if littleEndian && len(vs) > 0 {
		return append(b, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vs))), 8*len(vs))...)
	}
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// appendPackedFixed64 appends a packed fixed64 field (nothing for an empty list).
func appendPackedFixed64(b []byte, num int, vs []uint64) []byte {
	if len(vs) == 0 {
		return b
	}
	return appendFixed64s(appendLen(b, num, 8*len(vs)), vs)
}

// appendPackedFloat appends a packed float field (nothing for an empty list).
func appendPackedFloat(b []byte, num int, vs []float32) []byte {
	if len(vs) == 0 {
		return b
	}
	b = appendLen(b, num, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// fidFeatureSize is the body length of a Feature holding a fid list of n fids (either
// member: fid_v1_list and fid_v2_list both have one-byte tags).
func fidFeatureSize(n int) int {
	switch {
	case n == 0:
		return 2 // the member's tag and a zero length
	case n <= 15: // every length fits one byte
		return 8*n + 4
	}
	return sizeField(featFidV1List, sizePacked(listValue, n, 8))
}

// appendFidFeature appends the body of a Feature{fid_v<version>_list{fids}}.
func appendFidFeature(b []byte, member int, fids []uint64) []byte {
	b = appendLen(b, member, sizePacked(listValue, len(fids), 8))
	return appendPackedFixed64(b, listValue, fids)
}

// floatFeatureSize is the body length of a Feature{float_list} of n floats.
func floatFeatureSize(n int) int {
	return sizeField(featFloatList, sizePacked(listValue, n, 4))
}

func appendFloatFeature(b []byte, vs []float32) []byte {
	b = appendLen(b, featFloatList, sizePacked(listValue, len(vs), 4))
	return appendPackedFloat(b, listValue, vs)
}

// bytesFeatureSize is the body length of a Feature{bytes_list{value: [one n-byte value]}}.
func bytesFeatureSize(n int) int {
	return sizeField(featBytesList, sizeField(listValue, n))
}

func appendBytesFeature(b []byte, v []byte) []byte {
	b = appendLen(b, featBytesList, sizeField(listValue, len(v)))
	return appendString(b, listValue, v)
}

// sizeID is the length of an optional int32 id field (proto3: omitted when 0).
func sizeID(num, id int) int {
	if id == 0 {
		return 0
	}
	return sizeTag(num) + sizeVarint(uint64(int64(id)))
}

func appendID(b []byte, num, id int) []byte {
	if id == 0 {
		return b
	}
	return appendVarintField(b, num, uint64(int64(id)))
}
