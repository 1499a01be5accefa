package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/arrowpool"
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

// Decoder decodes files WriteDecodeInput wrote, one after another, into Arrow batches of
// DefaultShape.Rows rows, releasing each. Like a pipeline worker that reads file after
// file, it lends every file's Reader the chunk buffers and the Arrow memory (an
// internal/arrowpool) that the files before it gave back, so that a figure measured over
// several files is the decoder's steady state, not one file's warm-up.
type Decoder struct {
	bufs *dataset.Buffers
	mem  *arrowpool.Pool
}

// NewDecoder returns a Decoder with empty buffers.
func NewDecoder() *Decoder {
	return &Decoder{bufs: dataset.NewBuffers(), mem: arrowpool.New(0)}
}

// File decodes the file at path on this goroutine and returns the rows decoded.
func (d *Decoder) File(ctx context.Context, path string, typ batch.Source) (int64, error) {
	r, err := d.open(path, typ)
	if err != nil {
		return 0, err
	}
	defer r.Close()
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

// open opens a file WriteDecodeInput wrote.
func (d *Decoder) open(path string, typ batch.Source) (*dataset.Reader, error) {
	o := dataset.Options{Type: typ, BatchRows: DefaultShape.Rows, Mem: d.mem, Buffers: d.bufs}
	o.Record.PB.HasSortID = true
	return dataset.Open([]string{path}, o)
}

// FileParallel is File on workers goroutines: this goroutine frames the file into chunks
// of records (dataset.Reader.NextChunk) and the workers decode them into batches, as the
// pipelines' read step does.
func (d *Decoder) FileParallel(ctx context.Context, path string, typ batch.Source, workers int) (int64, error) {
	r, err := d.open(path, typ)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan *dataset.Chunk, workers)
	var (
		rows atomic.Int64
		wg   sync.WaitGroup
		once sync.Once
		werr error
	)
	for range max(1, workers) {
		wg.Go(func() {
			for c := range chunks {
				rec, err := c.Decode()
				if err != nil {
					once.Do(func() { werr = err })
					cancel()
					continue
				}
				rows.Add(rec.NumRows())
				rec.Release()
			}
		})
	}
	for {
		c, err := r.NextChunk(ctx)
		if err != nil {
			close(chunks)
			wg.Wait()
			if werr != nil {
				return rows.Load(), werr
			}
			if errors.Is(err, io.EOF) {
				return rows.Load(), nil
			}
			return rows.Load(), err
		}
		select {
		case chunks <- c:
		case <-ctx.Done():
		}
	}
}
