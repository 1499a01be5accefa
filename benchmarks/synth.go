package benchmarks

import (
	"fmt"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
)

// Shape describes a synthetic ExampleBatch.
type Shape struct {
	Rows       int // rows per ExampleBatch
	Features   int // INDIVIDUAL fid_v1_list features
	Shared     int // SHARED fid_v1_list features
	MaxFids    int // fids per cell are uniform in [1, MaxFids]
	DenseWidth int // width of one float_list feature (0: none)
}

// DefaultShape is the synthetic shape the decode benchmark uses: 256 rows, 100 features
// with 1–10 fids, 5 shared features, one 16-wide dense feature, labels and LineIds.
var DefaultShape = Shape{Rows: 256, Features: 100, Shared: 5, MaxFids: 10, DenseWidth: 16}

// SyntheticExampleBatch returns a deterministic ExampleBatch of the given shape.
func SyntheticExampleBatch(seed uint64, s Shape) *examplepb.ExampleBatch {
	rng := rand.New(rand.NewPCG(seed, 0x6d6f6e6f))
	eb := &examplepb.ExampleBatch{BatchSize: int32(s.Rows)}
	cell := func(slot int) *examplepb.Feature {
		v := make([]uint64, 1+rng.IntN(s.MaxFids))
		for i := range v {
			v[i] = uint64(slot)<<54 | rng.Uint64()&(1<<54-1)
		}
		return &examplepb.Feature{Type: &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: v}}}
	}
	for f := 0; f < s.Features; f++ {
		l := &examplepb.NamedFeatureList{Name: fmt.Sprintf("f_%03d", f), Id: int32(f + 1)}
		for range s.Rows {
			l.Feature = append(l.Feature, cell(f+1))
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, l)
	}
	for f := 0; f < s.Shared; f++ {
		eb.NamedFeatureList = append(eb.NamedFeatureList, &examplepb.NamedFeatureList{
			Name: fmt.Sprintf("s_%03d", f), Id: int32(500 + f), Type: examplepb.FeatureListType_SHARED,
			Feature: []*examplepb.Feature{cell(500 + f)},
		})
	}
	if s.DenseWidth > 0 {
		l := &examplepb.NamedFeatureList{Name: "dense"}
		for range s.Rows {
			v := make([]float32, s.DenseWidth)
			for i := range v {
				v[i] = rng.Float32()
			}
			l.Feature = append(l.Feature, &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: v}}})
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, l)
	}
	lid := &examplepb.NamedFeatureList{Name: "__LINE_ID__"}
	lab := &examplepb.NamedFeatureList{Name: "__LABEL__"}
	for r := range s.Rows {
		b, _ := proto.Marshal(&matrixpb.LineId{ReqTime: proto.Int64(1617120207 + int64(r)), Uid: proto.Uint64(rng.Uint64()),
			Actions: []int32{int32(rng.IntN(3))}, UserId: proto.String(fmt.Sprintf("%015x", rng.Uint64()>>4))})
		lid.Feature = append(lid.Feature, &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{b}}}})
		lab.Feature = append(lab.Feature, &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{float32(rng.IntN(2))}}}})
	}
	eb.NamedFeatureList = append(eb.NamedFeatureList, lid, lab)
	return eb
}
