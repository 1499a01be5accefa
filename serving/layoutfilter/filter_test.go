package layoutfilter

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The filters of markdown/serving.md, agent.conf and spec §1.11.
func TestReferenceExamples(t *testing.T) {
	tests := []struct {
		filter string
		accept []string
		reject []string
	}{
		{"entry; True", []string{"entry"}, []string{"ps_0", "entry_item_embedding_0", "dense_0"}},
		{"ps_{i}; True", []string{"ps_0", "ps_1", "ps_12"}, []string{"entry", "ps_", "ps_x", "dense_0"}},
		{"ps_{i}; i % 2 == 1", []string{"ps_1", "ps_3"}, []string{"ps_0", "ps_2", "entry"}},
		{"ps_{i}; i % 2 == 0", []string{"ps_0", "ps_2", "ps_10"}, []string{"ps_1", "entry"}},
		{"ps_0", []string{"ps_0"}, []string{"ps_1", "ps_01", "entry"}}, // agent.conf: no ';'
		{"ps_1", []string{"ps_1"}, []string{"ps_0"}},
		{Substitute("ps_{i}; i % ${shard_num} == ${shard_id}", 1, 3), []string{"ps_1", "ps_4"}, []string{"ps_0", "ps_2", "ps_3"}},
	}
	for _, tc := range tests {
		f, err := Parse(tc.filter)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.filter, err)
		}
		for _, name := range tc.accept {
			if ok, err := f.Match(name); !ok || err != nil {
				t.Errorf("%q.Match(%q) = %v, %v; want true", tc.filter, name, ok, err)
			}
		}
		for _, name := range tc.reject {
			if ok, err := f.Match(name); ok || err != nil {
				t.Errorf("%q.Match(%q) = %v, %v; want false", tc.filter, name, ok, err)
			}
		}
	}
}

func TestSubstitute(t *testing.T) {
	raw := "ps_{i}; i % ${shard_num} == ${shard_id} and ${shard_id} < ${shard_num}"
	for _, tc := range []struct {
		id, num int
		want    string
	}{
		{1, 3, "ps_{i}; i % 3 == 1 and 1 < 3"},
		{-1, 0, "ps_{i}; i % 1 == 0 and 0 < 1"}, // max(shard_id, 0), max(num_shard, 1)
	} {
		if got := Substitute(raw, tc.id, tc.num); got != tc.want {
			t.Errorf("Substitute(%d, %d) = %q, want %q", tc.id, tc.num, got, tc.want)
		}
	}
}

// The two-machine layout of markdown/serving.md ("Distributed Serving").
func TestMatchAnyServingDoc(t *testing.T) {
	subGraphs := []string{"entry", "ps_0", "ps_1", "ps_2"}
	pick := func(filters ...string) []string {
		var fs []Filter
		for _, s := range filters {
			fs = append(fs, MustParse(s))
		}
		var got []string
		for _, sg := range subGraphs {
			ok, err := MatchAny(fs, sg)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				got = append(got, sg)
			}
		}
		return got
	}
	if got := pick("entry; True", "ps_{i}; i % 2 == 1"); !slices.Equal(got, []string{"entry", "ps_1"}) {
		t.Errorf("machine 1: %v", got)
	}
	if got := pick("ps_{i}; i % 2 == 0"); !slices.Equal(got, []string{"ps_0", "ps_2"}) {
		t.Errorf("machine 2: %v", got)
	}
	if got := pick("entry; True", "ps_{i}; True"); !slices.Equal(got, subGraphs) {
		t.Errorf("standalone: %v", got)
	}
	if got := pick(); !slices.Equal(got, subGraphs) {
		t.Errorf("no filters: %v", got)
	}
	// A matching filter whose condition is false passes on to the next one.
	if got := pick("ps_{i}; i > 1", "ps_{i}; i == 0"); !slices.Equal(got, []string{"ps_0", "ps_2"}) {
		t.Errorf("fallthrough: %v", got)
	}
	// The first error stops the scan.
	if _, err := MatchAny([]Filter{MustParse("ps_{i}; 1 // (i - i)"), MustParse("ps_{i}")}, "ps_1"); !errors.Is(err, ErrDivisionByZero) {
		t.Errorf("MatchAny error = %v", err)
	}
}

