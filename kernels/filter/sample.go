package filter

import (
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
)

// StrategyRule is one entry of special_strategy's strategy_conf
// ("strategy:sample_rate[:label]").
type StrategyRule struct {
	Strategy   int32
	SampleRate float64 // in [0, 1]
	Label      float32 // written to label[0] of kept rows when HasLabel
	HasLabel   bool
}

// StrategyOptions configures special_strategy (io.md §3.7.4).
type StrategyOptions struct {
	// StrategyList is tried in order; the first strategy present in
	// line_id.special_strategies decides.
	StrategyList []int32
	// Rules gives sample rates (and labels) per strategy; see ParseStrategyConf.
	Rules []StrategyRule
	// KeepEmptyStrategy keeps rows without special strategies. The reference default is
	// true (see DefaultStrategyOptions); the zero value drops them.
	KeepEmptyStrategy bool
	// Seed of the sampling generator; 0 means DefaultSeed.
	Seed uint64
}

// DefaultStrategyOptions returns the reference defaults: KeepEmptyStrategy true.
func DefaultStrategyOptions() StrategyOptions { return StrategyOptions{KeepEmptyStrategy: true} }

// SpecialStrategy is special_strategy: a random filter on line_id.special_strategies that
// may also set label[0] of the rows it keeps. Rows none of whose strategies is in
// StrategyList are dropped (the reference's behaviour is undefined there). It is safe
// for concurrent use; calls draw from one generator in turn.
type SpecialStrategy struct {
	list      []int64
	rules     map[int64]StrategyRule
	keepEmpty bool
	rng       *source
}

// NewSpecialStrategy validates o and returns the op.
func NewSpecialStrategy(o StrategyOptions) (*SpecialStrategy, error) {
	const op = "special_strategy"
	if len(o.StrategyList) == 0 {
		return nil, configError(op, "empty strategy list")
	}
	s := &SpecialStrategy{rules: map[int64]StrategyRule{}, keepEmpty: o.KeepEmptyStrategy, rng: newSource(o.Seed)}
	for _, v := range o.StrategyList {
		s.list = append(s.list, int64(v))
	}
	for _, r := range o.Rules {
		if !(r.SampleRate >= 0 && r.SampleRate <= 1) {
			return nil, configError(op, "strategy %d: sample rate %v outside [0, 1]", r.Strategy, r.SampleRate)
		}
		if _, dup := s.rules[int64(r.Strategy)]; dup {
			return nil, configError(op, "strategy %d configured twice", r.Strategy)
		}
		s.rules[int64(r.Strategy)] = r
	}
	return s, nil
}

// eval decides every row; relabel, when not nil, receives the new label[0] of kept rows
// (NaN: unchanged).
func (s *SpecialStrategy) eval(rec arrow.RecordBatch, dst []int, relabel *[]float32) ([]int, error) {
	const op = "special_strategy"
	dst = dst[:0]
	d, err := bindLineIDs(op, rec)
	if err != nil {
		return dst, err
	}
	c, err := d.bind(fieldStrategies)
	if err != nil {
		return dst, err
	}
	s.rng.mu.Lock()
	defer s.rng.mu.Unlock()
	var buf []int64
	for r := range int(rec.NumRows()) {
		if buf, err = c.intsAt(r, buf[:0]); err != nil {
			return dst, err
		}
		keep, label := s.keepEmpty, float32(math.NaN())
		if len(buf) > 0 {
			keep = false
			for _, st := range s.list {
				if !slices.Contains(buf, st) {
					continue
				}
				rule, ok := s.rules[st]
				keep = !ok || rule.SampleRate == 1 || s.rng.r.Float64() <= rule.SampleRate
				if keep && ok && rule.HasLabel {
					label = rule.Label
				}
				break
			}
		}
		if keep {
			dst = append(dst, r)
			if relabel != nil {
				*relabel = append(*relabel, label)
			}
		}
	}
	return dst, nil
}

// Keep appends the indexes of the kept rows to dst[:0]. It ignores the configured labels;
// use Apply to have them written.
func (s *SpecialStrategy) Keep(rec arrow.RecordBatch, dst []int) ([]int, error) {
	return s.eval(rec, dst, nil)
}

