package tfevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
)

// ErrDecode means a record's checksums hold but its payload is not a tensorflow.Event; it
// is wrapped by a *tfrecord.CorruptError giving the file and offset.
var ErrDecode = errors.New("io/tfevents: record is not an Event")

// Point is one scalar of an event file.
type Point struct {
	Step     int64   `json:"step"`
	WallTime float64 `json:"wall_time"` // seconds since the epoch
	Tag      string  `json:"tag"`
	Value    float64 `json:"value"`
}

// Reader reads the events of one event file. It is not safe for concurrent use. The zero
// value is not usable; call NewReader.
type Reader struct {
	rr   *tfrecord.Reader
	name string
	err  error
}

// NewReader returns a Reader of the events in r; name is the file name its errors give.
// Reads from r are buffered.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{rr: tfrecord.NewReader(r, tfrecord.WithFile(name)), name: name}
}

// Next returns the next event, the file_version event first for files TensorFlow or
// Writer wrote (Next does not require it). It returns (nil, io.EOF) at a clean end of
// the input; a truncated record, a checksum mismatch or an undecodable payload is a
// *tfrecord.CorruptError naming the file and the byte offset of the record (the latter
// wrapping ErrDecode). After an error or io.EOF, Next keeps returning it.
func (r *Reader) Next() (*tfcorepb.Event, error) {
	if r.err != nil {
		return nil, r.err
	}
	b, err := r.rr.Next()
	if err != nil {
		r.err = err
		return nil, err
	}
	e := &tfcorepb.Event{}
	if err := proto.Unmarshal(b, e); err != nil {
		r.err = &tfrecord.CorruptError{File: r.name, Offset: r.rr.Offset(), Record: r.rr.Index(), Err: fmt.Errorf("%w: %w", ErrDecode, err)}
		return nil, r.err
	}
	return e, nil
}

// Scalars returns the scalar points of e, in the order of its summary values: every
// simple_value (TF1 summaries, WriteScalars), and every tensor value holding a rank-0
// DT_FLOAT, DT_DOUBLE, DT_INT32 or DT_INT64 tensor (TF2 tf.summary.scalar), read from
// float_val / double_val / int_val / int64_val or from tensor_content (little-endian),
// and zero when neither holds a value, as TensorFlow fills an empty tensor. Tensor values
// whose metadata names a plugin other than "scalars" are skipped, as are all other
// values. An event without a summary has no points.
func Scalars(e *tfcorepb.Event) []Point {
	var out []Point
	for _, v := range e.GetSummary().GetValue() {
		p := Point{Step: e.GetStep(), WallTime: e.GetWallTime(), Tag: v.GetTag()}
		switch x := v.GetValue().(type) {
		case *tfcorepb.Summary_Value_SimpleValue:
			p.Value = float64(x.SimpleValue)
		case *tfcorepb.Summary_Value_Tensor:
			if name := v.GetMetadata().GetPluginData().GetPluginName(); name != "" && name != "scalars" {
				continue
			}
			val, ok := tensorScalar(x.Tensor)
			if !ok {
				continue
			}
			p.Value = val
		default:
			continue
		}
		out = append(out, p)
	}
	return out
}

// tensorScalar returns the value of a rank-0 numeric tensor.
func tensorScalar(t *tfcorepb.TensorProto) (float64, bool) {
	if t == nil || t.GetTensorShape().GetUnknownRank() || len(t.GetTensorShape().GetDim()) != 0 {
		return 0, false
	}
	c := t.GetTensorContent()
	switch t.GetDtype() {
	case tfcorepb.DataType_DT_FLOAT:
		switch {
		case len(t.GetFloatVal()) > 0:
			return float64(t.GetFloatVal()[0]), true
		case len(c) >= 4:
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(c))), true
		}
	case tfcorepb.DataType_DT_DOUBLE:
		switch {
		case len(t.GetDoubleVal()) > 0:
			return t.GetDoubleVal()[0], true
		case len(c) >= 8:
			return math.Float64frombits(binary.LittleEndian.Uint64(c)), true
		}
	case tfcorepb.DataType_DT_INT32:
		switch {
		case len(t.GetIntVal()) > 0:
			return float64(t.GetIntVal()[0]), true
		case len(c) >= 4:
			return float64(int32(binary.LittleEndian.Uint32(c))), true
		}
	case tfcorepb.DataType_DT_INT64:
		switch {
		case len(t.GetInt64Val()) > 0:
			return float64(t.GetInt64Val()[0]), true
		case len(c) >= 8:
			return float64(int64(binary.LittleEndian.Uint64(c))), true
		}
	default:
		return 0, false
	}
	if len(c) != 0 {
		return 0, false // too short for the dtype
	}
	return 0, true
}

// ReadFile returns all scalar points of the event file at path, in file order. Errors
// name the file and, for damaged records, the byte offset.
func ReadFile(path string) ([]Point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("io/tfevents: %w", err)
	}
	defer f.Close()
	r := NewReader(f, path)
	var out []Point
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Scalars(e)...)
	}
}
