package shard

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestResultCodecRoundTrip(t *testing.T) {
	seed := uint64(20261121)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < 200; i++ {
		cfg, in := randomCase(rng)
		for _, version := range []int{1, 2, 3, 4, 5} {
			s, err := New(cfg, Options{PS: 1 + rng.IntN(4), Version: version, Unique: rng.IntN(2) == 0})
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Shard(in)
			if err != nil {
				t.Fatal(err)
			}
			c := r.Clone()
			enc, err := r.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeResult(enc)
			if err != nil {
				t.Fatalf("case %d v%d: %v", i, version, err)
			}
			for _, x := range []*Result{c, got} {
				if !sameResult(x, r) {
					t.Fatalf("case %d v%d: round trip differs", i, version)
				}
				for tb := 0; tb < x.Tables; tb++ {
					for p := 0; p < x.PS; p++ {
						if !reflect.DeepEqual(nz(x.List(tb, p)), nz(r.List(tb, p))) || !reflect.DeepEqual(nz(x.Splits(tb, p)), nz(r.Splits(tb, p))) {
							t.Fatalf("case %d v%d: list (%d,%d) differs", i, version, tb, p)
						}
					}
				}
			}
			// The clone does not alias the sharder's buffers.
			if len(c.Fids) > 0 {
				r.Fids[0]++
				if c.Fids[0] == r.Fids[0] {
					t.Fatal("Clone aliases the sharder's Fids")
				}
				r.Fids[0]--
			}
		}
	}
}

func nz[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// sameResult compares every field, treating nil and empty slices alike.
func sameResult(a, b *Result) bool {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < va.NumField(); i++ {
		fa, fb := va.Field(i), vb.Field(i)
		if fa.Kind() == reflect.Slice {
			if fa.Len() != fb.Len() {
				return false
			}
			for j := 0; j < fa.Len(); j++ {
				if !fa.Index(j).Equal(fb.Index(j)) {
					return false
				}
			}
			continue
		}
		if !fa.Equal(fb) {
			return false
		}
	}
	return true
}

func TestDecodeResultErrors(t *testing.T) {
	cfg := workedConfig(t)
	s, err := New(cfg, Options{PS: 2, Version: 5})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Shard(workedInput(false))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := r.MarshalBinary()
	cases := map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("XXXX"), enc[4:]...),
		"truncated": enc[:len(enc)-1],
		"trailing":  append(append([]byte{}, enc...), 0),
	}
	for name, b := range cases {
		if _, err := DecodeResult(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	// Every single-byte truncation fails cleanly.
	for n := 0; n < len(enc); n++ {
		if _, err := DecodeResult(enc[:n]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", n)
		}
	}
}

func FuzzDecodeResult(f *testing.F) {
	cfg := workedConfig(f)
	for _, v := range []int{1, 4, 5} {
		s, err := New(cfg, Options{PS: 2, Version: v})
		if err != nil {
			f.Fatal(err)
		}
		r, err := s.Shard(workedInput(true))
		if err != nil {
			f.Fatal(err)
		}
		enc, _ := r.MarshalBinary()
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeResult(b)
		if err != nil {
			return
		}
		for tb := 0; tb < r.Tables; tb++ {
			for p := 0; p < r.PS; p++ {
				_ = r.List(tb, p)
				_ = r.Splits(tb, p)
			}
		}
		enc, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeResult(enc)
		if err != nil || !sameResult(r, again) {
			t.Fatalf("re-encoding does not round trip: %v", err)
		}
	})
}
