package batch

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"
)

// LineId field numbers (io.md §2.4). Frozen: they are Monolith's wire numbers.
const (
	LineIDNumUID               = 2
	LineIDNumReqTime           = 3
	LineIDNumItemID            = 4
	LineIDNumActions           = 6
	LineIDNumChnid             = 19
	LineIDNumPreActions        = 23
	LineIDNumSampleRate        = 27
	LineIDNumSpecialStrategies = 39
	LineIDNumDeviceType        = 41
	LineIDNumCid               = 48
	LineIDNumUserID            = 49
	LineIDNumIsDraw            = 87
	LineIDNumRank              = 145
	LineIDNumDataSourceName    = 235
)

// LineIDField describes one decoded LineId column: "__line_id__.<Name>".
type LineIDField struct {
	Name   string
	Number protowire.Number
	Type   arrow.DataType
}

// LineIDFields lists the LineId fields that the batch decodes into read-only columns, in
// column order. These are the fields the filters and label ops of io.md §3 read. Absent
// fields hold the proto default (sample_rate reads 1.0), as Monolith's parsers see them.
var LineIDFields = []LineIDField{
	{"uid", LineIDNumUID, arrow.PrimitiveTypes.Uint64},
	{"req_time", LineIDNumReqTime, arrow.PrimitiveTypes.Int64},
	{"item_id", LineIDNumItemID, arrow.PrimitiveTypes.Uint64},
	{"actions", LineIDNumActions, arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	{"chnid", LineIDNumChnid, arrow.PrimitiveTypes.Int64},
	{"pre_actions", LineIDNumPreActions, arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	{"sample_rate", LineIDNumSampleRate, arrow.PrimitiveTypes.Float32},
	{"special_strategies", LineIDNumSpecialStrategies, arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	{"device_type", LineIDNumDeviceType, arrow.BinaryTypes.String},
	{"cid", LineIDNumCid, arrow.BinaryTypes.String},
	{"user_id", LineIDNumUserID, arrow.BinaryTypes.String},
	{"is_draw", LineIDNumIsDraw, arrow.FixedWidthTypes.Boolean},
	{"rank", LineIDNumRank, arrow.PrimitiveTypes.Int32},
	{"data_source_name", LineIDNumDataSourceName, arrow.BinaryTypes.String},
}

// LineIDColumn returns the column name of a decoded LineId field, e.g. "__line_id__.req_time".
func LineIDColumn(field string) string { return lineIDFieldPrefix + field }

// lineIDScan holds one decoded LineId. Repeated fields are appended to the reusable
// slices, so scanning a batch allocates only when a slice grows.
type lineIDScan struct {
	uid, itemID                            uint64
	reqTime, chnid                         int64
	sampleRate                             float32
	rank                                   int32
	isDraw                                 bool
	deviceType, cid, userID, dataSourceNam []byte
	actions, preActions, strategies        []int32
}

func (s *lineIDScan) reset() {
	*s = lineIDScan{
		sampleRate: 1,
		actions:    s.actions[:0], preActions: s.preActions[:0], strategies: s.strategies[:0],
	}
}

// scan decodes the fields of LineIDFields from serialized LineId bytes. Unknown fields are
// skipped (I3). Scalars keep the last value seen, as proto2 parsing does; repeated int32
// fields accept packed and unpacked encodings.
func (s *lineIDScan) scan(b []byte) error {
	s.reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == LineIDNumUID && typ == protowire.Fixed64Type:
			s.uid, n = protowire.ConsumeFixed64(b)
		case num == LineIDNumItemID && typ == protowire.Fixed64Type:
			s.itemID, n = protowire.ConsumeFixed64(b)
		case num == LineIDNumReqTime && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			s.reqTime = int64(v)
		case num == LineIDNumChnid && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			s.chnid = int64(v)
		case num == LineIDNumRank && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			s.rank = int32(v)
		case num == LineIDNumIsDraw && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			s.isDraw = v != 0
		case num == LineIDNumSampleRate && typ == protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			s.sampleRate = math.Float32frombits(v)
		case (num == LineIDNumDeviceType || num == LineIDNumCid || num == LineIDNumUserID || num == LineIDNumDataSourceName) && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			switch num {
			case LineIDNumDeviceType:
				s.deviceType = v
			case LineIDNumCid:
				s.cid = v
			case LineIDNumUserID:
				s.userID = v
			default:
				s.dataSourceNam = v
			}
		case num == LineIDNumActions || num == LineIDNumPreActions || num == LineIDNumSpecialStrategies:
			dst := &s.actions
			if num == LineIDNumPreActions {
				dst = &s.preActions
			} else if num == LineIDNumSpecialStrategies {
				dst = &s.strategies
			}
			n = ConsumeInt32s(b, typ, dst)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

// ConsumeInt32s appends one packed or unpacked repeated int32 field value to dst.
func ConsumeInt32s(b []byte, typ protowire.Type, dst *[]int32) int {
	switch typ {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n >= 0 {
			*dst = append(*dst, int32(v))
		}
		return n
	case protowire.BytesType:
		p, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return n
		}
		for len(p) > 0 {
			v, m := protowire.ConsumeVarint(p)
			if m < 0 {
				return m
			}
			*dst = append(*dst, int32(v))
			p = p[m:]
		}
		return n
	}
	return -1 // wrong wire type for a repeated int32
}

// lineIDColumns builds the decoded LineId columns for n rows from the logical values of
// the line_id column (which may be run-end encoded). Null rows get the defaults.
func lineIDColumns(mem memory.Allocator, col arrow.Array) ([]arrow.Field, []arrow.Array, error) {
	lv := logicalOf(col)
	n := col.Len()
	if lv.shared() {
		n = 1 // decode the one shared LineId and run-end encode the results
	}
	bin, ok := lv.values.(*array.Binary)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s has type %s, want binary", ErrLayout, ColLineID, col.DataType())
	}
	bs := make([]array.Builder, len(LineIDFields))
	for i, f := range LineIDFields {
		bs[i] = array.NewBuilder(mem, f.Type)
		bs[i].Reserve(n)
	}
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	var s lineIDScan
	for r := 0; r < n; r++ {
		p := lv.index(r)
		if bin.IsNull(p) {
			s.reset()
		} else if err := s.scan(bin.Value(p)); err != nil {
			return nil, nil, fmt.Errorf("%w: %s row %d: cannot parse LineId: %v", ErrUnrepresentable, ColLineID, r, err)
		}
		bs[0].(*array.Uint64Builder).Append(s.uid)
		bs[1].(*array.Int64Builder).Append(s.reqTime)
		bs[2].(*array.Uint64Builder).Append(s.itemID)
		appendInt32List(bs[3].(*array.ListBuilder), s.actions)
		bs[4].(*array.Int64Builder).Append(s.chnid)
		appendInt32List(bs[5].(*array.ListBuilder), s.preActions)
		bs[6].(*array.Float32Builder).Append(s.sampleRate)
		appendInt32List(bs[7].(*array.ListBuilder), s.strategies)
		bs[8].(*array.StringBuilder).BinaryBuilder.Append(s.deviceType)
		bs[9].(*array.StringBuilder).BinaryBuilder.Append(s.cid)
		bs[10].(*array.StringBuilder).BinaryBuilder.Append(s.userID)
		bs[11].(*array.BooleanBuilder).Append(s.isDraw)
		bs[12].(*array.Int32Builder).Append(s.rank)
		bs[13].(*array.StringBuilder).BinaryBuilder.Append(s.dataSourceNam)
	}
	fields := make([]arrow.Field, len(LineIDFields))
	arrs := make([]arrow.Array, len(LineIDFields))
	for i, f := range LineIDFields {
		arrs[i] = bs[i].NewArray()
		if lv.shared() {
			ree, err := runEndEncode(mem, arrs[i], col.Len())
			arrs[i].Release()
			if err != nil {
				releaseAll(arrs[:i])
				return nil, nil, err
			}
			arrs[i] = ree
		}
		fields[i] = arrow.Field{Name: LineIDColumn(f.Name), Type: arrs[i].DataType(), Metadata: arrow.NewMetadata(
			[]string{MetaRole, MetaOf}, []string{string(RoleLineIDField), ColLineID})}
	}
	return fields, arrs, nil
}

func appendInt32List(b *array.ListBuilder, v []int32) {
	b.Append(true)
	b.ValueBuilder().(*array.Int32Builder).AppendValues(v, nil)
}
