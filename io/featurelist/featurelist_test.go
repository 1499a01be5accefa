package featurelist

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, text string, opts ...Option) *List {
	t.Helper()
	l, err := Parse(strings.NewReader(text), "test.conf", opts...)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	return l
}

func TestParseFeatureFields(t *testing.T) {
	l := mustParse(t, "# comment\n\n"+
		`feature_name=fc_a; depend="x", 'y' ; method=M; slot=3; args=1, 2;`+"\n"+
		"feature_name=fc_b; shared=YES; need_raw=1; feature_version=2; input_optional=true,false,True; "+
		"feature_group=g1, g2; cache_keys=k; feature_id=+7; color=blue\r\n"+
		"feature_name=fc_c; shared=no; slot=1_000; feature_version=0\r"+
		"feature_name=fc_d; method=x;,; args=x,;\n")
	if l.Len() != 4 {
		t.Fatalf("Len = %d; want 4", l.Len())
	}
	a, _ := l.Feature("fc_a")
	if !slices.Equal(a.Depend, []string{"x", "y"}) || a.Method != "M" || !a.HasSlot || a.Slot != 3 ||
		!slices.Equal(a.Args, []string{"1", "2"}) || a.Shared || a.HasFeatureVersion || a.Version() != 1 ||
		a.HasFeatureID || a.Line != 3 || a.Extra != nil {
		t.Errorf("fc_a = %+v", *a)
	}
	b, _ := l.Feature("fc_b")
	if !b.Shared || !b.NeedRaw || b.Version() != 2 || !slices.Equal(b.InputOptional, []bool{true, false, false}) ||
		!slices.Equal(b.FeatureGroup, []string{"g1", "g2"}) || !slices.Equal(b.CacheKeys, []string{"k"}) ||
		b.FeatureID != 7 || !b.HasFeatureID || b.HasSlot || b.Depend != nil || b.Line != 4 ||
		!maps.Equal(b.Extra, map[string]string{"color": "blue"}) {
		t.Errorf("fc_b = %+v", *b)
	}
	c, _ := l.Feature("fc_c")
	if c.Shared || c.Slot != 1000 || !c.HasFeatureVersion || c.Version() != 0 || c.Line != 5 {
		t.Errorf("fc_c = %+v", *c)
	}
	// Values lose trailing "," then ";" then blanks, in that order (the reference's rstrip chain).
	d, _ := l.Feature("fc_d")
	if d.Method != "x;," || !slices.Equal(d.Args, []string{"x", ""}) || d.Line != 6 {
		t.Errorf("fc_d = %+v; want method %q, args [x ]", *d, "x;,")
	}
	// feature_version=0 is neither v1 nor v2.
	if fs := l.FeaturesForFID(uint64(1000) << 54); len(fs) != 0 {
		t.Errorf("FeaturesForFID(slot 1000 with version 0) = %v; want none", fs)
	}
	if fs := l.FeaturesForFID(uint64(3) << 54); len(fs) != 1 || fs[0] != a {
		t.Errorf("FeaturesForFID(v1 slot 3) = %v; want fc_a", fs)
	}
}

func TestParseValueSplitting(t *testing.T) {
	tests := []struct {
		line string
		want map[string]string // params as parsed
	}{
		{"feature_name=a", map[string]string{"feature_name": "a"}},
		{"feature_name = a b ; method=c d", map[string]string{"feature_name": "a b", "method": "c d"}},
		{"feature_name=a;;, method=M,,", map[string]string{"feature_name": "a", "method": "M"}},
		{"feature_name=a,; method=M", map[string]string{"feature_name": "a,", "method": "M"}},
		{"feature_name=a; x y=1; slot=2", map[string]string{"feature_name": "a; x", "y": "1", "slot": "2"}},
		{"feature_name=a; slot=1; slot=2", map[string]string{"feature_name": "a", "slot": "2"}},
		{"feature_name=", map[string]string{"feature_name": ""}},
	}
	for _, tc := range tests {
		params, err := splitParams(tc.line)
		if err != nil {
			t.Errorf("splitParams(%q): %v", tc.line, err)
			continue
		}
		if got := paramMap(params); !maps.Equal(got, tc.want) {
			t.Errorf("splitParams(%q) = %q; want %q", tc.line, got, tc.want)
		}
	}
}

