package filepattern

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxCandidates bounds the number of patterns a template or [GenPatterns] may produce.
const MaxCandidates = 1 << 20

const (
	dayLayout  = "20060102"
	hourLayout = "2006010215"
)

// placeholder is one `{KIND(start,end)}` group of a template, already enumerated.
type placeholder struct {
	values []string
}

// Candidates returns the patterns a DATE/INT template stands for, without touching the
// file system: ASCII spaces are removed, every `{DATE(a,b)}` / `{INT(a,b)}` group is
// enumerated (bounds inclusive) and the cartesian product is formed in placeholder order,
// the first placeholder varying slowest. A string without placeholders yields itself.
// Errors wrap [ErrBadTemplate] and name the offending group.
func Candidates(template string) ([]string, error) {
	return candidates(template, MaxCandidates)
}

// candidates is Candidates with an explicit bound on the number of candidates.
func candidates(template string, limit int) ([]string, error) {
	t := strings.ReplaceAll(template, " ", "")
	var (
		lits  []string // len(lits) == len(phs)+1
		phs   []placeholder
		total = 1
	)
	rest := t
	for {
		lb := strings.IndexByte(rest, '{')
		if rb := strings.IndexByte(rest, '}'); rb >= 0 && (lb < 0 || rb < lb) {
			return nil, fmt.Errorf("%w: unmatched '}' in %q", ErrBadTemplate, t)
		}
		if lb < 0 {
			lits = append(lits, rest)
			break
		}
		rb := strings.IndexByte(rest[lb:], '}')
		if rb < 0 {
			return nil, fmt.Errorf("%w: unclosed '{' in %q", ErrBadTemplate, t)
		}
		rb += lb
		ph, err := parsePlaceholder(rest[lb+1:rb], limit)
		if err != nil {
			return nil, err
		}
		if len(ph.values) == 0 || total > limit/len(ph.values) {
			return nil, fmt.Errorf("%w: %q expands to more than %d candidates",
				ErrBadTemplate, t, limit)
		}
		total *= len(ph.values)
		lits = append(lits, rest[:lb])
		phs = append(phs, ph)
		rest = rest[rb+1:]
	}
	out := make([]string, 0, total)
	idx := make([]int, len(phs))
	var b strings.Builder
	for {
		b.Reset()
		for i, ph := range phs {
			b.WriteString(lits[i])
			b.WriteString(ph.values[idx[i]])
		}
		b.WriteString(lits[len(phs)])
		out = append(out, b.String())
		// Odometer increment, last placeholder fastest.
		i := len(phs) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(phs[i].values) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out, nil
		}
	}
}

