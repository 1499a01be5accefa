package train

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/shard"
)

// Coder calls on batch-carrying elements in this test binary: the coders of
// arrow.RecordBatch and *element.Sharded are wrapped to count them. The Go SDK also calls
// the encoder for its size samples of every PCollection (exec.PCollection), fused stages
// included; element's encoders answer those with zeros, so an encode counts only when it
// returns bytes that are not all zero. A decode happens only where a batch crosses from
// one stage or worker to another.
// A sample's answer is as long as the element's encoding within a factor of 1.5, or it
// counts in badSizes.
var encodes, samples, decodes, badSizes atomic.Int64

func count(b []byte, err error, encode func() ([]byte, error)) ([]byte, error) {
	if err != nil || len(b) == 0 || slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		encodes.Add(1)
		return b, err
	}
	samples.Add(1)
	if real, err := encode(); err != nil || 2*len(b) < len(real) || 2*len(b) > 3*len(real) {
		badSizes.Add(1)
	}
	return b, nil
}

func countEncodeRecord(r arrow.RecordBatch) ([]byte, error) {
	b, err := element.EncodeRecordElement(r)
	return count(b, err, func() ([]byte, error) { return element.EncodeRecord(r) })
}

func countDecodeRecord(b []byte) (arrow.RecordBatch, error) {
	decodes.Add(1)
	return element.DecodeRecord(b)
}

func countEncodeSharded(s *element.Sharded) ([]byte, error) {
	b, err := element.EncodeShardedElement(s)
	return count(b, err, func() ([]byte, error) { return element.EncodeSharded(s) })
}

func countDecodeSharded(b []byte) (*element.Sharded, error) {
	decodes.Add(1)
	return element.DecodeSharded(b)
}

func consume(*element.Sharded) {}

func init() {
	register.Function1x0(consume)
	// Repeated registrations override earlier ones (the SDK's coder registry).
	beam.RegisterCoder(reflect.TypeOf((*arrow.RecordBatch)(nil)).Elem(), countEncodeRecord, countDecodeRecord)
	beam.RegisterCoder(reflect.TypeOf((*element.Sharded)(nil)), countEncodeSharded, countDecodeSharded)
}

// TestStepsFuse: training and evaluation on prism never move a batch between stages:
// every step after the file names' shuffle runs in one fused stage and passes batches in
// memory: no batch is encoded or decoded (the SDK's size samples are answered without
// encoding). A pipeline that shuffles sharded batches encodes and decodes every one of
// them, so the counts can fail.
func TestStepsFuse(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 2000)
	c.Checkpoint.Dir = filepath.Join(dir, "model")
	before, encBefore, sampBefore := decodes.Load(), encodes.Load(), samples.Load()
	sum, err := Run(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps == 0 || sum.EvalExamples == 0 {
		t.Fatalf("trained %d steps, evaluated %d rows", sum.Steps, sum.EvalExamples)
	}
	if n := decodes.Load() - before; n != 0 {
		t.Fatalf("training and evaluation decoded %d batches; the fused stage should decode none", n)
	}
	if n := encodes.Load() - encBefore; n != 0 {
		t.Fatalf("training and evaluation encoded %d batches; the fused stage should encode none", n)
	}
	if samples.Load() == sampBefore {
		t.Fatal("no size sample reached the counting coders: they are not in use")
	}
	if n := badSizes.Load(); n != 0 {
		t.Errorf("%d size samples answered with a length off the encoding's by more than 1.5×", n)
	}
	t.Logf("%d size samples answered without encoding", samples.Load()-sampBefore)

	// The control: shuffling sharded batches decodes every one of them.
	pr, err := Prepare(c)
	if err != nil {
		t.Fatal(err)
	}
	files, err := beamio.Files(context.Background(), c.TrainInput)
	if err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	sharded := shard.Shard(s, beamio.ReadFiles(s, beam.CreateList(s, files), pr.Job.Read), pr.Job.Kernels)
	beam.ParDo0(s, consume, beam.Reshuffle(s, sharded))
	if _, err := runners.Run(context.Background(), p, runners.Options{}); err != nil {
		t.Fatal(err)
	}
	if n := decodes.Load(); n == 0 || encodes.Load() < n {
		t.Fatalf("a shuffle of sharded batches encoded %d and decoded %d: want every one, at least once", encodes.Load(), n)
	}
}
