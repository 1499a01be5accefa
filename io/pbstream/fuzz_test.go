package pbstream

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the reader under every option combination (it must
// never panic and only fail with *CorruptError), and checks that payloads cut from the input
// round-trip through Writer and Reader.
func FuzzReader(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add(cat(u64(0), u64(3), []byte("abc")), uint8(4))
	f.Add(cat(u64(0x5D120000), u64(1), []byte{7}), uint8(1))
	f.Add(cat(u64(0), u64(0), u64(2), []byte("id"), u64(0), u64(1), []byte{1}), uint8(14))
	f.Add(cat(u64(5), []byte("user1"), u64(0)), uint8(6))
	f.Add(u64(SentinelLength), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, optBits uint8) {
		o := allOptions()[optBits%16]
		// 1. Arbitrary input.
		for _, allow := range []bool{false, true} {
			r := NewReader(bytes.NewReader(data), o, WithMaxRecordSize(1<<20), WithAllowTruncatedTail(allow), WithBufferSize(256))
			var err error
			last := int64(-1)
			for err == nil {
				var rec Record
				rec, err = r.Next()
				if err == nil {
					if rec.Offset <= last || rec.Offset >= int64(len(data)) {
						t.Fatalf("record %d offset %d out of order", rec.Index, rec.Offset)
					}
					last = rec.Offset
				}
			}
			var ce *CorruptError
			if err != io.EOF && !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *CorruptError", err)
			}
		}

		// 2. Round trip: each byte gives the next payload length.
		var recs []Record
		for rest, i := data, 0; len(rest) > 0; i++ {
			n := min(int(rest[0]), len(rest)-1)
			rec := Record{Payload: rest[1 : 1+n]}
			if o.LagrangeX {
				rec.DataSourceKey, rec.PBType = DataSourceKey(string(rec.Payload)), uint8(i)
			} else if o.HasSortID {
				rec.SortID = rest[1 : 1+n/2]
			}
			recs = append(recs, rec)
			rest = rest[1+n:]
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, o)
		for _, rec := range recs {
			if err := w.WriteRecord(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		r := NewReader(&buf, o, WithBufferSize(256))
		for i, want := range recs {
			got, err := r.Next()
			if err != nil || !bytes.Equal(got.Payload, want.Payload) || !bytes.Equal(got.SortID, want.SortID) ||
				got.DataSourceKey != want.DataSourceKey || got.PBType != want.PBType || got.Index != int64(i) {
				t.Fatalf("record %d: %+v, %v; want %+v", i, got, err, want)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
	})
}
