package filepattern

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mkTree creates the given files (with parents) under a fresh temp dir and returns it.
func mkTree(t *testing.T, files ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f))
		if strings.HasSuffix(f, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// rel strips root from every path so expectations stay readable.
func rel(t *testing.T, root string, paths []string) []string {
	t.Helper()
	out := make([]string, len(paths))
	for i, p := range paths {
		if p == Stdin {
			out[i] = p
			continue
		}
		r, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = filepath.ToSlash(r)
	}
	return out
}

func TestSplitSpec(t *testing.T) {
	tests := []struct {
		spec string
		want []string
	}{
		{"a", []string{"a"}},
		{"a,b , c", []string{"a", "b", "c"}},
		{"a,,b,", []string{"a", "b"}},
		{"d_{DATE(20200101,20200102)}/x,{INT(1, 2)}", []string{"d_{DATE(20200101,20200102)}/x", "{INT(1, 2)}"}},
		{"-,@list", []string{"-", "@list"}},
	}
	for _, tc := range tests {
		got, err := SplitSpec(tc.spec)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("SplitSpec(%q) = %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
	for _, spec := range []string{"", " , ,"} {
		if _, err := SplitSpec(spec); !errors.Is(err, ErrBadSpec) {
			t.Errorf("SplitSpec(%q) error = %v; want ErrBadSpec", spec, err)
		}
	}
}

func TestCandidates(t *testing.T) {
	// The reference docstring's example: 21 days x 6 hours x 4 parts.
	got, err := Candidates("data_{DATE(20201120, 20201210)}/hour_{INT(0, 5)}/part_{INT(0, 3)}")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 21*6*4 {
		t.Fatalf("len = %d; want %d", len(got), 21*6*4)
	}
	if got[0] != "data_20201120/hour_0/part_0" || got[1] != "data_20201120/hour_0/part_1" ||
		got[len(got)-1] != "data_20201210/hour_5/part_3" {
		t.Errorf("order: first %q, second %q, last %q", got[0], got[1], got[len(got)-1])
	}

	tests := []struct {
		tmpl string
		want []string
	}{
		{"plain/path*", []string{"plain/path*"}},
		{"a b/{INT(8,11)}", []string{"ab/8", "ab/9", "ab/10", "ab/11"}},
		{"{INT(-1,1)}", []string{"-1", "0", "1"}},
		{"{INT(07,07)}", []string{"7"}},
		{"h{DATE(2020022822,2020022901)}", []string{"h2020022822", "h2020022823", "h2020022900", "h2020022901"}},
		{"{DATE(20201231,20210101)}x", []string{"20201231x", "20210101x"}},
		{"{DATE(20210301,20210301)}", []string{"20210301"}},
		{"{INT(1,2)}{INT(3,4)}", []string{"13", "14", "23", "24"}},
	}
	for _, tc := range tests {
		got, err := Candidates(tc.tmpl)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Candidates(%q) = %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}

	bad := []string{
		"{}", "{DATE}", "{DATE(1,2,3)}", "{DATE(2020,20201210)}", "{DATE(20201301,20201302)}",
		"{DATE(2020010100,20200101)}", "{DATE(20200102,20200101)}", "{INT(a,1)}", "{INT(3,1)}",
		"{FOO(1,2)}", "{INT(1,2)", "x}", "{INT(1,2)}x}", "{INT(1,2)x}", "{INT(0,2000000)}",
		"{INT(0,2000)}{INT(0,2000)}", "{INT(-9223372036854775808,9223372036854775807)}",
	}
	for _, tmpl := range bad {
		if got, err := Candidates(tmpl); !errors.Is(err, ErrBadTemplate) {
			t.Errorf("Candidates(%q) = %d candidates, %v; want ErrBadTemplate", tmpl, len(got), err)
		}
	}
}

func TestGenPatterns(t *testing.T) {
	got, err := GenPatterns("/abc", "20220901", 0, "20220920", 0, false, "*")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 19 || got[0] != "/abc/20220901/*" || got[18] != "/abc/20220919/*" {
		t.Errorf("daily = %q; want 19 patterns /abc/20220901/* .. /abc/20220919/*", got)
	}

	tests := []struct {
		name               string
		path, start        string
		startHour          int
		end                string
		endHour            int
		hourly             bool
		wildcard           string
		want               []string
		wantLen            int // checked instead of want when want is nil
		wantFirst, wantEnd string
	}{
		{name: "hourly", path: "/abc", start: "20220901", end: "20220901", endHour: 3, hourly: true,
			wildcard: "*", want: []string{"/abc/20220901/00*", "/abc/20220901/01*", "/abc/20220901/02*"}},
		{name: "hourly across midnight", path: "/abc/", start: "20220228", startHour: 23, end: "20220301",
			endHour: 1, hourly: true, wildcard: ".gz",
			want: []string{"/abc/20220228/23.gz", "/abc/20220301/00.gz"}},
		{name: "daily ignores end hour", path: "p", start: "20220101", end: "20220103", endHour: 5,
			want: []string{"p/20220101/*", "p/20220102/*"}},
		{name: "daily start hour quirk", path: "p", start: "20220101", startHour: 5, end: "20220102",
			wildcard: "part-*", want: []string{"p/20220101/part-*"}},
		{name: "empty range", path: "p", start: "20220105", end: "20220101", want: nil},
		{name: "absolute wildcard replaces prefix", path: "p", start: "20220101", end: "20220102",
			wildcard: "/x/*", want: []string{"/x/*"}},
		{name: "no input path", start: "20220101", end: "20220102", want: nil},
		{name: "no start date", path: "p", end: "20220102", want: nil},
		{name: "leap year", path: "d", start: "20240101", end: "20250101", wantLen: 366,
			wantFirst: "d/20240101/*", wantEnd: "d/20241231/*"},
	}
	for _, tc := range tests {
		got, err := GenPatterns(tc.path, tc.start, tc.startHour, tc.end, tc.endHour, tc.hourly, tc.wildcard)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if tc.wantLen > 0 {
			if len(got) != tc.wantLen || got[0] != tc.wantFirst || got[len(got)-1] != tc.wantEnd {
				t.Errorf("%s: got %d patterns %q..%q; want %d %q..%q", tc.name, len(got), got[0],
					got[len(got)-1], tc.wantLen, tc.wantFirst, tc.wantEnd)
			}
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q; want %q", tc.name, got, tc.want)
		}
	}

	// End date defaults to today: a start in the far past gives many patterns.
	if got, err := GenPatterns("p", "20200101", 0, "", 0, false, ""); err != nil || len(got) < 365 {
		t.Errorf("default end: %d patterns, %v", len(got), err)
	}
	for _, bad := range [][2]string{{"2022091", "20220920"}, {"20220901", "2022-09-20"}, {"20221301", "20221302"}} {
		if _, err := GenPatterns("p", bad[0], 0, bad[1], 0, false, "*"); !errors.Is(err, ErrBadTemplate) {
			t.Errorf("GenPatterns(%q, %q) error = %v; want ErrBadTemplate", bad[0], bad[1], err)
		}
	}
	if _, err := GenPatterns("p", "20220901", 24, "20220902", 0, true, "*"); !errors.Is(err, ErrBadTemplate) {
		t.Errorf("hour 24: error = %v; want ErrBadTemplate", err)
	}
}

func TestExpand(t *testing.T) {
	root := mkTree(t,
		"a/1.pb", "a/2.pb", "a/3.txt", "a/sub/4.pb", "a/sub/deep/5.pb", "a/dir.pb/",
		"data_20201120/hour_0/part_0", "data_20201120/hour_1/part_1", "data_20201121/hour_0/part_0",
		"odd[1].pb", "empty/",
	)
	list := filepath.Join(root, "lists", "files.txt")
	if err := os.MkdirAll(filepath.Dir(list), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(list, []byte("# training files\n\n../a/1.pb\r\n  ../a/sub/*.pb  \n"+
		filepath.Join(root, "a/2.pb")+"\n../a/1.pb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := func(p string) string { return filepath.Join(root, p) }

	tests := []struct {
		name, spec string
		want       []string
	}{
		{"literal", j("a/1.pb"), []string{"a/1.pb"}},
		{"glob skips directories", j("a/*.pb"), []string{"a/1.pb", "a/2.pb"}},
		{"comma list sorted and deduplicated", j("a/2.pb") + "," + j("a/*.pb") + " , " + j("a/1.pb"),
			[]string{"a/1.pb", "a/2.pb"}},
		{"recursive", j("a/**/*.pb"), []string{"a/1.pb", "a/2.pb", "a/sub/4.pb", "a/sub/deep/5.pb"}},
		{"recursive tail", j("a/sub/**"), []string{"a/sub/4.pb", "a/sub/deep/5.pb"}},
		{"recursive with glob prefix", j("?/**/5.pb"), []string{"a/sub/deep/5.pb"}},
		{"literal with metacharacters", j("odd[1].pb"), []string{"odd[1].pb"}},
		{"stdin passes through", "-," + j("a/1.pb"), []string{"-", "a/1.pb"}},
		{"list file", "@" + list, []string{"a/1.pb", "a/2.pb", "a/sub/4.pb"}},
		{"template keeps matching candidates",
			j("data_{DATE(20201120, 20201122)}/hour_{INT(0,5)}/part_{INT(0,3)}"),
			[]string{"data_20201120/hour_0/part_0", "data_20201120/hour_1/part_1", "data_20201121/hour_0/part_0"}},
		{"template with glob", j("data_{DATE(20201121,20201121)}/*/*"), []string{"data_20201121/hour_0/part_0"}},
	}
	ctx := context.Background()
	for _, tc := range tests {
		got, err := Expand(ctx, tc.spec)
		if err != nil {
			t.Errorf("%s: Expand(%q): %v", tc.name, tc.spec, err)
			continue
		}
		if got := rel(t, root, got); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Expand(%q) = %q; want %q", tc.name, tc.spec, got, tc.want)
		}
	}

	// ExpandAll takes elements as they are (GenPatterns output).
	pats, err := GenPatterns(root, "20201120", 0, "20201122", 0, false, "data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ExpandAll(ctx, pats...); !errors.Is(err, ErrNoMatch) {
		t.Errorf("ExpandAll(%q) error = %v; want ErrNoMatch", pats, err)
	}
	if got, err := ExpandAll(ctx, j("a/1.pb"), j("a/1.pb")); err != nil || len(got) != 1 {
		t.Errorf("ExpandAll duplicates = %q, %v; want one file", got, err)
	}
}

func TestExpandErrors(t *testing.T) {
	root := mkTree(t, "a/1.pb", "a/sub/", "empty/")
	bad := filepath.Join(root, "bad.list")
	if err := os.WriteFile(bad, []byte("a/1.pb\n# ok so far\na/missing*.pb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(root, "nested.list")
	if err := os.WriteFile(nested, []byte("@other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(root, "empty.list")
	if err := os.WriteFile(empty, []byte("# nothing\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := func(p string) string { return filepath.Join(root, p) }
	tests := []struct {
		name, spec string
		is         error
		mention    []string // substrings the message must contain
	}{
		{"missing literal", j("a/1.pb") + "," + j("a/nope.pb"), ErrNoMatch, []string{"a/nope.pb"}},
		{"glob without match", j("a/*.gz"), ErrNoMatch, []string{"a/*.gz"}},
		{"only directories", j("a/s*"), ErrNoMatch, []string{"a/s*"}},
		{"literal directory", j("a"), ErrNoMatch, []string{"is a directory"}},
		{"recursive without match", j("empty/**/*.pb"), ErrNoMatch, []string{"empty/**/*.pb"}},
		{"template without match", j("x_{INT(1,3)}"), ErrNoMatch, []string{"x_{INT(1,3)}", "3 candidates"}},
		{"bad template", j("x_{INT(3,1)}"), ErrBadTemplate, []string{"INT(3,1)"}},
		{"bad glob", j("a/[.pb"), ErrBadSpec, []string{"a/[.pb"}},
		{"list entry without match", "@" + bad, ErrNoMatch, []string{bad + ":3", "a/missing*.pb"}},
		{"nested list", "@" + nested, ErrBadSpec, []string{nested + ":1", "@other"}},
		{"empty list", "@" + empty, ErrNoMatch, []string{empty}},
		{"missing list", "@" + j("no.list"), os.ErrNotExist, []string{"no.list"}},
		{"empty spec", " ", ErrBadSpec, nil},
	}
	for _, tc := range tests {
		got, err := Expand(context.Background(), tc.spec)
		if !errors.Is(err, tc.is) {
			t.Errorf("%s: Expand(%q) = %q, %v; want error %v", tc.name, tc.spec, got, err, tc.is)
			continue
		}
		for _, m := range tc.mention {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, m)
			}
		}
	}

	var fe *Error
	if _, err := Expand(context.Background(), "@"+bad); !errors.As(err, &fe) || fe.List != bad || fe.Line != 3 ||
		fe.Elem != "a/missing*.pb" {
		t.Errorf("list error = %#v; want List %q Line 3 Elem a/missing*.pb", fe, bad)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Expand(ctx, j("a/**")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: error = %v; want context.Canceled", err)
	}
}

func TestShard(t *testing.T) {
	files := []string{"f0", "f1", "f2", "f3", "f4", "f5", "f6"}
	tests := []struct {
		n, i int
		want []string
	}{
		{1, 0, files},
		{3, 0, []string{"f0", "f3", "f6"}},
		{3, 1, []string{"f1", "f4"}},
		{3, 2, []string{"f2", "f5"}},
		{10, 9, []string{}},
		{0, 0, nil},
		{3, 3, nil},
		{3, -1, nil},
	}
	for _, tc := range tests {
		got := Shard(files, tc.n, tc.i)
		if !slices.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("Shard(%d files, %d, %d) = %q; want %q", len(files), tc.n, tc.i, got, tc.want)
		}
	}
	// Every file lands in exactly one shard.
	var all []string
	for i := range 4 {
		all = append(all, Shard(files, 4, i)...)
	}
	slices.Sort(all)
	if !slices.Equal(all, files) {
		t.Errorf("union of shards = %q; want %q", all, files)
	}
}
