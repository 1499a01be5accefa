package beamio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/io/sink"
	"github.com/monolith-go/monolith/schemas/batch"
)

func init() {
	register.DoFn4x1[context.Context, beam.EventTime, arrow.RecordBatch, func(beam.EventTime, string), error](&writeFn{})
	register.Emitter2[beam.EventTime, string]()
	beam.RegisterType(reflect.TypeOf((*WriteConfig)(nil)).Elem())
}

// WriteConfig says how Write writes files. Plain values only (it is serialized with the
// pipeline).
type WriteConfig struct {
	Format sink.Format
	// Type is the message type of TFRecord/PB-stream output; 0 keeps each batch's source.
	Type  batch.Source
	Codec compress.Codec   // TFRecord/PB stream: whole-file compression (file names get its suffix); JSON lines: likewise
	PB    pbstream.Options // default: a sort id per record, Monolith's file default
	// MaxRowsPerFile starts a new file once a file holds this many rows; 0 = no limit.
	MaxRowsPerFile int64
}

// WriteOption changes a WriteConfig.
type WriteOption func(*WriteConfig)

// WithMessageType sets the message type of framed output.
func WithMessageType(t batch.Source) WriteOption { return func(c *WriteConfig) { c.Type = t } }

// WithCodec sets the whole-file compression of framed output.
func WithCodec(c compress.Codec) WriteOption { return func(w *WriteConfig) { w.Codec = c } }

// WithPBHeaders sets the PB-stream record headers.
func WithPBHeaders(o pbstream.Options) WriteOption { return func(w *WriteConfig) { w.PB = o } }

// WithMaxRowsPerFile caps the rows of one file.
func WithMaxRowsPerFile(n int64) WriteOption { return func(w *WriteConfig) { w.MaxRowsPerFile = n } }

// Write writes the batches of col as files PREFIX-<bundle>-<n><ext> in format and returns
// the paths of the committed files. Panics at pipeline construction if the options are
// invalid.
func Write(s beam.Scope, prefix string, format sink.Format, col beam.PCollection, opts ...WriteOption) beam.PCollection {
	s = s.Scope("beamio.Write")
	cfg := WriteConfig{Format: format, PB: pbstream.Options{HasSortID: true}}
	for _, o := range opts {
		o(&cfg)
	}
	if _, err := sink.ParseFormat(format.String()); err != nil {
		panic(fmt.Errorf("beamio.Write: %w", err))
	}
	if cfg.Type != 0 && format != sink.TFRecord && format != sink.PBStream {
		panic(fmt.Errorf("beamio.Write: a message type applies to tfrecord and pbstream output, not %s", format))
	}
	if cfg.Codec != compress.None && (format == sink.Parquet || format == sink.Avro) {
		panic(fmt.Errorf("beamio.Write: codec %s applies to tfrecord, pbstream and jsonl output, not %s", cfg.Codec, format))
	}
	if cfg.MaxRowsPerFile < 0 {
		panic(fmt.Errorf("beamio.Write: MaxRowsPerFile %d is negative", cfg.MaxRowsPerFile))
	}
	if prefix == "" {
		panic(errors.New("beamio.Write: empty prefix"))
	}
	return beam.ParDo(s, &writeFn{Prefix: prefix, Config: cfg}, col)
}

type writeFn struct {
	Prefix string
	Config WriteConfig

	bundle    string
	seq       int
	cur       *sink.Writer
	committed []string
	// ts is the event time of the bundle's last batch: the committed paths are emitted
	// with it, not with the zero time FinishBundle would give them, which a runner may
	// treat as late behind the watermark.
	ts beam.EventTime
}

func (f *writeFn) StartBundle(_ context.Context, _ func(beam.EventTime, string)) error {
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("beamio.Write: bundle id: %w", err)
	}
	f.bundle, f.seq, f.cur, f.committed = hex.EncodeToString(id[:]), 0, nil, nil
	return nil
}

func (f *writeFn) open() error {
	path := fmt.Sprintf("%s-%s-%05d%s%s", f.Prefix, f.bundle, f.seq, f.Config.Format.Ext(), f.Config.Codec.Ext())
	f.seq++
	w, err := sink.Create(path, sink.Options{Format: f.Config.Format, Type: f.Config.Type,
		Record: recordio.Options{Codec: f.Config.Codec, PB: f.Config.PB}})
	if err != nil {
		return err
	}
	f.cur = w
	return nil
}

func (f *writeFn) commit() error {
	if f.cur == nil {
		return nil
	}
	w := f.cur
	f.cur = nil
	if err := w.Close(); err != nil {
		return err
	}
	f.committed = append(f.committed, w.Path())
	return nil
}

// fail removes the bundle's files and returns err.
func (f *writeFn) fail(err error) error {
	if f.cur != nil {
		err = errors.Join(err, f.cur.Abort())
		f.cur = nil
	}
	for _, p := range f.committed {
		if rerr := os.Remove(p); rerr != nil && !os.IsNotExist(rerr) {
			err = errors.Join(err, rerr)
		}
	}
	f.committed = nil
	return fmt.Errorf("beamio.Write %s: %w", f.Prefix, err)
}

func (f *writeFn) ProcessElement(_ context.Context, ts beam.EventTime, rec arrow.RecordBatch, _ func(beam.EventTime, string)) error {
	f.ts = ts
	if f.cur == nil {
		if err := f.open(); err != nil {
			return f.fail(err)
		}
	}
	err := f.cur.Write(rec)
	if errors.Is(err, sink.ErrSchema) {
		// A Parquet file's schema is fixed: continue in a new file.
		if err = f.commit(); err == nil {
			if err = f.open(); err == nil {
				err = f.cur.Write(rec)
			}
		}
	}
	if err != nil {
		return f.fail(err)
	}
	if f.Config.MaxRowsPerFile > 0 && f.cur.Rows() >= f.Config.MaxRowsPerFile {
		if err := f.commit(); err != nil {
			return f.fail(err)
		}
	}
	return nil
}

func (f *writeFn) FinishBundle(_ context.Context, emit func(beam.EventTime, string)) error {
	if err := f.commit(); err != nil {
		return f.fail(err)
	}
	for _, p := range f.committed {
		emit(f.ts, p)
	}
	f.committed = nil
	return nil
}
