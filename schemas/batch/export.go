package batch

import (
	"encoding/base64"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

var unmarshalMerge = proto.UnmarshalOptions{Merge: true}

// exampleFeature returns the Feature of the cell at row r: an empty Feature for an unset
// cell, nil for an absent cell or a NamedFeature without a Feature.
func (fr *featureReader) exampleFeature(r int) (*examplepb.Feature, Kind) {
	k := fr.kindAt(r)
	p := fr.main.index(r)
	f := &examplepb.Feature{}
	switch k {
	case KindUnset:
		return f, k
	case KindNoFeature, KindAbsent:
		return nil, k
	case KindFidV1List:
		f.Type = &examplepb.Feature_FidV1List{FidV1List: &examplepb.FidList{Value: fr.fidsAt(r, k)}}
	case KindFidV2List:
		f.Type = &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: fr.fidsAt(r, k)}}
	case KindFloatList:
		f.Type = &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: listValues(fr, r, f32s)}}
	case KindDoubleList:
		f.Type = &examplepb.Feature_DoubleList{DoubleList: &examplepb.DoubleList{Value: listValues(fr, r, f64s)}}
	case KindInt64List:
		f.Type = &examplepb.Feature_Int64List{Int64List: &examplepb.Int64List{Value: listValues(fr, r, i64s)}}
	case KindBytesList:
		f.Type = &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: binaryValues(fr.main.values.(*array.List), p)}}
	case KindFidV2Lists, KindFidV1Lists:
		ls := nestedValues(fr, r, func(a arrow.Array, s, e int) *examplepb.FidList {
			return &examplepb.FidList{Value: append([]uint64(nil), u64s(a)[s:e]...)}
		})
		if k == KindFidV1Lists {
			f.Type = &examplepb.Feature_FidV1Lists{FidV1Lists: &examplepb.FidLists{List: ls}}
		} else {
			f.Type = &examplepb.Feature_FidV2Lists{FidV2Lists: &examplepb.FidLists{List: ls}}
		}
	case KindFloatLists:
		f.Type = &examplepb.Feature_FloatLists{FloatLists: &examplepb.FloatLists{List: nestedValues(fr, r, func(a arrow.Array, s, e int) *examplepb.FloatList {
			return &examplepb.FloatList{Value: append([]float32(nil), f32s(a)[s:e]...)}
		})}}
	case KindDoubleLists:
		f.Type = &examplepb.Feature_DoubleLists{DoubleLists: &examplepb.DoubleLists{List: nestedValues(fr, r, func(a arrow.Array, s, e int) *examplepb.DoubleList {
			return &examplepb.DoubleList{Value: append([]float64(nil), f64s(a)[s:e]...)}
		})}}
	case KindInt64Lists:
		f.Type = &examplepb.Feature_Int64Lists{Int64Lists: &examplepb.Int64Lists{List: nestedValues(fr, r, func(a arrow.Array, s, e int) *examplepb.Int64List {
			return &examplepb.Int64List{Value: append([]int64(nil), i64s(a)[s:e]...)}
		})}}
	case KindBytesLists:
		f.Type = &examplepb.Feature_BytesLists{BytesLists: &examplepb.BytesLists{List: nestedValues(fr, r, func(a arrow.Array, s, e int) *examplepb.BytesList {
			return &examplepb.BytesList{Value: binSlice(a, s, e)}
		})}}
	case KindInt64Value:
		f.Type = &examplepb.Feature_Int64Value{Int64Value: fr.main.values.(*array.Int64).Value(p)}
	case KindFloatValue:
		f.Type = &examplepb.Feature_FloatValue{FloatValue: fr.main.values.(*array.Float32).Value(p)}
	case KindDoubleValue:
		f.Type = &examplepb.Feature_DoubleValue{DoubleValue: fr.main.values.(*array.Float64).Value(p)}
	case KindBytesValue:
		f.Type = &examplepb.Feature_BytesValue{BytesValue: append([]byte{}, fr.main.values.(*array.Binary).Value(p)...)}
	default:
		return nil, k
	}
	return f, k
}

