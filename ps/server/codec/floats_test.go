package codec

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/pspb"
)

// TestBulkFloats: lookup responses and gradient requests with big float fields written in
// bulk read back equal through proto.Unmarshal, and proto.Marshal's bytes (and hand-made
// ones: split packed records, unpacked values) read back through the codec as
// proto.Unmarshal reads them.
func TestBulkFloats(t *testing.T) {
	floats := func(n int) []float32 {
		f := make([]float32, n)
		for i := range f {
			f[i] = float32(i)*0.25 - 3
		}
		f[0], f[n-1] = float32(math.Inf(-1)), math.Float32frombits(0x7fc00001) // a NaN payload survives
		return f
	}
	big := floats(1000)
	packed := func(num protowire.Number, fs []float32) []byte {
		b := protowire.AppendTag(nil, num, protowire.BytesType)
		return protowire.AppendBytes(b, appendFloats(nil, fs))
	}
	unpacked := protowire.AppendTag(nil, 1, protowire.Fixed32Type)
	unpacked = protowire.AppendFixed32(unpacked, math.Float32bits(7))
	for _, tc := range []struct {
		name string
		m    proto.Message
		raw  []byte // wire bytes to read instead of proto.Marshal(m)
		new  func() proto.Message
	}{
		{"lookup response", &pspb.LookupResponse{Embeddings: big, Found: []bool{true, false}, NumFound: 1, ErrorMessage: "x"}, nil, func() proto.Message { return &pspb.LookupResponse{} }},
		{"gradients", &pspb.ApplyGradientsRequest{Table: "emb", DimSize: 32, Fids: []int64{1, 2}, Gradients: big, LearningRates: []float32{0.1}, RequestId: "r-1"}, nil, func() proto.Message { return &pspb.ApplyGradientsRequest{} }},
		{"split records", &pspb.LookupResponse{Embeddings: big, NumFound: 3},
			append(append(append(protowire.AppendVarint([]byte{0x18}, 3), packed(1, big[:300])...), packed(1, big[300:700])...), packed(1, big[700:])...),
			func() proto.Message { return &pspb.LookupResponse{} }},
		{"unpacked value after packed", &pspb.LookupResponse{Embeddings: append(append([]float32(nil), big...), 7)},
			append(packed(1, big), unpacked...), func() proto.Message { return &pspb.LookupResponse{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Written by the codec, read by proto.
			bs, err := Codec.Marshal(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			got := tc.new()
			if err := proto.Unmarshal(bs.Materialize(), got); err != nil || !equalBits(got, tc.m) {
				t.Errorf("codec → proto: %v, %v", err, got)
			}
			bs.Free()
			// Written by proto (or by hand), read by the codec, whole and in frames.
			raw := tc.raw
			if raw == nil {
				if raw, err = proto.Marshal(tc.m); err != nil {
					t.Fatal(err)
				}
			}
			for _, frame := range []int{len(raw), 1000} {
				got := tc.new()
				if err := Codec.Unmarshal(split(raw, frame), got); err != nil || !equalBits(got, tc.m) {
					t.Errorf("proto → codec (frames of %d): %v", frame, err)
				}
			}
			// In one buffer at every alignment: the floats are read as floats when
			// aligned, byte-wise otherwise.
			for shift := range 4 {
				buf := append(make([]byte, shift, shift+len(raw)), raw...)[shift:]
				got := tc.new()
				if err := Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(buf)}, got); err != nil || !equalBits(got, tc.m) {
					t.Errorf("proto → codec (shifted by %d bytes): %v", shift, err)
				}
			}
		})
	}
	// A packed record whose length is not a multiple of 4 fails as in proto.
	bad := append(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendBytes(nil, make([]byte, 4*minBulkFloats+2))...)
	if err := Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bad)}, &pspb.LookupResponse{}); err == nil {
		t.Error("a packed float record of 1026 bytes read without error")
	}
}

// equalBits is proto.Equal with floats compared by their bits (NaN payloads included).
func equalBits(a, b proto.Message) bool {
	x, err1 := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	y, err2 := proto.MarshalOptions{Deterministic: true}.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// FuzzUnmarshal: on any bytes the codec's reading of a lookup response or a gradient
// request agrees with proto.Unmarshal: both fail, or both give the same message.
func FuzzUnmarshal(f *testing.F) {
	b, _ := proto.Marshal(&pspb.LookupResponse{Embeddings: make([]float32, 300), NumFound: 2})
	f.Add(b, false)
	b, _ = proto.Marshal(&pspb.ApplyGradientsRequest{Table: "t", Gradients: make([]float32, 300), Fids: []int64{1}})
	f.Add(b, true)
	f.Fuzz(func(t *testing.T, b []byte, grads bool) {
		// A packed record of the bulk field first, so that every input is past the bulk
		// threshold; the fuzzed bytes follow.
		prefix := protowire.AppendTag(nil, 1, protowire.BytesType)
		if grads {
			prefix = protowire.AppendTag(nil, 4, protowire.BytesType)
		}
		b = append(protowire.AppendBytes(prefix, make([]byte, 4*minBulkFloats)), b...)
		var want, got proto.Message = &pspb.LookupResponse{}, &pspb.LookupResponse{}
		if grads {
			want, got = &pspb.ApplyGradientsRequest{}, &pspb.ApplyGradientsRequest{}
		}
		werr := proto.Unmarshal(b, want)
		gerr := Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got)
		if (werr == nil) != (gerr == nil) || (werr == nil && !equalBits(want, got)) {
			t.Fatalf("proto: %v %v; codec: %v %v", werr, want, gerr, got)
		}
	})
}

// TestBulkMarshalLeavesMessage: marshalling a big lookup response does not write to it, so
// that goroutines reading it meanwhile (or marshalling it too) are safe; under -race a
// write would be reported.
func TestBulkMarshalLeavesMessage(t *testing.T) {
	m := &pspb.LookupResponse{Embeddings: make([]float32, 4*minBulkFloats), NumFound: 3}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 20 {
				bs, err := Codec.Marshal(m)
				if err != nil {
					errs <- err
					return
				}
				bs.Free()
				if len(m.Embeddings) != 4*minBulkFloats {
					errs <- fmt.Errorf("the response held %d floats during a marshal", len(m.Embeddings))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
