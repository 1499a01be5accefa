package model_test

import (
	"context"
	"math"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	kmetrics "github.com/monolith-go/monolith/kernels/metrics"
	"github.com/monolith-go/monolith/runners"
	"github.com/monolith-go/monolith/runners/beamtest"
	"github.com/monolith-go/monolith/transforms/model"
)

func TestMain(m *testing.M) { beamtest.VerifyMain(m) }

// TestEvaluate: Evaluate gathers the scores of several batches and its metrics give the
// driver exactly the AUC and log loss of all rows.
func TestEvaluate(t *testing.T) {
	batches := []model.Scores{
		{Preds: []float32{0.9, 0.2, 0.6}, Labels: []float32{1, 0, 1}},
		{Preds: []float32{0.4, 0.4}, Labels: []float32{0, 1}},
		{Preds: []float32{0.1}, Labels: []float32{0}},
	}
	var all model.Scores
	for _, b := range batches {
		all.Preds = append(all.Preds, b.Preds...)
		all.Labels = append(all.Labels, b.Labels...)
	}
	wantAUC, err := kmetrics.AUC(all.Preds, all.Labels)
	if err != nil {
		t.Fatal(err)
	}
	wantLL, err := kmetrics.LogLoss(all.Preds, all.Labels)
	if err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	model.Evaluate(s, beam.CreateList(s, batches))
	res, err := runners.Run(context.Background(), p, runners.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := model.EvalResultOf(res.Metrics().AllMetrics())
	if !ok {
		t.Fatal("no eval result in the pipeline's metrics")
	}
	pos := 3.0 / 6
	wantConst := -(pos*math.Log(pos) + (1-pos)*math.Log(1-pos))
	if r.Examples != 6 || r.AUC != wantAUC || r.LogLoss != wantLL || math.Abs(r.ConstLogLoss-wantConst) > 1e-12 {
		t.Fatalf("result %+v, want 6 examples, AUC %v, log loss %v, constant %v", r, wantAUC, wantLL, wantConst)
	}
	if _, err := model.Result(model.Scores{}); err == nil {
		t.Fatal("an empty evaluation gave a result")
	}
}
