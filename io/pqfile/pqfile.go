// Package pqfile opens Parquet files for the readers of this module (io/parquet,
// ps/export) the one way they both need: buffered column streams, a source that stays
// the caller's, and decoding on the caller's goroutine, where arrow-go's decoder panics on
// damaged input can be recovered.
package pqfile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// File is an open Parquet file.
type File struct {
	// Parquet is the file's reader: metadata, row groups.
	Parquet *file.Reader
	// Arrow decodes the file into Arrow records, BatchRows rows at a time, on the calling
	// goroutine (it is not Parallel).
	Arrow *pqarrow.FileReader
}

// Open reads the footer of the Parquet file r and returns the File, its buffers allocated
// from mem. A panic of the decoder becomes an error ("decoder panic: ..."); errors are
// arrow-go's, for the caller to wrap. Closing the File does not close r (file.Reader.Close would).
func Open(r parquet.ReaderAtSeeker, mem memory.Allocator, batchRows int64) (f *File, err error) {
	f = &File{}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decoder panic: %v", p)
		}
		if err != nil {
			f.Close()
			f = nil
		}
	}()
	if err := checkFooter(r); err != nil {
		return f, err
	}
	props := parquet.NewReaderProperties(mem)
	props.BufferedStreamEnabled = true
	if f.Parquet, err = file.NewParquetReader(noClose{r}, file.WithReadProps(props)); err != nil {
		return f, err
	}
	if f.Arrow, err = pqarrow.NewFileReader(f.Parquet, pqarrow.ArrowReadProperties{BatchSize: batchRows}, mem); err != nil {
		return f, err
	}
	return f, nil
}

// Close releases the file's reader; it does not close the source given to Open. Calling
// Close again, or on a nil File, returns nil.
func (f *File) Close() error {
	if f == nil || f.Parquet == nil {
		return nil
	}
	pf := f.Parquet
	f.Parquet, f.Arrow = nil, nil
	return pf.Close()
}

// noClose hides the Close method of a reader: file.Reader.Close closes its source when it
// can, but a reader's source belongs to the reader's caller.
type noClose struct{ parquet.ReaderAtSeeker }
