package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// maxIncludeDepth bounds nested include directives.
const maxIncludeDepth = 32

// ParseError reports a conf line that cannot be used. Key is empty for syntax errors.
type ParseError struct {
	File string
	Line int
	Key  string
	Err  error
}

func (e *ParseError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("serving/config: %s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("serving/config: %s:%d: %s: %v", e.File, e.Line, e.Key, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// Warning is a conf line that was ignored: an unknown key or a key without a value.
type Warning struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (w Warning) String() string { return fmt.Sprintf("%s:%d: %s: %s", w.File, w.Line, w.Key, w.Msg) }

// Parser reads agent conf files. The zero value opens files with os.Open and logs warnings
// with slog.Default. A Parser is safe for concurrent use if its functions are.
type Parser struct {
	// Open opens an included file; nil means os.Open.
	Open func(path string) (io.ReadCloser, error)
	// Warn receives each ignored line; nil logs it with slog.Default at warning level.
	Warn func(Warning)
}

// Parse reads a conf file from r and returns the typed AgentConfig (defaults for absent keys;
// the environment is not consulted: see Resolve). name is used in errors and warnings and
// relative include paths are resolved against its folder.
func Parse(r io.Reader, name string) (AgentConfig, error) { return Parser{}.Parse(r, name) }

// Load parses the conf file at path. A missing file is an error.
func Load(path string) (AgentConfig, error) { return Parser{}.Load(path) }

// Load parses the conf file at path. A missing file is an error.
func (p Parser) Load(path string) (AgentConfig, error) {
	rc, err := p.open(path)
	if err != nil {
		return AgentConfig{}, fmt.Errorf("serving/config: %w", err)
	}
	defer rc.Close()
	return p.Parse(rc, path)
}

// Parse reads a conf file from r (see the package function Parse).
func (p Parser) Parse(r io.Reader, name string) (AgentConfig, error) {
	st := &parseState{p: p, cfg: Default()}
	if err := st.file(r, name, nil); err != nil {
		return AgentConfig{}, err
	}
	if !st.haveDeploy && st.serverType != nil {
		if err := st.set(st.serverType.file, st.serverType.line, "deploy_type", st.serverType.value); err != nil {
			return AgentConfig{}, err
		}
	}
	return st.cfg, nil
}

func (p Parser) open(path string) (io.ReadCloser, error) {
	if p.Open != nil {
		return p.Open(path)
	}
	return os.Open(path)
}

type entry struct {
	file  string
	line  int
	value string
}

type parseState struct {
	p          Parser
	cfg        AgentConfig
	haveDeploy bool
	serverType *entry
}

func (st *parseState) warn(w Warning) {
	if st.p.Warn != nil {
		st.p.Warn(w)
		return
	}
	slog.Default().Warn("serving/config: ignored conf line", "file", w.File, "line", w.Line, "key", w.Key, "reason", w.Msg)
}

// file parses one file; stack holds the files including it (cycle detection).
func (st *parseState) file(r io.Reader, name string, stack []string) error {
	clean := filepath.Clean(name)
	for _, s := range stack {
		if s == clean {
			return fmt.Errorf("serving/config: include cycle: %s", strings.Join(append(stack, clean), " -> "))
		}
	}
	if len(stack) >= maxIncludeDepth {
		return fmt.Errorf("serving/config: %s: includes nested deeper than %d", name, maxIncludeDepth)
	}
	stack = append(stack, clean)
	br := bufio.NewReader(r)
	for lineNo := 1; ; lineNo++ {
		line, rerr := readLine(br)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("serving/config: read %s: %w", name, rerr)
		}
		if err := st.line(line, name, lineNo, stack); err != nil {
			return err
		}
		if rerr != nil {
			return nil
		}
	}
}

// readLine returns the next line without its terminator; \n, \r\n and \r end lines (as
// Python's universal newlines do). io.EOF comes with the last (possibly empty) line.
func readLine(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		b, err := br.ReadByte()
		if err != nil {
			return sb.String(), err
		}
		switch b {
		case '\n':
			return sb.String(), nil
		case '\r':
			if nb, err := br.Peek(1); err == nil && nb[0] == '\n' {
				_, _ = br.ReadByte()
			}
			return sb.String(), nil
		}
		sb.WriteByte(b)
	}
}

