package dataset

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/internal/arrowpool"
	"github.com/monolith-go/monolith/io/compress"
	"github.com/monolith-go/monolith/io/pbstream"
	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/io/recordio"
	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/io/treedump"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/parserpb"
	"github.com/monolith-go/monolith/schemas/wirecheck"
)

// Format is the on-disk form of an input file.
type Format int

// Formats. Auto decides per file (see the package documentation).
const (
	Auto Format = iota
	PBStream
	TFRecord
	Text     // protobuf text format, one message per file
	JSON     // protobuf JSON, one message per file
	TreeDump // the flattened tree dump of one Instance
	Parquet  // batch file (io/parquet)
	Avro     // batch file (io/avro)
	JSONL    // batch file (io/jsonl)
)

var formatNames = [...]string{Auto: "auto", PBStream: "pbstream", TFRecord: "tfrecord", Text: "pbtxt",
	JSON: "json", TreeDump: "dump", Parquet: "parquet", Avro: "avro", JSONL: "jsonl"}

func (f Format) String() string {
	if f >= 0 && int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat parses a format name as printed by Format.String ("pb" and "text" are
// accepted too).
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "pb", "pb_stream":
		return PBStream, nil
	case "text", "textproto":
		return Text, nil
	}
	for f, n := range formatNames {
		if n == strings.ToLower(s) {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("io/dataset: unknown format %q (want one of %s)", s, strings.Join(formatNames[:], ", "))
}

// FormatOf returns the format implied by a file name (Auto when the name does not say;
// then the framing is sniffed from the content).
func FormatOf(name string) Format {
	base := strings.ToLower(name)
	if compress.Detect(base) != compress.None {
		base = strings.TrimSuffix(base, filepath.Ext(base))
	}
	switch filepath.Ext(base) {
	case ".pbtxt", ".pbtext", ".textproto", ".txtpb", ".prototxt", ".txt":
		return Text
	case ".json":
		return JSON
	case ".dump":
		return TreeDump
	case ".parquet":
		return Parquet
	case ".avro":
		return Avro
	case ".jsonl", ".ndjson":
		return JSONL
	case ".tfrecord", ".tfrecords":
		return TFRecord
	}
	return Auto
}

// DSKPolicy says where a record's data_source_key comes from.
type DSKPolicy int

// Policies (see the package documentation).
const (
	DSKAuto    DSKPolicy = iota // the LagrangeX header's key when the stream has headers, else the message's
	DSKHeader                   // always the header's key, 0 without LagrangeX (Monolith's FilePBDataset)
	DSKMessage                  // always the message's own key
)

// Options configures a Reader. The zero value reads every format with automatic detection.
type Options struct {
	// Type is the message type of framed and text files; 0 sniffs it.
	Type batch.Source
	// Format of every input; Auto decides per file.
	Format Format
	// Record configures framed files: codec, PB-stream header options, AllowTruncatedTail,
	// buffer and record size limits. Its Framing is set per file. Codec None is taken as
	// Auto: a file is decompressed when its name ends in a compression suffix.
	Record recordio.Options
	// BatchRows is the number of Example or Instance rows per batch (default 1024).
	BatchRows int
	// DataSourceKey selects the data_source_key policy.
	DataSourceKey DSKPolicy
	// Mem allocates the batches. The default is a pool of the Reader's own
	// (internal/arrowpool): batches the caller releases hand their buffers to the next
	// ones. A caller that never releases batches should pass memory.DefaultAllocator.
	Mem memory.Allocator
	// Batch options passed to the batch builders.
	Batch []batch.Option
	// Buffers lends framing the buffers of earlier chunks and files (see Buffers). nil
	// gives the Reader its own; a caller that opens file after file (one Reader per file)
	// passes one Buffers to all of them, so that no file starts with new buffers.
	Buffers *Buffers
}

// DefaultBatchRows is the default number of Example or Instance rows per batch.
const DefaultBatchRows = 1024

// Stats counts what a Reader has produced so far. Safe to read concurrently.
type Stats struct {
	Files   int64 // files opened
	Records int64 // records decoded (messages, or stored batches of batch files)
	Rows    int64 // rows in the batches returned
	Bytes   int64 // payload bytes decoded (decompressed)
}

// Error reports a record that could not be decoded into a batch.
type Error struct {
	File   string
	Record int64 // 0-based record index in the file, -1 when not applicable
	Offset int64 // byte offset of the record in the decompressed stream, -1 when unknown
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("io/dataset: ")
	b.WriteString(e.File)
	if e.Record >= 0 {
		fmt.Fprintf(&b, ": record %d", e.Record)
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " at offset %d", e.Offset)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrAmbiguousType reports a file whose message type could not be sniffed.
var ErrAmbiguousType = errors.New("io/dataset: cannot tell the message type; set it explicitly (examplebatch, example or instance)")

// source yields the batches of one file, as chunks.
type source interface {
	nextChunk(ctx context.Context) (*Chunk, error)
	close() error
}

// Reader yields the batches of a list of files, file after file.
type Reader struct {
	files []string
	o     Options
	cur   source
	idx   int
	stats struct{ files, records, rows, bytes atomic.Int64 }
	bufs  *Buffers // chunk buffers returned by Decode (Options.Buffers or the Reader's own)
}

// Buffers keeps the payload buffers and record lists of decoded chunks for the next
// chunks, so that framing does not allocate (and grow, and leave to the collector) them
// per batch, and the record readers' buffers of closed files for the next files. It holds
// at most maxFreeBufs of each, and maxFreeBytes of buffers. Chunk.Decode returns them from
// any goroutine; Readers that share one (Options.Buffers) serve a file's first chunks from
// the files read before it. Safe for concurrent use.
type Buffers struct {
	mu       sync.Mutex
	bufs     [][]byte
	recs     [][]chunkRecord
	payloads [][]byte // the record readers' payload buffers of closed files
	readers  []*bufio.Reader
	held     int // bytes of bufs and payloads
}

// NewBuffers returns an empty Buffers.
func NewBuffers() *Buffers { return &Buffers{} }

// maxFreeBufs and maxFreeBytes bound what a Buffers keeps.
const (
	maxFreeBufs  = 16
	maxFreeBytes = 64 << 20
)

// maxChunkHint and maxChunkRecs bound what a new chunk's buffer and record list are made
// with before its records are read.
const (
	maxChunkHint = 16 << 20
	maxChunkRecs = 1 << 16
)

// get returns an empty buffer and record list, with the capacity of earlier chunks' when
// any came back.
func (p *Buffers) get() ([]byte, []chunkRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var r []chunkRecord
	if n := len(p.recs); n > 0 {
		r, p.recs[n-1], p.recs = p.recs[n-1][:0], nil, p.recs[:n-1]
	}
	return p.takeBytes(&p.bufs), r
}

func (p *Buffers) put(b []byte, r []chunkRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keepBytes(&p.bufs, b)
	if cap(r) > 0 && len(p.recs) < maxFreeBufs {
		p.recs = append(p.recs, r)
	}
}

// getPayload returns a record reader's buffer of an earlier file, or nil.
func (p *Buffers) getPayload() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeBytes(&p.payloads)
}

// putPayload keeps a closed file's record reader buffer.
func (p *Buffers) putPayload(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keepBytes(&p.payloads, b)
}

// takeBytes removes the last buffer of l and returns it empty, or nil; p.mu is held.
func (p *Buffers) takeBytes(l *[][]byte) []byte {
	n := len(*l)
	if n == 0 {
		return nil
	}
	b := (*l)[n-1]
	(*l)[n-1], *l = nil, (*l)[:n-1]
	p.held -= cap(b)
	return b[:0]
}

// keepBytes adds b to l unless that would pass maxFreeBufs or maxFreeBytes; p.mu is held.
func (p *Buffers) keepBytes(l *[][]byte, b []byte) {
	if cap(b) > 0 && len(*l) < maxFreeBufs && p.held+cap(b) <= maxFreeBytes {
		*l = append(*l, b[:0])
		p.held += cap(b)
	}
}

// getReader returns a buffered reader of src with a buffer of size bytes, one of a closed
// file when one of that size came back.
func (p *Buffers) getReader(src io.Reader, size int) *bufio.Reader {
	p.mu.Lock()
	for i := len(p.readers) - 1; i >= 0; i-- {
		if br := p.readers[i]; br.Size() == size {
			p.readers = slices.Delete(p.readers, i, i+1)
			p.mu.Unlock()
			br.Reset(src)
			return br
		}
	}
	p.mu.Unlock()
	return bufio.NewReaderSize(src, size)
}

// putReader keeps a closed file's buffered reader.
func (p *Buffers) putReader(br *bufio.Reader) {
	br.Reset(nil) // drop the closed file
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.readers) < maxFreeBufs {
		p.readers = append(p.readers, br)
	}
}

// Open returns a Reader of the given files (already expanded; see io/filepattern). "-"
// reads standard input as a framed stream. Files are opened lazily, one at a time.
func Open(files []string, o Options) (*Reader, error) {
	if o.BatchRows <= 0 {
		o.BatchRows = DefaultBatchRows
	}
	if o.Mem == nil {
		o.Mem = arrowpool.New(0)
	}
	if o.Record.Codec == compress.None {
		o.Record.Codec = compress.Auto
	}
	if len(files) == 0 {
		return nil, errors.New("io/dataset: no input files")
	}
	bufs := o.Buffers
	if bufs == nil {
		bufs = NewBuffers()
	}
	return &Reader{files: files, o: o, bufs: bufs}, nil
}

// Stats returns the counters so far.
func (r *Reader) Stats() Stats {
	return Stats{Files: r.stats.files.Load(), Records: r.stats.records.Load(), Rows: r.stats.rows.Load(), Bytes: r.stats.bytes.Load()}
}

// Next returns the next batch, which the caller must Release, or io.EOF after the last
// file. After an error the Reader is done.
func (r *Reader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	c, err := r.NextChunk(ctx)
	if err != nil {
		return nil, err
	}
	return c.Decode()
}

// NextChunk returns the next batch undecoded, or io.EOF after the last file: reading,
// decompressing and framing happen here, decoding in Chunk.Decode, which may run on
// another goroutine, so that a reader can decode chunks in parallel (beamio does). After
// an error the Reader is done.
func (r *Reader) NextChunk(ctx context.Context) (*Chunk, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if r.cur == nil {
			if r.idx >= len(r.files) {
				return nil, io.EOF
			}
			src, err := r.openSource(r.files[r.idx])
			r.idx++
			if err != nil {
				r.idx = len(r.files)
				return nil, err
			}
			r.stats.files.Add(1)
			r.cur = src
		}
		c, err := r.cur.nextChunk(ctx)
		if err == io.EOF {
			cerr := r.cur.close()
			r.cur = nil
			if cerr != nil {
				return nil, cerr
			}
			continue
		}
		if err != nil {
			_ = r.cur.close()
			r.cur, r.idx = nil, len(r.files)
			return nil, err
		}
		c.r = r
		return c, nil
	}
}

