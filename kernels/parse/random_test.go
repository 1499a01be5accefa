package parse

import (
	"errors"
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

var lineIDNames = []string{"uid", "req_time", "item_id", "actions", "chnid", "pre_actions", "sample_rate",
	"special_strategies", "device_type", "cid", "user_id", "rank", "data_source_name"}

// randSpec draws a spec from the batch's feature columns, mostly with compatible roles
// (fid columns as sparse features, float columns as float features, ...), sometimes not.
func randSpec(rng *rand.Rand, s *arrow.Schema, src batch.Source) *Spec {
	pools := map[string][]string{}
	var all []string
	for _, f := range s.Fields() {
		if !batch.IsFeature(f) {
			continue
		}
		switch f.Name {
		case batch.ListLabel, batch.ListLineID, NameLabel, NameInstanceWeight:
			continue
		}
		all = append(all, f.Name)
		t := batch.FlatType(f.Type)
		key := "other"
		switch {
		case arrow.TypeEqual(t, arrow.ListOf(arrow.PrimitiveTypes.Uint64)), arrow.TypeEqual(t, arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Uint64))) && src == batch.SourceInstance:
			key = "fid"
		case arrow.TypeEqual(t, arrow.ListOf(arrow.PrimitiveTypes.Float32)), arrow.TypeEqual(t, arrow.ListOf(arrow.PrimitiveTypes.Float64)):
			key = "float"
		case arrow.TypeEqual(t, arrow.ListOf(arrow.PrimitiveTypes.Int64)):
			key = "int"
		case arrow.TypeEqual(t, arrow.ListOf(arrow.BinaryTypes.Binary)):
			key = "bytes"
		}
		pools[key] = append(pools[key], f.Name)
	}
	if src == batch.SourceInstance {
		pools["fid"] = append(pools["fid"], "slot_0", "slot_1", "fc_slot_2", "slot_3", "slot_9")
		pools["float"] = append(pools["float"], "fc_q")
	}
	pick := func(keys ...string) string {
		pool := pools[keys[0]]
		if rng.IntN(3) == 0 || len(pool) == 0 {
			for _, k := range keys[1:] {
				pool = append(pool[:len(pool):len(pool)], pools[k]...)
			}
		}
		switch {
		case rng.IntN(8) == 0 && len(all) > 0:
			return all[rng.IntN(len(all))]
		case rng.IntN(10) == 0 || len(pool) == 0:
			return fmt.Sprint("missing_", rng.IntN(3))
		}
		return pool[rng.IntN(len(pool))]
	}
	for {
		used := map[string]bool{}
		var sparse []SparseFeature
		var dense []DenseFeature
		var extra []ExtraFeature
		for range rng.IntN(5) {
			if n := pick("fid", "other"); !used[n] {
				used[n] = true
				sparse = append(sparse, SparseFeature{Name: n})
			}
		}
		for range rng.IntN(4) {
			d := DenseFeature{Dim: 1 + rng.IntN(3)}
			switch rng.IntN(5) {
			case 0:
				d.Name, d.DType = pick("int", "other"), Int64
			case 1:
				d.Name, d.DType, d.Dim = pick("bytes", "other"), Bytes, 1
			default:
				d.Name = pick("float", "other")
			}
			if !used[d.Name] {
				used[d.Name] = true
				dense = append(dense, d)
			}
		}
		if rng.IntN(2) == 0 {
			dense = append(dense, DenseFeature{Name: NameLabel, Dim: 1 + rng.IntN(3)})
		}
		if rng.IntN(2) == 0 {
			dense = append(dense, DenseFeature{Name: NameInstanceWeight, Dim: 1})
		}
		for range rng.IntN(4) {
			if n := lineIDNames[rng.IntN(len(lineIDNames))]; !used[n] {
				used[n] = true
				extra = append(extra, ExtraFeature{Name: n, Dim: 1 + rng.IntN(3)})
			}
		}
		rng.Shuffle(len(dense), func(i, j int) { dense[i], dense[j] = dense[j], dense[i] })
		if s, err := NewSpec(sparse, dense, extra); err == nil {
			return s
		}
	}
}

