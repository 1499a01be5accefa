package export

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/ps/checkpoint"
	"github.com/monolith-go/monolith/schemas/hashtablepb"
)

// EntryDumpWriter writes entries as a TFRecord of EntryDump protos.
type EntryDumpWriter struct {
	tw     *tfrecord.Writer
	buf    []byte
	closed bool
}

// NewEntryDumpWriter returns a writer of TFRecord framed EntryDump protos to w.
func NewEntryDumpWriter(w io.Writer) *EntryDumpWriter {
	return &EntryDumpWriter{tw: tfrecord.NewWriter(w)}
}

// Write appends d as one record. Every field survives, unknown fields included.
func (w *EntryDumpWriter) Write(d *hashtablepb.EntryDump) error {
	if w.closed {
		return errors.New(errPrefix + "write on a closed writer")
	}
	var err error
	if w.buf, err = (proto.MarshalOptions{}).MarshalAppend(w.buf[:0], d); err != nil {
		return fmt.Errorf("%sfid %d: %w", errPrefix, uint64(d.GetId()), err)
	}
	if err := w.tw.Write(w.buf); err != nil {
		return fmt.Errorf("%s%w", errPrefix, err)
	}
	return nil
}

// writeRecord appends rec, the wire encoding of an EntryDump, as one record, unchanged.
func (w *EntryDumpWriter) writeRecord(rec []byte) error {
	if w.closed {
		return errors.New(errPrefix + "write on a closed writer")
	}
	if err := w.tw.Write(rec); err != nil {
		return fmt.Errorf("%s%w", errPrefix, err)
	}
	return nil
}

// entryIDField is the field number of EntryDump.id (sfixed64).
const entryIDField protowire.Number = 1

// checkRecord checks that rec, a record of a checkpoint's entries file, is a sequence of
// well-formed protobuf fields holding EntryDump.id, as Export needs of every entry. It
// reads the top-level fields only (their contents are left to Verify, which parses
// them). A malformed record is an error wrapping checkpoint.ErrCorrupt, one without id
// an error wrapping ErrUnsupported.
func checkRecord(rec []byte) error {
	hasID := false
	for len(rec) > 0 {
		num, typ, n := protowire.ConsumeTag(rec)
		if n >= 0 {
			rec = rec[n:]
			n = protowire.ConsumeFieldValue(num, typ, rec)
		}
		if n < 0 {
			return fmt.Errorf("%w: not an EntryDump: %w", checkpoint.ErrCorrupt, protowire.ParseError(n))
		}
		rec = rec[n:]
		hasID = hasID || num == entryIDField && typ == protowire.Fixed64Type
	}
	if !hasID {
		return fmt.Errorf("%w: the entry has no id", ErrUnsupported)
	}
	return nil
}

// Close flushes the buffered records. It does not close the underlying writer.
func (w *EntryDumpWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.tw.Flush(); err != nil {
		return fmt.Errorf("%s%w", errPrefix, err)
	}
	return nil
}

// EntryDumpReader reads a TFRecord of EntryDump protos.
type EntryDumpReader struct {
	tr   *tfrecord.Reader
	file string
	d    hashtablepb.EntryDump
	err  error
}

// NewEntryDumpReader returns a reader of the TFRecord framed EntryDump protos in r.
func NewEntryDumpReader(r io.Reader, opts ...Option) *EntryDumpReader {
	c := newConfig(opts)
	return &EntryDumpReader{tr: tfrecord.NewReader(r, tfrecord.WithFile(c.fileName)), file: c.fileName}
}

// Next returns the next entry, or (nil, io.EOF) at a clean end of the file.
func (r *EntryDumpReader) Next() (*hashtablepb.EntryDump, error) {
	if r.err != nil {
		return nil, r.err
	}
	rec, err := r.tr.Next()
	if err == io.EOF {
		r.err = io.EOF
		return nil, io.EOF
	}
	if err != nil {
		cause := err
		var ce *tfrecord.CorruptError
		if errors.As(err, &ce) {
			cause = ce.Err
		}
		switch {
		case errors.Is(cause, tfrecord.ErrTruncated):
			cause = fmt.Errorf("%w: %w", ErrTruncated, cause)
		case errors.Is(cause, tfrecord.ErrChecksum) || errors.Is(cause, tfrecord.ErrTooLarge):
			cause = fmt.Errorf("%w: %w", ErrFormat, cause)
		}
		r.err = &CorruptError{File: r.file, Record: r.tr.Index(), Offset: r.tr.Offset(), RowGroup: -1, Err: cause}
		return nil, r.err
	}
	if err := proto.Unmarshal(rec, &r.d); err != nil {
		r.err = &CorruptError{File: r.file, Record: r.tr.Index(), Offset: r.tr.Offset(), RowGroup: -1,
			Err: fmt.Errorf("%w: EntryDump: %v", ErrFormat, err)}
		return nil, r.err
	}
	return &r.d, nil
}

// Table returns "": an EntryDump file does not record its table.
func (r *EntryDumpReader) Table() string { return "" }

// Close does nothing (the reader does not own its input) and returns nil.
func (r *EntryDumpReader) Close() error {
	if r.err == nil {
		r.err = errors.New(errPrefix + "read on a closed reader")
	}
	return nil
}