func parsePlaceholder(body string, limit int) (placeholder, error) {
	bad := func(format string, args ...any) (placeholder, error) {
		return placeholder{}, fmt.Errorf("%w: {%s}: %s", ErrBadTemplate, body, fmt.Sprintf(format, args...))
	}
	kind, args, ok := strings.Cut(body, "(")
	if !ok || !strings.HasSuffix(args, ")") {
		return bad("want DATE(start,end) or INT(start,end)")
	}
	start, end, ok := strings.Cut(strings.TrimSuffix(args, ")"), ",")
	if !ok || strings.ContainsAny(end, ",()") || strings.ContainsAny(start, "()") {
		return bad("want exactly two bounds")
	}
	switch kind {
	case "DATE":
		if len(start) != len(end) || !allDigits(start) || !allDigits(end) {
			return bad("DATE bounds must both have 8 (day) or 10 (hour) digits")
		}
		var layout string
		var step time.Duration
		switch len(start) {
		case 8:
			layout, step = dayLayout, 24*time.Hour
		case 10:
			layout, step = hourLayout, time.Hour
		default:
			return bad("DATE bounds must both have 8 (day) or 10 (hour) digits")
		}
		s, err := time.Parse(layout, start)
		if err != nil {
			return bad("start: %v", err)
		}
		e, err := time.Parse(layout, end)
		if err != nil {
			return bad("end: %v", err)
		}
		if e.Before(s) {
			return bad("end is before start")
		}
		n := e.Sub(s)/step + 1
		if n > time.Duration(limit) {
			return bad("more than %d values", limit)
		}
		vals := make([]string, 0, n)
		for t := s; !t.After(e); t = t.Add(step) {
			vals = append(vals, t.Format(layout))
		}
		return placeholder{values: vals}, nil
	case "INT":
		s, err1 := strconv.ParseInt(start, 10, 64)
		e, err2 := strconv.ParseInt(end, 10, 64)
		if err1 != nil || err2 != nil {
			return bad("INT bounds must be decimal integers")
		}
		if e < s {
			return bad("end is before start")
		}
		if uint64(e-s) >= uint64(limit) {
			return bad("more than %d values", limit)
		}
		vals := make([]string, 0, e-s+1)
		for v := s; v <= e; v++ {
			vals = append(vals, strconv.FormatInt(v, 10))
		}
		return placeholder{values: vals}, nil
	default:
		return bad("unknown placeholder %q (want DATE or INT)", kind)
	}
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// GenPatterns returns one glob per day or hour of a date range, as Monolith's
// PBDataset.gen_patterns does (io.md §3.5.2). The range starts at startDate (YYYYMMDD)
// hour startHour, inclusive, and ends at endDate hour endHour (hourly) or endDate 00:00
// (daily), exclusive. Daily patterns are "<inputPath>/<YYYYMMDD>/<wildcard>", hourly ones
// "<inputPath>/<YYYYMMDD>/<HH><wildcard>". Paths are joined like Python's os.path.join: a
// wildcard starting with "/" replaces the prefix.
//
// An empty inputPath or startDate yields (nil, nil), as in the reference; an empty endDate
// means today (local time) and an empty wildcard means "*". Dates must have exactly eight
// digits and hours lie in 0..23. Note that, as in the reference, the daily range starts at
// startDate+startHour, so startHour only matters when startDate == endDate.
func GenPatterns(inputPath, startDate string, startHour int, endDate string, endHour int, hourly bool, wildcard string) ([]string, error) {
	if inputPath == "" || startDate == "" {
		return nil, nil
	}
	if endDate == "" {
		endDate = time.Now().Format(dayLayout)
	}
	if wildcard == "" {
		wildcard = "*"
	}
	parse := func(what, date string, hour int) (time.Time, error) {
		if len(date) != 8 || !allDigits(date) {
			return time.Time{}, fmt.Errorf("%w: gen_patterns: %s %q is not YYYYMMDD", ErrBadTemplate, what, date)
		}
		if hour < 0 || hour > 23 {
			return time.Time{}, fmt.Errorf("%w: gen_patterns: %s hour %d is not in 0..23", ErrBadTemplate, what, hour)
		}
		d, err := time.Parse(dayLayout, date)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: gen_patterns: %s: %v", ErrBadTemplate, what, err)
		}
		return d.Add(time.Duration(hour) * time.Hour), nil
	}
	start, err := parse("start", startDate, startHour)
	if err != nil {
		return nil, err
	}
	step := 24 * time.Hour
	if hourly {
		step = time.Hour
	} else {
		endHour = 0
	}
	end, err := parse("end", endDate, endHour)
	if err != nil {
		return nil, err
	}
	if end.Sub(start)/step > MaxCandidates {
		return nil, fmt.Errorf("%w: gen_patterns: more than %d patterns", ErrBadTemplate, MaxCandidates)
	}
	var out []string
	for cur := start; cur.Before(end); cur = cur.Add(step) {
		var pat string
		if hourly {
			pat = cur.Format("20060102/15") + wildcard
		} else {
			pat = pyJoin(cur.Format(dayLayout), wildcard)
		}
		out = append(out, pyJoin(inputPath, pat))
	}
	return out, nil
}

// pyJoin joins two path parts the way Python's posixpath.join does.
func pyJoin(a, b string) string {
	switch {
	case strings.HasPrefix(b, "/"):
		return b
	case a == "" || strings.HasSuffix(a, "/"):
		return a + b
	default:
		return a + "/" + b
	}
}
