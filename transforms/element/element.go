// Package element defines the PCollection element types of monolith-go's Beam transforms
// and registers their coders: Arrow record batches (IPC stream format), sharded batches,
// and per-(table, shard) gradient lists. Importing it (every transform does) registers them.
//
// # Element types
//
//	arrow.RecordBatch  a batch of rows in the schemas/batch layout, or a tensor record
//	                   (NewTensors: one fixed_size_list<float32> column per layout output)
//	Sharded            a batch with its sharding_sparse_fids result and, after Layout, its
//	                   layout tensors (or, before LayoutGrad, their gradients)
//	TableGrads         the gradient rows of one (table, PS shard) fid list of one batch,
//	                   one row per fid (aggregated or not)
//
// # Coders
//
// A record batch is encoded as a self-contained Arrow IPC stream (schema message, one
// record batch message, end-of-stream marker), so any runner can carry it and any Arrow
// implementation can read it. Sharded and TableGrads have compact binary encodings
// documented on their types. Coders run only where a runner moves elements between
// stages (after a Reshuffle or GroupByKey, or between workers); fused stages pass
// elements in memory, and the SDK's size samples of them are answered without encoding.
//
// # Size samples
//
// The Go SDK encodes a sample of every PCollection's elements to estimate their size in
// bytes (exec.PCollection.ProcessElement: the first elements, then each time after a
// random gap of up to a tenth of the elements seen), in fused stages too, where nothing
// else encodes them. For batches that
// sample was the whole cost of coders in a fused stage, paid on the bundle's goroutine:
// 13 % of the CPU of a 65,536-row read → layout pipeline. The encoders registered for
// the element types therefore recognise a call made for a size sample — the first SDK
// frame above them that is not an encoder is PCollection.ProcessElement, where a
// transport encode has a DataSink, a Reshuffle or a state or side-input writer there —
// and answer it with a zero-filled buffer as long as the element's Arrow buffers and
// slices instead of encoding it. The SDK only counts those bytes; its optional data
// sampling (the runner's enable_data_sampling experiment) would show the zeros instead of
// an element. Should a Beam release rename the frame, samples are encoded again: slower,
// the same results, and the fusion tests that count encodes fail.
//
// # Ownership
//
// Elements are immutable once emitted: a DoFn never modifies or Releases a record it
// receives, because a runner may hand the same record to several consumers (fan-out) in
// one fused stage. Records are built with Go-managed memory (memory.DefaultAllocator) and
// are reclaimed by the garbage collector; a DoFn releases only intermediate records it
// built and does not emit. This departs from the usual Arrow rule "release what you do not
// emit", which is unsafe under fan-out.
package element

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/monolith-go/monolith/kernels/shard"
)

func init() {
	beam.RegisterCoder(reflect.TypeOf((*arrow.RecordBatch)(nil)).Elem(), EncodeRecordElement, DecodeRecord)
	beam.RegisterCoder(reflect.TypeOf((*Sharded)(nil)), EncodeShardedElement, DecodeSharded)
	beam.RegisterCoder(reflect.TypeOf(TableGrads{}), EncodeTableGradsElement, DecodeTableGrads)
	beam.RegisterType(reflect.TypeOf((*Sharded)(nil)).Elem())
}

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("transforms/element: corrupt element")

