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
// one block of bytes instead of value by value (floats.go). The server's variant,
// ServerCodec, also takes back the embeddings of the lookup replies it has marshalled, for
// the server's next lookup (ReplyFloats).
package codec

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/pspb"
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
var pool = &dirtyPool[byte]{}

// dirtyPool hands out slices of T by power-of-two capacity, as they were put back.
type dirtyPool[T any] struct {
	tiers [bits.UintSize]sync.Pool // tiers[e] holds slices of capacity 1<<e
}

// Get returns a slice of length n and capacity the next power of two.
func (p *dirtyPool[T]) Get(n int) *[]T {
	e := bits.Len(uint(n - 1))
	if n <= 1 {
		e = 0
	}
	if b, ok := p.tiers[e].Get().(*[]T); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]T, n, 1<<e)
	return &b
}

// Put keeps slices whose capacity is a power of two (the ones Get made).
func (p *dirtyPool[T]) Put(b *[]T) {
	c := cap(*b)
	if c == 0 || c&(c-1) != 0 {
		return
	}
	p.tiers[bits.TrailingZeros(uint(c))].Put(b)
}

// replies holds the float buffers of lookup replies between ServerCodec's marshalling of
// one reply and the server's next lookup.
var replies = &dirtyPool[float32]{}

// ReplyFloats returns n floats, not cleared, for the embeddings of a LookupResponse that
// ServerCodec will marshal: it takes them back once they are on the wire.
func ReplyFloats(n int) []float32 { return *replies.Get(n) }

// ServerCodec is Codec for the parameter server's side: after marshalling a
// LookupResponse (or the sub-responses of a BatchLookupResponse) it takes back its
// embeddings for ReplyFloats and clears the field, so that the next lookup writes into
// memory already grown and not yet cleared instead of a fresh 128 KiB allocation. The
// server never reads a response it returned; anything that does afterwards (gRPC's binary
// log, a stats handler) sees no embeddings rather than another reply's.
var ServerCodec encoding.CodecV2 = serverCodec{}

type serverCodec struct{ codec }

func (serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	data, err := codec{}.Marshal(v)
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case *pspb.LookupResponse:
		takeBack(&m.Embeddings)
	case *pspb.BatchLookupResponse:
		for _, r := range m.GetResponses() {
			if r != nil {
				takeBack(&r.Embeddings)
			}
		}
	}
	return data, nil
}

// takeBack puts *f in replies and clears it.
func takeBack(f *[]float32) {
	if b := *f; cap(b) > 0 {
		replies.Put(&b)
	}
	*f = nil
}
