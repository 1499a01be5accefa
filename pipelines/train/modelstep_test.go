package train

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/monolith-go/monolith/ps/client"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/transforms/beamio"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/layout"
	"github.com/monolith-go/monolith/transforms/model"
	"github.com/monolith-go/monolith/transforms/shard"
)

func init() {
	register.Function1x2(trainDigest)
}

// trainDigest is one ForwardBackward output as text: the batch's id and rows, and hashes
// of the bits of its loss, predictions, labels, layout gradients and parameter gradients.
func trainDigest(e *element.Sharded) (string, error) {
	if e.Train == nil || e.Tensors == nil {
		return "", fmt.Errorf("element of %d rows without its training state", e.Rows())
	}
	h := fnv.New64a()
	var b [4]byte
	add := func(fs []float32) {
		for _, f := range fs {
			u := math.Float32bits(f)
			b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			h.Write(b[:])
		}
	}
	add(e.Train.Preds)
	add(e.Train.Labels)
	ts, err := element.Tensors(e.Tensors)
	if err != nil {
		return "", err
	}
	for _, t := range ts {
		add(t.Data)
	}
	for _, g := range e.Train.ParamGrads {
		add(g)
	}
	return fmt.Sprintf("%s rows=%d loss=%016x digest=%016x", e.Train.ID, e.Train.Rows, math.Float64bits(e.Train.Loss), h.Sum64()), nil
}

// TestModelStepWorkersSameOutputs: TrainPipeline runs the model step on j.Parallelism
// goroutines, so a batch's loss, predictions and gradients must not depend on how many
// workers the step has or which of them ran it. One pipeline looks every batch up once
// and hands it to DeepFM's ForwardBackward on 1 and on 3 workers; the two branches must
// give the same outputs, bit for bit.
func TestModelStepWorkersSameOutputs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := plantedData(t, dir, 3000)
	c.Model, c.Hidden = "deepfm", []int{16, 8}
	pr, ps := localPS(t, c, 2)
	j := pr.Job
	j.PS, j.RunID, j.Parallelism = ps.Addrs(), "test", 2
	files, err := beamio.Files(ctx, c.TrainInput)
	if err != nil {
		t.Fatal(err)
	}
	// The Lookup DoFn uses this client, as in Run, and does not dial its own.
	cl, err := client.New(ps.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx = withRun(ctx, &runHandle{ps: cl})
	p, s := beam.NewPipelineWithRoot()
	sharded := shard.Shard(s, beamio.ReadFiles(s, beam.CreateList(s, files), j.Read), j.Kernels)
	laid := layout.Layout(s, Lookup(s, sharded, j, 0, true), j.Kernels, layout.FromTrain{})
	one := beam.ParDo(s, trainDigest, model.ForwardBackward(s, laid, j.ModelSpec(), j.Kernels, model.Parallelism(1)))
	three := beam.ParDo(s, trainDigest, model.ForwardBackward(s, laid, j.ModelSpec(), j.Kernels, model.Parallelism(3)))
	// 2 files of 1500 rows in ExampleBatch records of 128: 2 × 12 batches, more than the
	// workers hold in flight.
	passert.Count(s, one, "batches on 1 worker", 24)
	passert.Equals(s, one, three)
	if _, err := runners.Run(ctx, p, runners.Options{}); err != nil {
		t.Fatal(err)
	}
}
