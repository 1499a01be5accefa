package datadef

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/monolith-go/monolith/internal/pytext"
)

// This file holds a small JSON codec that writes exactly what Python's json.dumps
// writes with its default arguments (the ones dataclasses_json's to_json passes) and
// reads what Python's json.loads reads.

// appendPyString appends s as a Python json.dumps string literal with ensure_ascii:
// printable ASCII other than '"' and '\\' is kept, the usual short escapes are used for
// \" \\ \n \r \t \b \f, and every other code point is written as \uXXXX in lowercase hex
// (a surrogate pair above U+FFFF). '/' is not escaped. Bytes that are not valid UTF-8
// are written as \ufffd (Python strings cannot hold them).
func appendPyString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u4 := func(b []byte, r rune) []byte {
		return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c <= '~' && c != '"' && c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b = append(b, '\\', '"')
			case '\\':
				b = append(b, '\\', '\\')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default: // other controls and DEL
				b = u4(b, rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			b = u4(b, r1)
			b = u4(b, r2)
			continue
		}
		b = u4(b, r) // includes utf8.RuneError for invalid bytes
	}
	return append(b, '"')
}

// appendPyFloat appends f as Python's json.dumps writes a float: NaN, Infinity and
// -Infinity for the non-finite values, else float.__repr__: the shortest digits that
// round-trip, in positional notation with at least one fractional digit when the
// decimal exponent is in [-4, 16), else as d[.ddd]e±XX with a two-digit minimum
// exponent.
func appendPyFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	return append(b, pytext.Float(f)...)
}

// objWriter writes one JSON object with Python's separators (", " and ": ").
type objWriter struct {
	b []byte
	n int
}

func newObjWriter() *objWriter {
	return &objWriter{b: append(make([]byte, 0, 256), '{')}
}

func (w *objWriter) key(k string) {
	if w.n > 0 {
		w.b = append(w.b, ',', ' ')
	}
	w.n++
	w.b = appendPyString(w.b, k)
	w.b = append(w.b, ':', ' ')
}

func (w *objWriter) null(k string) { w.key(k); w.b = append(w.b, "null"...) }

func (w *objWriter) str(k, v string) { w.key(k); w.b = appendPyString(w.b, v) }

func (w *objWriter) nstr(k string, v Null[string]) {
	if !v.Valid {
		w.null(k)
		return
	}
	w.str(k, v.V)
}

func (w *objWriter) int(k string, v int64) { w.key(k); w.b = strconv.AppendInt(w.b, v, 10) }

func (w *objWriter) nint(k string, v Null[int64]) {
	if !v.Valid {
		w.null(k)
		return
	}
	w.int(k, v.V)
}

func (w *objWriter) float(k string, v float64) { w.key(k); w.b = appendPyFloat(w.b, v) }

func (w *objWriter) bool(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *objWriter) ints(k string, v []int64) {
	w.key(k)
	w.b = append(w.b, '[')
	for i, x := range v {
		if i > 0 {
			w.b = append(w.b, ',', ' ')
		}
		w.b = strconv.AppendInt(w.b, x, 10)
	}
	w.b = append(w.b, ']')
}

func (w *objWriter) strs(k string, v []string) {
	w.key(k)
	w.b = append(w.b, '[')
	for i, x := range v {
		if i > 0 {
			w.b = append(w.b, ',', ' ')
		}
		w.b = appendPyString(w.b, x)
	}
	w.b = append(w.b, ']')
}

func (w *objWriter) done() []byte { return append(w.b, '}') }

// ---- reading ----

// jkind is the type of a parsed JSON value.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}

// jvalue is a parsed JSON value. Objects keep their members in document order,
// duplicates included; numbers keep their text.
type jvalue struct {
	kind  jkind
	b     bool
	s     string // string value, or the number's text
	isInt bool   // number without fraction or exponent (Python int)
	arr   []jvalue
	obj   []jmember
}

type jmember struct {
	key string
	val jvalue
}

// maxDepth bounds nesting; Python's json.loads fails with RecursionError near 1000.
const maxDepth = 1000

// parsePyJSON parses data as Python's json.loads does after decoding the bytes as
// strict UTF-8: JSON plus the NaN, Infinity and -Infinity literals, whitespace " \t\n\r"
// around values, nothing after the value. Lone surrogate escapes are rejected (Go
// strings cannot hold them).
func parsePyJSON(data []byte) (jvalue, error) {
	if !utf8.Valid(data) {
		return jvalue{}, fmt.Errorf("%w: not valid UTF-8", ErrSyntax)
	}
	p := parser{s: string(data)}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return jvalue{}, err
	}
	p.ws()
	if p.i != len(p.s) {
		return jvalue{}, p.errf("extra data")
	}
	return v, nil
}

type parser struct {
	s string
	i int
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrSyntax, p.i, fmt.Sprintf(format, args...))
}

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) lit(word string) bool {
	if strings.HasPrefix(p.s[p.i:], word) {
		p.i += len(word)
		return true
	}
	return false
}

