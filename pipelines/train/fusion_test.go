package train

import (
	"context"
	"path/filepath"
	"reflect"
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
// arrow.RecordBatch and *element.Sharded are wrapped to count them. The Go SDK encodes a
// sample of every PCollection's elements to estimate their size (exec.PCollection), so
// encodes happen in fused stages too; a decode happens only where a batch crosses from
// one stage or worker to another.
var encodes, decodes atomic.Int64

func countEncodeRecord(r arrow.RecordBatch) ([]byte, error) {
	encodes.Add(1)
	return element.EncodeRecord(r)
}

func countDecodeRecord(b []byte) (arrow.RecordBatch, error) {
	decodes.Add(1)
	return element.DecodeRecord(b)
}

func countEncodeSharded(s *element.Sharded) ([]byte, error) {
	encodes.Add(1)
	return element.EncodeSharded(s)
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
// memory (no batch is decoded; the only encodes are the SDK's size samples). A pipeline
// that shuffles sharded batches decodes every one of them, so the count can fail.
func TestStepsFuse(t *testing.T) {
	dir := t.TempDir()
	c := plantedData(t, dir, 2000)
	c.Checkpoint.Dir = filepath.Join(dir, "model")
	before := decodes.Load()
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
	t.Logf("%d batches encoded for the SDK's size samples", encodes.Load())

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
	if n := decodes.Load(); n == 0 {
		t.Fatal("a shuffle of sharded batches decoded none: the counting coder is not in use")
	}
}