// randExampleBatch is protogen's ExampleBatch with random variants of the reserved lists.
func randExampleBatch(rng *rand.Rand, rows int) *examplepb.ExampleBatch {
	eb := prototest.ExampleBatch(rng, rows)
	if rows == 0 {
		return eb
	}
	for _, l := range eb.NamedFeatureList {
		switch l.Name {
		case "__LABEL__", "__LINE_ID__", "instance_weight":
			switch rng.IntN(4) {
			case 0:
				l.Type, l.Feature = examplepb.FeatureListType_SHARED, l.Feature[:1]
			case 1:
				l.Feature[rng.IntN(rows)] = &examplepb.Feature{} // an unset cell
			}
			if l.Name == "instance_weight" {
				for _, f := range l.Feature {
					if v := f.GetFloatList().GetValue(); len(v) > 0 && rng.IntN(3) == 0 {
						v[0] = -v[0]
					}
				}
			}
		}
	}
	if rng.IntN(3) == 0 {
		l := &examplepb.NamedFeatureList{Name: "label"}
		for range rows {
			l.Feature = append(l.Feature, prototest.Feature(rng, 3, false)) // float_list
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, l)
		rng.Shuffle(len(eb.NamedFeatureList), func(i, j int) {
			eb.NamedFeatureList[i], eb.NamedFeatureList[j] = eb.NamedFeatureList[j], eb.NamedFeatureList[i]
		})
	}
	return eb
}

// randExamples is protogen's Examples with the reserved named features of ExtendExample
// and a named "label", each of one kind per batch.
func randExamples(rng *rand.Rand, rows int) []*examplepb.Example {
	exs := prototest.Examples(rng, rows)
	labelKind, lineKind, iwKind, namedKind := rng.IntN(3), rng.IntN(4), rng.IntN(2), rng.IntN(3)
	for _, ex := range exs {
		if labelKind > 0 && rng.IntN(3) > 0 {
			f := prototest.Feature(rng, 3, true)
			if labelKind == 2 {
				f = prototest.Feature(rng, 1, false)
			}
			ex.NamedFeature = append(ex.NamedFeature, nf("__LABEL__", f))
		}
		if lineKind > 0 && rng.IntN(3) > 0 {
			var f *examplepb.Feature
			switch lineKind {
			case 1:
				f = prototest.Bytes(string(prototest.LineID(rng)))
			case 2:
				f = prototest.Bytes("\xff\x01")
			}
			ex.NamedFeature = append(ex.NamedFeature, nf("__LINE_ID__", f))
		}
		if iwKind > 0 && rng.IntN(3) > 0 {
			ex.NamedFeature = append(ex.NamedFeature, nf("instance_weight", prototest.Feature(rng, 3, false)))
		}
		if namedKind > 0 && rng.IntN(3) > 0 {
			f := prototest.Feature(rng, 3, false)
			switch {
			case namedKind == 2:
				f = prototest.Feature(rng, 4, false) // double_list
			case rng.IntN(3) == 0:
				f = nil // a NamedFeature without a Feature
			case rng.IntN(3) == 0:
				f = unset()
			}
			ex.NamedFeature = append(ex.NamedFeature, nf("label", f))
		}
		if rng.IntN(3) == 0 {
			ex.InstanceWeight = -ex.InstanceWeight
		}
		rng.Shuffle(len(ex.NamedFeature), func(i, j int) { ex.NamedFeature[i], ex.NamedFeature[j] = ex.NamedFeature[j], ex.NamedFeature[i] })
	}
	return exs
}

// randInstances is protogen's Instances with a UE_QTZ feature and multi-value features.
func randInstances(rng *rand.Rand, rows int) []*parserpb.Instance {
	ins := prototest.Instances(rng, rows)
	for _, in := range ins {
		if rng.IntN(2) == 0 {
			p := make([]byte, rng.IntN(12))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			if len(p) >= 4 && rng.IntN(2) == 0 {
				p[1], p[3] = 0x3C, 0x40 // finite min and max
			}
			in.Feature = append(in.Feature, &matrixpb.Feature{Name: proto.String("fc_q"),
				BytesValue: [][]byte{[]byte("plain"), append([]byte("UE_QTZ"), p...)}})
		}
		if rng.IntN(2) == 0 {
			f := &matrixpb.Feature{Name: proto.String("fc_f3"), FloatValue: make([]float32, rng.IntN(4))}
			for i := range f.FloatValue {
				f.FloatValue[i] = float32(prototest.Float(rng, true))
			}
			in.Feature = append(in.Feature, f)
		}
		if rng.IntN(2) == 0 {
			f := &matrixpb.Feature{Name: proto.String("fc_i3"), Int64Value: make([]int64, rng.IntN(4))}
			for i := range f.Int64Value {
				f.Int64Value[i] = rng.Int64()
			}
			in.Feature = append(in.Feature, f)
		}
		if rng.IntN(3) == 0 {
			in.Label = append(in.Label, 7, 8)
		}
	}
	return ins
}

