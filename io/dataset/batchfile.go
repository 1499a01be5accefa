package dataset

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/io/avro"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/jsonl"
	"github.com/monolith-go/monolith/io/parquet"
	"github.com/monolith-go/monolith/io/recordio"
)

// batchReader is the common shape of the batch file readers.
type batchReader interface {
	Read() (arrow.RecordBatch, error)
}

// batchFileSource yields the batches stored in a Parquet, Avro or JSON-lines file.
type batchFileSource struct {
	r      *Reader
	name   string
	br     batchReader
	closer []io.Closer
	index  int64
}

// openBatchFile opens a batch file written by monolith-go. Avro and JSON-lines files may
// be compressed as a whole (by file name); Parquet compresses inside the file.
func openBatchFile(name string, f Format, r *Reader) (source, error) {
	if name == recordio.Stdin && f == Parquet {
		return nil, fmt.Errorf("io/dataset: Parquet cannot be read from standard input")
	}
	s := &batchFileSource{r: r, name: name}
	var in io.Reader = os.Stdin
	if name != recordio.Stdin {
		file, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("io/dataset: %w", err)
		}
		s.closer = append(s.closer, file)
		in = file
		if f != Parquet {
			codec := r.o.Record.Codec
			if codec == compress.Auto {
				codec = compress.Detect(name)
			}
			dec, err := compress.NewReader(file, codec)
			if err != nil {
				_ = s.close()
				return nil, &Error{File: name, Record: -1, Offset: -1, Err: err}
			}
			s.closer = append(s.closer, dec)
			in = dec
		}
	}
	var err error
	switch f {
	case Parquet:
		var pr *parquet.Reader
		pr, err = parquet.NewReader(in.(*os.File), r.o.Mem)
		if err == nil {
			s.br = pr
			s.closer = append(s.closer, pr) // closed before the file
		}
	case Avro:
		s.br, err = avro.NewReader(in, r.o.Mem)
	case JSONL:
		s.br, err = jsonl.NewReader(in, r.o.Mem)
	}
	if err != nil {
		_ = s.close()
		return nil, &Error{File: name, Record: -1, Offset: -1, Err: err}
	}
	return s, nil
}

func (s *batchFileSource) nextChunk(ctx context.Context) (*Chunk, error) {
	rec, err := s.next(ctx)
	if err != nil {
		return nil, err
	}
	return &Chunk{file: s.name, rec: rec}, nil
}

func (s *batchFileSource) next(ctx context.Context) (arrow.RecordBatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec, err := s.br.Read()
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, &Error{File: s.name, Record: s.index, Offset: -1, Err: fmt.Errorf("batch %d: %w", s.index, err)}
	}
	s.index++
	s.r.stats.records.Add(1)
	return rec, nil
}

func (s *batchFileSource) close() error {
	var first error
	for i := len(s.closer) - 1; i >= 0; i-- {
		if err := s.closer[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	s.closer = nil
	return first
}
