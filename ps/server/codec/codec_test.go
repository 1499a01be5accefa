package codec

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/pspb"
)

func lookupResponse(n int, v float32) *pspb.LookupResponse {
	r := &pspb.LookupResponse{Embeddings: make([]float32, n), NumFound: int64(n)}
	for i := range r.Embeddings {
		r.Embeddings[i] = v + float32(i)
	}
	return r
}

// split cuts b into pieces of at most n bytes, as frames arrive.
func split(b []byte, n int) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		out = append(out, mem.SliceBuffer(bytes.Clone(b[:k])))
		b = b[k:]
	}
	return out
}

// TestRoundTripReusesDirtyBuffers: the wire bytes are proto's, and buffers handed back
// uncleared never leak into a later message of another size.
func TestRoundTripReusesDirtyBuffers(t *testing.T) {
	if Codec.Name() != "proto" {
		t.Fatalf("name %q", Codec.Name())
	}
	for round, n := range []int{32000, 3, 31000, 400, 32000, 20000} {
		msg := lookupResponse(n, float32(round*1000))
		data, err := Codec.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := proto.Marshal(msg)
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("round %d: %d wire bytes differ from proto.Marshal's %d", round, len(got), len(want))
		}
		for _, frame := range []int{len(want) + 1, 16 << 10, 1000} { // one buffer, then several
			var got pspb.LookupResponse
			if err := Codec.Unmarshal(split(want, frame), &got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&got, msg) {
				t.Fatalf("round %d, frames of %d: decoded message differs", round, frame)
			}
		}
		data.Free() // back to the pool, dirty
	}
	if _, err := Codec.Marshal("not a message"); err == nil {
		t.Fatal("Marshal of a string succeeded")
	}
	if err := Codec.Unmarshal(nil, 7); err == nil {
		t.Fatal("Unmarshal into an int succeeded")
	}
}

func TestPoolTiers(t *testing.T) {
	p := &dirtyPool[byte]{}
	for _, n := range []int{0, 1, 2, 3, 1024, 1025, 1 << 20} {
		b := p.Get(n)
		if len(*b) != n || cap(*b)&(cap(*b)-1) != 0 || cap(*b) < n || (n > 1 && cap(*b) >= 2*n) {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		p.Put(b)
	}
	odd := make([]byte, 3)
	p.Put(&odd) // not a power of two: dropped
	if b := p.Get(3); cap(*b) != 4 {
		t.Fatalf("Get(3) after Put of a cap-3 buffer: cap %d", cap(*b))
	}
}

// TestServerCodecTakesRepliesBack: ServerCodec writes proto's bytes, clears the embeddings
// of the replies it marshalled (batch sub-replies too) and hands their buffers to the next
// ReplyFloats.
func TestServerCodecTakesRepliesBack(t *testing.T) {
	if ServerCodec.Name() != "proto" {
		t.Fatalf("name %q", ServerCodec.Name())
	}
	reused := false
	for round := range 10 {
		out := ReplyFloats(32000)
		for i := range out {
			out[i] = float32(round + i)
		}
		msg := &pspb.LookupResponse{Embeddings: out, NumFound: 7}
		want, _ := proto.Marshal(msg)
		data, err := ServerCodec.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("round %d: wire bytes differ from proto.Marshal's", round)
		}
		data.Free()
		if msg.Embeddings != nil || msg.NumFound != 7 {
			t.Fatalf("round %d: after marshalling, embeddings %d floats, num_found %d", round, len(msg.Embeddings), msg.NumFound)
		}
		// The pool may drop a buffer (the race detector drops some on purpose): one reuse
		// in ten rounds is the check.
		if next := ReplyFloats(32000); &next[0] == &out[0] {
			reused = true
		}
	}
	if !reused {
		t.Error("ReplyFloats never handed back a buffer ServerCodec took back")
	}
	batch := &pspb.BatchLookupResponse{Responses: []*pspb.LookupResponse{lookupResponse(300, 1), nil, lookupResponse(5, 2)}}
	want, _ := proto.Marshal(batch)
	data, err := ServerCodec.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data.Materialize(), want) {
		t.Fatal("batch: wire bytes differ from proto.Marshal's")
	}
	if batch.Responses[0].Embeddings != nil || batch.Responses[2].Embeddings != nil {
		t.Fatal("batch: sub-reply embeddings kept after marshalling")
	}
	// The client's codec leaves what it marshals alone.
	msg := lookupResponse(300, 1)
	if _, err := Codec.Marshal(msg); err != nil || len(msg.Embeddings) != 300 {
		t.Fatalf("Codec changed the message: %d floats, %v", len(msg.Embeddings), err)
	}
}
