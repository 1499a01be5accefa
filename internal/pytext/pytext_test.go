package pytext

import "testing"

func TestCEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain", `a"b`: `a\"b`, "a'b": `a\'b`, `a\b`: `a\\b`, "\t\n\r": `\t\n\r`,
		"\x00\x1f\x7f": `\000\037\177`, "é": `\303\251`,
	} {
		if got := CEscape(in); got != want {
			t.Errorf("CEscape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFloat(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 0.5: "0.5", 1: "1.0", 0.25: "0.25", 1e-05: "1e-05", 0.0001: "0.0001", 1e16: "1e+16",
		123456789.5: "123456789.5", 2.0 / 3: "0.6666666666666666",
	} {
		if got := Float(f); got != want {
			t.Errorf("Float(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestRepr(t *testing.T) {
	for in, want := range map[string]string{`ab`: `'ab'`, `it's`: `"it's"`, `'"`: `'\'"'`, "a\nb\x00": `'a\nb\x00'`, "é\u2028": `'é\u2028'`, "\xff": `'\xff'`} {
		if got := Repr(in); got != want {
			t.Errorf("Repr(%q) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{`ab`: `b'ab'`, `it's`: `b"it's"`, `'"`: `b'\'"'`, "a\nb\x00\xff": `b'a\nb\x00\xff'`} {
		if got := BytesRepr([]byte(in)); got != want {
			t.Errorf("BytesRepr(%q) = %s, want %s", in, got, want)
		}
	}
}

// Expected values printed by Python 3's os.path.join.
func TestPathJoin(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"a", "b"}, "a/b"},
		{[]string{"./exp/", "entry"}, "./exp/entry"},
		{[]string{"/a//b", "c"}, "/a//b/c"},
		{[]string{"a", "/b", "c"}, "/b/c"},
		{[]string{"", "b"}, "b"},
		{[]string{"a", ""}, "a/"},
		{[]string{"hdfs:///x", "ps_0"}, "hdfs:///x/ps_0"},
		{[]string{"a"}, "a"},
	} {
		if got := PathJoin(tc.parts[0], tc.parts[1:]...); got != tc.want {
			t.Errorf("PathJoin(%q) = %q, want %q", tc.parts, got, tc.want)
		}
	}
}
