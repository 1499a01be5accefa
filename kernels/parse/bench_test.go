package parse

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/prototest"
)

const (
	benchSparse = 100 // sparse features; every fourth ExampleBatch list is SHARED
	benchDense  = 4   // float dense features of dim 4
)

// benchSpec requests every feature of benchInput, the label, the weight and five extras.
func benchSpec(tb testing.TB, src batch.Source) *Spec {
	var sparse []SparseFeature
	for i := range benchSparse {
		if src == batch.SourceInstance && i%2 == 0 {
			sparse = append(sparse, SlotFeature(i))
		} else {
			sparse = append(sparse, SparseFeature{Name: fmt.Sprint("f_sparse_", i)})
		}
	}
	dense := []DenseFeature{{Name: "label", Dim: 2}, {Name: "instance_weight", Dim: 1}}
	for i := range benchDense {
		dense = append(dense, DenseFeature{Name: fmt.Sprint("f_dense_", i), Dim: 4})
	}
	return mustSpec(tb, sparse, dense, []ExtraFeature{{Name: "req_time", Dim: 1}, {Name: "uid", Dim: 1},
		{Name: "user_id", Dim: 1}, {Name: "actions", Dim: 2}, {Name: "sample_rate", Dim: 1}})
}

// benchInput builds a batch of rows rows from src: benchSparse fid features of 1–6 fids,
// benchDense float features, labels, weights and LineIds.
func benchInput(tb testing.TB, mem memory.Allocator, src batch.Source, rows int) arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(7, uint64(rows)))
	fids := func(slot int) []uint64 {
		v := make([]uint64, 1+rng.IntN(6))
		for i := range v {
			v[i] = uint64(slot)<<54 | rng.Uint64()>>10
		}
		return v
	}
	dense := func() []float32 { return []float32{rng.Float32(), rng.Float32(), rng.Float32(), rng.Float32()} }
	line := func(r int) *matrixpb.LineId {
		return &matrixpb.LineId{Uid: proto.Uint64(rng.Uint64()), ReqTime: proto.Int64(1617120207 + int64(r)),
			Actions: []int32{1, int32(r % 3)}, UserId: proto.String(fmt.Sprintf("%015x", rng.Uint64()>>4))}
	}
	var rec arrow.RecordBatch
	var err error
	switch src {
	case batch.SourceExampleBatch:
		eb := &examplepb.ExampleBatch{BatchSize: int32(rows)}
		for i := range benchSparse {
			l := &examplepb.NamedFeatureList{Name: fmt.Sprint("f_sparse_", i)}
			n := rows
			if i%4 == 0 {
				l.Type, n = examplepb.FeatureListType_SHARED, 1
			}
			for range n {
				l.Feature = append(l.Feature, prototest.FidV1(fids(i)...))
			}
			eb.NamedFeatureList = append(eb.NamedFeatureList, l)
		}
		for i := range benchDense {
			l := &examplepb.NamedFeatureList{Name: fmt.Sprint("f_dense_", i)}
			for range rows {
				l.Feature = append(l.Feature, prototest.Floats(dense()...))
			}
			eb.NamedFeatureList = append(eb.NamedFeatureList, l)
		}
		lab, iw, lid := list("__LABEL__"), list("instance_weight"), list("__LINE_ID__")
		for r := range rows {
			lab.Feature = append(lab.Feature, prototest.Floats(0, 1))
			iw.Feature = append(iw.Feature, prototest.Floats(rng.Float32()))
			lid.Feature = append(lid.Feature, lineBytes(line(r)))
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, lab, iw, lid)
		rec, err = batch.FromExampleBatch(mem, eb)
	case batch.SourceExample:
		exs := make([]*examplepb.Example, rows)
		for r := range exs {
			ex := &examplepb.Example{Label: []float32{0, 1}, InstanceWeight: rng.Float32(), LineId: line(r)}
			for i := range benchSparse {
				ex.NamedFeature = append(ex.NamedFeature, nf(fmt.Sprint("f_sparse_", i), prototest.FidV1(fids(i)...)))
			}
			for i := range benchDense {
				ex.NamedFeature = append(ex.NamedFeature, nf(fmt.Sprint("f_dense_", i), prototest.Floats(dense()...)))
			}
			exs[r] = ex
		}
		rec, err = batch.FromExamples(mem, exs)
	default:
		ins := make([]*parserpb.Instance, rows)
		for r := range ins {
			in := &parserpb.Instance{Label: []float32{0, 1}, InstanceWeight: proto.Float32(rng.Float32()), LineId: line(r)}
			for i := range benchSparse {
				if i%2 == 0 {
					in.Fid = append(in.Fid, fids(i)...)
				} else {
					in.Feature = append(in.Feature, &matrixpb.Feature{Name: proto.String(fmt.Sprint("f_sparse_", i)), Fid: fids(0)})
				}
			}
			for i := range benchDense {
				in.Feature = append(in.Feature, &matrixpb.Feature{Name: proto.String(fmt.Sprint("f_dense_", i)), FloatValue: dense()})
			}
			ins[r] = in
		}
		rec, err = batch.FromInstances(mem, ins)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}

// recordBytes is the size of the buffers of rec's columns.
func recordBytes(rec arrow.RecordBatch) int64 {
	var size func(d arrow.ArrayData) int64
	size = func(d arrow.ArrayData) int64 {
		n := int64(0)
		for _, b := range d.Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
		for _, c := range d.Children() {
			n += size(c)
		}
		return n
	}
	total := int64(0)
	for _, c := range rec.Columns() {
		total += size(c.Data())
	}
	return total
}

var benchSources = []batch.Source{batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance}

// BenchmarkParse parses a 256-row batch of each source; allocations are per batch.
func BenchmarkParse(b *testing.B) {
	for _, src := range benchSources {
		b.Run(src.String(), func(b *testing.B) {
			mem := memory.NewGoAllocator()
			rec := benchInput(b, mem, src, 256)
			defer rec.Release()
			spec := benchSpec(b, src)
			b.SetBytes(recordBytes(rec))
			b.ReportAllocs()
			for b.Loop() {
				out, err := Parse(mem, rec, spec)
				if err != nil {
					b.Fatal(err)
				}
				out.Release()
			}
		})
	}
}

// TestAllocsPerBatch checks that parsing allocates per batch, not per row: a batch of 1024
// rows allocates as often as one of 64 (up to the runtime's noise).
func TestAllocsPerBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a run without -short: allocation counts take seconds")
	}
	for _, src := range benchSources {
		spec := benchSpec(t, src)
		count := func(rows int) float64 {
			mem := memory.NewGoAllocator()
			rec := benchInput(t, mem, src, rows)
			defer rec.Release()
			return testing.AllocsPerRun(5, func() {
				out, err := Parse(mem, rec, spec)
				if err != nil {
					t.Fatal(err)
				}
				out.Release()
			})
		}
		small, large := count(64), count(1024)
		t.Logf("%s: %.0f allocations for 64 rows, %.0f for 1024", src, small, large)
		if large > small+8 { // 960 more rows; a per-row allocation would add ≥ 960
			t.Errorf("%s: %.0f allocations for 1024 rows, %.0f for 64: allocations grow with rows", src, large, small)
		}
	}
}
