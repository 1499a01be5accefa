package layout

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/monolith-go/monolith/kernels/shard"
)

// FuzzKernels: for random valid configs and inputs (drawn from the fuzzed seed), sharding
// then layout gives the naive reference's outputs for every version, P and unique mode,
// and the parallel gradient equals the serial one.
func FuzzKernels(f *testing.F) {
	f.Add(uint64(1), uint8(2), uint8(3))
	f.Add(uint64(99), uint8(0), uint8(5))
	f.Fuzz(func(t *testing.T, seed uint64, ps, version uint8) {
		rng := rand.New(rand.NewPCG(seed, 0))
		uniform := seed%2 == 0
		cfg, in := randomSetup(rng, uniform)
		P := int(ps%6) + 1
		v := int(version%5) + 1
		if v == 1 && !uniform {
			v = 3
		}
		want := refForward(cfg, in)
		r, emb, got := runVersion(t, cfg, in, v, P, 1+int(seed%3), seed%3 == 0)
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("v%d P=%d: output %d differs from the reference", v, P, i)
			}
		}
		l1, _ := New(cfg, Options{Version: v, PS: P})
		l2, _ := New(cfg, Options{Version: v, PS: P, Parallel: 2})
		grads := l1.Outputs(in.Rows)
		for _, g := range grads {
			for i := range g {
				g[i] = float32(rng.IntN(9)) - 4
			}
		}
		a, b := Zeros(emb), Zeros(emb)
		req := []Sharded{FromShard(r)}
		if err := l1.Backward(req, grads, a); err != nil {
			t.Fatal(err)
		}
		if err := l2.Backward(req, grads, b); err != nil {
			t.Fatal(err)
		}
		for k := range a.Tensors {
			if !slices.Equal(a.Tensors[k], b.Tensors[k]) {
				t.Fatal("parallel gradient differs")
			}
		}
		if !slices.Equal(a.Flat, b.Flat) {
			t.Fatal("parallel gradient differs")
		}
	})
}

// FuzzCorruptOffsets: sharding outputs overwritten with fuzzed words make Forward and
// Backward fail cleanly or succeed; they never panic.
func FuzzCorruptOffsets(f *testing.F) {
	f.Add(uint64(3), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, seed uint64, noise []byte) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg, in := randomSetup(rng, true)
		v := int(seed%5) + 1
		s, _ := shard.New(cfg, shard.Options{PS: 2, Version: v})
		r, err := s.Shard(in)
		if err != nil {
			t.Fatal(err)
		}
		emb, _ := Arrange(v, cfg, r, ListBuffers(cfg, r, value))
		req := FromShard(r)
		req.FidOffset, req.FeatureOffset, req.NflOffset = slices.Clone(r.FidOffset), slices.Clone(r.FeatureOffset), slices.Clone(r.NflOffset)
		for len(noise) >= 9 {
			which, word := noise[0]%4, binary.LittleEndian.Uint64(noise[1:9])
			noise = noise[9:]
			switch {
			case which == 0 && len(req.FidOffset) > 0:
				req.FidOffset[int(word>>40)%len(req.FidOffset)] = word
			case which == 1:
				req.FeatureOffset[int(word>>40)%len(req.FeatureOffset)] = int32(word)
			case which == 2:
				req.NflOffset[int(word>>40)%len(req.NflOffset)] = uint32(word)
			default:
				req.BatchSize = int(word % 64)
			}
		}
		l, _ := New(cfg, Options{Version: v, PS: 2})
		out := l.Outputs(req.BatchSize)
		_ = l.Forward([]Sharded{req}, emb, out)
		_ = l.Backward([]Sharded{req}, out, Zeros(emb))
	})
}
