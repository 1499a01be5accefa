package tfevents_test

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/monolith-go/monolith/io/tfevents"
)

var errEOF = io.EOF

// FuzzReader reads arbitrary input as an event file: it must end in io.EOF or an error,
// never panic, and Scalars must accept every event it returns.
func FuzzReader(f *testing.F) {
	if b, err := os.ReadFile(goldenFile); err == nil {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := tfevents.NewReader(bytes.NewReader(b), "fuzz")
		for range len(b) + 1 {
			e, err := r.Next()
			if err != nil {
				if _, err2 := r.Next(); err2 != err {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				return
			}
			for _, p := range tfevents.Scalars(e) {
				_ = p.Tag
			}
		}
		t.Fatal("more events than input bytes")
	})
}