func (p *parser) value(depth int) (jvalue, error) {
	if p.i >= len(p.s) {
		return jvalue{}, p.errf("expecting value")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		return jvalue{kind: jString, s: s}, err
	case p.lit("null"):
		return jvalue{kind: jNull}, nil
	case p.lit("true"):
		return jvalue{kind: jBool, b: true}, nil
	case p.lit("false"):
		return jvalue{kind: jBool}, nil
	case p.lit("NaN"):
		return jvalue{kind: jNumber, s: "NaN"}, nil
	case p.lit("Infinity"):
		return jvalue{kind: jNumber, s: "Infinity"}, nil
	case p.lit("-Infinity"):
		return jvalue{kind: jNumber, s: "-Infinity"}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return jvalue{}, p.errf("expecting value")
}

func digitAt(s string, i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }

// number scans -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)? like Python's scanner: an
// incomplete fraction or exponent ends the number before it (leaving "extra data").
func (p *parser) number() (jvalue, error) {
	start, i := p.i, p.i
	if p.s[i] == '-' {
		i++
	}
	switch {
	case i < len(p.s) && p.s[i] == '0':
		i++
	case digitAt(p.s, i):
		for digitAt(p.s, i) {
			i++
		}
	default:
		return jvalue{}, p.errf("expecting value")
	}
	isInt := true
	if i < len(p.s) && p.s[i] == '.' && digitAt(p.s, i+1) {
		isInt = false
		i++
		for digitAt(p.s, i) {
			i++
		}
	}
	if i < len(p.s) && (p.s[i] == 'e' || p.s[i] == 'E') {
		j := i + 1
		if j < len(p.s) && (p.s[j] == '+' || p.s[j] == '-') {
			j++
		}
		if digitAt(p.s, j) {
			isInt = false
			for digitAt(p.s, j) {
				j++
			}
			i = j
		}
	}
	p.i = i
	return jvalue{kind: jNumber, s: p.s[start:i], isInt: isInt}, nil
}

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (p *parser) str() (string, error) {
	p.i++ // opening quote
	var sb strings.Builder
	for {
		start := p.i
		for p.i < len(p.s) && p.s[p.i] != '"' && p.s[p.i] != '\\' && p.s[p.i] >= ' ' {
			p.i++
		}
		sb.WriteString(p.s[start:p.i])
		if p.i >= len(p.s) {
			return "", p.errf("unterminated string")
		}
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return sb.String(), nil
		case c < ' ':
			return "", p.errf("invalid control character in string")
		}
		// backslash
		p.i++
		if p.i >= len(p.s) {
			return "", p.errf("unterminated string")
		}
		c := p.s[p.i]
		p.i++
		switch c {
		case '"', '\\', '/':
			sb.WriteByte(c)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := hex4(p.s[p.i:])
			if !ok {
				return "", p.errf("invalid \\uXXXX escape")
			}
			p.i += 4
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(0), false
				if r < 0xdc00 && strings.HasPrefix(p.s[p.i:], `\u`) {
					r2, ok2 = hex4(p.s[p.i+2:])
				}
				if !ok2 || r2 < 0xdc00 || r2 > 0xdfff {
					return "", p.errf("lone surrogate \\u%04x (not representable)", r)
				}
				p.i += 6
				r = utf16.DecodeRune(r, r2)
			}
			sb.WriteRune(r)
		default:
			return "", p.errf("invalid escape")
		}
	}
}

func (p *parser) array(depth int) (jvalue, error) {
	if depth > maxDepth {
		return jvalue{}, p.errf("nesting deeper than %d", maxDepth)
	}
	p.i++
	v := jvalue{kind: jArray}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		p.ws()
		e, err := p.value(depth)
		if err != nil {
			return jvalue{}, err
		}
		v.arr = append(v.arr, e)
		p.ws()
		if p.i >= len(p.s) {
			return jvalue{}, p.errf("expecting ',' delimiter")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return v, nil
		default:
			return jvalue{}, p.errf("expecting ',' delimiter")
		}
	}
}

func (p *parser) object(depth int) (jvalue, error) {
	if depth > maxDepth {
		return jvalue{}, p.errf("nesting deeper than %d", maxDepth)
	}
	p.i++
	v := jvalue{kind: jObject}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return jvalue{}, p.errf("expecting property name enclosed in double quotes")
		}
		k, err := p.str()
		if err != nil {
			return jvalue{}, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return jvalue{}, p.errf("expecting ':' delimiter")
		}
		p.i++
		p.ws()
		e, err := p.value(depth)
		if err != nil {
			return jvalue{}, err
		}
		v.obj = append(v.obj, jmember{key: k, val: e})
		p.ws()
		if p.i >= len(p.s) {
			return jvalue{}, p.errf("expecting ',' delimiter")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return v, nil
		default:
			return jvalue{}, p.errf("expecting ',' delimiter")
		}
	}
}

// ---- typed field access ----

// fieldReader reads the fields of one top-level object the way dataclasses_json's
// from_json does: the last of duplicate keys wins, unknown keys are ignored, a missing
// key leaves the destination (which holds the Python default) untouched.
type fieldReader struct {
	typ string
	m   map[string]jvalue
}

