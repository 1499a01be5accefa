// Package pytext writes protobuf text the way Python's text_format prints it, for files
// Monolith's Python tools read or compare byte for byte (TF Serving configs, checkpoint
// state files, checkpoint info).
package pytext

import (
	"fmt"
	"math"
	"strconv"
	"strings"
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
