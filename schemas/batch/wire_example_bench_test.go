package batch

// The Example wire decoder against the message path (proto.Unmarshal + FromExamples), on
// the same serialized records:
//
//	go test -run '^$' -bench 'BenchmarkDecodeExamples' -benchmem -count 6 ./schemas/batch | tee new.txt   (compare with benchstat)

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

// syntheticExamples returns rows Examples shaped like the decode benchmark's data
// (benchmarks.DefaultShape read as Examples): 100 fid_v1_list features of 1–10 fids, 5
// features whose cell every row repeats, a 16-wide float_list, a label, a LineId and a
// data_source_key.
func syntheticExamples(seed uint64, rows int) []*examplepb.Example {
	rng := rand.New(rand.NewPCG(seed, 0x6578))
	cell := func(slot int) *examplepb.Feature {
		v := make([]uint64, 1+rng.IntN(10))
		for i := range v {
			v[i] = uint64(slot)<<54 | rng.Uint64()&(1<<54-1)
		}
		return prototest.FidV1(v...)
	}
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
		dense := make([]float32, 16)
		for i := range dense {
			dense[i] = rng.Float32()
		}
		ex.NamedFeature = append(ex.NamedFeature, &examplepb.NamedFeature{Name: "dense",
			Feature: &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: dense}}}})
		ex.LineId = &matrixpb.LineId{ReqTime: proto.Int64(1617120207 + int64(r)), Uid: proto.Uint64(rng.Uint64()),
			Actions: []int32{int32(rng.IntN(3))}, UserId: proto.String(fmt.Sprintf("%015x", rng.Uint64()>>4))}
		exs[r] = ex
	}
	return exs
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
	for _, in := range []struct {
		name string
		exs  []*examplepb.Example
	}{
		// The common case: fid lists, a float list, label and LineId; all on the wire path.
		{"synthetic", syntheticExamples(1, benchRows)},
		// Every cell kind; the columns of the kinds the wire path does not cover go through
		// Feature messages.
		{"every_kind", withoutRaw(prototest.Examples(rand.New(rand.NewPCG(9, 10)), benchRows))},
	} {
		records := marshalAll(b, in.exs)
		size := 0
		for _, r := range records {
			size += len(r)
		}
		mem := memory.NewGoAllocator()
		for _, path := range []struct {
			name   string
			decode func() error
		}{
			{"wire", func() error {
				rec, err := DecodeExamples(mem, records, nil)
				if err == nil {
					rec.Release()
				}
				return err
			}},
			{"message", func() error {
				rec, err := slowExamples(mem, records, nil, nil)
				if err == nil {
					rec.Release()
				}
				return err
			}},
		} {
			b.Run(in.name+"/"+path.name, func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if err := path.decode(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(records))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}