// TestDepartures pins the package doc's departures from agent_v3.py.
func TestDepartures(t *testing.T) {
	// S12: the whole name must match (re.match accepted a prefix).
	if ok, _ := MustParse("entry; True").Match("entry_item_embedding_0"); ok {
		t.Error("prefix match accepted")
	}
	if ok, _ := MustParse("ps_{i}; True").Match("ps_1_extra"); ok {
		t.Error("prefix match accepted")
	}
	// S12: no ';' means no condition (Python's split raised ValueError).
	f := MustParse("ps_{i}")
	if _, has := f.Condition(); has {
		t.Error("filter without ';' has a condition")
	}
	if ok, err := f.Match("ps_7"); !ok || err != nil {
		t.Errorf("Match = %v, %v", ok, err)
	}
	// Errors instead of Python exceptions (and no panics).
	for _, tc := range []struct {
		filter, name string
		want         error
		offset       int
	}{
		{"ps_{i}; i % 0 == 0", "ps_1", ErrDivisionByZero, 10},
		{"ps_{i}; i // 0", "ps_1", ErrDivisionByZero, 10},
		{"ps_{i}; i / (i - 1)", "ps_1", ErrDivisionByZero, 10},
		{"ps_{i}; i * 9223372036854775807 > 0", "ps_2", ErrOverflow, 10},
		{"ps_{i}; -i - 9223372036854775807 < 0", "ps_2", ErrOverflow, 11},
		{"ps_{i}; i > 0", "ps_99999999999999999999", ErrGroupValue, 8},
		{"entry|ps_{i}; i == 0", "entry", ErrGroupValue, 14},
	} {
		_, err := MustParse(tc.filter).Match(tc.name)
		var e *Error
		if !errors.Is(err, tc.want) || !errors.As(err, &e) || e.Offset != tc.offset || e.Filter != tc.filter {
			t.Errorf("%q.Match(%q) = %v; want %v at offset %d", tc.filter, tc.name, err, tc.want, tc.offset)
		}
	}
	// An unknown name fails at Parse (Python raised NameError at eval time).
	if _, err := Parse("ps_{i}; n == 1"); !errors.Is(err, ErrSyntax) {
		t.Errorf("unknown name: %v", err)
	}
	// Groups are converted only when the condition uses them (Python
	// converted every group and crashed on int(None)).
	if ok, err := MustParse("entry|ps_{i}; True").Match("entry"); !ok || err != nil {
		t.Errorf("unused group: %v, %v", ok, err)
	}
}