func TestParseFeedsCachesColumns(t *testing.T) {
	l := mustParse(t, strings.Join([]string{
		"feed_name=u; shared=true; feature_id=5",
		"feed_name=v",
		"feed_name=u; feature_id=6",
		"column_name : a, b ,a,",
		"cache_column:uid ",
		"cache_column:did",
		"cache_name=c1; capacity=10; timeout=5; cache_type=lru",
		"cache_key_class=K; cache_column=x",
	}, "\n"))
	if len(l.Feeds) != 2 || l.Feeds[0].FeedName != "u" || l.Feeds[1].FeedName != "v" {
		t.Fatalf("feeds = %v; want u (replaced in place), v", l.Feeds)
	}
	if u, _ := l.Feed("u"); u.Shared || u.FeatureID != 6 || u.Line != 3 {
		t.Errorf("feed u = %+v; want the later definition (line 3)", *u)
	}
	if v, _ := l.Feed("v"); v.Shared || v.HasFeatureID || v.Name() != "v" {
		t.Errorf("feed v = %+v", *v)
	}
	if want := []string{": a", "b", "a", ""}; !slices.Equal(l.ColumnNames, want) {
		t.Errorf("ColumnNames = %q; want %q (reference quirk)", l.ColumnNames, want)
	}
	if want := []string{"a", "b"}; !slices.Equal(l.CleanColumnNames(), want) {
		t.Errorf("CleanColumnNames = %q; want %q", l.CleanColumnNames(), want)
	}
	if got := mustParse(t, "column_name:x, y").ColumnNames; !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("column_name:x, y → %q", got)
	}
	if got := mustParse(t, "feed_name=a").ColumnNames; got != nil {
		t.Errorf("no column_name line: ColumnNames = %q; want nil", got)
	}

	if len(l.Caches) != 3 {
		t.Fatalf("caches = %d; want 3 (two cache_column lines share one key)", len(l.Caches))
	}
	if c, ok := l.Cache("cache_column"); !ok || c.CacheColumn != "did" || c.Line != 6 {
		t.Errorf("cache_column = %+v; want the later line (did)", c)
	}
	if c, ok := l.Cache("c1"); !ok || c.Capacity != 10 || !c.HasCapacity || c.Timeout != 5 || c.CacheType != "lru" {
		t.Errorf("cache c1 = %+v", c)
	}
	if c, ok := l.Cache("K"); !ok || c.CacheColumn != "x" || c.HasCapacity {
		t.Errorf("cache K = %+v", c)
	}
}

func TestDuplicateFeatureKeepsPosition(t *testing.T) {
	l := mustParse(t, "feature_name=a; slot=1\nfeature_name=b; slot=2\nfeature_name=a; slot=3\n")
	if got := []string{l.Features[0].FeatureName, l.Features[1].FeatureName}; l.Len() != 2 ||
		!slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("features = %v", got)
	}
	if a, _ := l.Feature("a"); a.Slot != 3 {
		t.Errorf("a.Slot = %d; want 3 (last definition wins)", a.Slot)
	}
	if _, ok := l.BySlot(1); ok {
		t.Errorf("BySlot(1) found the replaced definition")
	}
	if f, ok := l.BySlot(3); !ok || f.FeatureName != "a" {
		t.Errorf("BySlot(3) = %v", f)
	}
}

func TestNormalizedName(t *testing.T) {
	tests := []struct{ name, want string }{
		{"fc_User_ID", "user_id"},
		{"f_doc_id", "doc_id"},
		{"f_a-f_b", "a-b"},
		{"fc_a-fc_b", "a-b"},
		{"f_a-fc_b", "a-b"},
		{"f_a-bcd", "a-bcd"}, // the reference would give "a-d"
		{"x_f_y", "x_f_y"},
		{"a-f_b", "a-f_b"}, // f_ is only removed when the whole name starts with f_
		{"", ""},
	}
	for _, tc := range tests {
		if got := (&Feature{FeatureName: tc.name}).NormalizedName(); got != tc.want {
			t.Errorf("NormalizedName(%q) = %q; want %q", tc.name, got, tc.want)
		}
	}
}

