// Package pytext writes text the way Python prints it — text_format escapes, float repr,
// str and bytes repr — for files and outputs Monolith's Python tools read or compare byte
// for byte (TF Serving configs, checkpoint state files, checkpoint info, agent-client).
package pytext

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CEscape escapes the UTF-8 bytes of s as Python's text_encoding.CEscape(as_utf8=False):
// \t \n \r \" \' \\ and octal \ooo for other bytes outside printable ASCII.
func CEscape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch b {
		case '\t':
			sb.WriteString(`\t`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '"':
			sb.WriteString(`\"`)
		case '\'':
			sb.WriteString(`\'`)
		case '\\':
			sb.WriteString(`\\`)
		default:
			if b < 0x20 || b >= 0x7f {
				fmt.Fprintf(&sb, `\%03o`, b)
			} else {
				sb.WriteByte(b)
			}
		}
	}
	return sb.String()
}

// Quote is CEscape in double quotes.
func Quote(s string) string { return `"` + CEscape(s) + `"` }

// formatFloat formats f as Python's repr does (shortest round-trip digits, ".0" on
// integral values, exponent form outside [1e-4, 1e16)).
func Float(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		switch {
		case math.IsNaN(f):
			return "nan"
		case f > 0:
			return "inf"
		}
		return "-inf"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	exp := math.Floor(math.Log10(math.Abs(f)))
	e := strconv.FormatFloat(f, 'e', -1, 64)
	if i := strings.IndexByte(e, 'e'); i >= 0 {
		if x, err := strconv.Atoi(e[i+1:]); err == nil {
			exp = float64(x)
		}
	}
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// Repr is Python 3's repr of a str: single quotes unless s has a single quote and no
// double quote; backslash, the quote, \t \n \r escaped; other non-printable characters as
// \xNN, \uNNNN or \UNNNNNNNN (bytes that are not UTF-8 as \xNN).
func Repr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var sb strings.Builder
	sb.WriteByte(q)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			fmt.Fprintf(&sb, `\x%02x`, s[i])
		case r == rune(q) || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r < 0x80 && (r < 0x20 || r == 0x7f):
			fmt.Fprintf(&sb, `\x%02x`, r)
		case r < 0x80 || unicode.IsPrint(r):
			sb.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&sb, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			fmt.Fprintf(&sb, `\U%08x`, r)
		}
		i += w
	}
	sb.WriteByte(q)
	return sb.String()
}

// BytesRepr is Python 3's repr of bytes: b'…' (double quotes when b has a single quote and
// no double quote), backslash, the quote, \t \n \r escaped, other bytes outside printable
// ASCII as \xNN.
func BytesRepr(b []byte) string {
	q := byte('\'')
	if bytes.IndexByte(b, '\'') >= 0 && bytes.IndexByte(b, '"') < 0 {
		q = '"'
	}
	var sb strings.Builder
	sb.WriteByte('b')
	sb.WriteByte(q)
	for _, c := range b {
		switch {
		case c == q || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c == '\t':
			sb.WriteString(`\t`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte(q)
	return sb.String()
}

// PathJoin is Python's posixpath.join (os.path.join on Linux): an absolute part restarts the
// path, a '/' is added only between parts that lack one, and nothing is cleaned ("./a/" +
// "b" is "./a/b", "a//" + "b" is "a//b").
func PathJoin(base string, parts ...string) string {
	p := base
	for _, b := range parts {
		switch {
		case strings.HasPrefix(b, "/"):
			p = b
		case p == "" || strings.HasSuffix(p, "/"):
			p += b
		default:
			p += "/" + b
		}
	}
	return p
}
