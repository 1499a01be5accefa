package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/parquet"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/io/sink"
	"github.com/monolith-go/monolith/schemas/batch"
)

// runConvert converts training data between framings, message types and batch files
// (io/sink writes the output).
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
	format, err := sink.ParseFormat(*to)
	if err != nil {
		return fmt.Errorf("%w: --to: %v", errUsage, err)
	}
	so := sink.Options{Format: format, Type: typ, Mem: opts.Mem,
		Record: recordio.Options{Codec: codec, PB: pbstream.Options{HasSortID: *outSortID, LagrangeX: *outLagrangeX,
			KafkaDump: *outKafkaDump, KafkaDumpPrefix: *outKafkaPrefix}}}
	switch {
	case typ != 0 && format != sink.TFRecord && format != sink.PBStream:
		return fmt.Errorf("%w: --out-type applies to tfrecord and pbstream output; %s keeps the batches as they are", errUsage, format)
	case format == sink.Parquet && *output == recordio.Stdout:
		return fmt.Errorf("%w: Parquet cannot be written to standard output", errUsage)
	}
	if format == sink.Parquet {
		// Parquet needs the schema of every batch up front: scan the inputs once first.
		if so.FileSchema, err = scanSchemas(ctx, files, opts); err != nil {
			return err
		}
	}
	snk, err := sink.Create(*output, so)
	if err != nil {
		return err
	}
	r, err := dataset.Open(files, opts)
	if err != nil {
		_ = snk.Abort()
		return err
	}
	defer r.Close()
	prog, err := startProgress(ctx, in.progress, stderr, r.Stats)
	if err != nil {
		_ = snk.Abort()
		return err
	}
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil {
			err = snk.Write(rec)
			rec.Release()
		}
		if err != nil {
			prog.finish()
			_ = snk.Abort()
			return err
		}
	}
	prog.finish()
	if err := snk.Close(); err != nil {
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
