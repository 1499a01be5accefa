package pbstream

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Writer writes PB-stream records in the canonical form (see the package documentation).
// Output is buffered: call Flush when done. The zero value is not usable; call NewWriter.
type Writer struct {
	bw  *bufio.Writer
	o   Options
	u64 [8]byte
	err error
}

// NewWriter returns a Writer that frames records into w according to o.
func NewWriter(w io.Writer, o Options) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 64<<10), o: o}
}

// Write appends one record holding payload, with zero-valued headers (and an empty sort id
// when Options.HasSortID is set). It does not retain payload.
func (w *Writer) Write(payload []byte) error {
	return w.WriteRecord(Record{Payload: payload})
}

// WriteRecord appends one record. With LagrangeX the header carries rec.PBType and
// rec.DataSourceKey, whose low byte must be zero. Without LagrangeX, DataSourceKey and
// PBType must be zero (the framing cannot carry them); rec.SortID is written when
// Options.HasSortID is set and must be empty otherwise. These checks make sure nothing is
// silently dropped. Offset and Index are ignored. A payload of exactly 0xFEFEFEFE bytes is
// rejected: readers would take its length for the DEADBEEF sentinel. Rejections wrap
// ErrInvalidRecord and leave the Writer usable; write errors of the underlying writer are
// sticky.
func (w *Writer) WriteRecord(rec Record) error {
	if w.err != nil {
		return w.err
	}
	if err := w.check(rec); err != nil {
		return err
	}
	if w.o.LagrangeX {
		w.putU64(LagrangeXHeader(rec.DataSourceKey, rec.PBType))
	} else {
		if w.o.KafkaDumpPrefix {
			w.putU64(0)
			w.putU64(0)
		}
		if w.o.HasSortID {
			w.putU64(uint64(len(rec.SortID)))
			w.put(rec.SortID)
		}
		if w.o.KafkaDump {
			w.putU64(0)
		}
	}
	w.putU64(uint64(len(rec.Payload)))
	w.put(rec.Payload)
	return w.err
}

func (w *Writer) check(rec Record) error {
	switch {
	case uint64(len(rec.Payload)) == SentinelLength:
		return fmt.Errorf("%w: a payload of %#x bytes collides with the DEADBEEF sentinel", ErrInvalidRecord, uint64(SentinelLength))
	case w.o.LagrangeX && rec.DataSourceKey&0xFF != 0:
		return fmt.Errorf("%w: data source key %#x has a non-zero low byte, which the LagrangeX header cannot carry",
			ErrInvalidRecord, rec.DataSourceKey)
	case w.o.LagrangeX && len(rec.SortID) > 0:
		return fmt.Errorf("%w: a LagrangeX record cannot carry a sort id", ErrInvalidRecord)
	case !w.o.LagrangeX && (rec.DataSourceKey != 0 || rec.PBType != 0):
		return fmt.Errorf("%w: data source key %#x / pb type %d need the LagrangeX header",
			ErrInvalidRecord, rec.DataSourceKey, rec.PBType)
	case !w.o.LagrangeX && !w.o.HasSortID && len(rec.SortID) > 0:
		return fmt.Errorf("%w: a sort id needs Options.HasSortID", ErrInvalidRecord)
	}
	return nil
}

func (w *Writer) putU64(v uint64) {
	binary.LittleEndian.PutUint64(w.u64[:], v)
	w.put(w.u64[:])
}

func (w *Writer) put(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.bw.Write(b); err != nil {
		w.err = fmt.Errorf("io/pbstream: write: %w", err)
	}
}

// Flush writes buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("io/pbstream: write: %w", err)
	}
	return w.err
}