func readObject(typ string, data []byte) (fieldReader, error) {
	v, err := parsePyJSON(data)
	if err != nil {
		return fieldReader{}, fmt.Errorf("decode %s: %w", typ, err)
	}
	if v.kind != jObject {
		return fieldReader{}, fmt.Errorf("decode %s: %w: top level is %s, want object", typ, ErrFieldType, v.kind)
	}
	m := make(map[string]jvalue, len(v.obj))
	for _, mb := range v.obj {
		m[mb.key] = mb.val
	}
	return fieldReader{typ: typ, m: m}, nil
}

func (r fieldReader) wrong(name, want string, v jvalue) error {
	return fmt.Errorf("decode %s: field %q: %w: want %s, got %s", r.typ, name, ErrFieldType, want, v.kind)
}

func (r fieldReader) fail(name string, err error) error {
	return fmt.Errorf("decode %s: field %q: %w", r.typ, name, err)
}

func (r fieldReader) str(name string, dst *string) error {
	v, ok := r.m[name]
	if !ok {
		return nil
	}
	if v.kind != jString {
		return r.wrong(name, "string", v)
	}
	*dst = v.s
	return nil
}

func (r fieldReader) nstr(name string, dst *Null[string]) error {
	v, ok := r.m[name]
	switch {
	case !ok:
		return nil
	case v.kind == jNull:
		*dst = Null[string]{}
		return nil
	case v.kind != jString:
		return r.wrong(name, "string or null", v)
	}
	*dst = Some(v.s)
	return nil
}

func parseInt(v jvalue) (int64, error) {
	if v.kind != jNumber || !v.isInt {
		return 0, errors.New("not an integer")
	}
	n, err := strconv.ParseInt(v.s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("integer %s out of the int64 range", v.s)
	}
	return n, nil
}

func (r fieldReader) intv(name string, v jvalue, want string) (int64, error) {
	if v.kind != jNumber || !v.isInt {
		return 0, r.wrong(name, want, v)
	}
	n, err := parseInt(v)
	if err != nil {
		return 0, r.fail(name, fmt.Errorf("%w: %w", ErrFieldType, err))
	}
	return n, nil
}

func (r fieldReader) int(name string, dst *int64) error {
	v, ok := r.m[name]
	if !ok {
		return nil
	}
	n, err := r.intv(name, v, "integer")
	if err != nil {
		return err
	}
	*dst = n
	return nil
}

func (r fieldReader) nint(name string, dst *Null[int64]) error {
	v, ok := r.m[name]
	switch {
	case !ok:
		return nil
	case v.kind == jNull:
		*dst = Null[int64]{}
		return nil
	}
	n, err := r.intv(name, v, "integer or null")
	if err != nil {
		return err
	}
	*dst = Some(n)
	return nil
}

// float reads a Python float field: any JSON number (an integer is converted as
// Python's float(int) does, which fails beyond the float64 range; a float literal beyond
// the range is ±Infinity as in json.loads), NaN or ±Infinity.
func (r fieldReader) float(name string, dst *float64) error {
	v, ok := r.m[name]
	if !ok {
		return nil
	}
	if v.kind != jNumber {
		return r.wrong(name, "number", v)
	}
	var f float64
	switch v.s {
	case "NaN":
		f = math.NaN()
	case "Infinity":
		f = math.Inf(1)
	case "-Infinity":
		f = math.Inf(-1)
	default:
		var err error
		f, err = strconv.ParseFloat(v.s, 64)
		if err != nil {
			if !errors.Is(err, strconv.ErrRange) || v.isInt {
				return r.fail(name, fmt.Errorf("%w: integer %s too large for a float", ErrFieldType, v.s))
			}
		}
		if v.isInt && f == 0 {
			f = 0 // float(int("-0")) is 0.0, not -0.0
		}
	}
	*dst = f
	return nil
}

func (r fieldReader) bool(name string, dst *bool) error {
	v, ok := r.m[name]
	if !ok {
		return nil
	}
	if v.kind != jBool {
		return r.wrong(name, "boolean", v)
	}
	*dst = v.b
	return nil
}

func (r fieldReader) ints(name string, dst *[]int64) error {
	v, ok := r.m[name]
	if !ok {
		return nil
	}
	if v.kind != jArray {
		return r.wrong(name, "array of integers", v)
	}
	var out []int64 // nil for [], like the zero value
	for i, e := range v.arr {
		n, err := parseInt(e)
		if err != nil {
			return r.fail(fmt.Sprintf("%s[%d]", name, i), fmt.Errorf("%w: %w (got %s)", ErrFieldType, err, e.kind))
		}
		out = append(out, n)
	}
	*dst = out
	return nil
}

func (r fieldReader) strs(name string, dst *[]string) error {
	v, ok := r.m[name]
	if !ok {
		return nil
	}
	if v.kind != jArray {
		return r.wrong(name, "array of strings", v)
	}
	var out []string // nil for [], like the zero value
	for i, e := range v.arr {
		if e.kind != jString {
			return r.wrong(fmt.Sprintf("%s[%d]", name, i), "string", e)
		}
		out = append(out, e.s)
	}
	*dst = out
	return nil
}