func TestConditions(t *testing.T) {
	const subject = "x_7_3" // i = 7, j = 3
	tests := []struct {
		cond string
		want bool
	}{
		{"True", true},
		{"False", false},
		{"  True", true},
		{"i + j == 10", true},
		{"i - j == 4", true},
		{"i * j == 21", true},
		{"i // j == 2", true},
		{"i % j == 1", true},
		{"-i // j == -3", true}, // floor division
		{"-i % j == 2", true},   // result has the sign of the divisor
		{"i % -j == -2", true},
		{"i / j > 2 and i / j < 3", true},
		{"i / 2 == 3.5 + 0", false}, // no float literals: see TestParseErrors
		{"i / 2 > 3 and i / 2 < 4", true},
		{"4 / 2 == 2", true},
		{"i / j * 3 == 7", true},
		{"(i / j) // 1 == 2", true},
		{"(i / j) % 1 > 0", true},
		{"j < i < 8", true},
		{"j < i < 7", false},
		{"not j < i < 7", true},
		{"1 < 2 > 0", true},
		{"i == 7 and j == 3", true},
		{"i == 1 or j == 3", true},
		{"not i == 7", false},
		{"(i + j) * 2 == 20", true},
		{"i + j * 2 == 13", true},
		{"True and not False", true},
		{"i and 0", false},
		{"0 or j", true},
		{"(0 or j) + 1 == 4", true},
		{"(i and j) == 3", true},
		{"i != j", true},
		{"i >= 7", true},
		{"j <= 2", false},
		{"0x10 == 16 and 0o10 == 8 and 0b11 == 3", true},
		{"1_000 == 1000", true},
		{"00 == 0", true},
		{"- - i == 7", true},
		{"+i == 7", true},
		{"True + True == 2", true},
		{"i == 0 or 10 // i == 1", true}, // short-circuit
		{"j == 3 or 1 // 0", true},
		{"j == 4 and 1 // 0", false},
		{"i > 9 > 1 // 0", false}, // chained comparisons short-circuit too
		{"i == 7 # a comment", true},
		{"((((i))))", true},
		{"not not i", true},
	}
	for _, tc := range tests {
		text := "x_{i}_{j};" + tc.cond
		f, err := Parse(text)
		if tc.cond == "i / 2 == 3.5 + 0" {
			if err == nil {
				t.Errorf("Parse(%q) accepted a float literal", text)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", text, err)
			continue
		}
		got, err := f.Match(subject)
		if err != nil || got != tc.want {
			t.Errorf("%q.Match(%q) = %v, %v; want %v", text, subject, got, err, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		text   string
		offset int
		want   error
		msg    string
	}{
		{"ps_{i}; k == 1", 8, ErrSyntax, `unknown name "k"`},
		{"ps_{i}; true", 8, ErrSyntax, `unknown name "true"`},
		{"ps_{i}; i %", 11, ErrSyntax, "unexpected end"},
		{"ps_{i}; (i", 10, ErrSyntax, "want ')'"},
		{"ps_{i}; i)", 9, ErrSyntax, `unexpected ")"`},
		{"ps_{i};", 7, ErrSyntax, "empty condition"},
		{"ps_{i};   ", 10, ErrSyntax, "empty condition"},
		{"ps_{1}; True", 3, ErrSyntax, "placeholder {1}"},
		{"ps_{}; True", 3, ErrSyntax, "placeholder {}"},
		{"a{i}b{i}", 0, ErrSyntax, `group "i" defined twice`},
		{"ps_(; True", 0, ErrSyntax, "pattern"},
		{"ps_{i}; i ** 2", 11, ErrSyntax, `unexpected "*"`},
		{"ps_{i}; i == 007", 13, ErrSyntax, "leading zeros"},
		{"ps_{i}; 99999999999999999999 > 0", 8, ErrOverflow, "integer literal"},
		{"ps_{i}; i.x", 9, ErrSyntax, "unexpected character '.'"},
		{"ps_{i}; i == 3.5", 14, ErrSyntax, "unexpected character '.'"},
		{"ps_{i}; i and", 13, ErrSyntax, "unexpected end"},
		{"ps_{i}; i == not 1", 13, ErrSyntax, `unexpected "not"`},
		{"ps_{i}; 1 2", 10, ErrSyntax, `unexpected "2" after`},
		{"ps_{i}; " + strings.Repeat("(", 100) + "i" + strings.Repeat(")", 100), 8 + maxDepth, ErrSyntax, "nested deeper"},
		{"ps_{i}; " + strings.Repeat("-", 100) + "i", 8 + maxDepth - 1, ErrSyntax, "nested deeper"},
		{"ps_{i}; " + strings.Repeat("not ", 100) + "i", 8 + 4*(maxDepth-1), ErrSyntax, "nested deeper"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.text)
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, tc.want) || e.Offset != tc.offset || e.Filter != tc.text || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Parse(%q) = %v; want %v containing %q at offset %d", tc.text, err, tc.want, tc.msg, tc.offset)
		}
	}
}

func TestAccessors(t *testing.T) {
	f := MustParse("ps_{i}; i % 2 == 0")
	if got := f.Regex(); got != `ps_(?P<i>\d+)` {
		t.Errorf("Regex = %q", got)
	}
	if c, ok := f.Condition(); c != " i % 2 == 0" || !ok {
		t.Errorf("Condition = %q, %v", c, ok)
	}
	if f.Text() != "ps_{i}; i % 2 == 0" || f.String() != f.Text() {
		t.Errorf("Text = %q", f.Text())
	}
	// Unclosed braces are copied verbatim, as the reference does.
	if got := MustParse("ps_{i").Regex(); got != "ps_{i" {
		t.Errorf("Regex = %q", got)
	}
	// Groups written as regex syntax are bound too.
	if ok, err := MustParse(`ps_(?P<n>[0-9]+); n == 4`).Match("ps_4"); !ok || err != nil {
		t.Errorf("Match = %v, %v", ok, err)
	}
	if _, err := (Filter{}).Match("ps_0"); err == nil {
		t.Error("zero Filter matched")
	}
}
