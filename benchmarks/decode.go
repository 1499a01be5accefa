package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/schemas/batch"
)

// WriteDecodeInput writes to path a PB stream with sort ids (Monolith's file default) of
// records ExampleBatches of DefaultShape, as ExampleBatch records, or as the same rows in
// Example or Instance records (one per row), and returns the file's size.
func WriteDecodeInput(path string, typ batch.Source, records int) (int64, error) {
	w, err := recordio.Create(path, recordio.Options{PB: pbstream.Options{HasSortID: true}})
	if err != nil {
		return 0, err
	}
	mem := memory.NewGoAllocator()
	write := func(m proto.Message) error {
		p, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		return w.Write(p)
	}
	for i := range records {
		eb := SyntheticExampleBatch(uint64(i), DefaultShape)
		if typ == batch.SourceExampleBatch {
			if err := write(eb); err != nil {
				w.Close()
				return 0, err
			}
			continue
		}
		rec, err := batch.FromExampleBatch(mem, eb)
		if err != nil {
			w.Close()
			return 0, err
		}
		var msgs []proto.Message
		switch typ {
		case batch.SourceExample:
			exs, err := batch.ToExamples(rec)
			for _, ex := range exs {
				msgs = append(msgs, ex)
			}
			if err != nil {
				rec.Release()
				w.Close()
				return 0, err
			}
		case batch.SourceInstance:
			ins, err := batch.ToInstances(rec)
			for _, in := range ins {
				msgs = append(msgs, in)
			}
			if err != nil {
				rec.Release()
				w.Close()
				return 0, err
			}
		default:
			rec.Release()
			w.Close()
			return 0, fmt.Errorf("benchmarks: decode input of unknown type %v", typ)
		}
		rec.Release()
		for _, m := range msgs {
			if err := write(m); err != nil {
				w.Close()
				return 0, err
			}
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// DecodeFile decodes the file WriteDecodeInput wrote into Arrow batches of DefaultShape.Rows
// rows, releasing each, and returns the rows decoded.
func DecodeFile(ctx context.Context, path string, typ batch.Source) (int64, error) {
	o := dataset.Options{Type: typ, BatchRows: DefaultShape.Rows}
	o.Record.PB.HasSortID = true
	r, err := dataset.Open([]string{path}, o)
	if err != nil {
		return 0, err
	}
	var rows int64
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		rows += rec.NumRows()
		rec.Release()
	}
}
