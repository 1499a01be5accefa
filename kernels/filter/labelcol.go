package filter

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
)

// labelView reads the "__label__" column; a record without one has no labels.
type labelView struct {
	d     batch.Dense
	valid arrow.Array // physical list values, for null checks
	m     rowMap
	has   bool
}

func readLabels(op string, rec arrow.RecordBatch) (labelView, error) {
	col, err := column(op, rec, batch.ColLabel)
	if err != nil || col == nil {
		return labelView{}, err
	}
	d, err := batch.DenseColumn(rec, batch.ColLabel)
	if err != nil {
		return labelView{}, fmt.Errorf("%w: %s: %v", ErrInput, op, err)
	}
	vals, m := physical(col)
	return labelView{d: d, valid: vals, m: m, has: true}, nil
}

// row returns the labels of row r (nil when it has none). The slice aliases the record.
func (l *labelView) row(r int) []float32 {
	if !l.has || l.valid.NullN() > 0 && l.valid.IsNull(l.m.at(r)) {
		return nil
	}
	return l.d.Row(r)
}

// labelOut collects new labels row by row.
type labelOut struct {
	offs []int32
	vals []float32
}

func newLabelOut(rows, values int) *labelOut {
	o := &labelOut{offs: make([]int32, 1, rows+1), vals: make([]float32, 0, values)}
	return o
}

// end closes the current row.
func (o *labelOut) end() { o.offs = append(o.offs, int32(len(o.vals))) }

// withLabels returns rec with the collected labels.
func (o *labelOut) withLabels(op string, mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(o.vals) > math.MaxInt32 {
		return nil, inputError(op, "%d labels exceed the int32 offsets of the label column", len(o.vals))
	}
	out, err := batch.WithLabels(mem, rec, o.offs, o.vals)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// actionRanks maps an action priority list ("a,b,c": a first) to 0-based ranks.
type actionRanks map[int64]int

func newActionRanks(p []int32) actionRanks {
	if len(p) == 0 {
		return nil
	}
	m := make(actionRanks, len(p))
	for i, a := range p {
		if _, dup := m[int64(a)]; !dup {
			m[int64(a)] = i
		}
	}
	return m
}

// best returns the listed action of actions with the smallest rank.
func (m actionRanks) best(actions []int64) (action int64, rank int, ok bool) {
	for _, a := range actions {
		if k, listed := m[a]; listed && (!ok || k < rank) {
			action, rank, ok = a, k, true
		}
	}
	return action, rank, ok
}
