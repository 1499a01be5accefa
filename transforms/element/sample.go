package element

import (
	"runtime"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

const (
	execPkg       = "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/exec."
	sizeSampler   = execPkg + "(*PCollection).ProcessElement"
	maxSampleWalk = 16 // frames looked at above the encoder
)

// sizeSample reports whether the registered encoder calling it (skip frames above this
// function) runs for one of the SDK's size samples.
func sizeSample(skip int) bool {
	var pcs [maxSampleWalk]uintptr
	n := runtime.Callers(skip+2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if name, ok := strings.CutPrefix(f.Function, execPkg); ok && !strings.HasSuffix(name, ").Encode") {
			return f.Function == sizeSampler
		}
		if !more {
			return false
		}
	}
}

// sampleZeros backs the answers to size samples. It is never written: the SDK only counts
// the bytes (or, with data sampling, copies them). Its pages are never touched, so it costs
// address space, not memory.
var sampleZeros [sampleMax]byte

// sampleMax caps the size reported for one element (16 MiB, far above a batch's).
const sampleMax = 16 << 20

// sampleAnswer is what an encoder returns for a size sample: n zero bytes, n being the
// element's estimated encoded size (at most sampleMax), without allocating them — a
// fresh buffer per sample was a third of the extra allocation of a pipeline over the
// plain loop.
func sampleAnswer(n int) []byte {
	n = min(max(n, 1), sampleMax)
	return sampleZeros[:n:n]
}

// recordBytes estimates the encoded size of rec: the lengths of its buffers, its
// children's and its dictionaries', plus 8 bytes of metadata per column.
func recordBytes(rec arrow.RecordBatch) int {
	if rec == nil {
		return 0
	}
	n := 0
	for _, c := range rec.Columns() {
		n += 8 + dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int {
	if d == nil {
		return 0
	}
	n := 0
	for _, b := range d.Buffers() {
		if b != nil {
			n += b.Len()
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		n += dataBytes(d.Dictionary())
	}
	return n
}

// shardedBytes estimates the encoded size of s.
func shardedBytes(s *Sharded) int {
	if s == nil {
		return 0
	}
	n := recordBytes(s.Batch) + recordBytes(s.Tensors)
	if r := s.Shard; r != nil {
		n += 8*(len(r.Fids)+len(r.FidOffset)+len(r.RowSplits)) +
			4*(len(r.FeatureOffset)+len(r.NflOffset)+len(r.EmbSize)+len(r.TableRowLength)+len(r.ShardRowLength)+len(r.EmbRowLength)+len(r.Counts))
	}
	if t := s.Train; t != nil {
		n += len(t.ID) + 4*(len(t.Preds)+len(t.Labels))
		for _, ls := range [][][]float32{t.Emb, t.Params, t.ParamGrads} {
			for _, l := range ls {
				n += 4 * len(l)
			}
		}
		for i := range t.Grads {
			n += gradsBytes(&t.Grads[i])
		}
	}
	return n
}

// gradsBytes estimates the encoded size of g.
func gradsBytes(g *TableGrads) int {
	return len(g.Table) + 8*len(g.Fids) + 4*(len(g.Offsets)+len(g.Grads)+len(g.Counts))
}

// EncodeRecordElement is the encoder registered for arrow.RecordBatch: EncodeRecord,
// but for the SDK's size samples (see the package doc).
func EncodeRecordElement(rec arrow.RecordBatch) ([]byte, error) {
	if rec != nil && sizeSample(1) {
		return sampleAnswer(recordBytes(rec)), nil
	}
	return EncodeRecord(rec)
}

// EncodeShardedElement is the encoder registered for *Sharded: EncodeSharded, but for
// the SDK's size samples.
func EncodeShardedElement(s *Sharded) ([]byte, error) {
	if s != nil && sizeSample(1) {
		return sampleAnswer(shardedBytes(s)), nil
	}
	return EncodeSharded(s)
}

// EncodeTableGradsElement is the encoder registered for TableGrads: EncodeTableGrads, but
// for the SDK's size samples.
func EncodeTableGradsElement(g TableGrads) ([]byte, error) {
	if sizeSample(1) {
		return sampleAnswer(gradsBytes(&g)), nil
	}
	return EncodeTableGrads(g)
}
