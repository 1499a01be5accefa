package featurelist

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrNoFeature reports a lookup that found no feature.
var ErrNoFeature = errors.New("io/featurelist: no such feature")

// ParseError reports a malformed line of a feature-list file.
type ParseError struct {
	File string // the name given to Parse
	Line int    // 1-based line number
	Err  error
}

// Error formats the error as "io/featurelist: file:line: cause".
func (e *ParseError) Error() string {
	return fmt.Sprintf("io/featurelist: %s:%d: %v", e.File, e.Line, e.Err)
}

// Unwrap returns the cause.
func (e *ParseError) Unwrap() error { return e.Err }

// Feed is one feed_name=... line: a raw input column.
type Feed struct {
	FeedName     string
	Shared       bool  // false when absent
	FeatureID    int64 // valid when HasFeatureID
	HasFeatureID bool
	// Extra holds the keys this package does not know, verbatim (nil when none).
	Extra map[string]string
	Line  int // 1-based line of the definition
}

// Name returns the feed's key in [List.Feeds]: its feed_name.
func (f *Feed) Name() string { return f.FeedName }

// Cache is a cache_column:<x> line or a cache...=... line.
type Cache struct {
	CacheColumn   string
	CacheName     string
	Capacity      int64 // valid when HasCapacity
	HasCapacity   bool
	Timeout       int64 // valid when HasTimeout
	HasTimeout    bool
	CacheType     string
	CacheKeyClass string
	// Extra holds the keys this package does not know, verbatim (nil when none).
	Extra map[string]string
	Line  int // 1-based line of the definition

	set uint8 // which of the three name fields were given (bit 0 name, 1 key class, 2 column)
}

// Name returns the cache's key: cache_name if given, else cache_key_class, else the
// literal "cache_column" when only cache_column was given (a reference rule: all
// cache_column lines share that key).
func (c *Cache) Name() string {
	switch {
	case c.set&1 != 0:
		return c.CacheName
	case c.set&2 != 0:
		return c.CacheKeyClass
	case c.set&4 != 0:
		return "cache_column"
	}
	return ""
}

// Feature is one feature definition (any key=value line not starting with feed or cache).
type Feature struct {
	FeatureName       string
	Depend            []string // nil when absent
	Method            string
	Slot              int // valid when HasSlot
	HasSlot           bool
	Args              []string // nil when absent
	FeatureVersion    int      // valid when HasFeatureVersion; see Version
	HasFeatureVersion bool
	Shared            bool
	CacheKeys         []string // nil when absent
	NeedRaw           bool
	FeatureID         int64 // valid when HasFeatureID
	HasFeatureID      bool
	InputOptional     []bool   // nil when absent; an item is true iff it reads "true"
	FeatureGroup      []string // nil when absent
	// Extra holds the keys this package does not know, verbatim (nil when none).
	Extra map[string]string
	Line  int // 1-based line of the definition
}

// Version returns the FID version of the feature: feature_version, or 1 when absent.
func (f *Feature) Version() int {
	if !f.HasFeatureVersion {
		return 1
	}
	return f.FeatureVersion
}

// NormalizedName returns the feature's short name: each "-"-separated term loses a
// leading "fc_", or a leading "f_" when the whole name starts with "f_", and the result
// is lower-cased ("fc_User_ID" → "user_id", "f_a-f_b" → "a-b").
func (f *Feature) NormalizedName() string { return normalize(f.FeatureName) }

func normalize(name string) string {
	terms := strings.Split(name, "-")
	fPrefixed := strings.HasPrefix(name, "f_")
	for i, t := range terms {
		switch {
		case strings.HasPrefix(t, "fc_"):
			terms[i] = t[3:]
		case fPrefixed && strings.HasPrefix(t, "f_"):
			terms[i] = t[2:]
		}
	}
	return strings.ToLower(strings.Join(terms, "-"))
}

// List is a parsed feature-list file. Its slices hold items in the order of their first
// definition; treat them as read-only.
type List struct {
	// Name is the file name given to Parse.
	Name string
	// ColumnNames holds the column_name entries in file order, de-duplicated, with the
	// reference's ": first" quirk (see the package documentation); nil without a
	// column_name line. A later column_name line replaces an earlier one.
	ColumnNames []string
	Feeds       []*Feed
	Caches      []*Cache
	Features    []*Feature

	normalized bool
	feeds      map[string]int
	caches     map[string]int
	features   map[string]int // key → index in Features
	slots      map[int][]*Feature
}

// Option configures [Parse].
type Option func(*options)

type options struct{ normalized bool }

// KeyByNormalizedName keys features by [Feature.NormalizedName] instead of their
// feature_name (the reference's use_old_name=False). Lookups then take normalized names.
func KeyByNormalizedName() Option { return func(o *options) { o.normalized = true } }

// ParseFile parses the feature-list file at path; errors name path and line.
func ParseFile(path string, opts ...Option) (*List, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("io/featurelist: %w", err)
	}
	defer f.Close()
	return Parse(f, path, opts...)
}

