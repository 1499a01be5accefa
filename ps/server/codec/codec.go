// Package codec is the gRPC codec of the parameter-server service, used by ps/server and
// ps/client in place of gRPC's default proto codec. It encodes the same proto wire format
// under the same name ("proto"), so either end may talk to a peer using the default codec.
//
// The difference is buffer handling. gRPC's default codec marshals into, and assembles
// multi-frame messages in, buffers of its default pool, which clears every buffer it hands
// out over its whole capacity: a 128 KiB lookup response (1000 fids of dim 32) comes from
// the 1 MiB tier, so each message costs two 1 MiB clears, more than the table lookup
// itself. This codec's pool hands buffers out uncleared: Marshal overwrites every byte it
// returns and Unmarshal copies the received bytes over the whole buffer before reading it.
// The big float fields of lookup responses and gradient requests are written and read as
// one block of bytes instead of value by value (floats.go).
package codec

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Codec is the codec; pass it to grpc.ForceServerCodecV2 and grpc.ForceCodecV2.
var Codec encoding.CodecV2 = codec{}

// minPooled is the smallest message marshalled into a pooled buffer; smaller ones are
// plain allocations (gRPC's threshold as well).
const minPooled = 1 << 10

type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("ps/codec: marshal %T: not a proto.Message", v)
	}
	if num, f := bulkFloats(m); f != nil && len(*f) >= minBulkFloats {
		_, buf, err := marshalBulk(m, num, *f)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true} // the size was just computed
	if size < minPooled {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := pool.Get(size)
	b, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil {
		pool.Put(buf)
		return nil, err
	}
	*buf = b // the same array: its capacity was size
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("ps/codec: unmarshal %T: not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(pool) // one buffer: no copy
	defer buf.Free()
	if num, f := bulkFloats(m); f != nil && buf.Len() >= 4*minBulkFloats {
		proto.Reset(m)
		if ok, err := unmarshalBulk(buf.ReadOnlyData(), m, num, f); ok {
			return err
		}
		proto.Reset(m)
	}
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// pool is the buffer pool of the codec: one sync.Pool per power-of-two capacity, buffers
// handed out as they were put back (not cleared).
var pool = &dirtyPool{}

type dirtyPool struct {
	tiers [bits.UintSize]sync.Pool // tiers[e] holds buffers of capacity 1<<e
}

// Get returns a buffer of length n and capacity the next power of two.
func (p *dirtyPool) Get(n int) *[]byte {
	e := bits.Len(uint(n - 1))
	if n <= 1 {
		e = 0
	}
	if b, ok := p.tiers[e].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<e)
	return &b
}

// Put keeps buffers whose capacity is a power of two (the ones Get made).
func (p *dirtyPool) Put(b *[]byte) {
	c := cap(*b)
	if c == 0 || c&(c-1) != 0 {
		return
	}
	p.tiers[bits.TrailingZeros(uint(c))].Put(b)
}
