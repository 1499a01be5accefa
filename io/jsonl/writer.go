package jsonl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/schemas/batch"
)

// Writer writes record batches as JSON lines.
type Writer struct {
	bw      *bufio.Writer
	enc     *json.Encoder
	batches int
	closed  bool
	err     error
}

// NewWriter returns a Writer to w. It never fails today; the error is kept for symmetry
// with the other formats.
func NewWriter(w io.Writer, opts ...Option) (*Writer, error) {
	cfg := newConfig(opts)
	bw := bufio.NewWriterSize(w, cfg.bufferSize)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &Writer{bw: bw, enc: enc}, nil
}

// Write appends the rows of rec, one line each. It does not retain rec.
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
		if err := w.enc.Encode(&rows[i]); err != nil {
			w.err = fmt.Errorf("%sbatch %d, row %d: %w", errPrefix, w.batches, i, err)
			return w.err
		}
	}
	w.batches++
	return nil
}

// Close flushes the buffered lines. It does not close the underlying writer. Calling Close
// again returns nil.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("%sflush: %w", errPrefix, err)
		return w.err
	}
	return nil
}
