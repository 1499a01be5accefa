package ocf

import (
	"bytes"
	"compress/flate"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/golang/snappy"
)

// AppendLong appends a long (zig-zag varint).
func AppendLong(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

// AppendString appends a string (or bytes) value.
func AppendString(b []byte, s string) []byte {
	return append(AppendLong(b, int64(len(s))), s...)
}

// AppendFloat appends a float with its exact bits.
func AppendFloat(b []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
}

// AppendFloats appends an array<float>: one block of all items, then the end marker.
func AppendFloats(b []byte, vs []float32) []byte {
	if len(vs) > 0 {
		b = AppendLong(b, int64(len(vs)))
		for _, v := range vs {
			b = AppendFloat(b, v)
		}
	}
	return append(b, 0)
}

// Writer writes the header and the blocks of an object container file; the caller encodes
// the items of each block. After an error the file is unusable.
type Writer struct {
	w     io.Writer
	codec string
	sync  [SyncSize]byte
	comp  bytes.Buffer // deflated block
	fw    *flate.Writer
	snap  []byte // snappy block
	frame []byte // the framed block
}

// NewWriter writes the header to w: the metadata avro.schema = schema, avro.codec = codec
// (Null, Deflate or Snappy), then meta in order, and a random sync marker.
func NewWriter(w io.Writer, schema, codec string, meta ...[2]string) (*Writer, error) {
	if !KnownCodec(codec) {
		return nil, fmt.Errorf("unknown codec %q", codec)
	}
	ow := &Writer{w: w, codec: codec}
	if codec == Deflate {
		ow.fw, _ = flate.NewWriter(&ow.comp, flate.DefaultCompression) // the level is valid
	}
	if _, err := crand.Read(ow.sync[:]); err != nil {
		return nil, fmt.Errorf("sync marker: %w", err)
	}
	h := append([]byte{}, Magic...)
	h = AppendLong(h, int64(2+len(meta)))
	h = AppendString(AppendString(h, "avro.schema"), schema)
	h = AppendString(AppendString(h, "avro.codec"), codec)
	for _, kv := range meta {
		h = AppendString(AppendString(h, kv[0]), kv[1])
	}
	h = append(h, 0)
	h = append(h, ow.sync[:]...)
	if _, err := w.Write(h); err != nil {
		return nil, fmt.Errorf("write header: %w", err)
	}
	return ow, nil
}

// WriteBlock compresses data, the encoding of count items, and writes it as one block, in
// one call to the underlying writer (which therefore needs no buffering).
func (w *Writer) WriteBlock(count int64, data []byte) error {
	switch w.codec {
	case Deflate:
		w.comp.Reset()
		w.fw.Reset(&w.comp)
		if _, err := w.fw.Write(data); err != nil {
			return err
		}
		if err := w.fw.Close(); err != nil {
			return err
		}
		data = w.comp.Bytes()
	case Snappy:
		// Avro's snappy codec: the snappy data, then the big-endian CRC-32 (IEEE) of the
		// uncompressed data.
		w.snap = snappy.Encode(w.snap[:cap(w.snap)], data)
		w.snap = binary.BigEndian.AppendUint32(w.snap, crc32.ChecksumIEEE(data))
		data = w.snap
	}
	w.frame = AppendLong(AppendLong(w.frame[:0], count), int64(len(data)))
	w.frame = append(append(w.frame, data...), w.sync[:]...)
	_, err := w.w.Write(w.frame)
	return err
}