// splitKV splits a stripped line once on the first run of blanks, tabs and '=' (the
// reference's `[ =\t]+`).
func splitKV(line string) (key, value string, ok bool) {
	i := strings.IndexAny(line, " =\t")
	if i < 0 {
		return line, "", false
	}
	j := i
	for j < len(line) && (line[j] == ' ' || line[j] == '=' || line[j] == '\t') {
		j++
	}
	return line[:i], line[j:], true
}

func (st *parseState) line(raw, name string, lineNo int, stack []string) error {
	line := strings.TrimSpace(raw)
	if line == "" || line[0] == '#' {
		return nil
	}
	if i := strings.IndexByte(line, '#'); i > 0 {
		line = strings.TrimSpace(line[:i]) // S1: trailing blanks before a comment are dropped
	}
	key, value, _ := splitKV(line)
	if key == "include" {
		if value == "" {
			return &ParseError{File: name, Line: lineNo, Key: key, Err: errors.New("include without a path")}
		}
		path := value
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(name), path)
		}
		rc, err := st.p.open(path)
		if err != nil {
			return &ParseError{File: name, Line: lineNo, Key: key, Err: err}
		}
		defer rc.Close()
		return st.file(rc, path, stack)
	}
	if value == "" {
		st.warn(Warning{File: name, Line: lineNo, Key: key, Msg: "no value"})
		return nil
	}
	if key == "server_type" { // legacy spelling of deploy_type, used only when deploy_type is absent
		st.serverType = &entry{file: name, line: lineNo, value: value}
		return nil
	}
	if _, ok := fieldByName[key]; !ok {
		st.warn(Warning{File: name, Line: lineNo, Key: key, Msg: "unknown key"})
		return nil
	}
	if key == "deploy_type" {
		st.haveDeploy = true
	}
	return st.set(name, lineNo, key, value)
}

// set converts value to the type of the key's field and stores it: scalars take the last
// occurrence, layout_filters collects every one (S1).
func (st *parseState) set(name string, lineNo int, key, value string) error {
	f := fieldByName[key]
	v := reflect.ValueOf(&st.cfg).Elem().FieldByIndex(f.index)
	if err := setValue(v, key, value); err != nil {
		return &ParseError{File: name, Line: lineNo, Key: key, Err: err}
	}
	return nil
}

func setValue(v reflect.Value, key, value string) error {
	switch v.Kind() {
	case reflect.Bool:
		b, err := parseBool(value)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int:
		n, err := evalInt(value)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Pointer: // *int
		n, err := evalInt(value)
		if err != nil {
			return err
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().SetInt(n)
		v.Set(p)
	case reflect.Float64:
		f, err := evalFloat(value)
		if err != nil {
			return err
		}
		v.SetFloat(f)
	case reflect.String:
		if strings.EqualFold(value, "none") {
			v.SetString("")
			return nil
		}
		if key == "deploy_type" {
			d, err := ParseDeployType(value)
			if err != nil {
				return err
			}
			value = string(d)
		}
		v.SetString(value)
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.ValueOf(value)))
	default:
		return fmt.Errorf("unsupported field kind %s", v.Kind())
	}
	return nil
}

// parseBool accepts true/false/1/0/yes/no in any case (S2).
func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, fmt.Errorf("invalid boolean %q (want true, false, yes, no, 1 or 0)", s)
}

// evalInt evaluates an arithmetic expression and truncates it toward zero, as Python's
// int(eval(s)) does.
func evalInt(s string) (int64, error) {
	r, err := evalExpr(s)
	if err != nil {
		return 0, err
	}
	q := r.Num()
	if !r.IsInt() {
		q = q.Quo(q, r.Denom()) // big.Int.Quo truncates toward zero
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return q.Int64(), nil
}

func evalFloat(s string) (float64, error) {
	r, err := evalExpr(s)
	if err != nil {
		return 0, err
	}
	f, _ := r.Float64()
	if math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return f, nil
}
