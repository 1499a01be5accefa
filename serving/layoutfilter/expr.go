package layoutfilter

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The condition grammar, Python's precedence, lowest first:
//
//	or   = and { "or" and }
//	and  = not { "and" not }
//	not  = "not" not | cmp
//	cmp  = sum { ("==" | "!=" | "<" | "<=" | ">" | ">=") sum }   (chained as in Python)
//	sum  = term { ("+" | "-") term }
//	term = unary { ("*" | "/" | "//" | "%") unary }
//	unary = ("+" | "-") unary | atom
//	atom = INT | "True" | "False" | NAME | "(" or ")"
//
// Operator chains are kept flat so evaluation depth follows only the nesting
// bounded by maxDepth.

type tokKind int

const (
	tEOF tokKind = iota
	tInt
	tName
	tOp
)

type token struct {
	kind tokKind
	text string
	pos  int // offset in the filter text
}

func lex(text string, base int) ([]token, error) {
	var toks []token
	s := text[base:]
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\f' || c == '\r' || c == '\n':
			i++
		case c == '#': // a Python comment runs to the end of the line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case '0' <= c && c <= '9':
			j := i
			for j < len(s) && (isWordByte(s[j])) {
				j++
			}
			toks = append(toks, token{tInt, s[i:j], base + i})
			i = j
		case isWordByte(c):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			toks = append(toks, token{tName, s[i:j], base + i})
			i = j
		default:
			op := ""
			for _, o := range []string{"//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "<", ">", "(", ")"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, &Error{Filter: text, Offset: base + i, Err: fmt.Errorf("%w: unexpected character %q", ErrSyntax, rune(c))}
			}
			toks = append(toks, token{tOp, op, base + i})
			i += len(op)
		}
	}
	return append(toks, token{tEOF, "", len(text)}), nil
}

func isWordByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

type parser struct {
	text   string
	toks   []token
	i      int
	depth  int
	groups map[string]int
}

func parseCondition(text string, base int, groups map[string]int) (node, error) {
	toks, err := lex(text, base)
	if err != nil {
		return nil, err
	}
	p := &parser{text: text, toks: toks, groups: groups}
	if p.peek().kind == tEOF {
		return nil, p.errAt(p.peek(), "empty condition")
	}
	n, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errAt(t, "unexpected %q after the expression", t.text)
	}
	return n, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errAt(t token, format string, args ...any) error {
	return &Error{Filter: p.text, Offset: t.pos, Err: fmt.Errorf("%w: "+format, append([]any{ErrSyntax}, args...)...)}
}

// enter bounds recursion; callers must defer p.leave().
func (p *parser) enter(t token) error {
	p.depth++
	if p.depth > maxDepth {
		return p.errAt(t, "expression nested deeper than %d", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) isKeyword(word string) bool {
	t := p.peek()
	return t.kind == tName && t.text == word
}

func (p *parser) parseOr() (node, error) {
	if err := p.enter(p.peek()); err != nil {
		return nil, err
	}
	defer p.leave()
	return p.parseBool("or", p.parseAnd)
}

func (p *parser) parseAnd() (node, error) { return p.parseBool("and", p.parseNot) }

func (p *parser) parseBool(word string, sub func() (node, error)) (node, error) {
	x, err := sub()
	if err != nil {
		return nil, err
	}
	xs := []node{x}
	for p.isKeyword(word) {
		p.next()
		y, err := sub()
		if err != nil {
			return nil, err
		}
		xs = append(xs, y)
	}
	if len(xs) == 1 {
		return x, nil
	}
	return &boolNode{or: word == "or", xs: xs}, nil
}

func (p *parser) parseNot() (node, error) {
	if !p.isKeyword("not") {
		return p.parseCmp()
	}
	t := p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	return &notNode{x: x}, nil
}

func (p *parser) parseCmp() (node, error) {
	return p.parseChain(func(op string) bool {
		switch op {
		case "==", "!=", "<", "<=", ">", ">=":
			return true
		}
		return false
	}, p.parseSum, true)
}

func (p *parser) parseSum() (node, error) {
	return p.parseChain(func(op string) bool { return op == "+" || op == "-" }, p.parseTerm, false)
}

func (p *parser) parseTerm() (node, error) {
	return p.parseChain(func(op string) bool {
		return op == "*" || op == "/" || op == "//" || op == "%"
	}, p.parseUnary, false)
}

func (p *parser) parseChain(isOp func(string) bool, sub func() (node, error), cmp bool) (node, error) {
	x, err := sub()
	if err != nil {
		return nil, err
	}
	c := &chainNode{cmp: cmp, first: x}
	for t := p.peek(); t.kind == tOp && isOp(t.text); t = p.peek() {
		p.next()
		y, err := sub()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, t)
		c.rest = append(c.rest, y)
	}
	if len(c.ops) == 0 {
		return x, nil
	}
	return c, nil
}

func (p *parser) parseUnary() (node, error) {
	t := p.peek()
	if t.kind != tOp || (t.text != "-" && t.text != "+") {
		return p.parseAtom()
	}
	p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	return &negNode{op: t, x: x}, nil
}

func (p *parser) parseAtom() (node, error) {
	t := p.next()
	switch t.kind {
	case tInt:
		v, err := parseIntLiteral(t.text)
		if err != nil {
			return nil, &Error{Filter: p.text, Offset: t.pos, Err: err}
		}
		return constNode{v: intValue(v)}, nil
	case tName:
		switch t.text {
		case "True":
			return constNode{v: intValue(1)}, nil
		case "False":
			return constNode{v: intValue(0)}, nil
		case "and", "or", "not":
			return nil, p.errAt(t, "unexpected %q", t.text)
		}
		gi, ok := p.groups[t.text]
		if !ok {
			return nil, p.errAt(t, "unknown name %q (names are True, False and the pattern's groups %s)", t.text, groupList(p.groups))
		}
		return &nameNode{name: t, group: gi}, nil
	case tOp:
		if t.text == "(" {
			x, err := p.parseOr()
			if err != nil {
				return nil, err
			}
			if c := p.next(); c.kind != tOp || c.text != ")" {
				return nil, p.errAt(c, "want ')' to close '(' at offset %d", t.pos)
			}
			return x, nil
		}
		return nil, p.errAt(t, "unexpected %q", t.text)
	default:
		return nil, p.errAt(t, "unexpected end of condition")
	}
}

func groupList(groups map[string]int) string {
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return groups[a] - groups[b] })
	return "[" + strings.Join(names, " ") + "]"
}

