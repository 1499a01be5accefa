// Package stats is the Beam transform that summarises a data set's sparse features: per
// feature, rows, fids, coverage, the slots seen and a fids-per-row histogram
// (kernels/featstats), combined over the whole input into one Summary.
//
// # Behavior
//
// Every batch of the schemas/batch layout is added column by column: a fid column adds
// its rows (a SHARED column counts its fids once per batch), any other feature column and
// any feature absent from a batch counts rows without fids, so that coverage is measured
// against every row of the input. Combining is associative and commutative (counters add,
// slot sets union), so the result does not depend on bundling; only small per-bundle
// summaries are shuffled, never batches.
package stats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/monolith-go/monolith/kernels/featstats"
	"github.com/monolith-go/monolith/schemas/batch"
	_ "github.com/monolith-go/monolith/transforms/element" // the arrow.RecordBatch coder
)

func init() {
	beam.RegisterCoder(reflect.TypeOf((*Summary)(nil)), encodeSummary, decodeSummary)
	register.Combiner2[*Summary, arrow.RecordBatch](&combineFn{})
}

// ErrCorrupt is wrapped by every Summary decoding error.
var ErrCorrupt = errors.New("transforms/stats: corrupt summary")

// Summary is the statistics of a data set. The zero value is empty.
type Summary struct {
	Batches  int64
	Rows     int64
	Features map[string]*featstats.Feature
}

// Add accumulates one batch. A batch outside the schemas/batch layout is an error.
func (s *Summary) Add(rec arrow.RecordBatch) error {
	if _, err := batch.SourceOf(rec.Schema()); err != nil {
		return fmt.Errorf("stats.Stats: %w", err)
	}
	if s.Features == nil {
		s.Features = map[string]*featstats.Feature{}
	}
	rows := int(rec.NumRows())
	s.Batches++
	s.Rows += int64(rows)
	for _, name := range batch.Features(rec.Schema()) {
		f := s.Features[name]
		if f == nil {
			f = &featstats.Feature{}
			s.Features[name] = f
		}
		sp, err := batch.SparseColumn(rec, name)
		if err != nil {
			f.AddRows(rows)
			continue
		}
		f.Add(sp)
	}
	return nil
}

// Merge adds the statistics of o.
func (s *Summary) Merge(o *Summary) {
	if s.Features == nil {
		s.Features = map[string]*featstats.Feature{}
	}
	s.Batches += o.Batches
	s.Rows += o.Rows
	for name, of := range o.Features {
		f := s.Features[name]
		if f == nil {
			f = &featstats.Feature{}
			s.Features[name] = f
		}
		f.Merge(of)
	}
}

// Finish counts, for every feature, the rows of the batches it was absent from as rows
// without fids. Call it once, after the last Add or Merge.
func (s *Summary) Finish() {
	for _, f := range s.Features {
		if miss := s.Rows - f.Rows; miss > 0 {
			f.AddRows(int(miss))
		}
	}
}

// Names returns the feature names in sorted order.
func (s *Summary) Names() []string {
	names := make([]string, 0, len(s.Features))
	for n := range s.Features {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// MarshalBinary encodes s: batches, rows and feature count as uvarints, then per feature
// in name order its name (uvarint length, bytes) and its featstats encoding.
func (s *Summary) MarshalBinary() ([]byte, error) {
	b := binary.AppendUvarint(nil, uint64(s.Batches))
	b = binary.AppendUvarint(b, uint64(s.Rows))
	b = binary.AppendUvarint(b, uint64(len(s.Features)))
	var err error
	for _, n := range s.Names() {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		if b, err = s.Features[n].AppendBinary(b); err != nil {
			return nil, fmt.Errorf("stats: feature %q: %w", n, err)
		}
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote; errors wrap ErrCorrupt.
func (s *Summary) UnmarshalBinary(b []byte) error {
	total := len(b)
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<62 {
			return 0, fmt.Errorf("%w: %s at offset %d", ErrCorrupt, what, total-len(b))
		}
		b = b[n:]
		return v, nil
	}
	batches, err := next("batch count")
	if err != nil {
		return err
	}
	rows, err := next("row count")
	if err != nil {
		return err
	}
	count, err := next("feature count")
	if err != nil {
		return err
	}
	if count > uint64(len(b)) {
		return fmt.Errorf("%w: %d features in %d bytes", ErrCorrupt, count, len(b))
	}
	*s = Summary{Batches: int64(batches), Rows: int64(rows), Features: make(map[string]*featstats.Feature, count)}
	for i := range count {
		l, err := next("feature name length")
		if err != nil {
			return err
		}
		if l > uint64(len(b)) {
			return fmt.Errorf("%w: feature %d: name of %d bytes at offset %d", ErrCorrupt, i, l, total-len(b))
		}
		name := string(b[:l])
		b = b[l:]
		if _, dup := s.Features[name]; dup {
			return fmt.Errorf("%w: feature %q twice", ErrCorrupt, name)
		}
		f := &featstats.Feature{}
		if b, err = f.Decode(b); err != nil {
			return fmt.Errorf("%w: feature %q: %w", ErrCorrupt, name, err)
		}
		s.Features[name] = f
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(b))
	}
	return nil
}

func encodeSummary(s *Summary) ([]byte, error) { return s.MarshalBinary() }

func decodeSummary(b []byte) (*Summary, error) {
	s := &Summary{}
	if err := s.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return s, nil
}

// Stats summarises every batch of col (arrow.RecordBatch, schemas/batch layout) into a
// PCollection holding one *Summary, finished (see Summary.Finish).
func Stats(s beam.Scope, col beam.PCollection) beam.PCollection {
	s = s.Scope("stats.Stats")
	return beam.Combine(s, &combineFn{}, col)
}

type combineFn struct{}

func (*combineFn) CreateAccumulator() *Summary {
	return &Summary{Features: map[string]*featstats.Feature{}}
}

func (*combineFn) AddInput(acc *Summary, rec arrow.RecordBatch) (*Summary, error) {
	return acc, acc.Add(rec)
}

func (*combineFn) MergeAccumulators(a, b *Summary) *Summary {
	a.Merge(b)
	return a
}

func (*combineFn) ExtractOutput(acc *Summary) *Summary {
	out := &Summary{}
	out.Merge(acc) // the accumulator may be extracted more than once
	out.Finish()
	return out
}