func TestLookupForms(t *testing.T) {
	l := mustParse(t, "feature_name=fc_a-fc_b; slot=1\nfeature_name=f_c-f_d; slot=2\n"+
		"feature_name=e; slot=3\nfeature_name=fc_e; slot=4\nfeature_name=fc_g; slot=5\n")
	tests := []struct{ query, want string }{
		{"a-b", "fc_a-fc_b"},
		{"c-d", "f_c-f_d"},
		{"e", "e"}, // the exact name wins over fc_e
		{"g", "fc_g"},
		{" g\t", "fc_g"},
		{"fc_a-fc_b", "fc_a-fc_b"},
	}
	for _, tc := range tests {
		f, err := l.Lookup(tc.query)
		if err != nil || f.FeatureName != tc.want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", tc.query, f, err, tc.want)
		}
	}
	for _, q := range []string{"a", "b-a", "h", ""} {
		if l.Has(q) {
			t.Errorf("Has(%q) = true", q)
		}
		if _, err := l.Lookup(q); !errors.Is(err, ErrNoFeature) {
			t.Errorf("Lookup(%q) error = %v; want ErrNoFeature", q, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		text    string
		line    int
		mention string
	}{
		{"feature_name=a;slot=2", 1, "space"},
		{"feature_name=a; method=b;slot=2", 1, "space"},
		{"feature_name=a; slot=2\n\nfeature_name=b; slot=x", 3, `slot="x"`},
		{"feature_name=a; slot=99999999999999999999", 1, "out of range"},
		{"feature_name=a; slot=1__0", 1, "slot"},
		{"feature_name=a; slot=_1", 1, "slot"},
		{"feature_name=a; feature_id=", 1, "feature_id"},
		{"# ok\nslot=3", 2, "without feature_name"},
		{"feedback", 1, "not a key=value line"},
		{"feed_name=a\nfeed_x=1", 2, "without feed_name"},
		{"cache_type=lru", 1, "cache line without"},
		{"cache_name=c; capacity=lots", 1, "capacity"},
		{"feature_name=a\nfeature_name=\xff", 2, "UTF-8"},
		{"feature_name=a=b", 1, "space"},
	}
	for _, tc := range tests {
		_, err := Parse(strings.NewReader(tc.text), "x.conf")
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error = %v; want a *ParseError", tc.text, err)
			continue
		}
		if pe.File != "x.conf" || pe.Line != tc.line || !strings.Contains(err.Error(), tc.mention) ||
			!strings.HasPrefix(err.Error(), "io/featurelist: x.conf:") {
			t.Errorf("Parse(%q) error = %q (line %d); want x.conf line %d mentioning %q",
				tc.text, err, pe.Line, tc.line, tc.mention)
		}
	}
	if _, err := ParseFile("/nonexistent/feature_list.conf"); err == nil ||
		!strings.Contains(err.Error(), "/nonexistent/feature_list.conf") {
		t.Errorf("ParseFile(missing) error = %v; want one naming the path", err)
	}
}

func TestParsePyInt(t *testing.T) {
	good := map[string]int64{"0": 0, "+5": 5, "-5": -5, "007": 7, "1_000": 1000, " 3 ": 3,
		"9223372036854775807": 1<<63 - 1}
	for s, want := range good {
		if got, err := parsePyInt(s); err != nil || got != want {
			t.Errorf("parsePyInt(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "+", "_1", "1_", "1__0", "+-1", "0x10", "1.0", "9223372036854775808"} {
		if got, err := parsePyInt(s); err == nil {
			t.Errorf("parsePyInt(%q) = %d; want an error", s, got)
		}
	}
}

func TestSplitLines(t *testing.T) {
	got := splitLines("a\r\nb\rc\n\nd")
	if want := []string{"a", "b", "c", "", "d"}; !slices.Equal(got, want) {
		t.Errorf("splitLines = %q; want %q", got, want)
	}
}
