package filter

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
)

// MaxReplicas bounds the copies instance_reweight may emit for one row; a row that would
// need more is an error naming it.
const MaxReplicas = 1 << 16

// ReweightRule is one entry of instance_reweight's reweight config
// ("action:weight:label").
type ReweightRule struct {
	Action int32
	Weight int64 // multiplies the row's count; in [0, MaxReplicas]
	Label  int64 // label[0] of a row whose most prior action this is
}

// ReweightOptions configures instance_reweight (io.md §3.7.17). Method 0
// (multiplicative) is the only method.
type ReweightOptions struct {
	// ActionPriority orders actions, first = highest priority (see ParseActionPriority).
	ActionPriority []int32
	// Rules gives per-action weights and labels (see ParseReweightConfig).
	Rules []ReweightRule
}

// InstanceReweight is instance_reweight: it replicates, drops and relabels rows from
// their actions and pre_actions. It is safe for concurrent use.
type InstanceReweight struct {
	ranks map[int64]int // 1-based
	rules map[int64]ReweightRule
}

// NewInstanceReweight validates o and returns the op.
func NewInstanceReweight(o ReweightOptions) (*InstanceReweight, error) {
	const op = "instance_reweight"
	w := &InstanceReweight{ranks: map[int64]int{}, rules: map[int64]ReweightRule{}}
	for i, a := range o.ActionPriority {
		if _, dup := w.ranks[int64(a)]; dup {
			return nil, configError(op, "action %d listed twice in the priority", a)
		}
		w.ranks[int64(a)] = i + 1
	}
	for _, r := range o.Rules {
		if r.Weight < 0 || r.Weight > MaxReplicas {
			return nil, configError(op, "action %d: weight %d outside [0, %d]", r.Action, r.Weight, MaxReplicas)
		}
		if _, dup := w.rules[int64(r.Action)]; dup {
			return nil, configError(op, "action %d configured twice", r.Action)
		}
		w.rules[int64(r.Action)] = r
	}
	return w, nil
}

const (
	prioEmpty    = 2000 // the action list is empty
	prioUnlisted = 1000 // no action of the list is in the priority
)

// prio returns the priority of an action list and its most prior action.
func (w *InstanceReweight) prio(list []int64) (p int, best int64, ok bool) {
	if len(list) == 0 {
		return prioEmpty, 0, false
	}
	p = prioUnlisted
	for _, a := range list {
		if k, listed := w.ranks[a]; listed && k < p {
			p, best, ok = k, a, true
		}
	}
	return p, best, ok
}

// count returns cnt(list): 1 for a non-empty list, times the weight of every action that
// has a rule, skipping listed actions other than the most prior one. It saturates at
// MaxReplicas+1.
func (w *InstanceReweight) count(list []int64, best int64, hasBest bool) int64 {
	if len(list) == 0 {
		return 0
	}
	c := int64(1)
	for _, a := range list {
		if _, listed := w.ranks[a]; listed && (!hasBest || a != best) {
			continue
		}
		if r, ok := w.rules[a]; ok {
			c = min(c*r.Weight, MaxReplicas+1) // both factors ≤ MaxReplicas+1: no overflow
		}
	}
	return c
}

// replicas returns how many copies of a row to emit and its new label[0].
func (w *InstanceReweight) replicas(actions, pre []int64, l0 float32) (int64, float32) {
	preP, preBest, preOK := w.prio(pre)
	curP, curBest, curOK := w.prio(actions)
	switch {
	case preP > curP:
		if curOK {
			if r, ok := w.rules[curBest]; ok {
				l0 = float32(r.Label)
			}
		}
		curLabel := clampInt64(float64(l0))
		cc := w.count(actions, curBest, curOK)
		if preOK {
			if r, ok := w.rules[preBest]; ok {
				cp := w.count(pre, preBest, preOK)
				switch {
				case r.Label != curLabel:
					return min(cp+cc, MaxReplicas+1), l0
				case cp > cc:
					return cp - cc, -l0
				default:
					return cc - cp, l0
				}
			}
		}
		return cc, l0
	case preP == prioEmpty && curP == prioEmpty:
		return 1, l0
	}
	return 0, l0
}

// Apply returns the reweighted batch: each row of rec repeated replicas times in place
// (consecutively, input order kept), rows without labels or with 0 replicas dropped,
// label[0] possibly relabelled or negated. Other columns, line_id included, are copied
// unchanged. The caller must Release the result.
func (w *InstanceReweight) Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	const op = "instance_reweight"
	labels, err := readLabels(op, rec)
	if err != nil {
		return nil, err
	}
	d, err := bindLineIDs(op, rec)
	if err != nil {
		return nil, err
	}
	actions, err := d.bind(fieldActions)
	if err != nil {
		return nil, err
	}
	preActions, err := d.bind(fieldPreActions)
	if err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	rows := make([]int, 0, n)
	out := newLabelOut(n, len(labels.d.Values))
	relabelled := false
	var abuf, pbuf []int64
	for r := range n {
		l := labels.row(r)
		if len(l) == 0 {
			continue
		}
		if abuf, err = actions.intsAt(r, abuf[:0]); err != nil {
			return nil, err
		}
		if pbuf, err = preActions.intsAt(r, pbuf[:0]); err != nil {
			return nil, err
		}
		k, l0 := w.replicas(abuf, pbuf, l[0])
		if k > MaxReplicas {
			return nil, &RowError{Op: op, Column: batch.LineIDColumn("actions"), Row: r,
				Err: fmt.Errorf("more than %d replicas", MaxReplicas)}
		}
		if math.Float32bits(l0) != math.Float32bits(l[0]) {
			relabelled = true
		}
		for range k {
			rows = append(rows, r)
			start := len(out.vals)
			out.vals = append(out.vals, l...)
			out.vals[start] = l0
			out.end()
		}
	}
	if !relabelled {
		return Apply(mem, rec, rows)
	}
	taken, err := batch.Take(mem, rec, rows)
	if err != nil {
		return nil, err
	}
	defer taken.Release()
	return out.withLabels(op, mem, taken)
}

// clampInt64 truncates f toward zero and saturates it to the int64 range (NaN reads 0).
func clampInt64(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}
