package stats_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/monolith-go/monolith/internal/batchtest"
	"github.com/monolith-go/monolith/internal/beamtest"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/transforms/element"
	"github.com/monolith-go/monolith/transforms/stats"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

func init() { register.Function1x1(render) }

// render prints a summary in a stable text form.
func render(s *stats.Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "batches %d rows %d\n", s.Batches, s.Rows)
	for _, n := range s.Names() {
		f := s.Features[n]
		fmt.Fprintf(&b, "%s rows %d fids %d with %d shared %v hist %v slots %v\n", n, f.Rows, f.Fids, f.RowsWithFids, f.Shared, f.Hist, f.Slots())
	}
	return b.String()
}

// naive counts, straight from the Sparse views, per feature: rows with fids and fids
// (a SHARED cell once per batch), and the rows of all batches.
func naive(t *testing.T, recs []arrow.RecordBatch) (rows int64, withFids, fids map[string]int64) {
	withFids, fids = map[string]int64{}, map[string]int64{}
	for _, r := range recs {
		rows += r.NumRows()
		for _, n := range batch.Features(r.Schema()) {
			sp, err := batch.SparseColumn(r, n)
			if err != nil {
				continue
			}
			for i := range sp.Rows {
				cell := sp.Row(i)
				if len(cell) > 0 {
					withFids[n]++
				}
				if !sp.Shared || i == 0 {
					fids[n] += int64(len(cell))
				}
			}
		}
	}
	return rows, withFids, fids
}

func TestStats(t *testing.T) {
	mem := memory.NewGoAllocator()
	fix := batchtest.FixtureRecord(t, mem)
	var slices []arrow.RecordBatch
	for lo := int64(0); lo < fix.NumRows(); lo += 3 {
		slices = append(slices, fix.NewSlice(lo, min(lo+3, fix.NumRows())))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	tests := []struct {
		name string
		recs []arrow.RecordBatch
	}{
		{"fixture", []arrow.RecordBatch{fix}},
		{"fixture slices", slices},
		{"mixed sources", batchtest.MixedBatches(t, mem, rng)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want stats.Summary
			for _, r := range tc.recs {
				if err := want.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			want.Finish()
			rows, withFids, fids := naive(t, tc.recs)
			if want.Rows != rows {
				t.Fatalf("rows %d, want %d", want.Rows, rows)
			}
			for n, f := range want.Features {
				if f.Rows != rows || f.RowsWithFids != withFids[n] || f.Fids != fids[n] {
					t.Errorf("%s: rows %d with fids %d fids %d, want %d %d %d", n, f.Rows, f.RowsWithFids, f.Fids, rows, withFids[n], fids[n])
				}
			}
			p, s := beam.NewPipelineWithRoot()
			col := beam.Reshuffle(s, element.Create(s, tc.recs...))
			passert.Equals(s, beam.ParDo(s, render, stats.Stats(s, col)), render(&want))
			if err := ptest.Run(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSummaryBinary(t *testing.T) {
	var s stats.Summary
	if err := s.Add(batchtest.FixtureRecord(t, memory.NewGoAllocator())); err != nil {
		t.Fatal(err)
	}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got stats.Summary
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if render(&got) != render(&s) {
		t.Fatalf("round trip:\n%s\nwant\n%s", render(&got), render(&s))
	}
	for cut := range len(b) {
		if err := got.UnmarshalBinary(b[:cut]); !errors.Is(err, stats.ErrCorrupt) {
			t.Fatalf("truncated at %d: err = %v, want ErrCorrupt", cut, err)
		}
	}
}

func FuzzUnmarshalSummary(f *testing.F) {
	var s stats.Summary
	if err := s.Add(batchtest.FixtureRecord(f, memory.NewGoAllocator())); err != nil {
		f.Fatal(err)
	}
	b, _ := s.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var s stats.Summary
		if err := s.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, stats.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		out, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var again stats.Summary
		if err := again.UnmarshalBinary(out); err != nil || render(&again) != render(&s) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	})
}