// EncodeRecord encodes a record batch as an Arrow IPC stream.
func EncodeRecord(rec arrow.RecordBatch) ([]byte, error) {
	if rec == nil {
		return nil, errors.New("transforms/element: nil record batch")
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("transforms/element: encode record batch: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("transforms/element: encode record batch: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeRecord decodes an Arrow IPC stream holding exactly one record batch.
func DecodeRecord(b []byte) (rec arrow.RecordBatch, err error) {
	defer func() {
		// The IPC reader trusts buffer metadata in places; a corrupt element must be an
		// error, never a crash of the worker.
		if r := recover(); r != nil {
			rec, err = nil, fmt.Errorf("%w: record batch: %v", ErrCorrupt, r)
		}
	}()
	if err := checkIPC(b); err != nil {
		return nil, fmt.Errorf("%w: record batch: %v", ErrCorrupt, err)
	}
	r, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("%w: record batch: %v", ErrCorrupt, err)
	}
	defer r.Release()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("%w: record batch: %v", ErrCorrupt, err)
		}
		return nil, fmt.Errorf("%w: record batch: the stream holds no batch", ErrCorrupt)
	}
	rec = r.RecordBatch()
	rec.Retain()
	if r.Next() {
		rec.Release()
		return nil, fmt.Errorf("%w: record batch: the stream holds more than one batch", ErrCorrupt)
	}
	if err := r.Err(); err != nil {
		rec.Release()
		return nil, fmt.Errorf("%w: record batch: %v", ErrCorrupt, err)
	}
	if err := validate(rec); err != nil {
		rec.Release()
		return nil, fmt.Errorf("%w: record batch: %v", ErrCorrupt, err)
	}
	return rec, nil
}

