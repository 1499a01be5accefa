package filter

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// cmpOp is a comparison of filter_by_value, filter_by_feature_value and add_action.
type cmpOp uint8

const (
	opGT cmpOp = iota + 1
	opGE
	opEQ
	opLT
	opLE
	opNEQ
	opBetween
	opIn
	opNotIn
	opStartsWith
	opEndsWith
	opAny
	opAll
	opDiff
)

var opNames = map[string]cmpOp{
	"gt": opGT, "ge": opGE, "eq": opEQ, "lt": opLT, "le": opLE, "neq": opNEQ,
	"between": opBetween, "in": opIn, "not-in": opNotIn,
	"startswith": opStartsWith, "endswith": opEndsWith,
	"any": opAny, "all": opAll, "diff": opDiff,
}

func (o cmpOp) String() string {
	for n, v := range opNames {
		if v == o {
			return n
		}
	}
	return "?"
}

func (o cmpOp) isCompare() bool { return o >= opGT && o <= opNEQ }
func (o cmpOp) isSet() bool     { return o == opAny || o == opAll || o == opDiff }
func (o cmpOp) isMember() bool  { return o == opIn || o == opNotIn }
func (o cmpOp) isString() bool  { return o == opStartsWith || o == opEndsWith }

func parseOp(op, s string) (cmpOp, error) {
	if o, ok := opNames[s]; ok {
		return o, nil
	}
	return 0, configError(op, "unknown comparison %q (want gt, ge, eq, lt, le, neq, between, in, not-in, startswith, endswith, any, all or diff)", s)
}

// checkArity validates the operand count of a scalar op (not the set ops).
func checkArity(op string, o cmpOp, n int) error {
	switch {
	case o.isCompare() && n != 1:
		return configError(op, "%s takes exactly 1 operand, got %d", o, n)
	case o == opBetween && n != 2:
		return configError(op, "between takes exactly 2 operands (lower bound, upper bound), got %d", n)
	case o.isString() && n == 0:
		return configError(op, "%s needs at least 1 operand", o)
	}
	return nil
}

// scalarPred compares one value with compiled operands.
type scalarPred[T cmp.Ordered] struct {
	op   cmpOp
	a, b T
	set  []T // sorted, deduplicated: in / not-in
}

func newScalarPred[T cmp.Ordered](o cmpOp, operands []T) scalarPred[T] {
	p := scalarPred[T]{op: o}
	switch {
	case o.isMember():
		p.set = slices.Clone(operands)
		slices.Sort(p.set)
		p.set = slices.Compact(p.set)
	case o == opBetween:
		p.a, p.b = operands[0], operands[1]
	case len(operands) > 0:
		p.a = operands[0]
	}
	return p
}

func (p *scalarPred[T]) match(v T) bool {
	switch p.op {
	case opGT:
		return v > p.a
	case opGE:
		return v >= p.a
	case opEQ:
		return v == p.a
	case opLT:
		return v < p.a
	case opLE:
		return v <= p.a
	case opNEQ:
		return v != p.a
	case opBetween:
		return p.a <= v && v < p.b
	case opIn:
		return p.member(v)
	case opNotIn:
		return !p.member(v)
	}
	return false
}

func (p *scalarPred[T]) member(v T) bool {
	i, ok := slices.BinarySearch(p.set, v)
	return ok && p.set[i] == v // the equality check keeps NaN out of every set
}

// stringPred adds startswith / endswith to the string comparisons.
type stringPred struct {
	scalarPred[string]
	affixes []string
}

func newStringPred(o cmpOp, operands []string) stringPred {
	p := stringPred{scalarPred: newScalarPred(o, operands)}
	if o.isString() {
		p.affixes = slices.Clone(operands)
	}
	return p
}

func (p *stringPred) match(v string) bool {
	switch p.op {
	case opStartsWith:
		for _, a := range p.affixes {
			if strings.HasPrefix(v, a) {
				return true
			}
		}
		return false
	case opEndsWith:
		for _, a := range p.affixes {
			if strings.HasSuffix(v, a) {
				return true
			}
		}
		return false
	}
	return p.scalarPred.match(v)
}

// setPred applies any / all / diff to the values of a repeated field with true set
// semantics (I4): operands and values are deduplicated before counting.
type setPred struct {
	op  cmpOp
	set []int64 // sorted, deduplicated
}

func newSetPred(o cmpOp, operands []int64) setPred {
	s := slices.Clone(operands)
	slices.Sort(s)
	return setPred{op: o, set: slices.Compact(s)}
}

// setScratch marks operands already counted for the current row without clearing.
type setScratch struct {
	seen []uint32
	gen  uint32
}

func (s *setScratch) next(n int) {
	if len(s.seen) < n {
		s.seen = make([]uint32, n)
		s.gen = 0
	}
	s.gen++
	if s.gen == 0 { // wrapped: clear once every 2^32 rows
		clear(s.seen)
		s.gen = 1
	}
}

// match reports the set op over the values of one row (which must be non-empty).
func (p *setPred) match(vals []int64, s *setScratch) bool {
	s.next(len(p.set))
	hits := 0
	for _, v := range vals {
		i, ok := slices.BinarySearch(p.set, v)
		if !ok || s.seen[i] == s.gen {
			continue
		}
		s.seen[i] = s.gen
		hits++
		if p.op != opAll {
			break // any and diff only need to know whether the intersection is empty
		}
	}
	switch p.op {
	case opAny:
		return hits > 0
	case opAll:
		return hits == len(p.set)
	}
	return hits == 0
}

// hasNaN reports whether a float operand list holds NaN (never a useful operand).
func hasNaN(v []float64) bool {
	return slices.ContainsFunc(v, math.IsNaN)
}