// instanceFeature fills an Instance Feature from the cell at row r. Kinds an Instance
// feature cannot hold are an error.
func (fr *featureReader) instanceFeature(r int, k Kind) (*matrixpb.Feature, error) {
	f := &matrixpb.Feature{}
	if fr.name != "" {
		f.Name = proto.String(fr.name)
	}
	switch k {
	case KindUnset:
	case KindFidV2List:
		f.Fid = fr.fidsAt(r, k)
	case KindFloatList:
		f.FloatValue = listValues(fr, r, f32s)
	case KindInt64List:
		f.Int64Value = listValues(fr, r, i64s)
	case KindBytesList:
		f.BytesValue = binaryValues(fr.main.values.(*array.List), fr.main.index(r))
	case KindFidV2Lists:
		f.FidList = nestedValues(fr, r, func(a arrow.Array, s, e int) *matrixpb.Fixed64List {
			return &matrixpb.Fixed64List{Value: append([]uint64(nil), u64s(a)[s:e]...)}
		})
	case KindFloatLists:
		f.FloatList = nestedValues(fr, r, func(a arrow.Array, s, e int) *matrixpb.FloatList {
			return &matrixpb.FloatList{Value: append([]float32(nil), f32s(a)[s:e]...)}
		})
	case KindInt64Lists:
		f.Int64List = nestedValues(fr, r, func(a arrow.Array, s, e int) *matrixpb.Int64List {
			return &matrixpb.Int64List{Value: append([]int64(nil), i64s(a)[s:e]...)}
		})
	case KindBytesLists:
		f.BytesList = nestedValues(fr, r, func(a arrow.Array, s, e int) *matrixpb.BytesList {
			return &matrixpb.BytesList{Value: binSlice(a, s, e)}
		})
	default:
		return nil, fmt.Errorf("%w: feature %q row %d: an Instance feature cannot hold %s values", ErrUnrepresentable, fr.name, r, k)
	}
	return f, nil
}

func parseLineID(b []byte, r int) (*matrixpb.LineId, error) {
	m := &matrixpb.LineId{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: row %d: cannot parse LineId: %v", ErrUnrepresentable, r, err)
	}
	return m, nil
}

// batchExtra decodes the batch-level bytes of the schema metadata.
func batchExtra(rec arrow.RecordBatch) ([]byte, error) {
	v, ok := rec.Schema().Metadata().GetValue(MetaExtra)
	if !ok {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLayout, MetaExtra, err)
	}
	return b, nil
}

// constantDSK returns the data_source_key shared by all rows.
func (cs *columns) constantDSK() (uint32, error) {
	var key uint32
	for r := 0; r < cs.rows; r++ {
		k, _ := cs.dskAt(r)
		if r > 0 && k != key {
			return 0, fmt.Errorf("%w: rows 0 and %d have different data_source_key (%d, %d); an ExampleBatch has one",
				ErrUnrepresentable, r, key, k)
		}
		key = k
	}
	return key, nil
}

// ToExampleBatch converts a batch into one ExampleBatch.
//
// A batch built from an ExampleBatch converts back to the identical message. Batches from
// Examples or Instances become INDIVIDUAL lists in the order Monolith's Instance→Example
// conversion uses, followed by __LINE_ID__, __LABEL__ and instance_weight lists when any
// row has them. Rows with different data_source_key values, or with unmodelled fields
// ("__extra__"), cannot be represented and are an error.
func ToExampleBatch(rec arrow.RecordBatch) (*examplepb.ExampleBatch, error) {
	cs, err := readColumns(rec)
	if err != nil {
		return nil, err
	}
	extra, err := batchExtra(rec)
	if err != nil {
		return nil, err
	}
	eb := &examplepb.ExampleBatch{}
	if len(extra) > 0 {
		if cs.src != SourceExampleBatch {
			return nil, fmt.Errorf("%w: batch-level extra fields in a %s batch", ErrLayout, cs.src)
		}
		if err := unmarshalMerge.Unmarshal(extra, eb); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrLayout, MetaExtra, err)
		}
	}
	if cs.rows == 0 {
		return eb, nil
	}
	eb.BatchSize = int32(cs.rows)
	if eb.DataSourceKey, err = cs.constantDSK(); err != nil {
		return nil, err
	}
	n := cs.rows
	if cs.src == SourceExampleBatch {
		lists := make([]*examplepb.NamedFeatureList, 0, len(cs.order))
		for _, o := range cs.order {
			lists = append(lists, cs.ebList(o, n))
		}
		eb.NamedFeatureList = append(lists, eb.NamedFeatureList...)
		return eb, nil
	}
	for r := 0; r < n; r++ {
		if cs.extraAt(r) != nil {
			return nil, fmt.Errorf("%w: row %d has fields an ExampleBatch cannot hold (%s)", ErrUnrepresentable, r, ColExtra)
		}
	}
	for _, i := range cs.exampleOrder() {
		fr := cs.features[i]
		if fr.sorted != 0 {
			return nil, fmt.Errorf("%w: feature %q has sorted_id %d; ExampleBatch lists have none", ErrUnrepresentable, fr.name, fr.sorted)
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, cs.ebList(i, n))
	}
	var hasLine, hasLabel, hasIW bool
	for r := 0; r < n; r++ {
		_, l := cs.lineIDAt(r)
		lab, _ := cs.labelAt(r)
		w, ok := cs.iwAt(r)
		hasLine, hasLabel = hasLine || l, hasLabel || len(lab) > 0
		hasIW = hasIW || ok && (cs.src == SourceInstance || w != 0)
	}
	if hasLine {
		eb.NamedFeatureList = append(eb.NamedFeatureList, cs.ebList(orderLineID, n))
	}
	if hasLabel {
		eb.NamedFeatureList = append(eb.NamedFeatureList, cs.ebList(orderLabel, n))
	}
	if hasIW {
		eb.NamedFeatureList = append(eb.NamedFeatureList, cs.ebList(orderIW, n))
	}
	return eb, nil
}

