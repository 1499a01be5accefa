package parse

import (
	"encoding/binary"
	"errors"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// The naive parsers below follow Monolith's kernels statement by statement on the proto
// messages (row-major, as the C++ does), with this package's documented divergences. They
// are the reference the Arrow implementation is compared with on random batches.

var errNaive = errors.New("naive: rejected")

type specMaps struct {
	sparse map[string]SparseFeature
	dense  map[string]DenseFeature
	extra  []ExtraFeature
}

func mapsOf(s *Spec) specMaps {
	m := specMaps{sparse: map[string]SparseFeature{}, dense: map[string]DenseFeature{}, extra: s.Extra()}
	for _, f := range s.Sparse() {
		m.sparse[f.Name] = f
	}
	for _, f := range s.Dense() {
		m.dense[f.Name] = f
	}
	return m
}

func naiveV1ToV2(v uint64) uint64 { return (v>>54)<<48 | v&(1<<48-1) }

// naiveSparse is the ragged part of FillFeature.
func naiveSparse(f *examplepb.Feature) ([]uint64, error) {
	switch v := f.GetType().(type) {
	case *examplepb.Feature_FidV1List:
		var out []uint64
		for _, x := range v.FidV1List.GetValue() {
			out = append(out, naiveV1ToV2(x))
		}
		return out, nil
	case *examplepb.Feature_FidV2List:
		return append([]uint64(nil), v.FidV2List.GetValue()...), nil
	case *examplepb.Feature_FloatList, *examplepb.Feature_DoubleList, *examplepb.Feature_Int64List, *examplepb.Feature_BytesList:
		return nil, errNaive
	}
	return nil, nil
}

// naiveFill is FillFeature for a dense output.
func naiveFill(res *result, d DenseFeature, r int, f *examplepb.Feature) error {
	dim := d.Dim
	switch v := f.GetType().(type) {
	case *examplepb.Feature_FidV1List, *examplepb.Feature_FidV2List:
		return errNaive
	case *examplepb.Feature_FloatList, *examplepb.Feature_DoubleList:
		if d.DType != Float32 {
			return errNaive
		}
		var vals []float32
		if fl, ok := v.(*examplepb.Feature_FloatList); ok {
			vals = fl.FloatList.GetValue()
		} else {
			for _, x := range v.(*examplepb.Feature_DoubleList).DoubleList.GetValue() {
				vals = append(vals, float32(x))
			}
		}
		out := res.f32[d.Name]
		if dim == 1 {
			if len(vals) > 0 {
				out[r] = vals[0]
			} else {
				out[r] = math.Float32frombits(0x00800000)
			}
			return nil
		}
		for j := 0; j < dim && j < len(vals); j++ {
			out[r*dim+j] = vals[j]
		}
	case *examplepb.Feature_Int64List:
		vals := v.Int64List.GetValue()
		if dim == 1 && len(vals) == 0 || d.DType != Int64 {
			return errNaive
		}
		for j := 0; j < dim && j < len(vals); j++ {
			res.i64[d.Name][r*dim+j] = vals[j]
		}
	case *examplepb.Feature_BytesList:
		vals := v.BytesList.GetValue()
		if dim != 1 || len(vals) == 0 || d.DType != Bytes {
			return errNaive
		}
		res.str[d.Name][r] = string(vals[0])
	}
	return nil
}

// naiveExtras is FillFromLineId (chnid as int64, scalars in column 0).
func naiveExtras(res *result, r int, m *matrixpb.LineId, extra []ExtraFeature) {
	for _, e := range extra {
		dim := e.Dim
		ints := func(v []int32) {
			for j := 0; j < dim && j < len(v); j++ {
				res.i64[e.Name][r*dim+j] = int64(v[j])
			}
		}
		switch e.Name {
		case "uid":
			res.i64[e.Name][r*dim] = int64(m.GetUid())
		case "item_id":
			res.i64[e.Name][r*dim] = int64(m.GetItemId())
		case "req_time":
			res.i64[e.Name][r*dim] = m.GetReqTime()
		case "chnid":
			res.i64[e.Name][r*dim] = m.GetChnid()
		case "rank":
			res.i64[e.Name][r*dim] = int64(m.GetRank())
		case "sample_rate":
			res.f32[e.Name][r*dim] = m.GetSampleRate()
		case "actions":
			ints(m.GetActions())
		case "pre_actions":
			ints(m.GetPreActions())
		case "special_strategies":
			ints(m.GetSpecialStrategies())
		case "device_type":
			res.str[e.Name][r*dim] = m.GetDeviceType()
		case "cid":
			res.str[e.Name][r*dim] = m.GetCid()
		case "user_id":
			res.str[e.Name][r*dim] = m.GetUserId()
		case "data_source_name":
			res.str[e.Name][r*dim] = m.GetDataSourceName()
		}
	}
}

// naiveExampleBatch is ExampleBatchParser::Parse; SHARED reserved lists fill every row.
func naiveExampleBatch(eb *examplepb.ExampleBatch, spec *Spec) (*result, error) {
	n := int(eb.GetBatchSize())
	res := zeroResult(spec, n)
	m := mapsOf(spec)
	for _, l := range eb.GetNamedFeatureList() {
		cell := func(r int) *examplepb.Feature {
			if l.GetType() == examplepb.FeatureListType_SHARED {
				return l.GetFeature()[0]
			}
			return l.GetFeature()[r]
		}
		switch l.GetName() {
		case "__LINE_ID__":
			if len(m.extra) == 0 {
				continue
			}
			for r := range n {
				bl := cell(r).GetBytesList().GetValue()
				if len(bl) == 0 {
					return nil, errNaive
				}
				lid := &matrixpb.LineId{}
				if err := proto.Unmarshal(bl[0], lid); err != nil {
					return nil, errNaive
				}
				naiveExtras(res, r, lid, m.extra)
			}
		case "__LABEL__":
			d, ok := m.dense["label"]
			if !ok {
				continue
			}
			for r := range n {
				vals := cell(r).GetFloatList().GetValue()
				if d.Dim == 1 && len(vals) == 0 {
					return nil, errNaive
				}
				for j := 0; j < d.Dim && j < len(vals); j++ {
					res.f32["label"][r*d.Dim+j] = vals[j]
				}
			}
		case "instance_weight":
			if _, ok := m.dense["instance_weight"]; !ok {
				continue
			}
			for r := range n {
				vals := cell(r).GetFloatList().GetValue()
				if len(vals) == 0 {
					return nil, errNaive
				}
				w := vals[0]
				if !(w > 0) {
					w = 1
				}
				res.f32["instance_weight"][r] = w
			}
		default:
			name := l.GetName()
			if _, ok := m.sparse[name]; ok {
				for r := range n {
					vals, err := naiveSparse(cell(r))
					if err != nil {
						return nil, err
					}
					res.sparse[name][r] = vals
				}
			} else if d, ok := m.dense[name]; ok {
				for r := range n {
					if err := naiveFill(res, d, r, cell(r)); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return res, nil
}

// naiveExtend is ExtendExample; a __LINE_ID__ without bytes is an error only when the
// line id is read.
func naiveExtend(ex *examplepb.Example, needLine bool) error {
	for _, f := range ex.GetNamedFeature() {
		switch f.GetName() {
		case "__LINE_ID__":
			bl := f.GetFeature().GetBytesList().GetValue()
			if len(bl) == 0 {
				if needLine {
					return errNaive
				}
				continue
			}
			lid := &matrixpb.LineId{}
			if proto.Unmarshal(bl[0], lid) != nil {
				lid = &matrixpb.LineId{}
			}
			ex.LineId = lid
		case "__LABEL__":
			ex.Label = append(ex.Label, f.GetFeature().GetFloatList().GetValue()...)
		case "instance_weight":
			w := float32(1)
			if v := f.GetFeature().GetFloatList().GetValue(); len(v) > 0 {
				w = v[0]
			}
			ex.InstanceWeight = w
		}
	}
	return nil
}

// naiveExamples is ExampleParser::Parse on extended Examples.
func naiveExamples(exs []*examplepb.Example, spec *Spec) (*result, error) {
	res := zeroResult(spec, len(exs))
	m := mapsOf(spec)
	for r, orig := range exs {
		ex := proto.Clone(orig).(*examplepb.Example)
		if err := naiveExtend(ex, len(m.extra) > 0); err != nil {
			return nil, err
		}
		appeared := map[string]bool{}
		for _, f := range ex.GetNamedFeature() {
			name := f.GetName()
			if _, ok := m.sparse[name]; ok {
				vals, err := naiveSparse(f.GetFeature())
				if err != nil {
					return nil, err
				}
				res.sparse[name][r] = vals
			} else if d, ok := m.dense[name]; ok {
				if err := naiveFill(res, d, r, f.GetFeature()); err != nil {
					return nil, err
				}
			} else {
				continue
			}
			appeared[name] = true
		}
		if d, ok := m.dense["label"]; ok && !appeared["label"] {
			for j := range d.Dim {
				v := InvalidLabel
				if j < len(ex.GetLabel()) {
					v = ex.GetLabel()[j]
				}
				res.f32["label"][r*d.Dim+j] = v
			}
		}
		if _, ok := m.dense["instance_weight"]; ok && !appeared["instance_weight"] {
			w := ex.GetInstanceWeight()
			if !(w > 0) {
				w = 1
			}
			res.f32["instance_weight"][r] = w
		}
		naiveExtras(res, r, ex.GetLineId(), m.extra)
	}
	return res, nil
}

// naiveHalf converts IEEE half bits to float32 through float64 arithmetic.
func naiveHalf(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return s * math.Ldexp(m/1024, -14)
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return s * math.Inf(1)
	}
	return s * math.Ldexp(1+m/1024, e-15)
}

// naiveQTZ decodes a UE_QTZ payload (Float16::get / get_m and qtz8mm), with the element
// count of the f16 form fixed to len/2.
func naiveQTZ(p []byte) ([]float32, bool) {
	clamp := func(v float64) float32 {
		if math.IsInf(v, 1) {
			return 65504
		}
		if math.IsInf(v, -1) {
			return -65504
		}
		return float32(v)
	}
	if len(p) <= 8 {
		if len(p)%2 != 0 {
			return nil, false
		}
		out := make([]float32, len(p)/2)
		for i := range out {
			h := binary.LittleEndian.Uint16(p[2*i:])
			if h&0x7fff == 0 {
				continue
			}
			e := int(h>>10) & 0x1f
			r := float32(math.Ldexp(1, e-26))
			if h&0x8000 != 0 {
				r = -r
			}
			out[i] = clamp(naiveHalf(h)) + r
		}
		return out, true
	}
	lo := clamp(naiveHalf(binary.LittleEndian.Uint16(p)))
	hi := clamp(naiveHalf(binary.LittleEndian.Uint16(p[2:])))
	step := (hi - lo) / 255
	out := make([]float32, len(p)-4)
	for i := range out {
		out[i] = lo + float32(step*float32(p[4+i]))
	}
	return out, true
}

// naiveInstances is InstanceParser::Parse.
func naiveInstances(ins []*parserpb.Instance, spec *Spec) (*result, error) {
	res := zeroResult(spec, len(ins))
	m := mapsOf(spec)
	raw := spec.FidV1Raw()
	for r, in := range ins {
		for _, f := range spec.Sparse() {
			var out []uint64
			if f.FidV1 {
				for _, x := range in.GetFid() {
					if int(x>>54) == f.Slot {
						if !raw {
							x = naiveV1ToV2(x)
						}
						out = append(out, x)
					}
				}
			} else {
				for _, feat := range in.GetFeature() {
					if feat.GetName() != f.Name {
						continue
					}
					out = append(out, feat.GetFid()...)
					for _, l := range feat.GetFidList() {
						out = append(out, l.GetValue()...)
					}
				}
			}
			res.sparse[f.Name][r] = out
		}
		for name, d := range m.dense {
			dim := d.Dim
			switch name {
			case "label":
				for j := 0; j < dim && j < len(in.GetLabel()); j++ {
					res.f32[name][r*dim+j] = in.GetLabel()[j]
				}
				continue
			case "instance_weight":
				res.f32[name][r] = 1
				if in.InstanceWeight != nil {
					res.f32[name][r] = in.GetInstanceWeight()
				}
				continue
			}
			for _, feat := range in.GetFeature() {
				if feat.GetName() != name {
					continue
				}
				switch d.DType {
				case Float32:
					var payload []byte
					for _, b := range feat.GetBytesValue() {
						if len(b) >= 6 && string(b[:6]) == "UE_QTZ" {
							payload = b[6:]
						}
					}
					if len(payload) > 0 {
						if vals, ok := naiveQTZ(payload); ok {
							if len(vals) != dim {
								return nil, errNaive
							}
							copy(res.f32[name][r*dim:], vals)
							continue
						}
					}
					if len(feat.GetFloatValue()) == dim {
						copy(res.f32[name][r*dim:], feat.GetFloatValue())
					}
				case Int64:
					if len(feat.GetInt64Value()) == dim {
						copy(res.i64[name][r*dim:], feat.GetInt64Value())
					}
				default:
					if len(feat.GetBytesValue()) == dim {
						res.str[name][r] = string(feat.GetBytesValue()[0])
					}
				}
			}
		}
		naiveExtras(res, r, in.GetLineId(), m.extra)
	}
	return res, nil
}
