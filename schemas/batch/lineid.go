package batch

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
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
//
// Each column is written in place: fixed-width values and offsets in buffers of mem sized
// for the batch, list values and string bytes in Go slices (the arrays take them as they
// are, without a copy). No builder and no interface call per row: through 14 Arrow
// builders this was 7.7 % of a training run's CPU on batches of a few features per row.
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
	var lb lineIDBuild
	lb.mem = mem
	defer lb.release()
	uidBuf, uid := fixedColumn[uint64](&lb, n)
	reqTimeBuf, reqTime := fixedColumn[int64](&lb, n)
	itemIDBuf, itemID := fixedColumn[uint64](&lb, n)
	chnidBuf, chnid := fixedColumn[int64](&lb, n)
	sampleRateBuf, sampleRate := fixedColumn[float32](&lb, n)
	rankBuf, rank := fixedColumn[int32](&lb, n)
	isDrawBuf := lb.buffer(int(bitutil.BytesForBits(int64(n))))
	isDraw := isDrawBuf.Bytes()
	clear(isDraw)
	var lists [3]varColumn[int32] // actions, pre_actions, special_strategies
	var strs [4]varColumn[byte]   // device_type, cid, user_id, data_source_name
	for i := range lists {
		lists[i].offsBuf, lists[i].offs = fixedColumn[int32](&lb, n+1)
	}
	for i := range strs {
		strs[i].offsBuf, strs[i].offs = fixedColumn[int32](&lb, n+1)
	}
	var s lineIDScan
	for r := 0; r < n; r++ {
		p := lv.index(r)
		if bin.IsNull(p) {
			s.reset()
		} else if err := s.scan(bin.Value(p)); err != nil {
			return nil, nil, fmt.Errorf("%w: %s row %d: cannot parse LineId: %v", ErrUnrepresentable, ColLineID, r, err)
		}
		uid[r], reqTime[r], itemID[r], chnid[r] = s.uid, s.reqTime, s.itemID, s.chnid
		sampleRate[r], rank[r] = s.sampleRate, s.rank
		if s.isDraw {
			bitutil.SetBit(isDraw, r)
		}
		lists[0].add(r, s.actions)
		lists[1].add(r, s.preActions)
		lists[2].add(r, s.strategies)
		strs[0].add(r, s.deviceType)
		strs[1].add(r, s.cid)
		strs[2].add(r, s.userID)
		strs[3].add(r, s.dataSourceNam)
	}
	for i := range lists {
		lists[i].end()
	}
	for i := range strs {
		strs[i].end()
	}
	// In LineIDFields order; the type check below catches a column out of place.
	datas := [...]arrow.ArrayData{
		fixedData(arrow.PrimitiveTypes.Uint64, n, uidBuf),
		fixedData(arrow.PrimitiveTypes.Int64, n, reqTimeBuf),
		fixedData(arrow.PrimitiveTypes.Uint64, n, itemIDBuf),
		listData(&lists[0], n),
		fixedData(arrow.PrimitiveTypes.Int64, n, chnidBuf),
		listData(&lists[1], n),
		fixedData(arrow.PrimitiveTypes.Float32, n, sampleRateBuf),
		listData(&lists[2], n),
		stringData(&strs[0], n),
		stringData(&strs[1], n),
		stringData(&strs[2], n),
		fixedData(arrow.FixedWidthTypes.Boolean, n, isDrawBuf),
		fixedData(arrow.PrimitiveTypes.Int32, n, rankBuf),
		stringData(&strs[3], n),
	}
	fields := make([]arrow.Field, len(LineIDFields))
	arrs := make([]arrow.Array, len(LineIDFields))
	for i, d := range datas {
		arrs[i] = array.MakeFromData(d)
		d.Release()
	}
	for i, f := range LineIDFields {
		if !arrow.TypeEqual(arrs[i].DataType(), f.Type) {
			releaseAll(arrs)
			return nil, nil, fmt.Errorf("schemas/batch: internal: LineId column %s built as %s, want %s", f.Name, arrs[i].DataType(), f.Type)
		}
		if lv.shared() {
			ree, err := runEndEncode(mem, arrs[i], col.Len())
			arrs[i].Release()
			if err != nil {
				releaseAll(arrs[:i])
				releaseAll(arrs[i+1:])
				return nil, nil, err
			}
			arrs[i] = ree
		}
		fields[i] = arrow.Field{Name: LineIDColumn(f.Name), Type: arrs[i].DataType(), Metadata: arrow.NewMetadata(
			[]string{MetaRole, MetaOf}, []string{string(RoleLineIDField), ColLineID})}
	}
	return fields, arrs, nil
}

// lineIDBuild owns the buffers of the LineId columns being built, in the order they were
// made; lineIDColumns releases its hold on them when the arrays hold theirs.
type lineIDBuild struct {
	mem  memory.Allocator
	bufs []*memory.Buffer
}

// buffer is a new buffer of nbytes bytes (uninitialised).
func (lb *lineIDBuild) buffer(nbytes int) *memory.Buffer {
	b := memory.NewResizableBuffer(lb.mem)
	b.Resize(nbytes)
	lb.bufs = append(lb.bufs, b)
	return b
}

func (lb *lineIDBuild) release() {
	for _, b := range lb.bufs {
		b.Release()
	}
}

// fixedData is the array data of n values of type dt in buf, without nulls.
func fixedData(dt arrow.DataType, n int, buf *memory.Buffer) arrow.ArrayData {
	return array.NewData(dt, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
}

// fixedColumn is a new buffer of n values of T and the slice over its bytes.
func fixedColumn[T arrow.FixedWidthType](lb *lineIDBuild, n int) (*memory.Buffer, []T) {
	var zero T
	b := lb.buffer(n * int(unsafe.Sizeof(zero)))
	return b, arrow.GetData[T](b.Bytes())[:n]
}

// varColumn is a variable-length column being filled: a list<int32> (T int32) or a string
// (T byte). Offsets go in place, in a buffer of the batch's allocator; values in a slice.
type varColumn[T int32 | byte] struct {
	offsBuf *memory.Buffer
	offs    []int32 // n+1
	vals    []T
}

func (c *varColumn[T]) add(r int, v []T) {
	c.offs[r] = int32(len(c.vals))
	if c.vals == nil && len(v) > 0 {
		// Sized from the first value, as if every row held one as long: one allocation
		// when they are alike, none for a column no row sets.
		c.vals = make([]T, 0, len(v)*(len(c.offs)-1-r))
	}
	c.vals = append(c.vals, v...)
}

// end closes the offsets after the last row.
func (c *varColumn[T]) end() { c.offs[len(c.offs)-1] = int32(len(c.vals)) }

// listData is the array data of a list<int32> column of n rows.
func listData(c *varColumn[int32], n int) arrow.ArrayData {
	vals := memory.NewBufferBytes(arrow.GetBytes(c.vals))
	defer vals.Release() // the child holds it
	child := array.NewData(arrow.PrimitiveTypes.Int32, len(c.vals), []*memory.Buffer{nil, vals}, nil, 0, 0)
	defer child.Release()
	return array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Int32), n, []*memory.Buffer{nil, c.offsBuf}, []arrow.ArrayData{child}, 0, 0)
}

// stringData is the array data of a string column of n rows.
func stringData(c *varColumn[byte], n int) arrow.ArrayData {
	vals := memory.NewBufferBytes(c.vals)
	defer vals.Release() // the data holds it
	return array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, c.offsBuf, vals}, nil, 0, 0)
}
