package train

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/transforms/collect"
)

func init() {
	register.DoFn4x1[context.Context, beam.EventTime, string, func(beam.EventTime, []byte), error](&trainFn{})
	register.DoFn4x1[context.Context, beam.EventTime, string, func(beam.EventTime, []byte), error](&evalFn{})
	register.Emitter2[beam.EventTime, []byte]()
	register.Function2x2(mergeStats)
	register.Function2x1(concatChunks)
	beam.RegisterType(reflect.TypeOf((*Job)(nil)).Elem())
}

// TrainPipeline builds one training epoch: the file names are reshuffled (only names, so
// a runner spreads whole files over workers), and one fused stage per file reads its
// batches and trains on them against the PS (no batch is ever shuffled). Each bundle's
// Stats are summed and written to statePath for the driver.
func TrainPipeline(j Job, epoch int, files []string, statePath string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	s = s.Scope("train")
	names := beam.Reshuffle(s, beam.CreateList(s, files))
	stats := beam.ParDo(s, &trainFn{Job: j, Epoch: epoch}, names)
	collect.WriteFile(s, beam.Combine(s, mergeStats, stats), statePath)
	return p
}

// EvalPipeline builds the evaluation of files: one fused stage per file computes the
// predictions (no fid is created, nothing is applied); each bundle's predictions and labels
// are concatenated and written to statePath (8 bytes per row).
func EvalPipeline(j Job, files []string, statePath string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	s = s.Scope("eval")
	names := beam.Reshuffle(s, beam.CreateList(s, files))
	chunks := beam.ParDo(s, &evalFn{Job: j}, names)
	collect.WriteFile(s, beam.Combine(s, concatChunks, chunks), statePath)
	return p
}

// trainFn trains on the files of a bundle and emits the bundle's Stats.
//
// Its Worker (PS connections, trainers) lives for one bundle: StartBundle opens it and
// FinishBundle closes it. Runners call Teardown only on a best-effort basis (the Go SDK
// harness never does when a LOOPBACK job ends), so a worker kept from Setup to Teardown
// would leak its gRPC connections with every epoch.
type trainFn struct {
	Job   Job
	Epoch int

	w       *Worker
	ts      beam.EventTime
	stopped bool
}

// StartBundle connects the bundle's worker and joins the training barrier: a bundle in
// progress is a worker the controller can pause (and lists in GetBlockStatus) until
// FinishBundle leaves. The worker counts into the Metrics of a run in this process (see
// Metrics).
func (f *trainFn) StartBundle(ctx context.Context, _ func(beam.EventTime, []byte)) error {
	w, err := NewWorker(&f.Job, os.Stderr, metricsFrom(ctx))
	if err != nil {
		return err
	}
	f.w = w
	return f.w.JoinBarrier(ctx)
}

func (f *trainFn) ProcessElement(ctx context.Context, ts beam.EventTime, file string, _ func(beam.EventTime, []byte)) error {
	f.ts = ts
	if f.stopped {
		return nil // max_steps reached: the remaining files are skipped
	}
	stopped, err := f.w.TrainFile(ctx, file, f.Epoch)
	f.stopped = stopped
	return err
}

// FinishBundle collects the applies in flight, leaves the barrier, closes the worker and
// emits the bundle's Stats.
func (f *trainFn) FinishBundle(_ context.Context, emit func(beam.EventTime, []byte)) error {
	st, err := f.w.Flush()
	err = errors.Join(err, f.w.Close())
	f.w = nil
	if err != nil {
		return err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	emit(f.ts, b)
	return nil
}

// Teardown closes a worker left by a failed bundle.
func (f *trainFn) Teardown() error {
	if f.w == nil {
		return nil
	}
	return f.w.Close()
}

// mergeStats adds two JSON-encoded Stats.
func mergeStats(a, b []byte) ([]byte, error) {
	var x, y Stats
	if err := json.Unmarshal(a, &x); err != nil {
		return nil, fmt.Errorf("pipelines/train: stats: %w", err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return nil, fmt.Errorf("pipelines/train: stats: %w", err)
	}
	x.Add(y)
	return json.Marshal(x)
}

// evalFn evaluates the files of a bundle and emits one chunk of predictions and labels.
// Its Worker lives for one bundle, as trainFn's.
type evalFn struct {
	Job Job

	w      *Worker
	ts     beam.EventTime
	preds  []float32
	labels []float32
}

func (f *evalFn) StartBundle(ctx context.Context, _ func(beam.EventTime, []byte)) error {
	j := f.Job
	j.Threads = 1
	w, err := NewWorker(&j, nil, metricsFrom(ctx))
	if err != nil {
		return err
	}
	f.w = w
	return nil
}

func (f *evalFn) ProcessElement(ctx context.Context, ts beam.EventTime, file string, _ func(beam.EventTime, []byte)) error {
	f.ts = ts
	var err error
	f.preds, f.labels, err = f.w.EvalFile(ctx, file, f.preds, f.labels)
	return err
}

func (f *evalFn) FinishBundle(_ context.Context, emit func(beam.EventTime, []byte)) error {
	err := f.w.Close()
	f.w = nil
	if err != nil {
		return err
	}
	if len(f.preds) == 0 {
		return nil
	}
	emit(f.ts, appendChunk(nil, f.preds, f.labels))
	f.preds, f.labels = f.preds[:0], f.labels[:0]
	return nil
}

// Teardown closes a worker left by a failed bundle.
func (f *evalFn) Teardown() error {
	if f.w == nil {
		return nil
	}
	return f.w.Close()
}

// A chunk is n (uint32), n predictions, n labels (float32, little endian). Chunks merge by
// concatenation.
func appendChunk(b []byte, preds, labels []float32) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(preds)))
	for _, v := range preds {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	for _, v := range labels {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func concatChunks(a, b []byte) []byte { return append(a[:len(a):len(a)], b...) }

// readChunks decodes concatenated chunks.
func readChunks(b []byte) (preds, labels []float32, err error) {
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, nil, fmt.Errorf("pipelines/train: eval result: %d trailing bytes", len(b))
		}
		n := int(binary.LittleEndian.Uint32(b))
		b = b[4:]
		if len(b) < 8*n {
			return nil, nil, fmt.Errorf("pipelines/train: eval result: chunk of %d rows has %d bytes", n, len(b))
		}
		for i := 0; i < n; i++ {
			preds = append(preds, math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
			labels = append(labels, math.Float32frombits(binary.LittleEndian.Uint32(b[4*(n+i):])))
		}
		b = b[8*n:]
	}
	return preds, labels, nil
}