// parseIntLiteral accepts Python 3 integer literals: decimal without leading
// zeros (except all zeros), 0x/0o/0b prefixes and single '_' separators.
func parseIntLiteral(s string) (int64, error) {
	if len(s) > 1 && s[0] == '0' {
		switch s[1] {
		case 'x', 'X', 'o', 'O', 'b', 'B':
		default:
			if strings.Trim(s, "0_") != "" {
				return 0, fmt.Errorf("%w: integer literal %q: leading zeros are not allowed", ErrSyntax, s)
			}
		}
	}
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%w: integer literal %q", ErrOverflow, s)
		}
		return 0, fmt.Errorf("%w: bad integer literal %q", ErrSyntax, s)
	}
	return v, nil
}

// value is a Python int (bools are ints) or float; floats come only from '/'.
type value struct {
	isFloat bool
	i       int64
	f       float64
}

func intValue(i int64) value     { return value{i: i} }
func floatValue(f float64) value { return value{isFloat: true, f: f} }

func (v value) truthy() bool {
	if v.isFloat {
		return v.f != 0
	}
	return v.i != 0
}

func (v value) float() float64 {
	if v.isFloat {
		return v.f
	}
	return float64(v.i)
}

type env struct {
	filter  string
	subject string
	idx     []int
}

func (e *env) fail(pos int, err error) error {
	return &Error{Filter: e.filter, Offset: pos, Err: err}
}

type node interface {
	eval(e *env) (value, error)
}

type constNode struct{ v value }

func (n constNode) eval(*env) (value, error) { return n.v, nil }

type nameNode struct {
	name  token
	group int
}

func (n *nameNode) eval(e *env) (value, error) {
	lo, hi := e.idx[2*n.group], e.idx[2*n.group+1]
	if lo < 0 {
		return value{}, e.fail(n.name.pos, fmt.Errorf("%w: group %q did not take part in matching %q", ErrGroupValue, n.name.text, e.subject))
	}
	s := e.subject[lo:hi]
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return value{}, e.fail(n.name.pos, fmt.Errorf("%w: group %q captured %q, not an int64", ErrGroupValue, n.name.text, s))
	}
	return intValue(v), nil
}

type notNode struct{ x node }

func (n *notNode) eval(e *env) (value, error) {
	v, err := n.x.eval(e)
	if err != nil {
		return value{}, err
	}
	if v.truthy() {
		return intValue(0), nil
	}
	return intValue(1), nil
}

type negNode struct {
	op token
	x  node
}

func (n *negNode) eval(e *env) (value, error) {
	v, err := n.x.eval(e)
	if err != nil || n.op.text == "+" {
		return v, err
	}
	if v.isFloat {
		return floatValue(-v.f), nil
	}
	if v.i == math.MinInt64 {
		return value{}, e.fail(n.op.pos, ErrOverflow)
	}
	return intValue(-v.i), nil
}

// boolNode is Python's and/or: short-circuit, the result is an operand.
type boolNode struct {
	or bool
	xs []node
}

