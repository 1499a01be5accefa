package tfrecord

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Writer writes TFRecord records. Output is buffered: call Flush when done. The zero value
// is not usable; call NewWriter.
type Writer struct {
	bw  *bufio.Writer
	hdr [HeaderSize]byte
	ftr [FooterSize]byte
	err error
}

// NewWriter returns a Writer that frames records into w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 64<<10)}
}

// Write appends one record holding payload. It does not retain payload.
func (w *Writer) Write(payload []byte) error {
	if w.err != nil {
		return w.err
	}
	binary.LittleEndian.PutUint64(w.hdr[:8], uint64(len(payload)))
	binary.LittleEndian.PutUint32(w.hdr[8:], MaskedCRC(w.hdr[:8]))
	binary.LittleEndian.PutUint32(w.ftr[:], MaskedCRC(payload))
	if _, err := w.bw.Write(w.hdr[:]); err != nil {
		return w.setErr(err)
	}
	if _, err := w.bw.Write(payload); err != nil {
		return w.setErr(err)
	}
	if _, err := w.bw.Write(w.ftr[:]); err != nil {
		return w.setErr(err)
	}
	return nil
}

// Flush writes buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		return w.setErr(err)
	}
	return nil
}

func (w *Writer) setErr(err error) error {
	w.err = fmt.Errorf("io/tfrecord: write: %w", err)
	return w.err
}