// ebList builds the ExampleBatch list of a feature (o ≥ 0) or canonical column (o < 0).
func (cs *columns) ebList(o, n int) *examplepb.NamedFeatureList {
	l := &examplepb.NamedFeatureList{}
	var field *arrow.Field
	var col logical
	switch o {
	case orderLabel:
		field, col, l.Name = cs.label, cs.labelCol, ListLabel
	case orderLineID:
		field, col, l.Name = cs.lineID, cs.lineCol, ListLineID
	case orderIW:
		field, col, l.Name = cs.iw, cs.iwCol, ListInstanceWeight
	default:
		fr := cs.features[o]
		l.Name, l.Id = fr.name, fr.id
		cells := n
		if fr.shared {
			l.Type, cells = examplepb.FeatureListType_SHARED, 1
		}
		l.Feature = make([]*examplepb.Feature, cells)
		for r := range cells {
			f, _ := fr.exampleFeature(r)
			if f == nil {
				f = &examplepb.Feature{}
			}
			l.Feature[r] = f
		}
		return l
	}
	if name, ok := field.Metadata.GetValue(MetaList); ok {
		l.Name = name
	}
	id, _ := metaInt(*field, MetaID)
	l.Id = id
	cells := n
	if col.shared() {
		l.Type, cells = examplepb.FeatureListType_SHARED, 1
	}
	l.Feature = make([]*examplepb.Feature, cells)
	for r := range cells {
		f := &examplepb.Feature{}
		switch o {
		case orderLabel:
			if v, ok := cs.labelAt(r); ok {
				f.Type = &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: v}}
			}
		case orderLineID:
			if v, ok := cs.lineIDAt(r); ok {
				f.Type = &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{v}}}
			}
		case orderIW:
			if v, ok := cs.iwAt(r); ok {
				f.Type = &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{v}}}
			}
		}
		l.Feature[r] = f
	}
	return l
}

// exampleOrder lists feature indexes in the order rows are rebuilt: for Instance batches
// "value", then slot groups, then named features (Monolith's InstanceToExample order);
// otherwise schema order.
func (cs *columns) exampleOrder() []int {
	idx := make([]int, 0, len(cs.features))
	if cs.src != SourceInstance {
		for i := range cs.features {
			idx = append(idx, i)
		}
		return idx
	}
	for _, want := range []string{"value", "fid", ""} {
		for i, fr := range cs.features {
			if fr.inst == want {
				idx = append(idx, i)
			}
		}
	}
	return idx
}

