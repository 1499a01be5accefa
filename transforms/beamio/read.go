// Package beamio holds the Beam sources and sinks of training data: Read turns file
// patterns into a PCollection of Arrow batches (schemas/batch), Write turns one back into
// files. The formats themselves live in io/dataset (reading) and io/sink (writing).
//
// # Read
//
// Read expands the pattern once (io/filepattern), reshuffles the file names so that a
// runner spreads whole files across workers, and reads each file with io/dataset. Only
// file names are shuffled; batches are produced after the shuffle and flow through the
// fused downstream stages without being materialized. Every TFRecord, PB stream, text and
// batch-file input io/dataset reads is supported, with the same errors (file, record,
// offset; decisions I1/I2).
//
// Decoding runs on ReadConfig.Parallelism goroutines per bundle (default GOMAXPROCS):
// the bundle's goroutine reads, decompresses and frames the records (io/dataset chunks),
// the workers decode them, and the batches are emitted in file order (internal/ordered),
// so a runner that gives the stage one bundle, as prism does, still decodes on every core.
//
// Rows per batch: Example and Instance records are gathered RowsPerBatch at a time (the
// last batch of a file may be shorter). An ExampleBatch record is one batch; when it has
// more than RowsPerBatch rows it is cut into zero-copy slices of at most RowsPerBatch rows
// (SHARED features stay shared in every slice). Batches never span files.
//
// # Write
//
// Write writes every bundle's batches into its own files, named
// PREFIX-<bundle id>-<n><ext>, created atomically (io/sink), and returns the names of
// the files it committed. A failed bundle removes its files, so a retried bundle does not
// duplicate rows; output is complete only when the pipeline succeeds.
package beamio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/internal/ordered"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/filepattern"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/transforms/element"
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(string), error](&expandFn{})
	register.DoFn3x1[context.Context, string, func(arrow.RecordBatch), error](&readFn{})
	register.Emitter1[string]()
	register.Emitter1[arrow.RecordBatch]()
	beam.RegisterType(reflect.TypeOf((*ReadConfig)(nil)).Elem())
	_ = element.ErrCorrupt // the record coder is registered by transforms/element
}

// ReadConfig says how files are read. It is part of the pipeline (serialized with the
// DoFns), so it holds plain values only. The zero value sniffs formats and types and
// reads Monolith's file defaults.
type ReadConfig struct {
	Type               batch.Source      // 0 sniffs
	Format             dataset.Format    // Auto by file name and content
	Codec              compress.Codec    // Auto by file name
	PB                 pbstream.Options  // PB-stream headers; HasSortID defaults to true via DefaultReadConfig
	AllowTruncatedTail bool              // I1: the reference's silent partial last record
	RowsPerBatch       int               // Example/Instance rows per batch, and the ExampleBatch slice size; 0 = 1024
	DataSourceKey      dataset.DSKPolicy // data_source_key policy
	Parallelism        int               // decoding goroutines per bundle; 0 = GOMAXPROCS
}

// DefaultReadConfig returns the configuration of Monolith's FilePBDataset defaults: PB
// streams with a sort id, everything else sniffed.
func DefaultReadConfig() ReadConfig {
	return ReadConfig{PB: pbstream.Options{HasSortID: true}, RowsPerBatch: dataset.DefaultBatchRows}
}

// DatasetOptions returns the io/dataset options of c.
func (c ReadConfig) DatasetOptions() dataset.Options {
	rows := c.RowsPerBatch
	if rows <= 0 {
		rows = dataset.DefaultBatchRows
	}
	return dataset.Options{
		Type:          c.Type,
		Format:        c.Format,
		Record:        recordio.Options{Codec: c.Codec, PB: c.PB, AllowTruncatedTail: c.AllowTruncatedTail},
		BatchRows:     rows,
		DataSourceKey: c.DataSourceKey,
		Mem:           memory.DefaultAllocator,
	}
}

// ReadOption changes a ReadConfig.
type ReadOption func(*ReadConfig)

// WithConfig replaces the whole configuration.
func WithConfig(c ReadConfig) ReadOption { return func(r *ReadConfig) { *r = c } }

// WithType sets the message type of framed and text files.
func WithType(t batch.Source) ReadOption { return func(r *ReadConfig) { r.Type = t } }

// WithRowsPerBatch sets the number of rows per emitted batch.
func WithRowsPerBatch(n int) ReadOption { return func(r *ReadConfig) { r.RowsPerBatch = n } }

