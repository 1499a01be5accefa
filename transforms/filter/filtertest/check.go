package filtertest

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"google.golang.org/protobuf/proto"

	kfilter "github.com/monolith-go/monolith/kernels/filter"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/transforms/element"
)

// Apply transforms one batch, as Runner.Filter, Runner.Apply or a kernel op do: the
// result is nil, or a batch the caller releases.
type Apply func(arrow.RecordBatch) (arrow.RecordBatch, error)

// Summaries applies apply to every batch of recs and returns the summaries of the
// non-empty results, failing t on error.
func Summaries(t testing.TB, recs []arrow.RecordBatch, apply Apply) []string {
	t.Helper()
	var out []string
	for _, rec := range recs {
		res, err := apply(rec)
		if err != nil {
			t.Fatal(err)
		}
		if res == nil {
			continue
		}
		if res.NumRows() > 0 {
			out = append(out, MustSummarize(t, res))
		}
		res.Release()
	}
	return out
}

// ExampleSummaries maps every Example of every batch through fn (which returns the
// output rows for one input row, built on a clone) and returns the summaries of the
// non-empty batches: an expectation computed without the kernel.
func ExampleSummaries(bs []Batch, fn func(*examplepb.Example) []*examplepb.Example) []string {
	var out []string
	for _, b := range bs {
		var rows []*examplepb.Example
		for _, e := range b.Exs {
			rows = append(rows, fn(proto.Clone(e).(*examplepb.Example))...)
		}
		if len(rows) > 0 {
			out = append(out, SummarizeExamples(rows))
		}
	}
	return out
}

// CheckExpectation fails t unless the kernel's summaries and the test's independent
// expectation hold the same batches.
func CheckExpectation(t testing.TB, kernel, indep []string) {
	t.Helper()
	if !slices.Equal(Sorted(indep), Sorted(kernel)) {
		t.Fatalf("the kernel disagrees with the test's expectation:\nkernel %q\nwant   %q", kernel, indep)
	}
}

// ExpectSummaries asserts that the batches of col summarize to want, in any order.
func ExpectSummaries(s beam.Scope, col beam.PCollection, want []string) {
	got := beam.ParDo(s, Summarize, col)
	if len(want) == 0 {
		passert.Empty(s, got)
	} else {
		passert.Equals(s, got, Anys(want)...)
	}
}

// RunPipeline builds a pipeline with build, given its root scope and a PCollection of
// recs, and runs it on prism.
func RunPipeline(t testing.TB, recs []arrow.RecordBatch, build func(s beam.Scope, col beam.PCollection)) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	build(s, element.Create(s, recs...))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// RunAll applies apply to the batches in the given order and returns the summaries of
// the results by input index ("" for a dropped batch).
func RunAll(t testing.TB, apply Apply, recs []arrow.RecordBatch, order []int) []string {
	t.Helper()
	out := make([]string, len(recs))
	for _, i := range order {
		res, err := apply(recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if res != nil {
			out[i] = MustSummarize(t, res)
			res.Release()
		}
	}
	return out
}

// orders returns the indexes 0..n-1 forward and in reverse.
func orders(n int) (forward, reverse []int) {
	forward, reverse = make([]int, n), make([]int, n)
	for i := range n {
		forward[i], reverse[i] = i, n-1-i
	}
	return forward, reverse
}

// CheckReproducible pins the determinism rule of a random op: one Runner (newRunner
// returns its Filter or Apply) gives every batch of recs the result a fresh Runner gives
// it, whatever the order of the batches; and so does the transform on prism, with the
// batches in another order and grouping (two PCollections, flattened and reshuffled).
func CheckReproducible(t *testing.T, recs []arrow.RecordBatch, newRunner func(*testing.T) Apply,
	transform func(s beam.Scope, col beam.PCollection) beam.PCollection) {
	t.Helper()
	n := len(recs)
	forward, reverse := orders(n)
	shuffled := slices.Clone(forward)
	rand.New(rand.NewPCG(9, 9)).Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	// Reference: a fresh Runner per batch.
	ref := make([]string, n)
	for i := range n {
		ref[i] = RunAll(t, newRunner(t), recs, []int{i})[i]
	}
	apply := newRunner(t)
	for oname, order := range map[string][]int{"forward": forward, "reverse": reverse, "shuffled": shuffled, "forward again": forward} {
		if got := RunAll(t, apply, recs, order); !slices.Equal(got, ref) {
			t.Errorf("%s order: results differ from one batch at a time", oname)
		}
	}
	p, s := beam.NewPipelineWithRoot()
	var a, b []arrow.RecordBatch
	for _, i := range reverse {
		if i%3 == 0 {
			a = append(a, recs[i])
		} else {
			b = append(b, recs[i])
		}
	}
	col := beam.Reshuffle(s, beam.Flatten(s, element.Create(s, b...), element.Create(s, a...)))
	ExpectSummaries(s, transform(s, col), NonEmpty(ref))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// CheckReusedOpDependsOnOrder shows what CheckReproducible guards against: one kernel op
// (newOp returns a fresh one) reused over recs gives other results in reverse order.
func CheckReusedOpDependsOnOrder(t *testing.T, recs []arrow.RecordBatch, newOp func(*testing.T) Apply) {
	t.Helper()
	forward, reverse := orders(len(recs))
	if slices.Equal(RunAll(t, newOp(t), recs, forward), RunAll(t, newOp(t), recs, reverse)) {
		t.Fatal("a reused kernel op gave the same results in both orders; the reproducibility test would not detect a naive adapter")
	}
}

// CheckConfigRejected checks a bad Config: construct, which adds the transform with it
// to a pipeline, panics with an error that wraps kfilter.ErrConfig and mentions every
// string of want; and initRunner, Runner.Init with it, fails.
func CheckConfigRejected(t *testing.T, want []string, construct func(s beam.Scope, col beam.PCollection), initRunner func() error) {
	t.Helper()
	msg := func() (msg string) {
		defer func() {
			r := recover()
			if r == nil {
				t.Fatal("no panic")
			}
			err, ok := r.(error)
			if !ok {
				t.Fatalf("panic with %T %v, want an error", r, r)
			}
			if !errors.Is(err, kfilter.ErrConfig) {
				t.Errorf("%v does not wrap kfilter.ErrConfig", err)
			}
			msg = err.Error()
		}()
		_, s := beam.NewPipelineWithRoot()
		construct(s, beam.Create(s, 1))
		return ""
	}()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("panic %q does not mention %q", msg, w)
		}
	}
	if err := initRunner(); err == nil {
		t.Error("Runner.Init accepted the config")
	}
}

// CheckDefaultSeedLog runs initRunner (Runner.Init, returning the runner's op) and checks
// that it logged the use of the default seed, naming the op, iff logged.
func CheckDefaultSeedLog(t *testing.T, logged bool, initRunner func() (op string, err error)) {
	t.Helper()
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	op, err := initRunner()
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if got := strings.Contains(out, "default seed") && strings.Contains(out, "0x5eed") && strings.Contains(out, op); got != logged {
		t.Errorf("%s: log %q, want logged=%v", op, out, logged)
	}
}

// CheckRowError fails t unless err is a *kfilter.RowError whose message contains want
// (such as "op: batch of 3 rows").
func CheckRowError(t testing.TB, err error, want string) {
	t.Helper()
	var rowErr *kfilter.RowError
	if !errors.As(err, &rowErr) || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v", err)
	}
}