// ToExamples converts a batch into one Example per row.
//
// ExampleBatch rows follow Monolith's ExampleBatchToExample (io.md §2.10.1): the reserved
// lists fill line_id, label and instance_weight, every other list becomes a NamedFeature
// with the list id (unset cells included) and data_source_key is the batch's. Instance rows
// follow InstanceToExample (§2.10.4) and, by decision I8, keep data_source_key. Batch- or
// row-level fields an Example cannot hold are an error.
func ToExamples(rec arrow.RecordBatch) ([]*examplepb.Example, error) {
	cs, err := readColumns(rec)
	if err != nil {
		return nil, err
	}
	if extra, err := batchExtra(rec); err != nil {
		return nil, err
	} else if len(extra) > 0 {
		return nil, fmt.Errorf("%w: the ExampleBatch has raw feature lists or unknown fields that Examples cannot hold", ErrUnrepresentable)
	}
	base := cs.exampleOrder()
	out := make([]*examplepb.Example, cs.rows)
	for r := range out {
		ex := &examplepb.Example{}
		id := int32(0)
		order, err := cs.rowOrder(r, base)
		if err != nil {
			return nil, err
		}
		for _, i := range order {
			fr := cs.features[i]
			f, k := fr.exampleFeature(r)
			if k == KindAbsent {
				continue
			}
			nf := &examplepb.NamedFeature{Name: fr.name, Id: fr.id, SortedId: fr.sorted, Feature: f}
			if cs.src == SourceInstance {
				nf.Id = id
			}
			id++
			ex.NamedFeature = append(ex.NamedFeature, nf)
		}
		if b, ok := cs.lineIDAt(r); ok {
			if ex.LineId, err = parseLineID(b, r); err != nil {
				return nil, err
			}
		}
		ex.Label, _ = cs.labelAt(r)
		w, ok := cs.iwAt(r)
		if cs.src == SourceInstance && !ok {
			w = 1 // InstanceToExample: an absent weight becomes 1.0
		}
		ex.InstanceWeight = w
		ex.DataSourceKey, _ = cs.dskAt(r)
		if extra := cs.extraAt(r); extra != nil {
			if cs.src != SourceExample {
				return nil, fmt.Errorf("%w: row %d has Instance fields (dense, label_tag, next_fid or unknown) that an Example cannot hold", ErrUnrepresentable, r)
			}
			if err := unmarshalMerge.Unmarshal(extra, ex); err != nil {
				return nil, fmt.Errorf("%w: row %d: %s: %v", ErrLayout, r, ColExtra, err)
			}
		}
		out[r] = ex
	}
	return out, nil
}

// ToInstances converts a batch into one Instance per row.
//
// Instance batches convert back to identical messages. ExampleBatch and Example rows follow
// Monolith's AddFeature rules (io.md §2.10.2–3): fid_v1_list values join the top-level fid
// field and other kinds become named features; by decision I8 label, line_id,
// instance_weight and data_source_key are carried. Kinds an Instance cannot hold
// (double_list, double_lists, fid_v1_lists, scalar values) are an error naming the feature,
// where Monolith would silently drop the values.
func ToInstances(rec arrow.RecordBatch) ([]*parserpb.Instance, error) {
	cs, err := readColumns(rec)
	if err != nil {
		return nil, err
	}
	if extra, err := batchExtra(rec); err != nil {
		return nil, err
	} else if len(extra) > 0 {
		return nil, fmt.Errorf("%w: the ExampleBatch has raw feature lists or unknown fields that Instances cannot hold", ErrUnrepresentable)
	}
	order := cs.exampleOrder()
	out := make([]*parserpb.Instance, cs.rows)
	for r := range out {
		in := &parserpb.Instance{}
		for _, i := range order {
			fr := cs.features[i]
			k := fr.kindAt(r)
			switch {
			case k == KindAbsent:
				continue
			case fr.inst == "value" && k == KindFloatList:
				in.Value = listValues(fr, r, f32s)
				continue
			case fr.inst == "fid" && cs.src == SourceInstance:
				continue // rebuilt below in their original order
			case k == KindFidV1List:
				in.Fid = append(in.Fid, fr.fidsAt(r, k)...)
				continue
			case (k == KindUnset || k == KindNoFeature) && cs.src != SourceInstance:
				continue // AddFeature: an unset cell adds nothing
			}
			f, err := fr.instanceFeature(r, k)
			if err != nil {
				return nil, err
			}
			in.Feature = append(in.Feature, f)
		}
		if cs.src == SourceInstance {
			fids, err := cs.instanceFids(r)
			if err != nil {
				return nil, err
			}
			in.Fid = fids
		}
		in.Label, _ = cs.labelAt(r)
		if b, ok := cs.lineIDAt(r); ok {
			if in.LineId, err = parseLineID(b, r); err != nil {
				return nil, err
			}
		}
		if w, ok := cs.iwAt(r); ok && (cs.src != SourceExample || w != 0) {
			in.InstanceWeight = proto.Float32(w)
		}
		if k, ok := cs.dskAt(r); ok && (cs.src != SourceExample || k != 0) {
			in.DataSourceKey = proto.Uint32(k)
		}
		if extra := cs.extraAt(r); extra != nil {
			if cs.src != SourceInstance {
				return nil, fmt.Errorf("%w: row %d has Example fields (raw features or unknown) that an Instance cannot hold", ErrUnrepresentable, r)
			}
			if err := unmarshalMerge.Unmarshal(extra, in); err != nil {
				return nil, fmt.Errorf("%w: row %d: %s: %v", ErrLayout, r, ColExtra, err)
			}
		}
		out[r] = in
	}
	return out, nil
}
