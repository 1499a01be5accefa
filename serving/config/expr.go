package config

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Limits of the arithmetic evaluator, so that hostile input cannot exhaust memory.
const (
	maxExprDepth    = 64
	maxExprExponent = 400
	maxExprBits     = 4096
)

// evalExpr evaluates the small arithmetic language of numeric conf values (S2): decimal
// numbers (with an optional fraction and exponent), unary + and -, binary + - * /, and
// parentheses. Arithmetic is exact (rational).
func evalExpr(s string) (*big.Rat, error) {
	e := &exprParser{s: s}
	r, err := e.sum(0)
	if err == nil {
		e.space()
		if e.pos < len(e.s) {
			err = fmt.Errorf("unexpected %q at offset %d", e.s[e.pos:e.pos+1], e.pos)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("invalid number expression %q: %w", s, err)
	}
	return r, nil
}

type exprParser struct {
	s   string
	pos int
}

func (e *exprParser) space() {
	for e.pos < len(e.s) && (e.s[e.pos] == ' ' || e.s[e.pos] == '\t') {
		e.pos++
	}
}

func (e *exprParser) peek() byte {
	e.space()
	if e.pos < len(e.s) {
		return e.s[e.pos]
	}
	return 0
}

func checkSize(r *big.Rat) error {
	if r.Num().BitLen() > maxExprBits || r.Denom().BitLen() > maxExprBits {
		return errors.New("value too large")
	}
	return nil
}

func (e *exprParser) sum(depth int) (*big.Rat, error) {
	l, err := e.product(depth)
	if err != nil {
		return nil, err
	}
	for {
		op := e.peek()
		if op != '+' && op != '-' {
			return l, nil
		}
		e.pos++
		r, err := e.product(depth)
		if err != nil {
			return nil, err
		}
		if op == '+' {
			l.Add(l, r)
		} else {
			l.Sub(l, r)
		}
		if err := checkSize(l); err != nil {
			return nil, err
		}
	}
}

func (e *exprParser) product(depth int) (*big.Rat, error) {
	l, err := e.unary(depth)
	if err != nil {
		return nil, err
	}
	for {
		op := e.peek()
		if op != '*' && op != '/' {
			return l, nil
		}
		e.pos++
		r, err := e.unary(depth)
		if err != nil {
			return nil, err
		}
		if op == '*' {
			l.Mul(l, r)
		} else {
			if r.Sign() == 0 {
				return nil, errors.New("division by zero")
			}
			l.Quo(l, r)
		}
		if err := checkSize(l); err != nil {
			return nil, err
		}
	}
}

func (e *exprParser) unary(depth int) (*big.Rat, error) {
	if depth > maxExprDepth {
		return nil, errors.New("expression nested too deeply")
	}
	switch e.peek() {
	case '-':
		e.pos++
		r, err := e.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return r.Neg(r), nil
	case '+':
		e.pos++
		return e.unary(depth + 1)
	case '(':
		e.pos++
		r, err := e.sum(depth + 1)
		if err != nil {
			return nil, err
		}
		if e.peek() != ')' {
			return nil, errors.New("missing )")
		}
		e.pos++
		return r, nil
	}
	return e.number()
}

// number reads digits[.digits][e[+-]digits] (or .digits...).
func (e *exprParser) number() (*big.Rat, error) {
	e.space()
	start := e.pos
	digits := func() int {
		n := 0
		for e.pos < len(e.s) && e.s[e.pos] >= '0' && e.s[e.pos] <= '9' {
			e.pos++
			n++
		}
		return n
	}
	n := digits()
	if e.pos < len(e.s) && e.s[e.pos] == '.' {
		e.pos++
		n += digits()
	}
	if n == 0 {
		if e.pos >= len(e.s) {
			return nil, errors.New("missing number")
		}
		return nil, fmt.Errorf("unexpected %q at offset %d", e.s[start:start+1], start)
	}
	mant := e.s[start:e.pos]
	exp := 0
	if e.pos < len(e.s) && (e.s[e.pos] == 'e' || e.s[e.pos] == 'E') {
		save := e.pos
		e.pos++
		if e.pos < len(e.s) && (e.s[e.pos] == '+' || e.s[e.pos] == '-') {
			e.pos++
		}
		ds := e.pos
		if digits() == 0 {
			e.pos = save
		} else {
			x, err := strconv.Atoi(strings.TrimLeft(e.s[ds:e.pos], "0") + "0")
			if err != nil || x/10 > maxExprExponent {
				return nil, errors.New("exponent out of range")
			}
			exp = x / 10
			if e.s[ds-1] == '-' {
				exp = -exp
			}
		}
	}
	if len(mant) > maxExprBits/3 {
		return nil, errors.New("number too long")
	}
	r, ok := new(big.Rat).SetString(mant)
	if !ok {
		return nil, fmt.Errorf("invalid number %q", mant)
	}
	if exp != 0 {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
		if exp > 0 {
			r.Mul(r, new(big.Rat).SetInt(p))
		} else {
			r.Quo(r, new(big.Rat).SetInt(p))
		}
	}
	return r, nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
