// Package prototest makes random Monolith messages for tests: ExampleBatches with every cell
// kind, SHARED lists, unset and empty cells and mixed v1/v2 columns; Examples that disagree
// on their features; Instances with every optional and unmodelled field. Tests only.
package prototest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// Feature oneof field numbers (the cell kinds of schemas/batch).
const (
	kindUnset    = 0
	kFidV1List   = 1
	kFidV2List   = 2
	kFloatList   = 3
	kDoubleList  = 4
	kInt64List   = 5
	kBytesList   = 6
	kFidV2Lists  = 7
	kFloatLists  = 8
	kDoubleLists = 9
	kInt64Lists  = 10
	kBytesLists  = 11
	kInt64Value  = 12
	kFloatValue  = 13
	kDoubleValue = 14
	kBytesValue  = 15
	kFidV1Lists  = 16
)

// Float returns a float that is NaN (if nan), ±Inf or -0 about one time in eight.
func Float(rng *rand.Rand, nan bool) float64 {
	switch rng.IntN(32) {
	case 0:
		if nan {
			return math.NaN()
		}
		return 0
	case 1:
		return math.Inf(1)
	case 2:
		return math.Inf(-1)
	case 3:
		return math.Copysign(0, -1)
	}
	return rng.NormFloat64()
}

// Feature returns a random cell whose oneof member is field number k (0 gives an unset
// cell), with NaNs when nan is set.
func Feature(rng *rand.Rand, k int, nan bool) *examplepb.Feature {
	n := rng.IntN(4)
	u64 := func() []uint64 {
		v := make([]uint64, n)
		for i := range v {
			v[i] = rng.Uint64()
		}
		return v
	}
	f32 := func() []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(Float(rng, nan))
		}
		return v
	}
	f64 := func() []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = Float(rng, nan)
		}
		return v
	}
	i64 := func() []int64 {
		v := make([]int64, n)
		for i := range v {
			v[i] = rng.Int64() - rng.Int64()
		}
		return v
	}
	bs := func() [][]byte {
		v := make([][]byte, n)
		for i := range v {
			v[i] = []byte(fmt.Sprint(rng.IntN(1000)))
		}
		return v
	}
	f := &examplepb.Feature{}
	switch k {
	case kFidV1List:
		f.Type = &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: u64()}}
	case kFidV2List:
		v := u64()
		for i := range v {
			v[i] &^= 1 << 63
		}
		f.Type = &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: v}}
	case kFloatList:
		f.Type = &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: f32()}}
	case kDoubleList:
		f.Type = &examplepb.Feature_DoubleList{DoubleList: &examplepb.DoubleList{Value: f64()}}
	case kInt64List:
		f.Type = &examplepb.Feature_Int64List{Int64List: &examplepb.Int64List{Value: i64()}}
	case kBytesList:
		f.Type = &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: bs()}}
	case kFidV2Lists, kFidV1Lists:
		ls := &examplepb.FidLists{}
		for range rng.IntN(3) {
			ls.List = append(ls.List, &examplepb.FidList{Value: u64()})
		}
		if k == kFidV1Lists {
			f.Type = &examplepb.Feature_FidV1Lists{FidV1Lists: ls}
		} else {
			f.Type = &examplepb.Feature_FidV2Lists{FidV2Lists: ls}
		}
	case kFloatLists:
		ls := &examplepb.FloatLists{}
		for range rng.IntN(3) {
			ls.List = append(ls.List, &examplepb.FloatList{Value: f32()})
		}
		f.Type = &examplepb.Feature_FloatLists{FloatLists: ls}
	case kDoubleLists:
		ls := &examplepb.DoubleLists{}
		for range rng.IntN(3) {
			ls.List = append(ls.List, &examplepb.DoubleList{Value: f64()})
		}
		f.Type = &examplepb.Feature_DoubleLists{DoubleLists: ls}
	case kInt64Lists:
		ls := &examplepb.Int64Lists{}
		for range rng.IntN(3) {
			ls.List = append(ls.List, &examplepb.Int64List{Value: i64()})
		}
		f.Type = &examplepb.Feature_Int64Lists{Int64Lists: ls}
	case kBytesLists:
		ls := &examplepb.BytesLists{}
		for range rng.IntN(3) {
			ls.List = append(ls.List, &examplepb.BytesList{Value: bs()})
		}
		f.Type = &examplepb.Feature_BytesLists{BytesLists: ls}
	case kInt64Value:
		f.Type = &examplepb.Feature_Int64Value{Int64Value: rng.Int64()}
	case kFloatValue:
		f.Type = &examplepb.Feature_FloatValue{FloatValue: float32(Float(rng, nan))}
	case kDoubleValue:
		f.Type = &examplepb.Feature_DoubleValue{DoubleValue: Float(rng, nan)}
	case kBytesValue:
		f.Type = &examplepb.Feature_BytesValue{BytesValue: []byte(fmt.Sprint(rng.Int()))}
	}
	return f
}