// Chunk is one batch before decoding: the records of a framed file that make one batch
// (an ExampleBatch record, or up to BatchRows Example or Instance records), copied out of
// the reader's buffers, or a batch that its format decoded already. Decode is safe to
// call concurrently with the Reader and with other chunks' Decode.
type Chunk struct {
	r         *Reader
	file      string
	typ       batch.Source
	buf       []byte // the payloads, back to back
	recs      []chunkRecord
	overwrite bool              // the records' header keys replace the messages' data_source_key
	rec       arrow.RecordBatch // already decoded (batch and text files)
}

// chunkRecord locates one record of a chunk.
type chunkRecord struct {
	end           int // end of its payload in buf
	index, offset int64
	dsk           uint32
}

// Decode returns the chunk's batch, which the caller must Release. Errors name the file,
// the record and its offset.
func (c *Chunk) Decode() (arrow.RecordBatch, error) {
	rec, err := c.decode()
	if c.r != nil && c.recs != nil { // the batch holds copies of the payloads: reuse the buffers
		c.r.bufs.put(c.buf, c.recs)
		c.buf, c.recs = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if c.r != nil {
		c.r.stats.rows.Add(rec.NumRows())
	}
	return rec, nil
}

func (c *Chunk) decode() (arrow.RecordBatch, error) {
	if c.rec != nil {
		rec := c.rec
		c.rec = nil
		return rec, nil
	}
	if len(c.recs) == 0 {
		return nil, fmt.Errorf("io/dataset: %s: empty chunk (decoded twice?)", c.file)
	}
	o := &c.r.o
	fail := func(i int, err error) error {
		return &Error{File: c.file, Record: c.recs[i].index, Offset: c.recs[i].offset, Err: err}
	}
	start := 0
	switch c.typ {
	case batch.SourceExampleBatch:
		bo := o.Batch
		if c.overwrite {
			bo = append(bo[:len(bo):len(bo)], batch.WithDataSourceKey(c.recs[0].dsk))
		}
		out, err := batch.DecodeExampleBatch(o.Mem, c.buf[:c.recs[0].end], bo...)
		if err != nil {
			return nil, fail(0, err)
		}
		return out, nil
	case batch.SourceExample, batch.SourceInstance:
		records := make([][]byte, len(c.recs))
		var keys []uint32
		if c.overwrite {
			keys = make([]uint32, len(c.recs))
		}
		for i, cr := range c.recs {
			records[i], start = c.buf[start:cr.end], cr.end
			if keys != nil {
				keys[i] = cr.dsk
			}
		}
		decode := batch.DecodeExamples
		if c.typ == batch.SourceInstance {
			decode = batch.DecodeInstances
		}
		rec, err := decode(o.Mem, records, keys, o.Batch...)
		var re *batch.RecordError
		switch {
		case errors.As(err, &re):
			return nil, fail(re.Record, re.Err)
		case err != nil:
			return nil, &Error{File: c.file, Record: c.recs[0].index, Offset: -1, Err: fmt.Errorf("records %d and on: %w", c.recs[0].index, err)}
		}
		return rec, nil
	}
	return nil, fmt.Errorf("io/dataset: invalid message type %v", c.typ)
}

// Close releases the current file.
func (r *Reader) Close() error {
	r.idx = len(r.files)
	if r.cur != nil {
		err := r.cur.close()
		r.cur = nil
		return err
	}
	return nil
}

func (r *Reader) openSource(name string) (source, error) {
	f := r.o.Format
	if f == Auto && name != recordio.Stdin {
		f = FormatOf(name)
	}
	switch f {
	case Text, JSON, TreeDump:
		return r.openText(name, f)
	case Parquet, Avro, JSONL:
		return openBatchFile(name, f, r)
	}
	return r.openFramed(name, f)
}

// openFramed opens a PB-stream or TFRecord file, sniffing the framing when f is Auto.
func (r *Reader) openFramed(name string, f Format) (source, error) {
	ro := r.o.Record
	codec := ro.Codec
	var in io.Reader
	var file *os.File
	if name == recordio.Stdin {
		if codec != compress.Auto && codec != compress.None {
			return nil, fmt.Errorf("io/dataset: standard input is never decompressed (codec %v requested)", codec)
		}
		in, codec = os.Stdin, compress.None
	} else {
		var err error
		if file, err = os.Open(name); err != nil {
			return nil, fmt.Errorf("io/dataset: %w", err)
		}
		in = file
		if codec == compress.Auto {
			codec = compress.Detect(name)
		}
	}
	fail := func(err error) (source, error) {
		if file != nil {
			file.Close()
		}
		return nil, err
	}
	dec, err := compress.NewReader(in, codec)
	if err != nil {
		return fail(&Error{File: name, Record: -1, Offset: -1, Err: err})
	}
	// One buffer as large as the framing's: the record reader reads through br itself
	// (bufio.NewReaderSize returns a reader that is large enough).
	size := ro.BufferSize
	if size <= 0 {
		size = max(pbstream.DefaultBufferSize, tfrecord.DefaultBufferSize)
	}
	br := r.bufs.getReader(dec, size)
	if f == Auto {
		f = PBStream
		if head, _ := br.Peek(12); len(head) == 12 && tfrecord.MaskedCRC(head[:8]) == binary.LittleEndian.Uint32(head[8:]) {
			f = TFRecord
		}
	}
	ro.Framing, ro.Codec = recordio.PBStream, compress.None
	if f == TFRecord {
		ro.Framing = recordio.TFRecord
	}
	ro.BufferSize = size
	rr, err := recordio.NewReader(br, name, ro)
	if err != nil {
		r.bufs.putReader(br)
		dec.Close()
		return fail(err)
	}
	rr.SetPayloadBuffer(r.bufs.getPayload())
	return &framedSource{r: r, name: name, rr: rr, br: br, file: file, dec: dec, typ: r.o.Type,
		lagrangeX: f == PBStream && ro.PB.LagrangeX}, nil
}

// framedSource decodes the records of one framed file.
type framedSource struct {
	r         *Reader
	name      string
	rr        *recordio.Reader
	br        *bufio.Reader // rr reads through it; nil once close handed it on
	file      *os.File
	dec       io.ReadCloser
	typ       batch.Source
	lagrangeX bool
	done      bool
}

func (s *framedSource) close() error {
	err := s.rr.Close()
	if cerr := s.dec.Close(); err == nil {
		err = cerr
	}
	if s.file != nil {
		if cerr := s.file.Close(); err == nil {
			err = cerr
		}
	}
	if s.br != nil { // hand the buffers on once, after the readers are done with them
		s.r.bufs.putPayload(s.rr.PayloadBuffer())
		s.r.bufs.putReader(s.br)
		s.br = nil
	}
	return err
}

func (s *framedSource) fail(rec recordio.Record, err error) error {
	return &Error{File: s.name, Record: rec.Index, Offset: rec.Offset, Err: err}
}

// overwriteDSK reports whether the header key replaces the message's key.
func (s *framedSource) overwriteDSK() bool {
	switch s.r.o.DataSourceKey {
	case DSKHeader:
		return true
	case DSKMessage:
		return false
	}
	return s.lagrangeX
}

func (s *framedSource) nextChunk(ctx context.Context) (*Chunk, error) {
	o := &s.r.o
	c := &Chunk{file: s.name, overwrite: s.overwriteDSK()}
	for !s.done {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := s.rr.Next()
		if err == io.EOF {
			s.done = true
			break
		}
		if err != nil {
			return nil, err // a *recordio.CorruptError naming file, offset and record
		}
		s.r.stats.records.Add(1)
		s.r.stats.bytes.Add(int64(len(rec.Payload)))
		if s.typ == 0 {
			if len(rec.Payload) == 0 {
				return nil, s.fail(rec, fmt.Errorf("%w: the first record is empty", ErrAmbiguousType))
			}
			if s.typ, err = sniff(rec.Payload); err != nil {
				return nil, s.fail(rec, err)
			}
		}
		if s.typ != batch.SourceExampleBatch && s.typ != batch.SourceExample && s.typ != batch.SourceInstance {
			return nil, fmt.Errorf("io/dataset: invalid message type %v", s.typ)
		}
		c.typ = s.typ
		if len(c.recs) == 0 {
			c.buf, c.recs = s.r.bufs.get()
			if c.recs == nil { // none came back yet: size both for a chunk of records like this one
				per := 1
				if s.typ != batch.SourceExampleBatch {
					per = o.BatchRows
				}
				hint := maxChunkHint // records vary: half again the first one's share, bounded
				if n := len(rec.Payload); per <= maxChunkHint/max(n, 1) {
					hint = min(n*per*3/2, maxChunkHint)
				}
				c.buf = make([]byte, 0, hint)
				c.recs = make([]chunkRecord, 0, min(per, maxChunkRecs))
			}
		}
		c.buf = append(c.buf, rec.Payload...) // the reader reuses its buffer
		c.recs = append(c.recs, chunkRecord{end: len(c.buf), index: rec.Index, offset: rec.Offset, dsk: rec.DataSourceKey})
		if s.typ == batch.SourceExampleBatch || len(c.recs) >= o.BatchRows {
			return c, nil
		}
	}
	if len(c.recs) > 0 {
		return c, nil
	}
	return nil, io.EOF
}

// sniff picks the message type that decodes a payload without unknown fields (LineIds
// exempt: production LineIds carry many fields our schema lacks, I3). It reads the wire
// (schemas/wirecheck) instead of unmarshalling the payload three times.
func sniff(payload []byte) (batch.Source, error) {
	var found []batch.Source
	for _, c := range []struct {
		src batch.Source
		md  protoreflect.MessageDescriptor
	}{
		{batch.SourceExampleBatch, (*examplepb.ExampleBatch)(nil).ProtoReflect().Descriptor()},
		{batch.SourceExample, (*examplepb.Example)(nil).ProtoReflect().Descriptor()},
		{batch.SourceInstance, (*parserpb.Instance)(nil).ProtoReflect().Descriptor()},
	} {
		if wirecheck.Known(payload, c.md, isLineID) {
			found = append(found, c.src)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%w (candidates: %v)", ErrAmbiguousType, found)
	}
	return found[0], nil
}

// isLineID reports whether n is the LineId message.
func isLineID(n protoreflect.FullName) bool { return n == "idl.matrix.proto.LineId" }

// openText reads a one-message text file.
func (r *Reader) openText(name string, f Format) (source, error) {
	b, err := readAll(name)
	if err != nil {
		return nil, err
	}
	r.stats.bytes.Add(int64(len(b)))
	fail := func(err error) (source, error) { return nil, &Error{File: name, Record: 0, Offset: -1, Err: err} }
	typ := r.o.Type
	var msg proto.Message
	if f == TreeDump {
		if typ != 0 && typ != batch.SourceInstance {
			return fail(fmt.Errorf("a tree dump holds an Instance, not %v", typ))
		}
		in := &parserpb.Instance{}
		if err := treedump.Unmarshal(name, b, in); err != nil {
			return fail(err)
		}
		typ, msg = batch.SourceInstance, in
	} else {
		pf := pbtext.Text
		if f == JSON {
			pf = pbtext.JSON
		}
		cands := []batch.Source{batch.SourceExampleBatch, batch.SourceInstance, batch.SourceExample}
		if typ != 0 {
			cands = []batch.Source{typ}
		}
		var firstErr error
		for _, c := range cands {
			m := newMessage(c)
			if err := pbtext.Unmarshal(name, b, pf, m); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			typ, msg = c, m
			break
		}
		if msg == nil {
			if len(cands) > 1 {
				return fail(fmt.Errorf("%w: not a valid ExampleBatch, Instance or Example: %v", ErrAmbiguousType, firstErr))
			}
			return fail(firstErr)
		}
	}
	r.stats.records.Add(1)
	var rec arrow.RecordBatch
	switch m := msg.(type) {
	case *examplepb.ExampleBatch:
		rec, err = batch.FromExampleBatch(r.o.Mem, m, r.o.Batch...)
	case *examplepb.Example:
		rec, err = batch.FromExamples(r.o.Mem, []*examplepb.Example{m}, r.o.Batch...)
	case *parserpb.Instance:
		rec, err = batch.FromInstances(r.o.Mem, []*parserpb.Instance{m}, r.o.Batch...)
	}
	if err != nil {
		return fail(err)
	}
	return &onceSource{rec: rec}, nil
}

func newMessage(s batch.Source) proto.Message {
	switch s {
	case batch.SourceExampleBatch:
		return &examplepb.ExampleBatch{}
	case batch.SourceExample:
		return &examplepb.Example{}
	}
	return &parserpb.Instance{}
}

func readAll(name string) ([]byte, error) {
	var in io.Reader = os.Stdin
	if name != recordio.Stdin {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("io/dataset: %w", err)
		}
		defer f.Close()
		dec, err := compress.NewReader(f, compress.Detect(name))
		if err != nil {
			return nil, &Error{File: name, Record: -1, Offset: -1, Err: err}
		}
		defer dec.Close()
		in = dec
	}
	b, err := io.ReadAll(in)
	if err != nil {
		return nil, &Error{File: name, Record: -1, Offset: -1, Err: err}
	}
	return b, nil
}

// onceSource yields one prepared batch.
type onceSource struct{ rec arrow.RecordBatch }

func (s *onceSource) nextChunk(context.Context) (*Chunk, error) {
	rec, err := s.next()
	if err != nil {
		return nil, err
	}
	return &Chunk{rec: rec}, nil
}

func (s *onceSource) next() (arrow.RecordBatch, error) {
	if s.rec == nil {
		return nil, io.EOF
	}
	rec := s.rec
	s.rec = nil
	return rec, nil
}

func (s *onceSource) close() error {
	if s.rec != nil {
		s.rec.Release()
		s.rec = nil
	}
	return nil
}
