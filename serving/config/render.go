package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Render writes c's conf fields as a conf file that Parse reads back to an equal config:
// one "key value" line per set field (null strings, nil pointers and empty lists are
// omitted; each layout filter gets its own line). Host is not rendered. A value Parse
// cannot reproduce (a '#', a line break, surrounding blanks, a string spelled "none", a
// non-finite float) is an error naming the key.
func (c AgentConfig) Render() (string, error) {
	var sb strings.Builder
	v := reflect.ValueOf(c)
	for _, f := range agentFields {
		fv := v.FieldByIndex(f.index)
		var vals []string
		switch fv.Kind() {
		case reflect.Pointer:
			if fv.IsNil() {
				continue
			}
			vals = []string{strconv.FormatInt(fv.Elem().Int(), 10)}
		case reflect.Slice:
			for i := range fv.Len() {
				vals = append(vals, fv.Index(i).String())
			}
		case reflect.String:
			if fv.String() == "" {
				continue
			}
			vals = []string{fv.String()}
		case reflect.Float64:
			vals = []string{strconv.FormatFloat(fv.Float(), 'g', -1, 64)}
		default:
			vals = []string{formatValue(fv)}
		}
		for _, s := range vals {
			if err := renderable(fv.Kind(), s); err != nil {
				return "", fmt.Errorf("serving/config: render %s: %w", f.name, err)
			}
			sb.WriteString(f.name + " " + s + "\n")
		}
	}
	return sb.String(), nil
}

func renderable(k reflect.Kind, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty value")
	case strings.ContainsAny(s, "#\n\r"):
		return fmt.Errorf("value %q holds '#' or a line break", s)
	case strings.TrimSpace(s) != s || s[0] == '=':
		return fmt.Errorf("value %q has surrounding blanks or a leading '='", s)
	case k == reflect.String && strings.EqualFold(s, "none"):
		return fmt.Errorf("value %q reads back as null", s)
	case k == reflect.Float64 && (strings.Contains(s, "Inf") || strings.Contains(s, "NaN")):
		return fmt.Errorf("non-finite value %s", s)
	}
	return nil
}
