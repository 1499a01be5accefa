package layoutfilter

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Sentinel errors carried by *Error; test them with errors.Is.
var (
	// ErrSyntax reports a malformed MATCH pattern or CONDITION expression.
	ErrSyntax = errors.New("syntax error")
	// ErrDivisionByZero reports a /, // or % whose right operand is zero.
	ErrDivisionByZero = errors.New("division by zero")
	// ErrOverflow reports an integer result or literal outside int64.
	ErrOverflow = errors.New("integer overflow")
	// ErrGroupValue reports a group the condition uses that did not take part in
	// the match or whose text is not a decimal integer.
	ErrGroupValue = errors.New("bad group value")
)

// Error is the error returned by Parse and Match. Offset is the byte offset
// into Filter where the problem was found.
type Error struct {
	Filter string
	Offset int
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("serving/layoutfilter: filter %q at offset %d: %v", e.Filter, e.Offset, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// maxDepth bounds the nesting of parentheses and unary operators in a condition.
const maxDepth = 64

// Filter is one compiled layout filter. The zero Filter is invalid: Match
// reports an error for it. A Filter is immutable and safe for concurrent use.
type Filter struct {
	text    string
	regex   string // MATCH with placeholders replaced, not anchored
	cond    string // text after the first ';', verbatim
	hasCond bool
	re      *regexp.Regexp // ^(?:regex)$
	expr    node
}

// Substitute replaces every "${shard_id}" in raw with max(shardID, 0) and
// every "${shard_num}" with max(numShard, 1), as the agent does before
// compiling its configured filters.
func Substitute(raw string, shardID, numShard int) string {
	r := strings.NewReplacer(
		"${shard_id}", strconv.Itoa(max(shardID, 0)),
		"${shard_num}", strconv.Itoa(max(numShard, 1)),
	)
	return r.Replace(raw)
}

// Parse compiles a filter "MATCH; CONDITION". The text is split at the
// first ';'; without one the filter has no condition and accepts every name
// its pattern matches. Names in the condition must be named groups of the
// pattern (or True/False); an unknown name is an error here, not at Match.
func Parse(text string) (Filter, error) {
	f := Filter{text: text}
	match := text
	if i := strings.IndexByte(text, ';'); i >= 0 {
		match, f.cond, f.hasCond = text[:i], text[i+1:], true
	}
	regex, err := translate(text, match)
	if err != nil {
		return Filter{}, err
	}
	re, err := regexp.Compile(`^(?:` + regex + `)$`)
	if err != nil {
		return Filter{}, &Error{Filter: text, Offset: 0, Err: fmt.Errorf("%w: pattern %q: %v", ErrSyntax, regex, err)}
	}
	groups := map[string]int{}
	for i, name := range re.SubexpNames() {
		if name == "" {
			continue
		}
		if _, dup := groups[name]; dup {
			return Filter{}, &Error{Filter: text, Offset: 0, Err: fmt.Errorf("%w: group %q defined twice", ErrSyntax, name)}
		}
		groups[name] = i
	}
	f.regex, f.re = regex, re
	if f.hasCond {
		base := len(match) + 1
		f.expr, err = parseCondition(text, base, groups)
		if err != nil {
			return Filter{}, err
		}
	}
	return f, nil
}

// MustParse is like Parse but panics on error; for tests and constant filters.
func MustParse(text string) Filter {
	f, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return f
}

// translate turns each "{name}" of match into (?P<name>\d+) and copies all
// other text verbatim. A '{' without a later '}' is copied as is.
func translate(text, match string) (string, error) {
	var b strings.Builder
	off := 0
	for off < len(match) {
		open := strings.IndexByte(match[off:], '{')
		if open < 0 {
			b.WriteString(match[off:])
			break
		}
		open += off
		closing := strings.IndexByte(match[open:], '}')
		if closing < 0 {
			b.WriteString(match[off:])
			break
		}
		closing += open
		name := match[open+1 : closing]
		if !isIdent(name) {
			return "", &Error{Filter: text, Offset: open, Err: fmt.Errorf("%w: placeholder {%s}: want {name} with name an ASCII identifier", ErrSyntax, name)}
		}
		b.WriteString(match[off:open])
		b.WriteString(`(?P<` + name + `>\d+)`)
		off = closing + 1
	}
	return b.String(), nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Text returns the filter text given to Parse.
func (f Filter) Text() string { return f.text }

// String returns the filter text given to Parse.
func (f Filter) String() string { return f.text }

// Regex returns the pattern with placeholders replaced, before anchoring;
// the reference reports "Regex();Condition()" in ContainerServiceInfo.debug_info.
func (f Filter) Regex() string { return f.regex }

// Condition returns the text after the first ';' verbatim and whether the
// filter has one.
func (f Filter) Condition() (string, bool) { return f.cond, f.hasCond }

// Match reports whether the pattern matches the whole of subGraph and the
// condition, evaluated with the captured groups, is truthy. A filter without
// a condition accepts every name its pattern matches.
func (f Filter) Match(subGraph string) (bool, error) {
	if f.re == nil {
		return false, &Error{Filter: f.text, Err: errors.New("zero Filter")}
	}
	idx := f.re.FindStringSubmatchIndex(subGraph)
	if idx == nil {
		return false, nil
	}
	if !f.hasCond {
		return true, nil
	}
	v, err := f.expr.eval(&env{filter: f.text, subject: subGraph, idx: idx})
	if err != nil {
		return false, err
	}
	return v.truthy(), nil
}

// MatchAny reports whether name is accepted by filters: true when filters is
// empty, else true at the first filter whose Match is true. The first error
// stops the scan and is returned.
func MatchAny(filters []Filter, name string) (bool, error) {
	if len(filters) == 0 {
		return true, nil
	}
	for _, f := range filters {
		ok, err := f.Match(name)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}