// Apply returns the kept rows of rec with label[0] set for rows kept by a rule that has
// a label (a row without labels gets the one label). The caller must Release the result.
func (s *SpecialStrategy) Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	const op = "special_strategy"
	var relabel []float32
	keep, err := s.eval(rec, nil, &relabel)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(relabel, func(v float32) bool { return !math.IsNaN(float64(v)) }) {
		return Apply(mem, rec, keep)
	}
	labels, err := readLabels(op, rec)
	if err != nil {
		return nil, err
	}
	out := newLabelOut(len(keep), len(keep))
	for i, r := range keep {
		row := labels.row(r)
		start := len(out.vals)
		out.vals = append(out.vals, row...)
		if v := relabel[i]; !math.IsNaN(float64(v)) {
			if len(row) == 0 {
				out.vals = append(out.vals, v)
			} else {
				out.vals[start] = v
			}
		}
		out.end()
	}
	taken, err := batch.Take(mem, rec, keep)
	if err != nil {
		return nil, err
	}
	defer taken.Release()
	return out.withLabels(op, mem, taken)
}

// NegativeSampleOptions configures negative_sample (io.md §3.7.5).
type NegativeSampleOptions struct {
	// DropRate is the probability of dropping a negative row, in [0, 1].
	DropRate float64
	// LabelIndex selects the label compared with Threshold. Rows with fewer labels are
	// kept (not sampled).
	LabelIndex int
	// Threshold: rows whose label is ≥ Threshold are positives and always kept.
	Threshold float32
	// ActionPriority and PerActionDropRate, when both are set, choose the drop rate of a
	// row from its highest-priority action (see ParseActionPriority and
	// ParsePerActionDropRate).
	ActionPriority    []int32
	PerActionDropRate map[int32]float64
	// Seed of the sampling generator; 0 means DefaultSeed.
	Seed uint64
}

// NegativeSample is negative_sample. It is safe for concurrent use; calls draw from one
// generator in turn.
type NegativeSample struct {
	dropRate  float64
	index     int
	threshold float32
	ranks     actionRanks
	perAction map[int64]float64
	rng       *source
}

// NewNegativeSample validates o and returns the filter.
func NewNegativeSample(o NegativeSampleOptions) (*NegativeSample, error) {
	const op = "negative_sample"
	if !(o.DropRate >= 0 && o.DropRate <= 1) {
		return nil, configError(op, "drop rate %v outside [0, 1]", o.DropRate)
	}
	if o.LabelIndex < 0 {
		return nil, configError(op, "negative label index %d", o.LabelIndex)
	}
	if math.IsNaN(float64(o.Threshold)) {
		return nil, configError(op, "NaN threshold")
	}
	n := &NegativeSample{dropRate: o.DropRate, index: o.LabelIndex, threshold: o.Threshold, rng: newSource(o.Seed)}
	if len(o.ActionPriority) > 0 && len(o.PerActionDropRate) > 0 {
		n.ranks = newActionRanks(o.ActionPriority)
		n.perAction = make(map[int64]float64, len(o.PerActionDropRate))
		for a, r := range o.PerActionDropRate {
			if !(r >= 0 && r <= 1) {
				return nil, configError(op, "action %d: drop rate %v outside [0, 1]", a, r)
			}
			n.perAction[int64(a)] = r
		}
	}
	return n, nil
}

// Keep appends the indexes of the kept rows to dst[:0].
func (n *NegativeSample) Keep(rec arrow.RecordBatch, dst []int) ([]int, error) {
	const op = "negative_sample"
	dst = dst[:0]
	labels, err := readLabels(op, rec)
	if err != nil {
		return dst, err
	}
	var actions *lidCol
	if n.ranks != nil {
		d, err := bindLineIDs(op, rec)
		if err != nil {
			return dst, err
		}
		if actions, err = d.bind(fieldActions); err != nil {
			return dst, err
		}
	}
	n.rng.mu.Lock()
	defer n.rng.mu.Unlock()
	var buf []int64
	for r := range int(rec.NumRows()) {
		l := labels.row(r)
		if n.index >= len(l) || l[n.index] >= n.threshold {
			dst = append(dst, r)
			continue
		}
		rate := n.dropRate
		if actions != nil {
			if buf, err = actions.intsAt(r, buf[:0]); err != nil {
				return dst, err
			}
			if a, _, ok := n.ranks.best(buf); ok && a > 0 {
				if ar, ok := n.perAction[a]; ok {
					rate = ar
				}
			}
		}
		if float64(n.rng.r.Uint64()%1000)/1000 >= rate {
			dst = append(dst, r)
		}
	}
	return dst, nil
}
