package export

import (
	"context"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// benchEntry is an entry of a typical trained table: a dim-5 embedding of an ftrl segment
// (dim 1) and an adagrad segment (dim 4), with its update time.
func benchEntry(fid int64) *hashtablepb.EntryDump {
	return &hashtablepb.EntryDump{
		Id:              proto.Int64(fid),
		Num:             []float32{0.5, -1, 2, 0.25, 3},
		LastUpdateTsSec: proto.Int64(1700000000 + fid),
		Opt: &hashtablepb.OptimizerDump{Dump: []*hashtablepb.SingleOptimizerDump{
			{Type: &hashtablepb.SingleOptimizerDump_Ftrl{Ftrl: &hashtablepb.FtrlOptimizerDump{Zero: []float32{0.1}, Norm: []float32{1}}}},
			{Type: &hashtablepb.SingleOptimizerDump_Adagrad{Adagrad: &hashtablepb.AdagradOptimizerDump{Norm: []float32{1, 2, 3, 4}}}},
		}},
	}
}

// BenchmarkStorable: the check Avro and Parquet writers run on every entry (allocs/op is
// allocs per entry).
func BenchmarkStorable(b *testing.B) {
	d := benchEntry(42)
	b.ReportAllocs()
	for b.Loop() {
		if err := storable(d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite writes one entry per op (allocs/op is allocs per entry).
func BenchmarkWrite(b *testing.B) {
	d := benchEntry(42)
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			w, err := NewWriter(io.Discard, f, TableInfo{Name: "user", Dim: 5})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Write(d); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRead reads one entry per op from a file of 4096 entries, reopened at its end
// (allocs/op is allocs per entry, the reopening amortized).
func BenchmarkRead(b *testing.B) {
	entries := make([]*hashtablepb.EntryDump, 4096)
	for i := range entries {
		entries[i] = benchEntry(int64(i))
	}
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			data := writeEntries(b, f, TableInfo{Name: "user", Dim: 5}, entries)
			open := func() Reader {
				r, err := newReader(f, data)
				if err != nil {
					b.Fatal(err)
				}
				return r
			}
			r := open()
			b.ReportAllocs()
			for b.Loop() {
				_, err := r.Next()
				if err == io.EOF {
					r.Close()
					r = open()
					_, err = r.Next()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			r.Close()
		})
	}
}

// BenchmarkExport exports a two-table checkpoint of 500 entries (allocs/op and ns/op are
// per export).
func BenchmarkExport(b *testing.B) {
	root := b.TempDir()
	save(b, root, checkpoint.Meta{Step: 1}, buildShard(b, all))
	src, err := Resolve(root)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			out := b.TempDir()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Export(context.Background(), src, f, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
