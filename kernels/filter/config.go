package filter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The parsers below read Monolith's config strings. Blanks around tokens are ignored and
// empty list items are skipped; every other malformed token is an error (wrapping
// ErrConfig) that quotes the token.

// tokenError reports a bad token of a config string.
func tokenError(op, token, format string, args ...any) error {
	return fmt.Errorf("%w: %s: token %q: %s", ErrConfig, op, token, fmt.Sprintf(format, args...))
}

// items splits s at sep, trims blanks and drops empty items.
func items(s string, sep string) []string {
	var out []string
	for _, it := range strings.Split(s, sep) {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

func parseInt32(op, tok string) (int32, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(tok), 10, 32)
	if err != nil {
		return 0, tokenError(op, tok, "not an int32")
	}
	return int32(v), nil
}

// parseRate parses a number in [0, 1].
func parseRate(op, tok string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(tok), 64)
	if err != nil || !(v >= 0 && v <= 1) {
		return 0, tokenError(op, tok, "not a rate in [0, 1]")
	}
	return v, nil
}

// parseInt32List parses a comma list of int32 (empty items skipped).
func parseInt32List(op, s string) ([]int32, error) {
	var out []int32
	for _, it := range items(s, ",") {
		v, err := parseInt32(op, it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseActionPriority parses an action priority list "a,b,c" (a first = highest
// priority). An action listed twice is an error.
func ParseActionPriority(s string) ([]int32, error) {
	const op = "action_priority"
	out, err := parseInt32List(op, s)
	if err != nil {
		return nil, err
	}
	seen := map[int32]bool{}
	for _, a := range out {
		if seen[a] {
			return nil, tokenError(op, strconv.Itoa(int(a)), "listed twice")
		}
		seen[a] = true
	}
	return out, nil
}

// ParsePerActionDropRate parses negative_sample's "action:rate,…" (rates in [0, 1]).
func ParsePerActionDropRate(s string) (map[int32]float64, error) {
	const op = "per_action_drop_rate"
	out := map[int32]float64{}
	for _, it := range items(s, ",") {
		parts := strings.Split(it, ":")
		if len(parts) != 2 {
			return nil, tokenError(op, it, "want action:rate")
		}
		a, err := parseInt32(op, parts[0])
		if err != nil {
			return nil, err
		}
		r, err := parseRate(op, parts[1])
		if err != nil {
			return nil, err
		}
		if _, dup := out[a]; dup {
			return nil, tokenError(op, it, "action %d configured twice", a)
		}
		out[a] = r
	}
	return out, nil
}

// ParseAddLabelConfig parses add_label's config: ";"-separated tasks
// "pos_actions:neg_actions:sample_rate" with comma lists, e.g. "1,2:3:1.0;4::0.5". Empty
// tasks are skipped; each task needs positive actions, disjoint positive and negative
// actions, and a rate in [0, 1]; at least one task is needed.
func ParseAddLabelConfig(s string) ([]AddLabelTask, error) {
	const op = "add_label"
	var tasks []AddLabelTask
	for _, it := range items(s, ";") {
		parts := strings.Split(it, ":")
		if len(parts) != 3 {
			return nil, tokenError(op, it, "want pos_actions:neg_actions:sample_rate")
		}
		var t AddLabelTask
		var err error
		if t.PosActions, err = parseInt32List(op, parts[0]); err != nil {
			return nil, err
		}
		if t.NegActions, err = parseInt32List(op, parts[1]); err != nil {
			return nil, err
		}
		if t.SampleRate, err = parseRate(op, parts[2]); err != nil {
			return nil, err
		}
		if err := checkAddLabelTask(t); err != nil {
			return nil, tokenError(op, it, "%v", err)
		}
		tasks = append(tasks, t)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%w: %s: no tasks in %q", ErrConfig, op, s)
	}
	return tasks, nil
}

func checkAddLabelTask(t AddLabelTask) error {
	if len(t.PosActions) == 0 {
		return fmt.Errorf("no positive actions")
	}
	if !(t.SampleRate >= 0 && t.SampleRate <= 1) {
		return fmt.Errorf("sample rate %v outside [0, 1]", t.SampleRate)
	}
	for _, p := range t.PosActions {
		for _, n := range t.NegActions {
			if p == n {
				return fmt.Errorf("action %d is both positive and negative", p)
			}
		}
	}
	return nil
}

// ParseScatterLabelConfig parses scatter_label's "chnid:index,…"; TaskNum is
// max(index)+1. Indexes must be in [0, MaxTasks); a chnid given twice is an error.
func ParseScatterLabelConfig(s string) (ScatterLabelOptions, error) {
	const op = "scatter_label"
	o := ScatterLabelOptions{Index: map[int64]int{}}
	for _, it := range items(s, ",") {
		parts := strings.Split(it, ":")
		if len(parts) != 2 {
			return ScatterLabelOptions{}, tokenError(op, it, "want chnid:index")
		}
		ch, err := strconv.ParseInt(strings.TrimSpace(parts[0]), 10, 64)
		if err != nil {
			return ScatterLabelOptions{}, tokenError(op, it, "chnid is not an int64")
		}
		idx, err := strconv.Atoi(strings.TrimSpace(parts[1]))
		if err != nil || idx < 0 || idx >= MaxTasks {
			return ScatterLabelOptions{}, tokenError(op, it, "index is not an integer in [0, %d)", MaxTasks)
		}
		if _, dup := o.Index[ch]; dup {
			return ScatterLabelOptions{}, tokenError(op, it, "chnid %d configured twice", ch)
		}
		o.Index[ch] = idx
		o.TaskNum = max(o.TaskNum, idx+1)
	}
	if len(o.Index) == 0 {
		return ScatterLabelOptions{}, fmt.Errorf("%w: %s: no entries in %q", ErrConfig, op, s)
	}
	return o, nil
}

// ParseReweightConfig parses instance_reweight's "action:weight:label,…". Weights are
// integers in [0, MaxReplicas], labels integers; an action given twice is an error.
func ParseReweightConfig(s string) ([]ReweightRule, error) {
	const op = "instance_reweight"
	var out []ReweightRule
	seen := map[int32]bool{}
	for _, it := range items(s, ",") {
		parts := strings.Split(it, ":")
		if len(parts) != 3 {
			return nil, tokenError(op, it, "want action:weight:label")
		}
		a, err := parseInt32(op, parts[0])
		if err != nil {
			return nil, err
		}
		w, err := strconv.ParseInt(strings.TrimSpace(parts[1]), 10, 64)
		if err != nil || w < 0 || w > MaxReplicas {
			return nil, tokenError(op, it, "weight is not an integer in [0, %d]", MaxReplicas)
		}
		l, err := strconv.ParseInt(strings.TrimSpace(parts[2]), 10, 64)
		if err != nil {
			return nil, tokenError(op, it, "label is not an integer")
		}
		if seen[a] {
			return nil, tokenError(op, it, "action %d configured twice", a)
		}
		seen[a] = true
		out = append(out, ReweightRule{Action: a, Weight: w, Label: l})
	}
	return out, nil
}

// ParseStrategyConf parses special_strategy's "strategy:sample_rate[:label],…".
func ParseStrategyConf(s string) ([]StrategyRule, error) {
	const op = "special_strategy"
	var out []StrategyRule
	seen := map[int32]bool{}
	for _, it := range items(s, ",") {
		parts := strings.Split(it, ":")
		if len(parts) != 2 && len(parts) != 3 {
			return nil, tokenError(op, it, "want strategy:sample_rate[:label]")
		}
		st, err := parseInt32(op, parts[0])
		if err != nil {
			return nil, err
		}
		r := StrategyRule{Strategy: st}
		if r.SampleRate, err = parseRate(op, parts[1]); err != nil {
			return nil, err
		}
		if len(parts) == 3 {
			l, err := strconv.ParseFloat(strings.TrimSpace(parts[2]), 32)
			if err != nil || math.IsNaN(l) {
				return nil, tokenError(op, it, "label is not a float32")
			}
			r.Label, r.HasLabel = float32(l), true
		}
		if seen[st] {
			return nil, tokenError(op, it, "strategy %d configured twice", st)
		}
		seen[st] = true
		out = append(out, r)
	}
	return out, nil
}

// ParseNormMethod parses one label_normalization method name (log, scale, scale2int,
// pow, repow, scalelog).
func ParseNormMethod(s string) (NormMethod, error) {
	t := strings.TrimSpace(s)
	for m := NormLog; m <= NormScaleLog; m++ {
		if normNames[m] == t {
			return m, nil
		}
	}
	return 0, tokenError("label_normalization", s, "unknown method (want log, scale, scale2int, pow, repow or scalelog)")
}

// ParseNormMethods parses a comma list of label_normalization methods.
func ParseNormMethods(s string) ([]NormMethod, error) {
	var out []NormMethod
	for _, it := range items(s, ",") {
		m, err := ParseNormMethod(it)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
