package parse

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/monolith-go/monolith/schemas/batch"
)

// lineID holds the decoded fields of one LineId that extra features can name. Repeated
// fields reuse their slices across rows.
type lineID struct {
	uid, itemID                             uint64
	reqTime, chnid                          int64
	rank                                    int32
	sampleRate                              float32
	deviceType, cid, userID, dataSourceName []byte
	actions, preActions, specialStrategies  []int32
}

// reset sets every field to its proto2 default (sample_rate 1.0).
func (l *lineID) reset() {
	*l = lineID{
		sampleRate:        1,
		actions:           l.actions[:0],
		preActions:        l.preActions[:0],
		specialStrategies: l.specialStrategies[:0],
	}
}

// parse decodes a serialized LineId the way protobuf's C++ parser does: known fields of the
// expected wire type are read (scalars keep the last value, repeated int32 fields accept
// packed and unpacked values), anything else is skipped as an unknown field. It reports
// false for malformed wire data; l then holds the defaults.
func (l *lineID) parse(b []byte) bool {
	l.reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			l.reset()
			return false
		}
		b = b[n:]
		n = -1
		switch {
		case typ == protowire.Fixed64Type && (num == batch.LineIDNumUID || num == batch.LineIDNumItemID):
			var v uint64
			v, n = protowire.ConsumeFixed64(b)
			if num == batch.LineIDNumUID {
				l.uid = v
			} else {
				l.itemID = v
			}
		case typ == protowire.VarintType && (num == batch.LineIDNumReqTime || num == batch.LineIDNumChnid || num == batch.LineIDNumRank):
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			switch num {
			case batch.LineIDNumReqTime:
				l.reqTime = int64(v)
			case batch.LineIDNumChnid:
				l.chnid = int64(v)
			default:
				l.rank = int32(v)
			}
		case typ == protowire.Fixed32Type && num == batch.LineIDNumSampleRate:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			l.sampleRate = math.Float32frombits(v)
		case typ == protowire.BytesType && (num == batch.LineIDNumDeviceType || num == batch.LineIDNumCid || num == batch.LineIDNumUserID || num == batch.LineIDNumDataSourceName):
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			switch num {
			case batch.LineIDNumDeviceType:
				l.deviceType = v
			case batch.LineIDNumCid:
				l.cid = v
			case batch.LineIDNumUserID:
				l.userID = v
			default:
				l.dataSourceName = v
			}
		case (typ == protowire.VarintType || typ == protowire.BytesType) &&
			(num == batch.LineIDNumActions || num == batch.LineIDNumPreActions || num == batch.LineIDNumSpecialStrategies):
			dst := &l.actions
			if num == batch.LineIDNumPreActions {
				dst = &l.preActions
			} else if num == batch.LineIDNumSpecialStrategies {
				dst = &l.specialStrategies
			}
			n = batch.ConsumeInt32s(b, typ, dst)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			l.reset()
			return false
		}
		b = b[n:]
	}
	return true
}

// int64Of returns a scalar integer field, bit-cast to int64 as Monolith writes uint64
// fields into int64 tensors.
func (l *lineID) int64Of(num int) int64 {
	switch num {
	case batch.LineIDNumUID:
		return int64(l.uid)
	case batch.LineIDNumItemID:
		return int64(l.itemID)
	case batch.LineIDNumReqTime:
		return l.reqTime
	case batch.LineIDNumChnid:
		return l.chnid
	case batch.LineIDNumRank:
		return int64(l.rank)
	}
	return 0
}

func (l *lineID) ints(num int) []int32 {
	switch num {
	case batch.LineIDNumActions:
		return l.actions
	case batch.LineIDNumPreActions:
		return l.preActions
	case batch.LineIDNumSpecialStrategies:
		return l.specialStrategies
	}
	return nil
}

func (l *lineID) bytesOf(num int) []byte {
	switch num {
	case batch.LineIDNumDeviceType:
		return l.deviceType
	case batch.LineIDNumCid:
		return l.cid
	case batch.LineIDNumUserID:
		return l.userID
	case batch.LineIDNumDataSourceName:
		return l.dataSourceName
	}
	return nil
}
