package train

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/io/fileops"
	"github.com/monolith-go/monolith/transforms/model"
)

func init() {
	register.DoFn2x1[context.Context, model.Scores, error](&dumpFn{})
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