// ValueKinds are the Feature oneof field numbers of every value kind.
var ValueKinds = []int{kFidV1List, kFidV2List, kFloatList, kDoubleList,
	kInt64List, kBytesList, kFidV2Lists, kFloatLists, kDoubleLists,
	kInt64Lists, kBytesLists, kInt64Value, kFloatValue, kDoubleValue,
	kBytesValue, kFidV1Lists}

// LineID returns a serialized LineId carrying an unknown field, as production LineIds do.
func LineID(rng *rand.Rand) []byte {
	m := &matrixpb.LineId{
		Uid: proto.Uint64(rng.Uint64()), ReqTime: proto.Int64(rng.Int64N(1 << 40)), Actions: []int32{int32(rng.IntN(5))},
		UserId: proto.String(fmt.Sprintf("u%x", rng.Uint32())),
	}
	if rng.IntN(2) == 0 {
		m.SampleRate = proto.Float32(0.5)
	}
	b, _ := proto.Marshal(m)
	return append(b, 0x5a, 0x01, 'a') // an unknown field (11, string)
}

// ExampleBatch returns a batch with a random subset of cell kinds, SHARED and INDIVIDUAL
// lists, unset and empty cells, mixed v1/v2 columns, an all-unset (null-typed) list and the
// canonical lists. rows may be 0.
func ExampleBatch(rng *rand.Rand, rows int) *examplepb.ExampleBatch {
	eb := &examplepb.ExampleBatch{BatchSize: int32(rows), DataSourceKey: rng.Uint32()}
	for li, k := range ValueKinds {
		for _, shared := range []bool{false, true} {
			if rng.IntN(3) == 0 {
				continue
			}
			l := &examplepb.NamedFeatureList{Name: fmt.Sprintf("f_%d_%v", k, shared), Id: int32(li)}
			cells := rows
			if shared {
				l.Type, cells = examplepb.FeatureListType_SHARED, 1
			}
			for range cells {
				kk := k
				switch rng.IntN(5) {
				case 0:
					kk = kindUnset
				case 1:
					if k == kFidV1List {
						kk = kFidV2List // a mixed column
					}
				}
				l.Feature = append(l.Feature, Feature(rng, kk, !shared))
			}
			eb.NamedFeatureList = append(eb.NamedFeatureList, l)
		}
	}
	empty := &examplepb.NamedFeatureList{Name: "f_empty"}
	lid := &examplepb.NamedFeatureList{Name: "__LINE_ID__"}
	lab := &examplepb.NamedFeatureList{Name: "__LABEL__", Id: 7}
	iw := &examplepb.NamedFeatureList{Name: "instance_weight"}
	for range rows {
		empty.Feature = append(empty.Feature, &examplepb.Feature{})
		lid.Feature = append(lid.Feature, &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{LineID(rng)}}}})
		lab.Feature = append(lab.Feature, &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{float32(Float(rng, true)), 1}}}})
		iw.Feature = append(iw.Feature, &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{rng.Float32()}}}})
	}
	if rows > 0 {
		eb.NamedFeatureList = append(eb.NamedFeatureList, empty, lid, lab, iw)
	}
	rng.Shuffle(len(eb.NamedFeatureList), func(i, j int) {
		eb.NamedFeatureList[i], eb.NamedFeatureList[j] = eb.NamedFeatureList[j], eb.NamedFeatureList[i]
	})
	return eb
}

