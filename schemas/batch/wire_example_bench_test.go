package batch

// The Example and Instance wire decoders against their message paths (proto.Unmarshal +
// FromExamples or FromInstances), on the same serialized records:
//
//	go test -run '^$' -bench 'BenchmarkDecode(Examples|Instances)' -benchmem -count 6 ./schemas/batch | tee new.txt   (compare with benchstat)

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

// syntheticExamples returns rows Examples shaped like the decode benchmark's data
// (benchmarks.DefaultShape read as Examples): 100 fid_v1_list features of 1–10 fids, 5
// features whose cell every row repeats, a 16-wide float_list, a label, a LineId and a
// data_source_key.
func syntheticExamples(seed uint64, rows int) []*examplepb.Example {
	rng := rand.New(rand.NewPCG(seed, 0x6578))
	cell := func(slot int) *examplepb.Feature { return prototest.FidV1(randV1Fids(rng, slot)...) }
	shared := make([]*examplepb.Feature, 5)
	for i := range shared {
		shared[i] = cell(500 + i)
	}
	exs := make([]*examplepb.Example, rows)
	for r := range exs {
		ex := &examplepb.Example{Label: []float32{float32(rng.IntN(2))}, DataSourceKey: 3}
		for f := range 100 {
			ex.NamedFeature = append(ex.NamedFeature, &examplepb.NamedFeature{Name: fmt.Sprintf("f_%03d", f), Id: int32(f + 1), Feature: cell(f + 1)})
		}
		for f, c := range shared {
			ex.NamedFeature = append(ex.NamedFeature, &examplepb.NamedFeature{Name: fmt.Sprintf("s_%03d", f), Id: int32(500 + f), Feature: c})
		}
		ex.NamedFeature = append(ex.NamedFeature, &examplepb.NamedFeature{Name: "dense", Feature: prototest.Floats(randFloats(rng, 16)...)})
		ex.LineId = randLineID(rng, r)
		exs[r] = ex
	}
	return exs
}

// randFloats returns n random floats in [0, 1).
func randFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = rng.Float32()
	}
	return v
}

// randLineID returns the LineId of row r of a synthetic batch.
func randLineID(rng *rand.Rand, r int) *matrixpb.LineId {
	return &matrixpb.LineId{ReqTime: proto.Int64(1617120207 + int64(r)), Uid: proto.Uint64(rng.Uint64()),
		Actions: []int32{int32(rng.IntN(3))}, UserId: proto.String(fmt.Sprintf("%015x", rng.Uint64()>>4))}
}

// randV1Fids returns 1–10 random v1 fids of a slot.
func randV1Fids(rng *rand.Rand, slot int) []uint64 {
	v := make([]uint64, 1+rng.IntN(10))
	for i := range v {
		v[i] = uint64(slot)<<54 | rng.Uint64()&(1<<54-1)
	}
	return v
}

// marshalAll serializes messages, one record each.
func marshalAll[M proto.Message](tb testing.TB, msgs []M) [][]byte {
	tb.Helper()
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// withoutRaw drops the raw features that send a whole batch through the message path.
func withoutRaw(exs []*examplepb.Example) []*examplepb.Example {
	for _, ex := range exs {
		ex.NamedRawFeature = nil
	}
	return exs
}

func BenchmarkDecodeExamples(b *testing.B) {
	// The common case: fid lists, a float list, label and LineId; all on the wire path.
	benchDecode(b, "synthetic", marshalAll(b, syntheticExamples(1, benchRows)), DecodeExamples, slowExamples)
	// Every cell kind; the columns of the kinds the wire path does not cover go through
	// Feature messages.
	benchDecode(b, "every_kind", marshalAll(b, withoutRaw(prototest.Examples(rand.New(rand.NewPCG(9, 10)), benchRows))), DecodeExamples, slowExamples)
}

// syntheticInstances returns rows Instances shaped like syntheticExamples: 100 slots of
// 1–10 v1 fids in the top-level fid field (slot after slot, so the fid order is the
// canonical one), 5 named v2 fid features whose cell every row repeats, a 16-wide named
// float_value feature, a label, a LineId and a data_source_key.
func syntheticInstances(seed uint64, rows int) []*parserpb.Instance {
	rng := rand.New(rand.NewPCG(seed, 0x696e))
	shared := make([][]uint64, 5)
	for i := range shared {
		shared[i] = randV1Fids(rng, 500+i)
	}
	ins := make([]*parserpb.Instance, rows)
	for r := range ins {
		in := &parserpb.Instance{Label: []float32{float32(rng.IntN(2))}, DataSourceKey: proto.Uint32(3)}
		for slot := range 100 {
			in.Fid = append(in.Fid, randV1Fids(rng, slot+1)...)
		}
		for f, c := range shared {
			in.Feature = append(in.Feature, &matrixpb.Feature{Name: proto.String(fmt.Sprintf("fc_s_%03d", f)), Fid: c})
		}
		in.Feature = append(in.Feature, &matrixpb.Feature{Name: proto.String("fc_dense"), FloatValue: randFloats(rng, 16)})
		in.LineId = randLineID(rng, r)
		ins[r] = in
	}
	return ins
}

func BenchmarkDecodeInstances(b *testing.B) {
	// The common case: slot fids, named fid and float features, label and LineId.
	benchDecode(b, "synthetic", marshalAll(b, syntheticInstances(1, benchRows)), DecodeInstances, slowInstances)
	// Every value field; the columns of the kinds the wire path does not cover go through
	// Feature messages, and label_tag/next_fid through a message per row.
	benchDecode(b, "every_kind", marshalAll(b, prototest.Instances(rand.New(rand.NewPCG(9, 10)), benchRows)), DecodeInstances, slowInstances)
}

// decodeFunc is the shape of DecodeExamples and DecodeInstances.
type decodeFunc func(mem memory.Allocator, records [][]byte, keys []uint32, opts ...Option) (arrow.RecordBatch, error)

// benchDecode runs the sub-benchmarks name/wire and name/message on the same records and
// reports, beside the time and bytes per batch, rows/s and allocs/row.
func benchDecode(b *testing.B, name string, records [][]byte, wire decodeFunc,
	message func(memory.Allocator, [][]byte, []uint32, []Option) (arrow.RecordBatch, error)) {
	size := 0
	for _, r := range records {
		size += len(r)
	}
	mem := memory.NewGoAllocator()
	for _, path := range []struct {
		name   string
		decode func() (arrow.RecordBatch, error)
	}{
		{"wire", func() (arrow.RecordBatch, error) { return wire(mem, records, nil) }},
		{"message", func() (arrow.RecordBatch, error) { return message(mem, records, nil, nil) }},
	} {
		b.Run(name+"/"+path.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			n := 0
			for b.Loop() {
				rec, err := path.decode()
				if err != nil {
					b.Fatal(err)
				}
				rec.Release()
				n++
			}
			runtime.ReadMemStats(&after)
			rows := float64(len(records)) * float64(n)
			b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/rows, "allocs/row")
		})
	}
}