// Read returns the batches of every file matching pattern (any io/filepattern spec: globs,
// comma lists, @file lists, date patterns). Panics at pipeline construction if the
// options are invalid; an empty expansion fails the pipeline with an error naming the
// pattern.
func Read(s beam.Scope, pattern string, opts ...ReadOption) beam.PCollection {
	s = s.Scope("beamio.Read")
	cfg := DefaultReadConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.RowsPerBatch < 0 {
		panic(fmt.Errorf("beamio.Read: rows per batch %d is negative", cfg.RowsPerBatch))
	}
	if err := cfg.DatasetOptions().Record.Validate(); err != nil {
		panic(fmt.Errorf("beamio.Read: %w", err))
	}
	files := beam.ParDo(s, &expandFn{Pattern: pattern}, beam.Impulse(s))
	return ReadFiles(s, beam.Reshuffle(s, files), cfg)
}

// ReadFiles reads the files named by a PCollection of strings.
func ReadFiles(s beam.Scope, files beam.PCollection, cfg ReadConfig) beam.PCollection {
	s = s.Scope("beamio.ReadFiles")
	return beam.ParDo(s, &readFn{Config: cfg}, files)
}

// Files expands pattern into its files, as Read does (for callers that report them).
func Files(ctx context.Context, pattern string) ([]string, error) {
	files, err := filepattern.Expand(ctx, pattern)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("beamio: no files match %q", pattern)
	}
	return files, nil
}

type expandFn struct {
	Pattern string
}

func (f *expandFn) ProcessElement(ctx context.Context, _ []byte, emit func(string)) error {
	files, err := Files(ctx, f.Pattern)
	if err != nil {
		return err
	}
	for _, file := range files {
		emit(file)
	}
	return nil
}

type readFn struct {
	Config ReadConfig

	pool *ordered.Pool[int, *dataset.Chunk, []arrow.RecordBatch]
	bufs *dataset.Buffers // lent from file to file, across the bundles of this instance
}

func (f *readFn) StartBundle(ctx context.Context, _ func(arrow.RecordBatch)) error {
	n := f.Config.Parallelism
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	rows := int64(f.Config.DatasetOptions().BatchRows)
	if f.bufs == nil {
		f.bufs = dataset.NewBuffers()
	}
	var err error
	f.pool, err = ordered.New(ctx, n, 0, func() (int, error) { return 0, nil },
		func(_ context.Context, _ int, c *dataset.Chunk) ([]arrow.RecordBatch, error) {
			rec, err := c.Decode()
			if err != nil {
				return nil, fmt.Errorf("beamio: %w", err)
			}
			return cut(rec, rows), nil
		})
	return err
}

func (f *readFn) ProcessElement(ctx context.Context, file string, emit func(arrow.RecordBatch)) error {
	o := f.Config.DatasetOptions()
	o.Buffers = f.bufs
	r, err := dataset.Open([]string{file}, o)
	if err != nil {
		return fmt.Errorf("beamio: %w", err)
	}
	defer r.Close()
	out := func(recs []arrow.RecordBatch) {
		for _, rec := range recs {
			emit(rec)
		}
	}
	for {
		c, err := r.NextChunk(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("beamio: %w", err)
		}
		if err := f.pool.Submit(c, out); err != nil {
			return err
		}
	}
}

func (f *readFn) FinishBundle(emit func(arrow.RecordBatch)) error {
	return f.pool.Flush(func(recs []arrow.RecordBatch) {
		for _, rec := range recs {
			emit(rec)
		}
	})
}

// cut slices rec into batches of at most rows rows (zero-copy), releasing rec when it
// is cut.
func cut(rec arrow.RecordBatch, rows int64) []arrow.RecordBatch {
	n := rec.NumRows()
	if n <= rows {
		return []arrow.RecordBatch{rec}
	}
	out := make([]arrow.RecordBatch, 0, (n+rows-1)/rows)
	for lo := int64(0); lo < n; lo += rows {
		out = append(out, rec.NewSlice(lo, min(lo+rows, n)))
	}
	rec.Release()
	return out
}

// ReadFile reads one file and calls fn with each batch, cut to at most RowsPerBatch rows.
// fn owns the batch. It is the body of Read's DoFn, exported for plain-Go callers (the
// pipeline benchmark's loop) so that both read exactly the same way. bufs, when not nil,
// lends the framing buffers of the files read before (dataset.Buffers), as Read's DoFn
// does from file to file; a caller reading many files passes one per goroutine.
func ReadFile(ctx context.Context, file string, cfg ReadConfig, bufs *dataset.Buffers, fn func(arrow.RecordBatch) error) error {
	o := cfg.DatasetOptions()
	o.Buffers = bufs
	r, err := dataset.Open([]string{file}, o)
	if err != nil {
		return fmt.Errorf("beamio: %w", err)
	}
	defer r.Close()
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("beamio: %w", err)
		}
		recs := cut(rec, int64(o.BatchRows))
		for i, part := range recs {
			if err := fn(part); err != nil {
				for _, rest := range recs[i+1:] {
					rest.Release()
				}
				return err
			}
		}
	}
}
