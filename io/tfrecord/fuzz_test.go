package tfrecord

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the reader (it must never panic, and whatever it
// returns must re-encode to exactly the bytes it consumed) and checks that payloads cut from
// the input round-trip through Writer and Reader.
func FuzzReader(f *testing.F) {
	f.Add([]byte{})
	f.Add(unhex(f, "0000000000000000 29039807 d8ea82a2"))
	f.Add(unhex(f, "1800000000000000 a37f4b22 090100000000000000150000003f150000803f1500000040 37170c15"))
	f.Add(append(header(1<<40), 1, 2, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		// 1. Arbitrary input.
		for _, allow := range []bool{false, true} {
			r := NewReader(bytes.NewReader(data), WithMaxRecordSize(1<<20), WithAllowTruncatedTail(allow), WithBufferSize(256))
			var re bytes.Buffer
			w := NewWriter(&re)
			var err error
			for {
				var p []byte
				if p, err = r.Next(); err != nil {
					break
				}
				if err := w.Write(p); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if err != io.EOF {
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a *CorruptError", err)
				}
			}
			if !bytes.HasPrefix(data, re.Bytes()) {
				t.Fatalf("re-encoded records are not a prefix of the input")
			}
		}

		// 2. Round trip: split data into payloads, using each byte as the next length.
		var payloads [][]byte
		for rest := data; len(rest) > 0; {
			n := min(int(rest[0]), len(rest)-1)
			payloads = append(payloads, rest[1:1+n])
			rest = rest[1+n:]
		}
		var buf bytes.Buffer
		w := NewWriter(&buf)
		for _, p := range payloads {
			if err := w.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		r := NewReader(&buf, WithBufferSize(256))
		for i, want := range payloads {
			got, err := r.Next()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("record %d: %x, %v; want %x", i, got, err, want)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
	})
}