func (n *boolNode) eval(e *env) (value, error) {
	var v value
	for _, x := range n.xs {
		var err error
		if v, err = x.eval(e); err != nil {
			return value{}, err
		}
		if v.truthy() == n.or {
			return v, nil
		}
	}
	return v, nil
}

// chainNode is a left-to-right arithmetic chain, or, when cmp is set, a
// Python comparison chain (a < b < c means a < b and b < c, short-circuit).
type chainNode struct {
	cmp   bool
	first node
	ops   []token
	rest  []node
}

func (n *chainNode) eval(e *env) (value, error) {
	acc, err := n.first.eval(e)
	if err != nil {
		return value{}, err
	}
	for k, op := range n.ops {
		y, err := n.rest[k].eval(e)
		if err != nil {
			return value{}, err
		}
		if n.cmp {
			if !compare(op.text, acc, y) {
				return intValue(0), nil
			}
			acc = y
			continue
		}
		if acc, err = arith(op.text, acc, y); err != nil {
			return value{}, e.fail(op.pos, err)
		}
	}
	if n.cmp {
		return intValue(1), nil
	}
	return acc, nil
}

func arith(op string, x, y value) (value, error) {
	if op == "/" {
		if y.float() == 0 {
			return value{}, ErrDivisionByZero
		}
		return floatValue(x.float() / y.float()), nil
	}
	if x.isFloat || y.isFloat {
		return floatArith(op, x.float(), y.float())
	}
	a, b := x.i, y.i
	switch op {
	case "+":
		r := a + b
		if (a^r)&(b^r) < 0 {
			return value{}, ErrOverflow
		}
		return intValue(r), nil
	case "-":
		r := a - b
		if (a^b)&(a^r) < 0 {
			return value{}, ErrOverflow
		}
		return intValue(r), nil
	case "*":
		if a == 0 || b == 0 {
			return intValue(0), nil
		}
		r := a * b
		if r/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			return value{}, ErrOverflow
		}
		return intValue(r), nil
	case "//":
		if b == 0 {
			return value{}, ErrDivisionByZero
		}
		if a == math.MinInt64 && b == -1 {
			return value{}, ErrOverflow
		}
		q := a / b
		if a%b != 0 && (a < 0) != (b < 0) {
			q--
		}
		return intValue(q), nil
	case "%":
		if b == 0 {
			return value{}, ErrDivisionByZero
		}
		if b == -1 {
			return intValue(0), nil
		}
		r := a % b
		if r != 0 && (r < 0) != (b < 0) {
			r += b
		}
		return intValue(r), nil
	}
	return value{}, fmt.Errorf("%w: operator %q", ErrSyntax, op)
}

// floatArith follows CPython's float_add/sub/mul/floor_div/rem.
func floatArith(op string, a, b float64) (value, error) {
	switch op {
	case "+":
		return floatValue(a + b), nil
	case "-":
		return floatValue(a - b), nil
	case "*":
		return floatValue(a * b), nil
	}
	if b == 0 {
		return value{}, ErrDivisionByZero
	}
	mod := math.Mod(a, b)
	div := (a - mod) / b
	if mod != 0 {
		if (b < 0) != (mod < 0) {
			mod += b
			div -= 1
		}
	} else {
		mod = math.Copysign(0, b)
	}
	if op == "%" {
		return floatValue(mod), nil
	}
	var fd float64
	if div != 0 {
		fd = math.Floor(div)
		if div-fd > 0.5 {
			fd++
		}
	} else {
		fd = math.Copysign(0, a/b)
	}
	return floatValue(fd), nil
}

// compare is exact for int/float mixes, as Python's is; NaN is unordered.
func compare(op string, x, y value) bool {
	var c int
	switch {
	case !x.isFloat && !y.isFloat:
		c = cmpInt(x.i, y.i)
	case x.isFloat && y.isFloat:
		if math.IsNaN(x.f) || math.IsNaN(y.f) {
			return op == "!="
		}
		c = cmpFloat(x.f, y.f)
	case x.isFloat:
		if math.IsNaN(x.f) {
			return op == "!="
		}
		c = -cmpIntFloat(y.i, x.f)
	default:
		if math.IsNaN(y.f) {
			return op == "!="
		}
		c = cmpIntFloat(x.i, y.f)
	}
	switch op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	default: // ">="
		return c >= 0
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpIntFloat compares i with a non-NaN f without rounding i.
func cmpIntFloat(i int64, f float64) int {
	const two63 = 9223372036854775808.0
	if f >= two63 {
		return -1
	}
	if f < -two63 {
		return 1
	}
	t := math.Trunc(f)
	if c := cmpInt(i, int64(t)); c != 0 {
		return c
	}
	return -cmpFloat(f-t, 0)
}