// Parse reads a feature-list file from r. name is used in error messages and as
// [List.Name]. Every malformed line is reported as a *[ParseError].
func Parse(r io.Reader, name string, opts ...Option) (*List, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("io/featurelist: read %s: %w", name, err)
	}
	l := &List{
		Name:       name,
		normalized: o.normalized,
		feeds:      map[string]int{},
		caches:     map[string]int{},
		features:   map[string]int{},
		slots:      map[int][]*Feature{},
	}
	for n, line := range splitLines(string(data)) {
		if err := l.parseLine(n+1, line); err != nil {
			return nil, &ParseError{File: name, Line: n + 1, Err: err}
		}
	}
	for _, f := range l.Features {
		if f.HasSlot {
			l.slots[f.Slot] = append(l.slots[f.Slot], f)
		}
	}
	return l, nil
}

// splitLines splits text at "\n", "\r\n" and "\r", like Python's universal newlines.
func splitLines(s string) []string {
	var lines []string
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return lines
}

// isPySpace reports whether Python's str.strip would remove r.
func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }

func (l *List) parseLine(lineNo int, raw string) error {
	if !utf8.ValidString(raw) {
		return errors.New("invalid UTF-8")
	}
	line := pyStrip(raw)
	switch {
	case line == "" || strings.HasPrefix(line, "#"):
		return nil
	case strings.HasPrefix(line, "column_name"):
		l.ColumnNames = parseColumns(line)
		return nil
	case strings.HasPrefix(line, "cache_column"):
		// As in the reference, the 13 characters of "cache_column:" are skipped whatever
		// they are.
		c := &Cache{CacheColumn: pyStrip(skipRunes(line, len("cache_column:"))), Line: lineNo, set: 4}
		addItem(&l.Caches, l.caches, c.Name(), c)
		return nil
	}
	params, err := splitParams(line)
	if err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(line, "feed"):
		f, err := newFeed(params)
		if err != nil {
			return err
		}
		f.Line = lineNo
		addItem(&l.Feeds, l.feeds, f.FeedName, f)
	case strings.HasPrefix(line, "cache"):
		c, err := newCache(params)
		if err != nil {
			return err
		}
		c.Line = lineNo
		addItem(&l.Caches, l.caches, c.Name(), c)
	default:
		f, err := newFeature(params)
		if err != nil {
			return err
		}
		f.Line = lineNo
		key := f.FeatureName
		if l.normalized {
			key = f.NormalizedName()
		}
		addItem(&l.Features, l.features, key, f)
	}
	return nil
}

// addItem appends v under key, or replaces the earlier item with that key in place.
func addItem[T any](items *[]T, index map[string]int, key string, v T) {
	if i, ok := index[key]; ok {
		(*items)[i] = v
		return
	}
	index[key] = len(*items)
	*items = append(*items, v)
}

// skipRunes drops the first n characters of s (Python's s[n:]).
func skipRunes(s string, n int) string {
	for ; n > 0 && s != ""; n-- {
		_, size := utf8.DecodeRuneInString(s)
		s = s[size:]
	}
	return s
}

// parseColumns reproduces the reference: skip 12 characters, split on ",", strip.
func parseColumns(line string) []string {
	rest := skipRunes(line, len("column_name:"))
	var out []string
	seen := map[string]bool{}
	for _, item := range strings.Split(rest, ",") {
		item = pyStrip(item)
		if !seen[item] {
			seen[item] = true
			out = append(out, item)
		}
	}
	return out
}

