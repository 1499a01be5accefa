package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/io/avro"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/jsonl"
	"github.com/monolith-go/monolith/io/parquet"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/schemas/batch"
)

// sink receives batches and writes them to the output.
type sink interface {
	write(rec arrow.RecordBatch) error
	close() error // commits the output
	abort()       // removes a partial output
}

func runConvert(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("convert", stderr)
	var in inputFlags
	in.register(fs)
	var inputs multiFlag
	fs.Var(&inputs, "input", "input files, globs, comma lists, @filelist or {DATE(..)}/{INT(..)} patterns (repeatable)")
	output := fs.String("output", "", "output path (\"-\" for standard output)")
	to := fs.String("to", "", "output format: tfrecord, pbstream, parquet, avro or jsonl")
	outType := fs.String("out-type", "same", "message type written to tfrecord/pbstream: same, examplebatch, example or instance")
	outCodec := fs.String("out-codec", "auto", "output compression for tfrecord/pbstream: auto (by file name), none, gzip, zlib, snappy or zstd")
	outSortID := fs.Bool("out-sort-id", true, "pbstream output: write an (empty) sort id per record")
	outLagrangeX := fs.Bool("out-lagrangex", false, "pbstream output: write LagrangeX headers carrying data_source_key")
	outKafkaDump := fs.Bool("out-kafka-dump", false, "pbstream output: write the kafka_dump u64")
	outKafkaPrefix := fs.Bool("out-kafka-dump-prefix", false, "pbstream output: write the Kafka dump prefix")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith convert --input PATTERN --output PATH --to FORMAT [flags]\n\n"+
			"Converts ExampleBatch, Example and Instance data between framings, message types and\n"+
			"the Parquet, Avro and JSON-lines batch files. Conversions that would drop data fail.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	inputs = append(inputs, fs.Args()...)
	if len(inputs) == 0 || *output == "" || *to == "" {
		return fmt.Errorf("%w: convert needs --input, --output and --to", errUsage)
	}
	opts, err := in.options()
	if err != nil {
		return err
	}
	files, err := expand(ctx, inputs)
	if err != nil {
		return err
	}
	var typ batch.Source
	if *outType != "same" {
		if typ, err = batch.ParseSource(*outType); err != nil {
			return fmt.Errorf("%w: --out-type: %v", errUsage, err)
		}
	}
	codec, err := compress.ParseCodec(*outCodec)
	if err != nil {
		return fmt.Errorf("%w: --out-codec: %v", errUsage, err)
	}
	ro := recordio.Options{Codec: codec, PB: pbstream.Options{HasSortID: *outSortID, LagrangeX: *outLagrangeX,
		KafkaDump: *outKafkaDump, KafkaDumpPrefix: *outKafkaPrefix}}
	var snk sink
	switch strings.ToLower(*to) {
	case "tfrecord", "pbstream":
		ro.Framing = recordio.PBStream
		if strings.EqualFold(*to, "tfrecord") {
			ro.Framing = recordio.TFRecord
		}
		if snk, err = newProtoSink(*output, ro, typ); err != nil {
			return err
		}
	case "parquet", "avro", "jsonl":
		if *outType != "same" {
			return fmt.Errorf("%w: --out-type applies to tfrecord and pbstream output; %s keeps the batches as they are", errUsage, *to)
		}
		if snk, err = newBatchFileSink(ctx, strings.ToLower(*to), *output, files, opts); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: --to %q (want tfrecord, pbstream, parquet, avro or jsonl)", errUsage, *to)
	}
	r, err := dataset.Open(files, opts)
	if err != nil {
		snk.abort()
		return err
	}
	defer r.Close()
	prog, err := startProgress(ctx, in.progress, stderr, r.Stats)
	if err != nil {
		snk.abort()
		return err
	}
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil {
			err = snk.write(rec)
			rec.Release()
		}
		if err != nil {
			prog.finish()
			snk.abort()
			return err
		}
	}
	prog.finish()
	if err := snk.close(); err != nil {
		return err
	}
	st := r.Stats()
	logger(stderr, in.verbose).Info("converted", "files", st.Files, "records", st.Records, "rows", st.Rows, "output", *output)
	return nil
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// protoSink writes messages into a framed file.
type protoSink struct {
	w   *recordio.Writer
	typ batch.Source // 0: the type of each batch's source
	lx  bool
}

func newProtoSink(path string, o recordio.Options, typ batch.Source) (*protoSink, error) {
	w, err := recordio.Create(path, o)
	if err != nil {
		return nil, err
	}
	return &protoSink{w: w, typ: typ, lx: o.Framing == recordio.PBStream && o.PB.LagrangeX}, nil
}

