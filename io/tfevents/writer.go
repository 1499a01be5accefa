package tfevents

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
)

// Scalar is one tagged value of a scalar summary.
type Scalar struct {
	Tag   string
	Value float64 // stored as float32, TensorFlow's simple_value
}

// ErrClosed is returned by writes to a closed Writer.
var ErrClosed = errors.New("io/tfevents: writer closed")

// Writer appends events to an event file. It is safe for concurrent use: a mutex keeps
// records whole and in call order. The zero value is not usable; call Create or NewWriter.
type Writer struct {
	mu     sync.Mutex
	tw     *tfrecord.Writer
	f      *os.File // nil for NewWriter
	path   string
	closed bool
	buf    []byte
}

// marshal is deterministic so that equal events give equal bytes (golden files).
var marshal = proto.MarshalOptions{Deterministic: true}

// maxSuffixes bounds the names Create tries when FileName(now, host, "") exists.
const maxSuffixes = 1000

// Create makes dir (MkdirAll) and a new event file in it named FileName(now, hostname,
// ""), and writes the file_version record to it, flushed and synced as TensorFlow's
// writer does, so the file is a valid event file at once. An unwritable dir fails here
// with an error naming the path. Create never overwrites: if the name exists (a second
// writer in the same second), it uses the suffix ".1", ".2", … instead, which sorts
// after the first. The hostname is os.Hostname, or "localhost" when that fails.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("io/tfevents: create %s: %w", dir, err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	now := time.Now()
	var f *os.File
	for i := 0; ; i++ {
		suffix := ""
		if i > 0 {
			suffix = "." + strconv.Itoa(i)
		}
		path := filepath.Join(dir, FileName(now, host, suffix))
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i >= maxSuffixes {
			return nil, fmt.Errorf("io/tfevents: create %s: %w", path, err)
		}
	}
	w := &Writer{tw: tfrecord.NewWriter(f), f: f, path: f.Name()}
	err = w.start(now)
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		return nil, errors.Join(err, f.Close(), os.Remove(w.path))
	}
	return w, nil
}

// NewWriter returns a Writer of events into w and writes the file_version record, with
// wall time now, to it (buffered: it reaches w on Flush or Close). Close flushes but does
// not close w.
func NewWriter(w io.Writer, now time.Time) (*Writer, error) {
	ew := &Writer{tw: tfrecord.NewWriter(w)}
	if err := ew.start(now); err != nil {
		return nil, err
	}
	return ew, nil
}

// start writes the file_version record, as TensorFlow's writers do on opening a file.
func (w *Writer) start(now time.Time) error {
	return w.write(&tfcorepb.Event{WallTime: wallTime(now), What: &tfcorepb.Event_FileVersion{FileVersion: FileVersion}})
}

// Path returns the file written by a Writer from Create; "" for NewWriter.
func (w *Writer) Path() string { return w.path }

// WriteScalars writes one Event at step with wall time t whose Summary holds one
// simple_value per scalar, in order: the port of Monolith's
// base_runner.BaseRunner.write_summary (a tf.compat.v1.Summary of simple_value values
// given to FileWriter.add_summary). Values are rounded to float32, as simple_value is a
// float. With no scalars it writes an event with an empty Summary, as the Python does for
// empty logs. The record is buffered until Flush or Close.
func (w *Writer) WriteScalars(step int64, t time.Time, scalars ...Scalar) error {
	vals := make([]*tfcorepb.Summary_Value, len(scalars))
	for i, s := range scalars {
		vals[i] = &tfcorepb.Summary_Value{Tag: s.Tag, Value: &tfcorepb.Summary_Value_SimpleValue{SimpleValue: float32(s.Value)}}
	}
	return w.WriteEvent(&tfcorepb.Event{
		WallTime: wallTime(t),
		Step:     step,
		What:     &tfcorepb.Event_Summary{Summary: &tfcorepb.Summary{Value: vals}},
	})
}

// WriteEvent writes e as the next record. It does not retain e.
func (w *Writer) WriteEvent(e *tfcorepb.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.write(e)
}

func (w *Writer) write(e *tfcorepb.Event) error {
	if w.closed {
		return ErrClosed
	}
	b, err := marshal.MarshalAppend(w.buf[:0], e)
	if err != nil {
		return fmt.Errorf("io/tfevents: encode event: %w", err)
	}
	w.buf = b
	if err := w.tw.Write(b); err != nil {
		return w.named(err)
	}
	return nil
}

// named adds the file name to a write error of a Create'd writer.
func (w *Writer) named(err error) error {
	if w.path == "" {
		return fmt.Errorf("io/tfevents: %w", err)
	}
	return fmt.Errorf("io/tfevents: %s: %w", w.path, err)
}

// Flush writes buffered records to the underlying writer and, for a Writer from Create,
// syncs the file to stable storage.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	return w.flush()
}

func (w *Writer) flush() error {
	if err := w.tw.Flush(); err != nil {
		return w.named(err)
	}
	if w.f != nil {
		if err := w.f.Sync(); err != nil {
			return w.named(err)
		}
	}
	return nil
}

// Close flushes (and syncs) buffered records and, for a Writer from Create, closes the
// file. It is idempotent: later calls return nil. Writes after Close return ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.flush()
	if w.f != nil {
		if cerr := w.f.Close(); cerr != nil {
			err = errors.Join(err, w.named(cerr))
		}
	}
	return err
}
