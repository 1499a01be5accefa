package hyperparams

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Errors wrapped by the operations of Params.
var (
	// ErrImmutable: Define, Set or Delete on a frozen Params.
	ErrImmutable = errors.New("this Params instance is immutable")
	// ErrInvalidName: a name that does not match ^[a-z][a-z0-9_]*$.
	ErrInvalidName = errors.New("invalid parameter name")
	// ErrDuplicate: Define of a name already defined.
	ErrDuplicate = errors.New("parameter already defined")
	// ErrUnknown: a name that is not defined (Python's AttributeError).
	ErrUnknown = errors.New("unknown parameter")
	// ErrNotParams: a dotted name walks into a value that is not a Params, or indexes
	// something that is not a list of Params (Python's "Cannot introspect").
	ErrNotParams = errors.New("cannot introspect")
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// listPartRE matches a dotted-name part that indexes a list: "name[index]".
var listPartRE = regexp.MustCompile(`^(.+)\[(.+)\]$`)

// param is one parameter.
type param struct {
	name        string
	value       any
	description string
}

// Params is a set of named parameters; see the package doc. The zero value is not usable:
// make one with New.
type Params struct {
	params    map[string]*param
	order     []string // definition order (iteration order)
	immutable bool
}

// Tuple is a Python tuple: it prints as (a, b) and (a,) where a []any prints as [a, b].
type Tuple []any

// New returns an empty, mutable Params.
func New() *Params {
	return &Params{params: map[string]*param{}}
}

// Define adds a parameter with its default value and description.
func (p *Params) Define(name string, defaultValue any, description string) error {
	if p.immutable {
		return ErrImmutable
	}
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %q (want ^[a-z][a-z0-9_]*$)", ErrInvalidName, name)
	}
	if _, ok := p.params[name]; ok {
		return fmt.Errorf("%w: Parameter %s is already defined", ErrDuplicate, name)
	}
	p.params[name] = &param{name: name, value: defaultValue, description: description}
	p.order = append(p.order, name)
	return nil
}

// MustDefine is Define for static definitions: it panics on an error.
func (p *Params) MustDefine(name string, defaultValue any, description string) *Params {
	if err := p.Define(name, defaultValue, description); err != nil {
		panic(err)
	}
	return p
}

// Contains reports whether name is defined at this level (no dotted names), Python's `in`.
func (p *Params) Contains(name string) bool {
	_, ok := p.params[name]
	return ok
}

// Len returns the number of parameters at this level.
func (p *Params) Len() int { return len(p.params) }

// Names returns the names at this level, sorted (Python's dir()).
func (p *Params) Names() []string {
	names := append([]string(nil), p.order...)
	sort.Strings(names)
	return names
}

// Freeze makes p immutable; the Params nested in it stay as they are.
func (p *Params) Freeze() { p.immutable = true }

// IsImmutable reports whether p is frozen.
func (p *Params) IsImmutable() bool { return p.immutable }