// Examples returns Examples whose rows disagree on which features they carry.
func Examples(rng *rand.Rand, rows int) []*examplepb.Example {
	out := make([]*examplepb.Example, rows)
	for r := range out {
		ex := &examplepb.Example{InstanceWeight: rng.Float32(), DataSourceKey: uint32(rng.IntN(3))}
		for i, k := range ValueKinds {
			c := rng.IntN(4)
			if c == 0 && r == 0 {
				c = 1 // row 0 fixes the column order
			}
			switch c {
			case 0:
				continue
			case 1:
				nf := &examplepb.NamedFeature{Name: fmt.Sprint("f", i), Id: int32(i)}
				if rng.IntN(2) == 0 {
					nf.Feature = &examplepb.Feature{}
				}
				ex.NamedFeature = append(ex.NamedFeature, nf)
			default:
				ex.NamedFeature = append(ex.NamedFeature, &examplepb.NamedFeature{Name: fmt.Sprint("f", i), Id: int32(i), Feature: Feature(rng, k, true)})
			}
		}
		if rng.IntN(3) > 0 {
			ex.LineId = &matrixpb.LineId{}
			_ = proto.Unmarshal(LineID(rng), ex.LineId)
			ex.Label = []float32{float32(Float(rng, true))}
		}
		if r == 1 {
			ex.NamedRawFeature = []*examplepb.NamedRawFeature{{Name: "raw", Id: 3}}
		}
		out[r] = ex
	}
	return out
}

// Instances returns Instances with slot fids in random order, named features, optional
// fields present and absent, and unmodelled fields.
func Instances(rng *rand.Rand, rows int) []*parserpb.Instance {
	out := make([]*parserpb.Instance, rows)
	for r := range out {
		in := &parserpb.Instance{Label: []float32{float32(r % 2)}}
		for range rng.IntN(8) {
			in.Fid = append(in.Fid, uint64(rng.IntN(4))<<54|rng.Uint64()&(1<<54-1))
		}
		if rng.IntN(2) == 0 {
			in.InstanceWeight = proto.Float32(rng.Float32())
			in.DataSourceKey = proto.Uint32(rng.Uint32())
		}
		if r%3 == 0 {
			in.LabelTag = []*parserpb.LabelTag{{Key: proto.Int32(1), Val: proto.Float32(2)}}
			in.NextFid = []uint64{rng.Uint64()}
		}
		if rng.IntN(2) == 0 {
			in.Value = []float32{rng.Float32()}
		}
		in.Feature = []*matrixpb.Feature{
			{Name: proto.String("fc_a"), Fid: []uint64{rng.Uint64() >> 1}},
			{Name: proto.String("fc_f"), FloatValue: []float32{float32(Float(rng, true))}},
			{Name: proto.String("fc_seq"), FidList: []*matrixpb.Fixed64List{{Value: []uint64{1, 2}}, {}}},
			{Name: proto.String("fc_bl"), BytesList: []*matrixpb.BytesList{{Value: [][]byte{[]byte("y")}}}},
			{Name: proto.String("fc_i"), Int64Value: []int64{rng.Int64()}},
			{Name: proto.String("fc_b"), BytesValue: [][]byte{[]byte("x")}},
			{Name: proto.String("fc_fl"), FloatList: []*matrixpb.FloatList{{Value: []float32{1}}}},
			{Name: proto.String("fc_il"), Int64List: []*matrixpb.Int64List{{Value: []int64{-1}}}},
			{Name: proto.String("fc_empty")},
		}
		if rng.IntN(2) == 0 {
			in.Feature = in.Feature[:2]
		}
		if rng.IntN(2) == 0 {
			in.LineId = &matrixpb.LineId{}
			_ = proto.Unmarshal(LineID(rng), in.LineId)
		}
		out[r] = in
	}
	return out
}

// Feature cells of one kind each, for tests that write messages by hand.

// FidV1 is a fid_v1_list cell.
func FidV1(v ...uint64) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: v}}}
}

// FidV2 is a fid_v2_list cell.
func FidV2(v ...uint64) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: v}}}
}

// Floats is a float_list cell.
func Floats(v ...float32) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: v}}}
}

// Doubles is a double_list cell.
func Doubles(v ...float64) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_DoubleList{DoubleList: &examplepb.DoubleList{Value: v}}}
}

// Int64s is an int64_list cell.
func Int64s(v ...int64) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_Int64List{Int64List: &examplepb.Int64List{Value: v}}}
}

// Bytes is a bytes_list cell of the strings' bytes.
func Bytes(v ...string) *examplepb.Feature {
	b := make([][]byte, len(v))
	for i, s := range v {
		b[i] = []byte(s)
	}
	return &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: b}}}
}
