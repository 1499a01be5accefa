package parse

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
)

// FuzzParse parses random batches of every source (whole or sliced) with random specs:
// Parse never panics or leaks, rejects only with ErrInput, and its output has the spec's
// schema and the batch's rows.
func FuzzParse(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(4), "")
	f.Add(uint64(2), uint8(1), uint8(7), "label,instance_weight")
	f.Add(uint64(3), uint8(2), uint8(3), "slot_1,fc_q:f3,user_id:x2")
	f.Add(uint64(4), uint8(3), uint8(0), "f_1_true,f_3_false:f1")
	f.Fuzz(func(t *testing.T, seed uint64, sel, rows uint8, names string) {
		rng := rand.New(rand.NewPCG(seed, uint64(sel)))
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		n := int(rows % 12)
		var rec arrow.RecordBatch
		var err error
		switch sel % 4 {
		case 0:
			rec, err = batch.FromExampleBatch(mem, randExampleBatch(rng, n))
		case 1:
			rec, err = batch.FromExamples(mem, randExamples(rng, n))
		case 2:
			rec, err = batch.FromInstances(mem, randInstances(rng, n))
		default:
			rec = batchtest.RandBatch(t, mem, rng, n)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		n = int(rec.NumRows())
		if n > 1 && rng.IntN(2) == 0 {
			lo := rng.IntN(n)
			sub := rec.NewSlice(int64(lo), int64(lo+1+rng.IntN(n-lo)))
			defer sub.Release()
			rec = sub
		}
		src, err := batch.SourceOf(rec.Schema())
		if err != nil {
			t.Fatal(err)
		}
		spec := fuzzSpec(rng, rec.Schema(), src, names)
		out, err := Parse(mem, rec, spec)
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatalf("error %v does not wrap ErrInput", err)
			}
			return
		}
		defer out.Release()
		if !out.Schema().Equal(spec.Schema(src)) || out.NumRows() != rec.NumRows() {
			t.Fatalf("output %v with %d rows, want %v with %d", out.Schema(), out.NumRows(), spec.Schema(src), rec.NumRows())
		}
		toResult(t, out, spec, src)
	})
}

// fuzzSpec is randSpec, or a spec of the fuzzer's names: "name" is sparse, "name:fD" a
// float feature of dim D, "name:iD" int64, "name:b" bytes, "name:xD" an extra.
func fuzzSpec(rng *rand.Rand, s *arrow.Schema, src batch.Source, names string) *Spec {
	if names == "" {
		return randSpec(rng, s, src)
	}
	var sparse []SparseFeature
	var dense []DenseFeature
	var extra []ExtraFeature
	for _, item := range strings.Split(names, ",") {
		name, typ, _ := strings.Cut(item, ":")
		dim := 1
		if len(typ) > 1 {
			dim = 1 + int(typ[1]-'0')%4
		}
		switch {
		case typ == "":
			sparse = append(sparse, SparseFeature{Name: name})
		case typ[0] == 'f':
			dense = append(dense, DenseFeature{Name: name, Dim: dim})
		case typ[0] == 'i':
			dense = append(dense, DenseFeature{Name: name, Dim: dim, DType: Int64})
		case typ[0] == 'b':
			dense = append(dense, DenseFeature{Name: name, Dim: 1, DType: Bytes})
		default:
			extra = append(extra, ExtraFeature{Name: name, Dim: dim})
		}
	}
	spec, err := NewSpec(sparse, dense, extra)
	if err != nil {
		return randSpec(rng, s, src)
	}
	return spec
}
