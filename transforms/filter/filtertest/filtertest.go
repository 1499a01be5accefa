// Package filtertest holds the test helpers shared by transforms/filter and
// transforms/label: generated batches, batch summaries, and the checks both run on their
// Runner, DoFn and Config. Tests only.
package filtertest

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/matrixpb"
)

func init() {
	register.Function1x2[arrow.RecordBatch, string, error](Summarize)
}

// Mem is the allocator of the helpers and tests.
var Mem = memory.NewGoAllocator()

// GenFids are the generated fids: feature "f" holds a subset of these.
var GenFids = []uint64{1<<48 | 11, 2<<48 | 22, 3<<48 | 33}

// GenExamples returns n Examples of batch id: uid = id*1000+row, random req_time, chnid,
// actions, pre_actions, special_strategies and labels; features "f" (fid_v2), "i" (one
// int64, sometimes absent) and "b" (bytes). One row in 16 has no LineId.
func GenExamples(rng *rand.Rand, id, n int) []*examplepb.Example {
	out := make([]*examplepb.Example, n)
	ints := func(k, hi int) []int32 {
		var v []int32
		for range rng.IntN(k + 1) {
			v = append(v, int32(rng.IntN(hi)+1))
		}
		return v
	}
	for r := range out {
		e := &examplepb.Example{}
		if rng.IntN(16) != 0 {
			e.LineId = &matrixpb.LineId{
				Uid:               proto.Uint64(uint64(id*1000 + r)),
				ReqTime:           proto.Int64(rng.Int64N(100)),
				Chnid:             proto.Int64(rng.Int64N(4)),
				Actions:           ints(3, 5),
				PreActions:        ints(2, 5),
				SpecialStrategies: ints(2, 3),
			}
			if rng.IntN(4) == 0 {
				e.LineId.SampleRate = proto.Float32(0.5)
			}
		}
		switch rng.IntN(6) {
		case 0:
		case 1:
			e.Label = []float32{float32(rng.IntN(3)), float32(rng.IntN(2))}
		case 2:
			e.Label = []float32{2.5}
		default:
			e.Label = []float32{float32(rng.IntN(2))}
		}
		var fids []uint64
		for _, f := range GenFids {
			if rng.IntN(2) == 0 {
				fids = append(fids, f)
			}
		}
		e.NamedFeature = append(e.NamedFeature, &examplepb.NamedFeature{Name: "f",
			Feature: &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: fids}}}})
		if rng.IntN(4) != 0 {
			e.NamedFeature = append(e.NamedFeature, &examplepb.NamedFeature{Name: "i",
				Feature: &examplepb.Feature{Type: &examplepb.Feature_Int64List{Int64List: &examplepb.Int64List{Value: []int64{rng.Int64N(10)}}}}})
		}
		e.NamedFeature = append(e.NamedFeature, &examplepb.NamedFeature{Name: "b",
			Feature: &examplepb.Feature{Type: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{[]byte("x" + strconv.Itoa(r%3))}}}}})
		out[r] = e
	}
	return out
}

// Batch is a batch with the Examples it holds.
type Batch struct {
	Exs []*examplepb.Example
	Rec arrow.RecordBatch
}

// MakeBatches returns generated batches of the given sizes; odd batches carry only the
// LineId bytes (no decoded columns), so the kernel decodes them itself.
func MakeBatches(t testing.TB, seed uint64, sizes ...int) []Batch {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []Batch
	for id, n := range sizes {
		exs := GenExamples(rng, id, n)
		var opts []batch.Option
		if id%2 == 1 {
			opts = append(opts, batch.WithoutLineIDFields())
		}
		rec, err := batch.FromExamples(Mem, exs, opts...)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Batch{Exs: exs, Rec: rec})
	}
	return out
}

// FixtureBatch returns the golden ExampleBatch as a batch with its rows as Examples.
func FixtureBatch(t testing.TB) Batch {
	t.Helper()
	rec := batchtest.FixtureRecord(t, Mem)
	exs, err := batch.ToExamples(rec)
	if err != nil {
		t.Fatal(err)
	}
	return Batch{Exs: exs, Rec: rec}
}

// Records returns the batches' records.
func Records(bs []Batch) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for _, b := range bs {
		out = append(out, b.Rec)
	}
	return out
}

// BatchFromExamples returns the batch of exs, with decoded LineId columns.
func BatchFromExamples(exs []*examplepb.Example) (arrow.RecordBatch, error) {
	return batch.FromExamples(Mem, exs)
}

// Summarize renders a batch as its row count and, per row, its LineId (re-marshalled
// deterministically, "-" when absent) and labels. It is registered for Beam.
func Summarize(rec arrow.RecordBatch) (string, error) {
	rows, err := batch.Rows(rec)
	if err != nil {
		return "", err
	}
	var lids [][]byte
	var labels [][]float32
	for _, r := range rows[:rec.NumRows()] {
		lids = append(lids, r.LineID)
		labels = append(labels, r.Label)
	}
	return render(lids, labels)
}

// SummarizeExamples renders Examples as Summarize renders the batch holding them.
func SummarizeExamples(exs []*examplepb.Example) string {
	var lids [][]byte
	var labels [][]float32
	for _, e := range exs {
		var b []byte
		if e.LineId != nil {
			var err error
			if b, err = proto.Marshal(e.LineId); err != nil {
				panic(err)
			}
		}
		lids = append(lids, b)
		labels = append(labels, e.Label)
	}
	s, err := render(lids, labels)
	if err != nil {
		panic(err)
	}
	return s
}

func render(lids [][]byte, labels [][]float32) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows", len(lids))
	for i, l := range lids {
		id := "-"
		if l != nil {
			var m matrixpb.LineId
			if err := proto.Unmarshal(l, &m); err != nil {
				return "", err
			}
			d, err := proto.MarshalOptions{Deterministic: true}.Marshal(&m)
			if err != nil {
				return "", err
			}
			id = hex.EncodeToString(d)
		}
		fmt.Fprintf(&b, "\n%s %v", id, labels[i])
	}
	return b.String(), nil
}

// MustSummarize is Summarize, failing t on error.
func MustSummarize(t testing.TB, rec arrow.RecordBatch) string {
	t.Helper()
	s, err := Summarize(rec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Anys returns s as a []any, for passert.
func Anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Sorted returns a sorted copy of s.
func Sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// NonEmpty returns a copy of s without its empty strings.
func NonEmpty(s []string) []string {
	return slices.DeleteFunc(slices.Clone(s), func(v string) bool { return v == "" })
}

// LineID returns e's LineId, the default message when absent (as the kernel reads it).
func LineID(e *examplepb.Example) *matrixpb.LineId {
	if e.LineId == nil {
		return &matrixpb.LineId{}
	}
	return e.LineId
}
