package avro

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/linkedin/goavro/v2"

	"github.com/monolith-go/monolith/io/ocf"
	"github.com/monolith-go/monolith/schemas/batch"
)

// Writer writes record batches to an Avro object container file.
type Writer struct {
	ocf       *goavro.OCFWriter
	blockSize int
	pending   []any // natives of the rows of the current block
	size      int   // estimated encoded size of pending
	batches   int
	closed    bool
	err       error
}

// NewWriter writes the file header to w and returns a Writer. w is used as a plain
// io.Writer even when it is an *os.File (goavro would otherwise append to an existing file).
func NewWriter(w io.Writer, opts ...Option) (*Writer, error) {
	cfg := config{compression: CompressionDeflate, blockSize: DefaultBlockSize}
	for _, o := range opts {
		o(&cfg)
	}
	if !ocf.KnownCodec(string(cfg.compression)) {
		return nil, fmt.Errorf("%sunknown compression %q (want null, deflate or snappy)", errPrefix, cfg.compression)
	}
	codec, err := rowCodec()
	if err != nil {
		return nil, err
	}
	ow, err := goavro.NewOCFWriter(goavro.OCFConfig{
		W:               struct{ io.Writer }{w},
		Codec:           codec,
		CompressionName: string(cfg.compression),
	})
	if err != nil {
		return nil, fmt.Errorf("%swrite header: %w", errPrefix, err)
	}
	return &Writer{ocf: ow, blockSize: max(cfg.blockSize, 1)}, nil
}

// Write appends the rows of rec. It does not retain rec. Rows are buffered until a block is
// full; Close writes the last block.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New(errPrefix + "write on a closed Writer")
	}
	rows, err := batch.Rows(rec)
	if err != nil {
		return fmt.Errorf("%sbatch %d: %w", errPrefix, w.batches, err)
	}
	for i := range rows {
		w.pending = append(w.pending, rowNative(&rows[i]))
		w.size += rowSize(&rows[i])
		if w.size >= w.blockSize {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	w.batches++
	return nil
}

// flush writes the pending rows as one block.
func (w *Writer) flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	if err := w.ocf.Append(w.pending); err != nil {
		w.err = fmt.Errorf("%sbatch %d: write block: %w", errPrefix, w.batches, err)
		return w.err
	}
	clear(w.pending)
	w.pending, w.size = w.pending[:0], 0
	return nil
}

// Close writes the buffered rows. It does not close the underlying writer. Calling Close
// again returns nil.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	return w.flush()
}

// rowSize estimates the encoded size of a row, to cut blocks.
func rowSize(r *batch.Row) int {
	n := 16 + len(r.BatchSchema) + 5*len(r.Label) + len(r.LineID) + len(r.Extra) + 5*len(r.FidOrder)
	for i := range r.Features {
		c := &r.Features[i]
		n += 16 + len(c.Name) + 10*(len(c.Fids)+len(c.Int64s)) + 4*len(c.Floats) + 8*len(c.Doubles)
		for _, b := range c.Bytes {
			n += 5 + len(b)
		}
		for _, l := range c.FidLists {
			n += 2 + 10*len(l)
		}
		for _, l := range c.FloatLists {
			n += 2 + 4*len(l)
		}
		for _, l := range c.DoubleLists {
			n += 2 + 8*len(l)
		}
		for _, l := range c.Int64Lists {
			n += 2 + 10*len(l)
		}
		for _, l := range c.BytesLists {
			n += 2
			for _, b := range l {
				n += 5 + len(b)
			}
		}
	}
	return n
}

// rowNative returns the goavro native form of a row: a map per record, []any per array,
// goavro.Union for a non-null union member, int64/int32/float32/float64/[]byte/string values.
func rowNative(r *batch.Row) map[string]any {
	features := make([]any, len(r.Features))
	for i := range r.Features {
		features[i] = cellNative(&r.Features[i])
	}
	m := map[string]any{
		"batch_schema":    nullableBytes(r.BatchSchema),
		"batch_rows":      int64(r.BatchRows),
		"features":        features,
		"label":           nil,
		"instance_weight": nil,
		"line_id":         nullableBytes(r.LineID),
		"data_source_key": nil,
		"extra":           nullableBytes(r.Extra),
		"fid_order":       nil,
	}
	if r.Label != nil {
		m["label"] = goavro.Union("array", natives(r.Label, func(v float32) any { return v }))
	}
	if r.InstanceWeight != nil {
		m["instance_weight"] = goavro.Union("float", *r.InstanceWeight)
	}
	if r.DataSourceKey != nil {
		m["data_source_key"] = goavro.Union("long", int64(*r.DataSourceKey))
	}
	if r.FidOrder != nil {
		m["fid_order"] = goavro.Union("array", natives(r.FidOrder, func(v int32) any { return v }))
	}
	return m
}

func nullableBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return goavro.Union("bytes", b)
}

func cellNative(c *batch.Cell) map[string]any {
	fid := func(v uint64) any { return int64(v) } // bit-cast, see avsc.Row
	f32 := func(v float32) any { return v }
	f64 := func(v float64) any { return v }
	i64 := func(v int64) any { return v }
	bs := func(v []byte) any { return v }
	return map[string]any{
		"name":         c.Name,
		"kind":         int32(c.Kind),
		"fids":         natives(c.Fids, fid),
		"floats":       natives(c.Floats, f32),
		"doubles":      natives(c.Doubles, f64),
		"int64s":       natives(c.Int64s, i64),
		"bytes":        natives(c.Bytes, bs),
		"fid_lists":    natives(c.FidLists, func(l []uint64) any { return natives(l, fid) }),
		"float_lists":  natives(c.FloatLists, func(l batch.Float32s) any { return natives(l, f32) }),
		"double_lists": natives(c.DoubleLists, func(l batch.Float64s) any { return natives(l, f64) }),
		"int64_lists":  natives(c.Int64Lists, func(l []int64) any { return natives(l, i64) }),
		"bytes_lists":  natives(c.BytesLists, func(l [][]byte) any { return natives(l, bs) }),
	}
}

// natives converts a slice to the []any goavro expects for an array, without reflection.
func natives[S ~[]T, T any](s S, f func(T) any) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}