// CleanColumnNames returns ColumnNames with a stray leading ":" (the column_name quirk)
// and surrounding blanks removed from each name, and empty names dropped.
func (l *List) CleanColumnNames() []string {
	var out []string
	seen := make(map[string]bool, len(l.ColumnNames))
	for _, c := range l.ColumnNames {
		if c = pyStrip(strings.TrimPrefix(c, ":")); c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

type param struct{ key, value string }

// splitParams splits a key=value line as the reference does (see the package doc).
func splitParams(line string) ([]param, error) {
	items := strings.Split(line, "=")
	if len(items) < 2 {
		return nil, errors.New("not a key=value line")
	}
	params := make([]param, 0, len(items)-1)
	for i := 0; i < len(items)-1; i++ {
		var key string
		if i == 0 {
			key = pyStrip(items[0])
		} else {
			sp := strings.LastIndexByte(items[i], ' ')
			if sp < 0 {
				return nil, fmt.Errorf("no space before key %d in %q: keys after the first must follow a space",
					i+1, items[i])
			}
			key = pyStrip(items[i][sp:])
		}
		value := items[i+1]
		if i < len(items)-2 {
			sp := strings.LastIndexByte(value, ' ')
			if sp < 0 {
				return nil, fmt.Errorf("value of %q runs into the next key without a space: %q", key, value)
			}
			value = value[:sp]
		}
		value = strings.TrimRightFunc(strings.TrimRight(strings.TrimRight(pyStrip(value), ","), ";"), isPySpace)
		params = append(params, param{key, value})
	}
	return params, nil
}

// paramMap keeps the last value of every key, as the reference's dict does.
func paramMap(params []param) map[string]string {
	m := make(map[string]string, len(params))
	for _, p := range params {
		m[p.key] = p.value
	}
	return m
}

// fieldReader converts typed values and collects unknown keys.
type fieldReader struct {
	m     map[string]string
	known map[string]bool
	err   error
}

func newReader(params []param, known ...string) *fieldReader {
	r := &fieldReader{m: paramMap(params), known: map[string]bool{}}
	for _, k := range known {
		r.known[k] = true
	}
	return r
}

func (r *fieldReader) str(key string) (string, bool) {
	v, ok := r.m[key]
	return v, ok
}

func (r *fieldReader) boolean(key string) bool {
	v, ok := r.m[key]
	if !ok {
		return false
	}
	switch strings.ToLower(v) {
	case "true", "yes", "t", "y", "1":
		return true
	}
	return false
}

func (r *fieldReader) integer(key string) (int64, bool) {
	v, ok := r.m[key]
	if !ok || r.err != nil {
		return 0, false
	}
	n, err := parsePyInt(v)
	if err != nil {
		r.err = fmt.Errorf("%s=%q: %w", key, v, err)
		return 0, false
	}
	return n, true
}

// quoteRemover deletes quote characters from list items.
var quoteRemover = strings.NewReplacer(`"`, "", "'", "")

func (r *fieldReader) list(key string) []string {
	v, ok := r.m[key]
	if !ok {
		return nil
	}
	parts := strings.Split(pyStrip(v), ",")
	for i, p := range parts {
		parts[i] = quoteRemover.Replace(pyStrip(p))
	}
	return parts
}

func (r *fieldReader) extra() map[string]string {
	var out map[string]string
	for k, v := range r.m {
		if !r.known[k] {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// parsePyInt parses a decimal integer as Python's int() does for the values that occur
// in conf files: optional sign, digits, single underscores between digits.
func parsePyInt(s string) (int64, error) {
	t := pyStrip(s)
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) > 1 || body == "" || body[0] == '_' || body[len(body)-1] == '_' ||
		strings.Contains(body, "__") {
		return 0, errors.New("not an integer")
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			return 0, ne.Err
		}
		return 0, err
	}
	return n, nil
}

func newFeed(params []param) (*Feed, error) {
	r := newReader(params, "feed_name", "shared", "feature_id")
	f := &Feed{Shared: r.boolean("shared")}
	var ok bool
	if f.FeedName, ok = r.str("feed_name"); !ok {
		return nil, errors.New("feed line without feed_name")
	}
	f.FeatureID, f.HasFeatureID = r.integer("feature_id")
	f.Extra = r.extra()
	return f, r.err
}

func newCache(params []param) (*Cache, error) {
	r := newReader(params, "cache_column", "cache_name", "capacity", "timeout", "cache_type", "cache_key_class")
	c := &Cache{}
	var ok bool
	if c.CacheName, ok = r.str("cache_name"); ok {
		c.set |= 1
	}
	if c.CacheKeyClass, ok = r.str("cache_key_class"); ok {
		c.set |= 2
	}
	if c.CacheColumn, ok = r.str("cache_column"); ok {
		c.set |= 4
	}
	if c.set == 0 {
		return nil, errors.New("cache line without cache_name, cache_key_class or cache_column")
	}
	c.CacheType, _ = r.str("cache_type")
	c.Capacity, c.HasCapacity = r.integer("capacity")
	c.Timeout, c.HasTimeout = r.integer("timeout")
	c.Extra = r.extra()
	return c, r.err
}

func newFeature(params []param) (*Feature, error) {
	r := newReader(params, "feature_name", "depend", "method", "slot", "args", "feature_version",
		"shared", "cache_keys", "need_raw", "feature_id", "input_optional", "feature_group")
	f := &Feature{
		Depend:       r.list("depend"),
		Args:         r.list("args"),
		CacheKeys:    r.list("cache_keys"),
		FeatureGroup: r.list("feature_group"),
		Shared:       r.boolean("shared"),
		NeedRaw:      r.boolean("need_raw"),
	}
	var ok bool
	if f.FeatureName, ok = r.str("feature_name"); !ok {
		return nil, errors.New("feature line without feature_name")
	}
	f.Method, _ = r.str("method")
	if opt := r.list("input_optional"); opt != nil {
		f.InputOptional = make([]bool, len(opt))
		for i, o := range opt {
			f.InputOptional[i] = o == "true"
		}
	}
	var n int64
	if n, f.HasSlot = r.integer("slot"); f.HasSlot {
		if int64(int(n)) != n {
			return nil, fmt.Errorf("slot=%d out of range", n)
		}
		f.Slot = int(n)
	}
	if n, f.HasFeatureVersion = r.integer("feature_version"); f.HasFeatureVersion {
		if int64(int(n)) != n {
			return nil, fmt.Errorf("feature_version=%d out of range", n)
		}
		f.FeatureVersion = int(n)
	}
	f.FeatureID, f.HasFeatureID = r.integer("feature_id")
	f.Extra = r.extra()
	return f, r.err
}
