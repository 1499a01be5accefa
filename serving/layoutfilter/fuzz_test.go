package layoutfilter

import (
	"errors"
	"strconv"
	"testing"
)

// FuzzParse: Parse and Match never panic, and every error is an *Error
// whose offset lies inside the filter text.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"entry; True", "ps_{i}; True", "ps_{i}; i % 2 == 1", "ps_{i}; i % 2 == 0", "ps_0",
		"x_{i}_{j}; j < i < 8 and not (i // j) % 0", "ps_{i}; " + "((((((i))))))", "a{b{c}", "{", "}{",
		"ps_(?P<n>.*); n + 1", "ps_{i}; -i // -1 == 9223372036854775807",
	} {
		f.Add(s, "ps_1")
	}
	f.Fuzz(func(t *testing.T, text, name string) {
		checkErr := func(err error) {
			if err == nil {
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(text) || e.Filter != text {
				t.Fatalf("%q: bad error %#v", text, err)
			}
		}
		flt, err := Parse(text)
		checkErr(err)
		if err != nil {
			return
		}
		ok1, err1 := flt.Match(name)
		checkErr(err1)
		ok2, err2 := flt.Match(name)
		if ok1 != ok2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("%q.Match(%q) not deterministic", text, name)
		}
	})
}

// FuzzEval: for any condition C that parses, "not (C)" is its negation
// whenever C evaluates without error.
func FuzzEval(f *testing.F) {
	for _, s := range []string{
		"i % 2 == 0", "i // j", "i / j > 1", "j < i < 8", "i and j or 0", "-i % j", "i * j - 1",
		"(i / j) // 1 == i // j", "not i", "i % (j - 3)", "True + i",
	} {
		f.Add(s, int64(7), int64(3))
	}
	f.Fuzz(func(t *testing.T, cond string, i, j int64) {
		text := "x_{i}_{j};" + cond
		flt, err := Parse(text)
		if err != nil {
			return
		}
		neg, err := Parse("x_{i}_{j}; not (" + cond + ")")
		if err != nil {
			return // e.g. a trailing comment swallows the ')'
		}
		name := "x_" + strconv.FormatUint(uint64(i), 10) + "_" + strconv.FormatUint(uint64(j), 10)
		ok, err := flt.Match(name)
		if err != nil {
			return
		}
		nok, err := neg.Match(name)
		if err != nil {
			// Only the group value can fail where the plain form did not.
			t.Fatalf("%q on %s: %v after success", cond, name, err)
		}
		if ok == nok {
			t.Fatalf("%q on %s: C = %v and not (C) = %v", cond, name, ok, nok)
		}
	})
}
