package filter

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/pspb"
)

// encodePayloads joins payloads as uvarint-length-prefixed chunks, the fuzz input format.
func encodePayloads(payloads [][]byte) []byte {
	var b []byte
	for _, p := range payloads {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// decodePayloads splits a fuzz input into payloads; a malformed or short length takes the
// rest of the input as the last payload.
func decodePayloads(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return append(out, b)
		}
		out = append(out, b[k:k+int(n)])
		b = b[k+int(n):]
	}
	return out
}

// FuzzRestore feeds arbitrary records (valid TFRecord framing, arbitrary payloads) to
// Restore: it must return an error or succeed, never panic, and a filter it accepted must
// save a dump that restores again.
func FuzzRestore(f *testing.F) {
	src := newSmall(f, 3)
	workload(src, 5, 200)
	valid := readRecords(f, save(f, src))
	f.Add(encodePayloads(valid))
	f.Add(encodePayloads(valid[:3]))
	f.Add(encodePayloads(append(valid[:1:1], valid[0])))
	f.Add([]byte{})
	f.Add([]byte{3, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		dump := writeRecords(t, decodePayloads(in))
		dst := newSmall(t, 3)
		if err := dst.Restore(tfrecord.NewReader(bytes.NewReader(dump))); err == nil {
			again := newSmall(t, 3)
			if err := again.Restore(tfrecord.NewReader(bytes.NewReader(save(t, dst)))); err != nil {
				t.Fatalf("an accepted dump does not round-trip: %v", err)
			}
			dst.Admit(1, 1)
		}
		for _, stateless := range []Filter{None(), mustNew(t, &pspb.FilterConfig{Type: pspb.FilterConfig_PROBABILISTIC}, occurrence(3))} {
			if err := stateless.Restore(tfrecord.NewReader(bytes.NewReader(dump))); err != nil {
				t.Fatalf("%s: Restore of well-framed records: %v", stateless.Kind(), err)
			}
		}
	})
}
