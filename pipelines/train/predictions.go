package train

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/io/fileops"
	"github.com/monolith-go/monolith/io/tfrecord"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
	"github.com/monolith-go/monolith/transforms/layout"
	"github.com/monolith-go/monolith/transforms/model"
)

func init() {
	register.DoFn2x1[context.Context, model.Scores, error](&dumpFn{})
	register.DoFn2x1[context.Context, model.Scores, error](&predictionsFn{})
}

// CounterPredictions counts the rows PredictPipeline wrote (namespace CounterNS).
const CounterPredictions = "predictions"

// PredictionFormats are the output formats of PredictPipeline: "jsonl" — one JSON object
// per row, {"line_id": the row's LineId in protobuf JSON, "prediction": p, "label": y} —
// and "tfrecord" — one monolith.Example per row in TFRecord framing, with the row's
// line_id and label and the float feature "prediction" (monolith inspect reads it).
var PredictionFormats = []string{"jsonl", "tfrecord"}

// PredictPipeline scores the rows of files with the model of j (whose PS holds a restored
// checkpoint) and writes them to out in format: the eval path's reading, ops, sharding,
// lookup (creating nothing), layout and model.Predict with line ids, gathered and written
// once. out is a location the user names, visible to the workers.
func PredictPipeline(j Job, files []string, out, format string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	s = s.Scope("predict")
	sharded := readAndShard(s, j, files)
	looked := Lookup(s, sharded, j, 0, false)
	laid := layout.Layout(s, looked, j.Kernels, layout.FromTrain{}, layout.Parallelism(j.Parallelism))
	scores := model.Predict(s, laid, j.ModelSpec(), j.Kernels, model.Parallelism(j.Parallelism), model.LineIDs())
	beam.ParDo0(s.Scope("train.WritePredictionRows"), &predictionsFn{Out: out, Format: format}, model.Gather(s, scores))
	return p
}

type predictionsFn struct{ Out, Format string }

func (f *predictionsFn) ProcessElement(ctx context.Context, sc model.Scores) error {
	enc, err := predictionEncoder(f.Format)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := enc(&buf, sc); err != nil {
		return fmt.Errorf("pipelines/train: predictions %s: %w", f.Out, err)
	}
	if err := atomicfile.WriteFile(f.Out, buf.Bytes()); err != nil {
		return fmt.Errorf("pipelines/train: predictions: %w", err)
	}
	beam.NewCounter(CounterNS, CounterPredictions).Inc(ctx, int64(len(sc.Preds)))
	return nil
}

// predictionEncoder returns the writer of a prediction format.
func predictionEncoder(format string) (func(w *bytes.Buffer, sc model.Scores) error, error) {
	switch format {
	case "jsonl", "":
		return writeJSONLines, nil
	case "tfrecord":
		return writeTFRecords, nil
	}
	return nil, fmt.Errorf("%w: prediction format %q (want %s)", ErrConfig, format, strings.Join(PredictionFormats, " or "))
}

// lineIDOf decodes row r's serialized LineId into id (reset first; empty when the rows
// carry none).
func lineIDOf(sc model.Scores, r int, id *matrixpb.LineId) error {
	proto.Reset(id)
	if r < len(sc.LineIDs) && len(sc.LineIDs[r]) > 0 {
		if err := proto.Unmarshal(sc.LineIDs[r], id); err != nil {
			return fmt.Errorf("row %d: line id: %w", r, err)
		}
	}
	return nil
}

func writeJSONLines(w *bytes.Buffer, sc model.Scores) error {
	id := &matrixpb.LineId{}
	for r, p := range sc.Preds {
		if err := lineIDOf(sc, r, id); err != nil {
			return err
		}
		js, err := protojson.Marshal(id)
		if err != nil {
			return err
		}
		w.WriteString(`{"line_id":`)
		w.Write(js)
		w.WriteString(`,"prediction":`)
		w.WriteString(strconv.FormatFloat(float64(p), 'g', -1, 32))
		if r < len(sc.Labels) {
			w.WriteString(`,"label":`)
			w.WriteString(strconv.FormatFloat(float64(sc.Labels[r]), 'g', -1, 32))
		}
		w.WriteString("}\n")
	}
	return nil
}

func writeTFRecords(w *bytes.Buffer, sc model.Scores) error {
	tw := tfrecord.NewWriter(w)
	// One Example, refilled per row: it is marshalled before the next row.
	pred := &examplepb.FloatList{Value: make([]float32, 1)}
	ex := &examplepb.Example{LineId: &matrixpb.LineId{}, NamedFeature: []*examplepb.NamedFeature{{Name: "prediction",
		Feature: &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: pred}}}}}
	label := make([]float32, 1)
	var b []byte
	for r, p := range sc.Preds {
		if err := lineIDOf(sc, r, ex.LineId); err != nil {
			return err
		}
		pred.Value[0], ex.Label = p, nil
		if r < len(sc.Labels) {
			label[0] = sc.Labels[r]
			ex.Label = label
		}
		var err error
		if b, err = (proto.MarshalOptions{}).MarshalAppend(b[:0], ex); err != nil {
			return err
		}
		if err := tw.Write(b); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// WritePredictions writes Monolith's plain-text prediction dump of the gathered scores
// (model.Evaluate's output) into dir/part-00000: one "prediction<TAB>label" line per row,
// appended through an io/fileops WritableFile that its close hook closes. dir is a
// location the user names, visible to the workers.
func WritePredictions(s beam.Scope, all beam.PCollection, dir string) {
	s = s.Scope("train.WritePredictions")
	beam.ParDo0(s, &dumpFn{Dir: dir}, all)
}

type dumpFn struct{ Dir string }

func (f *dumpFn) ProcessElement(_ context.Context, sc model.Scores) error {
	return dumpPredictions(f.Dir, sc.Preds, sc.Labels)
}

// dumpPredictions writes {dir}/part-00000 (Monolith's part-<worker:05d> of worker 0):
// "prediction\tlabel\n" per row, appended through a fileops.WritableFile that the close
// hook closes.
func dumpPredictions(dir string, preds, labels []float32) error {
	f, err := fileops.Open(filepath.Join(dir, "part-00000"))
	if err != nil {
		return fmt.Errorf("pipelines/train: prediction dump: %w", err)
	}
	hook := fileops.NewCloseHook(f)
	var line []byte
	for i, p := range preds {
		line = strconv.AppendFloat(line[:0], float64(p), 'g', -1, 32)
		line = append(line, '\t')
		line = strconv.AppendFloat(line, float64(labels[i]), 'g', -1, 32)
		line = append(line, '\n')
		if err := f.Append(line); err != nil {
			_ = hook.End()
			return fmt.Errorf("pipelines/train: prediction dump: %w", err)
		}
	}
	if err := hook.End(); err != nil {
		return fmt.Errorf("pipelines/train: prediction dump: %w", err)
	}
	return nil
}