func sliceEB(eb *examplepb.ExampleBatch, lo, hi int) *examplepb.ExampleBatch {
	out := &examplepb.ExampleBatch{BatchSize: int32(hi - lo), DataSourceKey: eb.DataSourceKey}
	for _, l := range eb.NamedFeatureList {
		c := proto.Clone(l).(*examplepb.NamedFeatureList)
		if c.Type != examplepb.FeatureListType_SHARED {
			c.Feature = c.Feature[lo:hi]
		}
		out.NamedFeatureList = append(out.NamedFeatureList, c)
	}
	return out
}

// TestAgainstNaive compares Parse with the naive row-major parsers on random batches of
// every source, whole and sliced, and random specs.
func TestAgainstNaive(t *testing.T) {
	for _, src := range []batch.Source{batch.SourceExampleBatch, batch.SourceExample, batch.SourceInstance} {
		t.Run(src.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(src), 11))
			iters := 300
			if testing.Short() {
				iters = 100
			}
			var ok, rejected int
			for it := range iters {
				ok1, rej1 := compareOnce(t, rng, src, it)
				ok += ok1
				rejected += rej1
			}
			t.Logf("%d parsed, %d rejected", ok, rejected)
			if ok < iters/5 || rejected < iters/30 {
				t.Errorf("%d parsed, %d rejected of %d: the random specs do not exercise both paths", ok, rejected, iters)
			}
		})
	}
}

func compareOnce(t *testing.T, rng *rand.Rand, src batch.Source, it int) (ok, rejected int) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := rng.IntN(9)
	lo, hi := 0, rows
	if rows > 1 && rng.IntN(2) == 0 {
		lo = rng.IntN(rows)
		hi = lo + 1 + rng.IntN(rows-lo)
	}
	var rec arrow.RecordBatch
	var err error
	var naive func(*Spec) (*result, error)
	switch src {
	case batch.SourceExampleBatch:
		eb := randExampleBatch(rng, rows)
		rec, err = batch.FromExampleBatch(mem, eb)
		sub := sliceEB(eb, lo, hi)
		naive = func(s *Spec) (*result, error) { return naiveExampleBatch(sub, s) }
	case batch.SourceExample:
		exs := randExamples(rng, rows)
		rec, err = batch.FromExamples(mem, exs)
		naive = func(s *Spec) (*result, error) { return naiveExamples(exs[lo:hi], s) }
	default:
		ins := randInstances(rng, rows)
		rec, err = batch.FromInstances(mem, ins)
		naive = func(s *Spec) (*result, error) { return naiveInstances(ins[lo:hi], s) }
	}
	if err != nil {
		t.Fatalf("iteration %d: %v", it, err)
	}
	defer rec.Release()
	sub := rec.NewSlice(int64(lo), int64(hi))
	defer sub.Release()
	if rows == 0 {
		sub.Retain()
		sub.Release()
	}
	spec := randSpec(rng, rec.Schema(), src)
	got, gerr := parseResult(t, mem, sub, spec)
	want, werr := naive(spec)
	switch {
	case gerr != nil && werr != nil:
		if !errors.Is(gerr, ErrInput) {
			t.Fatalf("iteration %d: error %v does not wrap ErrInput", it, gerr)
		}
		return 0, 1
	case gerr != nil || werr != nil:
		t.Fatalf("iteration %d (rows %d..%d, spec %+v %+v %+v): Parse error %v, naive error %v",
			it, lo, hi, spec.Sparse(), spec.Dense(), spec.Extra(), gerr, werr)
	}
	if d := diffResult(got, want); d != "" {
		t.Fatalf("iteration %d (rows %d..%d, spec %+v %+v %+v): %s", it, lo, hi, spec.Sparse(), spec.Dense(), spec.Extra(), d)
	}
	return 1, 0
}