// validate runs Arrow's full validation over every column and, recursively, over the
// children of nested columns (list values, struct fields, run ends and values): a corrupt
// child buffer must fail here, not panic in a reader later.
func validate(rec arrow.RecordBatch) error {
	for i, col := range rec.Columns() {
		if err := validateArray(col); err != nil {
			return fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
	}
	return nil
}

func validateArray(a arrow.Array) error {
	d := a.Data()
	// Arrow's validation computes offset+length+1 and trusts it: a negative length can
	// cancel a huge offset and pass, then crash any reader (a fuzz-found case).
	if d.Len() < 0 || d.Offset() < 0 || d.Offset() > math.MaxInt32-d.Len() {
		return fmt.Errorf("%s array has length %d at offset %d", a.DataType(), d.Len(), d.Offset())
	}
	// The IPC writer indexes every buffer the type's layout declares; a decoded array that
	// lacks one would fail (or crash) on re-encoding.
	if want, got := len(a.DataType().Layout().Buffers), len(d.Buffers()); got < want && a.DataType().ID() != arrow.NULL {
		return fmt.Errorf("%s array has %d buffers, its layout has %d", a.DataType(), got, want)
	}
	// Arrow's validation trusts the null count the IPC metadata states; the writer then
	// indexes a validity bitmap that may be absent.
	if n := d.NullN(); n < 0 || n > d.Len() {
		return fmt.Errorf("%s array of %d values claims %d nulls", a.DataType(), d.Len(), n)
	}
	if d.NullN() > 0 && a.DataType().ID() != arrow.NULL && a.DataType().ID() != arrow.RUN_END_ENCODED {
		if v := d.Buffers()[0]; v == nil || v.Len() < int(bitutil.BytesForBits(int64(d.Offset()+d.Len()))) {
			return fmt.Errorf("%s array has %d nulls but no validity bitmap for them", a.DataType(), d.NullN())
		}
	}
	if err := checkFirstOffset(a); err != nil {
		return err
	}
	if v, ok := a.(interface{ ValidateFull() error }); ok {
		if err := v.ValidateFull(); err != nil {
			return err
		}
	}
	switch x := a.(type) {
	case array.ListLike:
		if err := validateArray(x.ListValues()); err != nil {
			return fmt.Errorf("list values: %w", err)
		}
	case *array.Struct:
		for i := 0; i < x.NumField(); i++ {
			if err := validateArray(x.Field(i)); err != nil {
				return fmt.Errorf("struct field %d: %w", i, err)
			}
		}
	case *array.RunEndEncoded:
		if err := validateArray(x.Values()); err != nil {
			return fmt.Errorf("run-end values: %w", err)
		}
	}
	return nil
}

// checkFirstOffset checks the offset at an empty variable-width array's start, which
// Arrow's validation skips but the IPC writer reads (a fuzz-found crash): it must lie
// within the values.
func checkFirstOffset(a arrow.Array) error {
	d := a.Data()
	if d.Len() != 0 {
		return nil // ValidateFull checks every offset of a non-empty array
	}
	var limit int
	switch a.DataType().ID() {
	case arrow.BINARY, arrow.STRING:
		if b := d.Buffers()[2]; b != nil {
			limit = b.Len()
		}
	case arrow.LIST, arrow.MAP:
		if len(d.Children()) == 1 {
			limit = d.Children()[0].Len()
		}
	default:
		return nil
	}
	off := d.Buffers()[1]
	if off == nil || off.Len() == 0 {
		return nil // no offsets to read: the writer writes none
	}
	if off.Len() < 4*(d.Offset()+1) { // the writer would index an offset the buffer lacks (fuzz-found)
		return fmt.Errorf("empty %s array at offset %d has an offsets buffer of %d bytes", a.DataType(), d.Offset(), off.Len())
	}
	if first := int(int32(binary.LittleEndian.Uint32(off.Bytes()[4*d.Offset():]))); first < 0 || first > limit {
		return fmt.Errorf("empty %s array starts at offset %d, outside its %d values", a.DataType(), first, limit)
	}
	return nil
}

// Sharded is a batch with its sharding result; see the package doc.
//
// Encoding: uvarint length + IPC stream of Batch (length 0 when nil), uvarint length +
// shard.Result encoding (0 when nil), uvarint length + IPC stream of Tensors (0 when nil),
// and, only when Train is set, uvarint length + EncodeTrainState.
type Sharded struct {
	Batch   arrow.RecordBatch // the rows; nil when a transform dropped them
	Shard   *shard.Result     // owned by the element (a clone of the Sharder's result)
	Tensors arrow.RecordBatch // layout outputs or their gradients; nil before Layout
	Train   *TrainState       // a training step's state; nil outside training
}

// Rows returns the number of rows of the element.
func (s *Sharded) Rows() int {
	switch {
	case s.Batch != nil:
		return int(s.Batch.NumRows())
	case s.Shard != nil:
		return s.Shard.BatchSize
	case s.Tensors != nil:
		return int(s.Tensors.NumRows())
	}
	return 0
}

// EncodeSharded encodes s.
func EncodeSharded(s *Sharded) ([]byte, error) {
	if s == nil {
		return nil, errors.New("transforms/element: nil Sharded")
	}
	var out []byte
	parts := []any{s.Batch, s.Shard, s.Tensors}
	if s.Train != nil {
		parts = append(parts, s.Train)
	}
	for i, part := range parts {
		var b []byte
		var err error
		switch v := part.(type) {
		case arrow.RecordBatch:
			if v != nil {
				b, err = EncodeRecord(v)
			}
		case *shard.Result:
			if v != nil {
				b, err = v.MarshalBinary()
			}
		case *TrainState:
			b, err = EncodeTrainState(v)
		}
		if err != nil {
			return nil, fmt.Errorf("transforms/element: encode Sharded part %d: %w", i, err)
		}
		out = binary.AppendUvarint(out, uint64(len(b)))
		out = append(out, b...)
	}
	return out, nil
}

// DecodeSharded decodes an encoded Sharded.
func DecodeSharded(b []byte) (*Sharded, error) {
	s := &Sharded{}
	off := 0
	for i := 0; i < 4; i++ {
		if i == 3 && off == len(b) {
			break // no training state
		}
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n > uint64(len(b)-off-k) {
			return nil, fmt.Errorf("%w: Sharded part %d: bad length at offset %d", ErrCorrupt, i, off)
		}
		off += k
		part := b[off : off+int(n)]
		off += int(n)
		if n == 0 {
			continue
		}
		var err error
		switch i {
		case 0:
			s.Batch, err = DecodeRecord(part)
		case 1:
			s.Shard, err = shard.DecodeResult(part)
		case 2:
			s.Tensors, err = DecodeRecord(part)
		case 3:
			s.Train, err = DecodeTrainState(part)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: Sharded part %d: %v", ErrCorrupt, i, err)
		}
	}
	if off != len(b) {
		return nil, fmt.Errorf("%w: Sharded: %d trailing bytes", ErrCorrupt, len(b)-off)
	}
	return s, nil
}
