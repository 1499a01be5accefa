package model

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	kmetrics "github.com/monolith-go/monolith/kernels/metrics"
)

func init() {
	register.Function2x1(mergeScores)
	register.DoFn2x1[context.Context, Scores, error](&evaluateFn{})
}

// Namespace is the Beam metrics namespace of Evaluate's results.
const Namespace = "monolith.eval"

// Names of Evaluate's Beam gauges. A gauge holds an int64: the float figures are stored as
// their IEEE-754 bits (math.Float64bits), so that the driver reads them exactly.
const (
	GaugeExamples         = "examples"
	GaugeAUCBits          = "auc_bits"
	GaugeLogLossBits      = "logloss_bits"
	GaugeConstLogLossBits = "constant_logloss_bits"
)

// EvalResult is what Evaluate reports.
type EvalResult struct {
	Examples int64
	AUC      float64 // ties count half
	LogLoss  float64
	// ConstLogLoss is the log loss of the best constant predictor (the base rate).
	ConstLogLoss float64
}

// Evaluate gathers the Scores of col and reports their EvalResult as Beam metrics
// (EvalResultOf reads them from the pipeline's result). It also returns the gathered
// Scores (one element: every row), for a sink that writes predictions. A run without
// rows fails.
func Evaluate(s beam.Scope, col beam.PCollection) beam.PCollection {
	s = s.Scope("model.Evaluate")
	all := Gather(s, col)
	beam.ParDo0(s, &evaluateFn{}, all)
	return all
}

// Gather concatenates the Scores of col into one element (every row; the order of the
// batches is the runner's).
func Gather(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.Combine(s.Scope("model.Gather"), mergeScores, col)
}

// mergeScores concatenates two Scores.
func mergeScores(a, b Scores) Scores {
	out := Scores{Preds: append(a.Preds[:len(a.Preds):len(a.Preds)], b.Preds...),
		Labels: append(a.Labels[:len(a.Labels):len(a.Labels)], b.Labels...)}
	if a.LineIDs != nil || b.LineIDs != nil {
		out.LineIDs = append(a.LineIDs[:len(a.LineIDs):len(a.LineIDs)], b.LineIDs...)
	}
	return out
}

type evaluateFn struct{}

func (evaluateFn) ProcessElement(ctx context.Context, all Scores) error {
	r, err := Result(all)
	if err != nil {
		return err
	}
	beam.NewGauge(Namespace, GaugeExamples).Set(ctx, r.Examples)
	beam.NewGauge(Namespace, GaugeAUCBits).Set(ctx, int64(math.Float64bits(r.AUC)))
	beam.NewGauge(Namespace, GaugeLogLossBits).Set(ctx, int64(math.Float64bits(r.LogLoss)))
	beam.NewGauge(Namespace, GaugeConstLogLossBits).Set(ctx, int64(math.Float64bits(r.ConstLogLoss)))
	return nil
}

// Result computes the EvalResult of some scores.
func Result(sc Scores) (EvalResult, error) {
	if len(sc.Preds) == 0 {
		return EvalResult{}, fmt.Errorf("model.Evaluate: no rows to evaluate")
	}
	auc, err := kmetrics.AUC(sc.Preds, sc.Labels)
	if err != nil {
		return EvalResult{}, fmt.Errorf("model.Evaluate: AUC: %w", err)
	}
	ll, err := kmetrics.LogLoss(sc.Preds, sc.Labels)
	if err != nil {
		return EvalResult{}, fmt.Errorf("model.Evaluate: log loss: %w", err)
	}
	var pos float64
	for _, y := range sc.Labels {
		if y > 0 {
			pos++
		}
	}
	p := pos / float64(len(sc.Labels))
	cl := 0.0
	if p > 0 && p < 1 {
		cl = -(p*math.Log(p) + (1-p)*math.Log(1-p))
	}
	return EvalResult{Examples: int64(len(sc.Preds)), AUC: auc, LogLoss: ll, ConstLogLoss: cl}, nil
}

// EvalResultOf reads Evaluate's result from the metrics of a finished pipeline (ok is false
// when the pipeline reported none).
func EvalResultOf(res metrics.QueryResults) (r EvalResult, ok bool) {
	got := map[string]int64{}
	for _, g := range res.Gauges() {
		if g.Key.Namespace == Namespace {
			got[g.Key.Name] = g.Result().Value
		}
	}
	if len(got) < 4 {
		return r, false
	}
	r.Examples = got[GaugeExamples]
	r.AUC = math.Float64frombits(uint64(got[GaugeAUCBits]))
	r.LogLoss = math.Float64frombits(uint64(got[GaugeLogLossBits]))
	r.ConstLogLoss = math.Float64frombits(uint64(got[GaugeConstLogLossBits]))
	return r, true
}
