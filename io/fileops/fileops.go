// Package fileops is Monolith's file_ops (io.md §5, seed 002): WritableFile appends raw
// bytes and entry-dump TFRecords (EntryDump{id, num: bias then embedding}, floats not
// packed, as the TF op writes them) to one file in call order, and CloseHook closes a set of
// files at the end of training. Departure: bad append_entry_dump shapes are errors naming
// the sizes instead of aborting the process.
package fileops

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/monolith-go/monolith/io/tfrecord"
)

// ErrClosed reports an append to a closed file.
var ErrClosed = errors.New("fileops: file closed")

// WritableFile is one file opened for writing with truncation; its methods are safe for
// concurrent use and keep the order of the calls.
type WritableFile struct {
	path string

	mu  sync.Mutex
	f   *os.File
	bw  *bufio.Writer
	tw  *tfrecord.Writer
	buf []byte
}

// Open creates the missing parent folders and opens path for writing, truncating it.
func Open(path string) (*WritableFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("fileops %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fileops %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	return &WritableFile{path: path, f: f, bw: bw, tw: tfrecord.NewWriter(bw)}, nil
}

// Path is the file's path.
func (w *WritableFile) Path() string { return w.path }

// Append writes content as it is (no framing).
func (w *WritableFile) Append(content []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return fmt.Errorf("fileops %s: append: %w", w.path, ErrClosed)
	}
	if _, err := w.bw.Write(content); err != nil {
		return fmt.Errorf("fileops %s: append: %w", w.path, err)
	}
	return nil
}

// AppendEntryDump writes one TFRecord per item: EntryDump{id: itemID[b], num: bias[b]
// then embedding[b·D … b·D+D−1]} with D = len(embedding)/len(itemID). itemID must not be
// empty, bias must hold at least one value per item, and len(itemID) must divide
// len(embedding).
func (w *WritableFile) AppendEntryDump(itemID []int64, bias, embedding []float32) error {
	n := len(itemID)
	if n == 0 || len(bias) < n || len(embedding)%n != 0 {
		return fmt.Errorf("fileops %s: append_entry_dump: %d item ids, %d biases, %d embedding values (need ids > 0, biases ≥ ids, ids dividing the embedding size)",
			w.path, n, len(bias), len(embedding))
	}
	d := len(embedding) / n
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return fmt.Errorf("fileops %s: append_entry_dump: %w", w.path, ErrClosed)
	}
	for b, id := range itemID {
		w.buf = AppendEntryDumpPayload(w.buf[:0], id, bias[b], embedding[b*d:(b+1)*d])
		if err := w.tw.Write(w.buf); err != nil {
			return fmt.Errorf("fileops %s: append_entry_dump item %d: %w", w.path, b, err)
		}
	}
	return nil
}

// AppendEntryDumpPayload appends the EntryDump wire bytes the TF op writes: id as field 1
// (sfixed64), then bias and each embedding value as field 2, one unpacked float each.
func AppendEntryDumpPayload(b []byte, id int64, bias float32, embedding []float32) []byte {
	b = protowire.AppendTag(b, 1, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(id))
	b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, math.Float32bits(bias))
	for _, v := range embedding {
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(v))
	}
	return b
}

// Close flushes and closes the file; closing twice is not an error.
func (w *WritableFile) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	ferr := w.bw.Flush()
	cerr := w.f.Close()
	w.f = nil
	if err := errors.Join(ferr, cerr); err != nil {
		return fmt.Errorf("fileops %s: close: %w", w.path, err)
	}
	return nil
}

// CloseHook is FileCloseHook: End closes every file, at the end of training.
type CloseHook struct{ files []*WritableFile }

// NewCloseHook returns the hook of files.
func NewCloseHook(files ...*WritableFile) *CloseHook { return &CloseHook{files: files} }

// End closes every file and returns their errors, joined.
func (h *CloseHook) End() error {
	var errs []error
	for _, f := range h.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