// similarKeys returns the keys at this level whose 3-character substrings match more than
// half of name's (the reference's test counts len(name)-3 substrings, not the last one).
func (p *Params) similarKeys(name string) []string {
	var out []string
	for _, key := range p.order {
		matches, trials := 0, 0
		for i := 0; i < len(name)-3; i++ {
			trials++
			if strings.Contains(key, name[i:i+3]) {
				matches++
			}
		}
		if trials > 0 && float64(matches)/float64(trials) > 0.5 {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// unknown returns the ErrUnknown error for name, with the reference's suggestions.
func (p *Params) unknown(name string) error {
	if similar := p.similarKeys(name); len(similar) > 0 {
		return fmt.Errorf("%w: %s (did you mean: [%s])", ErrUnknown, name, strings.Join(similar, ","))
	}
	return fmt.Errorf("%w: %s", ErrUnknown, name)
}

// nested walks the dotted name to the Params that holds its last part.
func (p *Params) nested(name string) (*Params, string, error) {
	parts := strings.Split(name, ".")
	curr := p
	for i, part := range parts[:len(parts)-1] {
		prefix := strings.Join(parts[:i+1], ".")
		index, isList := 0, false
		if m := listPartRE.FindStringSubmatch(part); m != nil {
			n, err := strconv.Atoi(m[2])
			if err != nil {
				return nil, "", fmt.Errorf("%w: bad list index in %s", ErrNotParams, prefix)
			}
			part, index, isList = m[1], n, true
		}
		prm, ok := curr.params[part]
		if !ok {
			return nil, "", fmt.Errorf("%w: %s", ErrUnknown, prefix)
		}
		v := prm.value
		if isList {
			rv := reflect.ValueOf(v)
			if !rv.IsValid() || (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array) {
				return nil, "", fmt.Errorf("%w: %s for %s", ErrNotParams, pyTypeName(v), prefix)
			}
			if index < 0 {
				index += rv.Len()
			}
			if index < 0 || index >= rv.Len() {
				return nil, "", fmt.Errorf("%w: list index out of range in %s", ErrNotParams, prefix)
			}
			v = rv.Index(index).Interface()
		}
		next, ok := v.(*Params)
		if !ok || next == nil {
			return nil, "", fmt.Errorf("%w: %s for %s", ErrNotParams, pyTypeName(v), prefix)
		}
		curr = next
	}
	return curr, parts[len(parts)-1], nil
}

// Get returns the value of a (dotted) name.
func (p *Params) Get(name string) (any, error) {
	holder, key, err := p.nested(name)
	if err != nil {
		return nil, err
	}
	prm, ok := holder.params[key]
	if !ok {
		return nil, p.unknown(name)
	}
	return prm.value, nil
}

// GetAs returns the value of a (dotted) name as a T; a value of another type is an error.
func GetAs[T any](p *Params, name string) (T, error) {
	var zero T
	v, err := p.Get(name)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("hyperparams: %s is a %T, not a %T", name, v, zero)
	}
	return t, nil
}

// Description returns the description of a (dotted) name.
func (p *Params) Description(name string) (string, error) {
	holder, key, err := p.nested(name)
	if err != nil {
		return "", err
	}
	prm, ok := holder.params[key]
	if !ok {
		return "", p.unknown(name)
	}
	return prm.description, nil
}

// Set sets the value of a (dotted) name; p itself must not be frozen (the Params holding
// the last part is not checked, as in the reference). A *Params value is stored, not copied.
func (p *Params) Set(name string, value any) error {
	if p.immutable {
		return ErrImmutable
	}
	holder, key, err := p.nested(name)
	if err != nil {
		return err
	}
	prm, ok := holder.params[key]
	if !ok {
		return p.unknown(name)
	}
	prm.value = value
	return nil
}

// Delete removes (dotted) names, in order; it stops at the first error.
func (p *Params) Delete(names ...string) error {
	if p.immutable {
		return ErrImmutable
	}
	for _, name := range names {
		holder, key, err := p.nested(name)
		if err != nil {
			return err
		}
		if _, ok := holder.params[key]; !ok {
			return p.unknown(name)
		}
		delete(holder.params, key)
		for i, n := range holder.order {
			if n == key {
				holder.order = append(holder.order[:i:i], holder.order[i+1:]...)
				break
			}
		}
	}
	return nil
}

// Each calls fn for every parameter at this level, in definition order.
func (p *Params) Each(fn func(name string, value any)) {
	for _, n := range p.order {
		fn(n, p.params[n].value)
	}
}

// Copy returns a deep copy of p (see the package doc); a frozen Params gives a frozen copy.
func (p *Params) Copy() *Params {
	if p == nil {
		return nil
	}
	c := &Params{params: make(map[string]*param, len(p.params)), order: append([]string(nil), p.order...),
		immutable: p.immutable}
	for n, prm := range p.params {
		c.params[n] = &param{name: prm.name, value: deepCopy(prm.value), description: prm.description}
	}
	return c
}

// deepCopy copies nested Params and the containers of the package doc.
func deepCopy(v any) any {
	switch x := v.(type) {
	case *Params:
		return x.Copy()
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	case Tuple:
		if x == nil {
			return x
		}
		out := make(Tuple, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	case []*Params:
		if x == nil {
			return x
		}
		out := make([]*Params, len(x))
		for i, e := range x {
			out[i] = e.Copy()
		}
		return out
	case map[string]any:
		if x == nil {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	}
	return v
}

// Equal reports whether p and o define the same names with equal values.
func (p *Params) Equal(o *Params) bool {
	if p == nil || o == nil {
		return p == o
	}
	if len(p.params) != len(o.params) {
		return false
	}
	for n, prm := range p.params {
		q, ok := o.params[n]
		if !ok || !valuesEqual(prm.value, q.value) {
			return false
		}
	}
	return true
}

func valuesEqual(a, b any) bool {
	switch x := a.(type) {
	case *Params:
		y, ok := b.(*Params)
		return ok && x.Equal(y)
	case []any:
		y, ok := b.([]any)
		return ok && listsEqual(x, y)
	case Tuple:
		y, ok := b.(Tuple)
		return ok && listsEqual(x, y)
	case []*Params:
		y, ok := b.([]*Params)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !x[i].Equal(y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !valuesEqual(e, f) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func listsEqual(x, y []any) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !valuesEqual(x[i], y[i]) {
			return false
		}
	}
	return true
}

// CopyParamsTo sets every parameter of from in to (which must define them), except the
// names in skip; nested Params are copied. It returns to (copy_params_to).
func CopyParamsTo(from, to *Params, skip ...string) (*Params, error) {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	for _, n := range from.order {
		if skipped[n] {
			continue
		}
		v := from.params[n].value
		if sub, ok := v.(*Params); ok {
			v = sub.Copy()
		}
		if err := to.Set(n, v); err != nil {
			return to, err
		}
	}
	return to, nil
}

// Flatten returns every non-Params value under p by its last name part, depth first in
// definition order; a later name overwrites an earlier one (the reference's inverted index).
func Flatten(p *Params) map[string]any {
	idx := map[string]any{}
	var walk func(*Params)
	walk = func(q *Params) {
		for _, n := range q.order {
			v := q.params[n].value
			if sub, ok := v.(*Params); ok && sub != nil {
				walk(sub)
			} else {
				idx[n] = v
			}
		}
	}
	walk(p)
	return idx
}

// Update sets every non-Params parameter under p whose name is a key of args to that value
// and removes the key from args (update_params); it stops at the first error.
func Update(p *Params, args map[string]any) error {
	for _, n := range p.order {
		v := p.params[n].value
		if sub, ok := v.(*Params); ok && sub != nil {
			if err := Update(sub, args); err != nil {
				return err
			}
			continue
		}
		if nv, ok := args[n]; ok {
			if err := p.Set(n, nv); err != nil {
				return err
			}
			delete(args, n)
		}
	}
	return nil
}
