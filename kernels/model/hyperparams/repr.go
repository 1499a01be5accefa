package hyperparams

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/internal/pytext"
)

// Reprer is a value that prints itself in the text dump (the reference's Repr method).
type Reprer interface {
	Repr() string
}

// String returns the reference's text dump of p (str(params)); see the package doc.
func (p *Params) String() string {
	var sb strings.Builder
	p.writeTo(&sb, 0)
	return sb.String()
}

// writeTo writes the block of p whose closing brace is indented by depth levels.
func (p *Params) writeTo(sb *strings.Builder, depth int) {
	sb.WriteString("{\n")
	for i, n := range p.Names() {
		if i > 0 {
			sb.WriteByte('\n')
		}
		indent := strings.Repeat("  ", depth+1)
		sb.WriteString(indent + n + ": ")
		switch v := p.params[n].value.(type) {
		case *Params:
			if v == nil {
				sb.WriteString("None")
			} else {
				v.writeTo(sb, depth+1)
			}
		case string:
			sb.WriteString(`"` + v + `"`)
		default:
			sb.WriteString(pyStr(v))
		}
	}
	sb.WriteString("\n" + strings.Repeat("  ", depth) + "}")
}

// pyStr is Python's str of the reference's GetRepr(v) for a value other than a string.
func pyStr(v any) string {
	switch x := v.(type) {
	case Reprer:
		return x.Repr()
	case string:
		return x
	}
	return pyRepr(v)
}

// pyRepr is Python's repr of the reference's GetRepr(v).
func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case *Params:
		if x == nil {
			return "None"
		}
		keys := x.Names()
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pytext.Repr(k) + ": " + pyRepr(x.params[k].value)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case Reprer:
		return pytext.Repr(x.Repr())
	case fmt.Stringer:
		return x.String()
	case string:
		return pytext.Repr(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		return pytext.Float(x)
	case float32:
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		return pytext.Float(f)
	case Tuple:
		parts := reprAll(x)
		if len(parts) == 1 {
			return "(" + parts[0] + ",)"
		}
		return "(" + strings.Join(parts, ", ") + ")"
	case []any:
		return "[" + strings.Join(reprAll(x), ", ") + "]"
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(rv.Uint(), 10)
	case reflect.Float32:
		return pyRepr(float32(rv.Float()))
	case reflect.Float64:
		return pytext.Float(rv.Float())
	case reflect.String:
		return pytext.Repr(rv.String())
	case reflect.Bool:
		return pyRepr(rv.Bool())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return "None"
		}
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = pyRepr(rv.Index(i).Interface())
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		if rv.IsNil() {
			return "None"
		}
		return reprMap(rv)
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return "None"
		}
	}
	return fmt.Sprint(v)
}

func reprAll(xs []any) []string {
	parts := make([]string, len(xs))
	for i, e := range xs {
		parts[i] = pyRepr(e)
	}
	return parts
}

// reprMap prints a map as the reference's sorted dict: keys sorted (numbers numerically,
// strings by code point, anything else by its repr), "key: value" with both repr'd.
func reprMap(rv reflect.Value) string {
	type kv struct {
		key  reflect.Value
		repr string
	}
	keys := make([]kv, 0, rv.Len())
	for _, k := range rv.MapKeys() {
		keys = append(keys, kv{k, pyRepr(k.Interface())})
	}
	less := func(a, b reflect.Value) bool {
		switch a.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return a.Int() < b.Int()
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			return a.Uint() < b.Uint()
		case reflect.Float32, reflect.Float64:
			return a.Float() < b.Float()
		case reflect.String:
			return a.String() < b.String()
		}
		return false
	}
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := keys[i].key, keys[j].key
		if a.Kind() == reflect.Interface {
			a = a.Elem()
		}
		if b.Kind() == reflect.Interface {
			b = b.Elem()
		}
		if a.IsValid() && b.IsValid() && a.Kind() == b.Kind() {
			switch a.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
				reflect.Float32, reflect.Float64, reflect.String:
				return less(a, b)
			}
		}
		return keys[i].repr < keys[j].repr
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k.repr + ": " + pyRepr(rv.MapIndex(k.key).Interface())
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// pyTypeName prints the Python class a value stands for, as str(type(v)) does:
// "<class 'dict'>"; a Go type without a Python counterpart prints its Go name.
func pyTypeName(v any) string {
	name := fmt.Sprintf("%T", v)
	switch v.(type) {
	case nil:
		name = "NoneType"
	case Tuple:
		name = "tuple"
	case string:
		name = "str"
	case bool:
		name = "bool"
	default:
		switch reflect.ValueOf(v).Kind() {
		case reflect.Map:
			name = "dict"
		case reflect.Slice, reflect.Array:
			name = "list"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			name = "int"
		case reflect.Float32, reflect.Float64:
			name = "float"
		}
	}
	return "<class '" + name + "'>"
}