func (s *protoSink) write(rec arrow.RecordBatch) error {
	typ := s.typ
	if typ == 0 {
		var err error
		if typ, err = batch.SourceOf(rec.Schema()); err != nil {
			return err
		}
	}
	var msgs []proto.Message
	var keys []uint32
	switch typ {
	case batch.SourceExampleBatch:
		eb, err := batch.ToExampleBatch(rec)
		if err != nil {
			return err
		}
		msgs, keys = append(msgs, eb), append(keys, eb.GetDataSourceKey())
	case batch.SourceExample:
		exs, err := batch.ToExamples(rec)
		if err != nil {
			return err
		}
		for _, ex := range exs {
			msgs, keys = append(msgs, ex), append(keys, ex.GetDataSourceKey())
		}
	case batch.SourceInstance:
		ins, err := batch.ToInstances(rec)
		if err != nil {
			return err
		}
		for _, in := range ins {
			msgs, keys = append(msgs, in), append(keys, in.GetDataSourceKey())
		}
	}
	// LagrangeX headers carry pb_type 0 for Instances and 1 otherwise (io.md §1.2.2).
	var pbType uint8
	if typ != batch.SourceInstance {
		pbType = 1
	}
	opts := proto.MarshalOptions{Deterministic: true}
	var buf []byte
	for i, m := range msgs {
		var err error
		if buf, err = opts.MarshalAppend(buf[:0], m); err != nil {
			return fmt.Errorf("convert: marshal: %w", err)
		}
		r := recordio.Record{Payload: buf}
		if s.lx {
			r.DataSourceKey, r.PBType = keys[i], pbType
		}
		if err := s.w.WriteRecord(r); err != nil {
			return err
		}
	}
	return nil
}

func (s *protoSink) close() error { return s.w.Close() }
func (s *protoSink) abort()       { _ = s.w.Abort() }

// batchWriter is the common shape of the batch file writers.
type batchWriter interface {
	Write(rec arrow.RecordBatch) error
	Close() error
}

// fileSink writes batches into a Parquet, Avro or JSON-lines file, created atomically
// (standard output for "-").
type fileSink struct {
	w    batchWriter
	enc  io.WriteCloser // outer compression of JSON lines, or nil
	file *atomicfile.File
}

func (s *fileSink) write(rec arrow.RecordBatch) error { return s.w.Write(rec) }

func (s *fileSink) close() error {
	err := s.w.Close()
	if s.enc != nil {
		if cerr := s.enc.Close(); err == nil {
			err = cerr
		}
	}
	if s.file == nil {
		return err
	}
	if err != nil {
		return errors.Join(err, s.file.Abort())
	}
	return s.file.Commit()
}

func (s *fileSink) abort() {
	if s.file != nil {
		_ = s.file.Abort()
	}
}

// newBatchFileSink opens a Parquet, Avro or JSON-lines writer. Parquet needs the schema
// of every batch up front, so the inputs are scanned once first (batches are discarded).
// JSON lines are compressed when the output name ends in a compression suffix.
func newBatchFileSink(ctx context.Context, format, path string, files []string, opts dataset.Options) (sink, error) {
	var fileSchema *arrow.Schema
	if format == "parquet" {
		if path == recordio.Stdout {
			return nil, fmt.Errorf("%w: Parquet cannot be written to standard output", errUsage)
		}
		var err error
		if fileSchema, err = scanSchemas(ctx, files, opts); err != nil {
			return nil, err
		}
	}
	s := &fileSink{}
	var out io.Writer = os.Stdout
	if path != recordio.Stdout {
		f, err := atomicfile.Create(path)
		if err != nil {
			return nil, fmt.Errorf("convert: %w", err)
		}
		s.file, out = f, f
	}
	var err error
	switch format {
	case "parquet":
		s.w, err = parquet.NewWriter(out, fileSchema, parquet.WithAllocator(opts.Mem))
	case "avro":
		s.w, err = avro.NewWriter(out)
	case "jsonl":
		if codec := compress.Detect(path); codec != compress.None {
			if s.enc, err = compress.NewWriter(out, codec); err != nil {
				break
			}
			out = s.enc
		}
		s.w, err = jsonl.NewWriter(out)
	}
	if err != nil {
		s.abort()
		return nil, fmt.Errorf("convert: %w", err)
	}
	return s, nil
}

// scanSchemas reads the inputs once and returns the Parquet file schema of their batches.
func scanSchemas(ctx context.Context, files []string, opts dataset.Options) (*arrow.Schema, error) {
	r, err := dataset.Open(files, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var schemas []*arrow.Schema
	seen := map[string]bool{}
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if key := rec.Schema().String(); !seen[key] {
			seen[key] = true
			schemas = append(schemas, rec.Schema())
		}
		rec.Release()
	}
	return parquet.FileSchema(schemas...)
}
