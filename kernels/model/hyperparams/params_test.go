package hyperparams

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// must fails the test on an error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type testEnum int

func (e testEnum) String() string { return [...]string{"TestEnum.A", "TestEnum.B"}[e-1] }

// TestEquals ports test_equals.
func TestEquals(t *testing.T) {
	p1, p2 := New(), New()
	type object struct{ id int }
	some, other := &object{1}, &object{2}
	steps := []struct {
		do   func()
		want bool
	}{
		{func() {}, true},
		{func() { must(t, p1.Define("first", "firstvalue", "")) }, false},
		{func() { must(t, p2.Define("first", "firstvalue", "")) }, true},
		{func() { must(t, p1.Define("second", some, "")); must(t, p2.Define("second", other, "")) }, false},
		{func() { must(t, p2.Set("second", some)) }, true},
		{func() { must(t, p1.Define("third", New(), "")); must(t, p2.Define("third", New(), "")) }, true},
		{func() {
			must(t, p1.Define("third_x", New().MustDefine("fourth", "x", ""), ""))
			must(t, p2.Define("third_x", New().MustDefine("fourth", "y", ""), ""))
		}, false},
		{func() { must(t, p2.Set("third_x.fourth", "x")) }, true},
		{func() { must(t, p1.Set("third_x.fourth", "x")); must(t, p2.Set("first", "other")) }, false},
	}
	for i, s := range steps {
		s.do()
		if got := p1.Equal(p2); got != s.want {
			t.Fatalf("step %d: Equal = %v, want %v", i, got, s.want)
		}
		if got := p2.Equal(p1); got != s.want {
			t.Fatalf("step %d: reversed Equal = %v, want %v", i, got, s.want)
		}
	}
	if p1.Equal(nil) {
		t.Error("Params equal to nil")
	}
}

// TestDeepCopy ports test_deep_copy: nested Params are copied, a pointer (the reference's
// tensor) is shared.
func TestDeepCopy(t *testing.T) {
	type tensor struct{ v int }
	tens := &tensor{0}
	inner := New().MustDefine("alpha", 2, "").MustDefine("tensor", tens, "")
	list := []any{1, New().MustDefine("x", 1, "")}
	outer := New().MustDefine("beta", 1, "").MustDefine("inner", inner, "").MustDefine("list", list, "")
	cp := outer.Copy()
	if cp == outer || !cp.Equal(outer) {
		t.Fatal("copy is the same object or differs")
	}
	ci, _ := GetAs[*Params](cp, "inner")
	if ci == inner || !ci.Equal(inner) {
		t.Error("inner not deep-copied")
	}
	if v, _ := cp.Get("inner.alpha"); v != 2 {
		t.Errorf("inner.alpha = %v", v)
	}
	if v, _ := cp.Get("inner.tensor"); v != tens {
		t.Error("tensor pointer not shared")
	}
	must(t, cp.Set("list[1].x", 5))
	if v, _ := outer.Get("list[1].x"); v != 1 {
		t.Errorf("the copy's list shares Params with the original: %v", v)
	}
	must(t, ci.Set("alpha", 3))
	if v, _ := outer.Get("inner.alpha"); v != 2 {
		t.Errorf("setting the copy changed the original: %v", v)
	}
}

// TestCopyParamsTo ports test_copy_params_to.
func TestCopyParamsTo(t *testing.T) {
	src := New().MustDefine("a", "a", "").MustDefine("b", "b", "").MustDefine("c", "c", "")
	dst := New().MustDefine("a", "", "")
	if _, err := CopyParamsTo(src, dst, "b", "c"); err != nil {
		t.Fatal(err)
	}
	if v, _ := dst.Get("a"); v != "a" {
		t.Errorf("a = %v", v)
	}
	if dst.Contains("b") || dst.Contains("c") {
		t.Error("skipped names copied")
	}
	// Without the skip list, b is not defined in dst: an error, as Python's set raises.
	if _, err := CopyParamsTo(src, dst); !errors.Is(err, ErrUnknown) {
		t.Errorf("copy into a Params without b: %v", err)
	}
	// Nested Params are copied, not shared.
	n := New().MustDefine("x", 1, "")
	src2, dst2 := New().MustDefine("n", n, ""), New().MustDefine("n", nil, "")
	must(t, func() error { _, err := CopyParamsTo(src2, dst2); return err }())
	if v, _ := dst2.Get("n"); v == any(n) {
		t.Error("nested Params shared")
	}
}

// TestDefineErrors ports test_define_existing and test_legal_param_names.
func TestDefineErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		want error
	}{
		{"foo_bar", nil},
		{"foo9", nil},
		{"foo", nil},
		{"foo", ErrDuplicate},
		{"", ErrInvalidName},
		{"_foo", ErrInvalidName},
		{"Foo", ErrInvalidName},
		{"1foo", ErrInvalidName},
		{"foo$", ErrInvalidName},
		{"_immutable", ErrInvalidName},
		{"a.b", ErrInvalidName},
	} {
		p := New()
		if tc.want == ErrDuplicate {
			must(t, p.Define(tc.name, 1, ""))
		}
		err := p.Define(tc.name, 1, "")
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("Define(%q) = %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == ErrDuplicate && !strings.Contains(err.Error(), "Parameter foo is already defined") {
			t.Errorf("message %q", err)
		}
	}
}

// TestSetAndGet ports test_set_and_get.
func TestSetAndGet(t *testing.T) {
	p := New()
	if err := p.Set("foo", 4); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "foo") {
		t.Errorf("Set undefined: %v", err)
	}
	must(t, p.Define("foo", 1, "the foo"))
	steps := []struct {
		set  any
		want any
	}{{nil, 1}, {2, 2}, {3, 3}}
	for _, s := range steps {
		if s.set != nil {
			must(t, p.Set("foo", s.set))
		}
		if v, err := p.Get("foo"); err != nil || v != s.want {
			t.Errorf("Get(foo) = %v, %v; want %v", v, err, s.want)
		}
	}
	if !p.Contains("foo") || p.Contains("bar") || p.Len() != 1 {
		t.Error("Contains/Len")
	}
	if d, _ := p.Description("foo"); d != "the foo" {
		t.Errorf("Description = %q", d)
	}
	must(t, p.Delete("foo"))
	if p.Contains("foo") || p.Len() != 0 {
		t.Error("foo still there")
	}
	if _, err := p.Get("foo"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Get deleted: %v", err)
	}
	if err := p.Delete("foo"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Delete deleted: %v", err)
	}
	if _, err := GetAs[string](New().MustDefine("n", 1, ""), "n"); err == nil {
		t.Error("GetAs of the wrong type")
	}
}

// TestNested ports test_set_and_get_nested_param, with list indexing added.
func TestNested(t *testing.T) {
	innermost := New().MustDefine("delta", 22, "").MustDefine("zeta", 5, "")
	inner := New().MustDefine("alpha", 2, "").MustDefine("innermost", innermost, "")
	outer := New().MustDefine("beta", 1, "").MustDefine("inner", inner, "").
		MustDefine("d", map[string]any{"foo": "bar"}, "").
		MustDefine("layers", []*Params{New().MustDefine("dim", 4, ""), New().MustDefine("dim", 8, "")}, "").
		MustDefine("mixed", []any{1, New().MustDefine("dim", 16, "")}, "")
	gets := []struct {
		name string
		want any
		err  error
		msg  string
	}{
		{name: "beta", want: 1},
		{name: "inner.alpha", want: 2},
		{name: "inner.innermost.delta", want: 22},
		{name: "inner.innermost.zeta", want: 5},
		{name: "layers[0].dim", want: 4},
		{name: "layers[1].dim", want: 8},
		{name: "layers[-1].dim", want: 8},
		{name: "mixed[1].dim", want: 16},
		{name: "inner.gamma", err: ErrUnknown, msg: "inner.gamma"},
		{name: "inner.innermost.bad", err: ErrUnknown, msg: "inner.innermost.bad"},
		{name: "nope.x", err: ErrUnknown, msg: "nope"},
		{name: "d.foo", err: ErrNotParams, msg: "cannot introspect: <class 'dict'> for d"},
		{name: "beta.x", err: ErrNotParams, msg: "<class 'int'> for beta"},
		{name: "mixed[0].dim", err: ErrNotParams, msg: "<class 'int'> for mixed[0]"},
		{name: "layers[2].dim", err: ErrNotParams, msg: "out of range"},
		{name: "layers[x].dim", err: ErrNotParams, msg: "bad list index"},
		{name: "beta[0].x", err: ErrNotParams, msg: "<class 'int'> for beta[0]"},
	}
	for _, g := range gets {
		v, err := outer.Get(g.name)
		if g.err != nil {
			if !errors.Is(err, g.err) || !strings.Contains(err.Error(), g.msg) {
				t.Errorf("Get(%q) = %v, %v; want %v containing %q", g.name, v, err, g.err, g.msg)
			}
			// Set and Delete share the walk.
			if err := outer.Set(g.name, 5); !errors.Is(err, g.err) {
				t.Errorf("Set(%q) = %v, want %v", g.name, err, g.err)
			}
			continue
		}
		if err != nil || v != g.want {
			t.Errorf("Get(%q) = %v, %v; want %v", g.name, v, err, g.want)
		}
	}
	must(t, outer.Set("inner.alpha", 3))
	must(t, outer.Set("d", map[string]any{"foo": "baq"}))
	must(t, outer.Delete("beta", "inner.innermost.zeta"))
	if v, _ := GetAs[int](inner, "alpha"); v != 3 {
		t.Errorf("inner.alpha = %d after a dotted Set", v)
	}
	if d, _ := GetAs[map[string]any](outer, "d"); d["foo"] != "baq" {
		t.Errorf("d = %v", d)
	}
	if _, err := outer.Get("beta"); !errors.Is(err, ErrUnknown) {
		t.Errorf("beta after Delete: %v", err)
	}
	if _, err := outer.Get("inner.innermost.zeta"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "inner.innermost.zeta") {
		t.Errorf("zeta after Delete: %v", err)
	}
	if v, _ := outer.Get("inner.innermost.delta"); v != 22 {
		t.Errorf("delta = %v", v)
	}
}

// TestFreeze ports test_freeze.
func TestFreeze(t *testing.T) {
	p := New()
	must(t, p.Define("foo", 1, ""))
	must(t, p.Define("nested", p.Copy(), ""))
	p.Freeze()
	if !p.IsImmutable() {
		t.Fatal("not frozen")
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"Set", p.Set("foo", 2)},
		{"Delete", p.Delete("foo")},
		{"Define", p.Define("bar", 1, "")},
	} {
		if !errors.Is(tc.err, ErrImmutable) {
			t.Errorf("%s on a frozen Params: %v", tc.name, tc.err)
		}
	}
	if v, _ := p.Get("foo"); v != 1 {
		t.Errorf("foo = %v", v)
	}
	if _, err := p.Get("bar"); !errors.Is(err, ErrUnknown) {
		t.Errorf("bar: %v", err)
	}
	nested, _ := GetAs[*Params](p, "nested")
	must(t, nested.Set("foo", 2))
	if v, _ := p.Get("nested.foo"); v != 2 {
		t.Errorf("nested.foo = %v", v)
	}
	if v, _ := p.Get("foo"); v != 1 {
		t.Errorf("foo = %v", v)
	}
	if q := p.Copy(); !errors.Is(q.Set("foo", 2), ErrImmutable) {
		t.Error("copy of a frozen Params is mutable")
	}
}

// TestString ports test_to_string and checks the other value kinds against the output of
// the reference's hyperparams.py (run with Python 3 on the same values).
func TestString(t *testing.T) {
	inner := New().MustDefine("bar", 2, "")
	outer := New().MustDefine("foo", 1, "").MustDefine("inner", inner, "").
		MustDefine("list", []any{1, inner, 2}, "").
		MustDefine("dict", map[string]any{"a": 1, "b": inner}, "").
		MustDefine("enum", testEnum(2), "")
	n3 := New().MustDefine("x", "y", "")
	kinds := New().MustDefine("none", nil, "").
		MustDefine("s", "it's \"x\"\n", "").
		MustDefine("f", 0.1, "").
		MustDefine("big", 1e16, "").
		MustDefine("small", 1e-05, "").
		MustDefine("b", true, "").
		MustDefine("t", Tuple{1}, "").
		MustDefine("e", Tuple{}, "").
		MustDefine("l", []any{"a", "it's", nil, 1.0, Tuple{2, 3}}, "").
		MustDefine("d", map[string]any{"z": "q", "a": map[int]string{2: "x", 1: "y"}}, "").
		MustDefine("empty", New(), "").
		MustDefine("nest", New().MustDefine("deep", n3, "").MustDefine("a", []*Params{n3}, ""), "")
	for _, tc := range []struct {
		name string
		p    *Params
		want string
	}{
		{"test_to_string", outer, `{
  dict: {'a': 1, 'b': {'bar': 2}}
  enum: TestEnum.B
  foo: 1
  inner: {
    bar: 2
  }
  list: [1, {'bar': 2}, 2]
}`},
		{"kinds", kinds, `{
  b: True
  big: 1e+16
  d: {'a': {1: 'y', 2: 'x'}, 'z': 'q'}
  e: ()
  empty: {

  }
  f: 0.1
  l: ['a', "it's", None, 1.0, (2, 3)]
  nest: {
    a: [{'x': 'y'}]
    deep: {
      x: "y"
    }
  }
  none: None
  s: "it's "x"
"
  small: 1e-05
  t: (1,)
}`},
		{"empty", New(), "{\n\n}"},
		{"instantiable without a class", New().MustDefine("cls", nil, ""), "{\n  cls: None\n}"},
		{"instantiable", LayerParams(&Class{Name: "monolith.core.base_layer.BaseLayer"}),
			"{\n  cls: <class 'monolith.core.base_layer.BaseLayer'>\n  name: \"monolith.core.base_layer.BaseLayer\"\n}"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestRepr checks single values against Python 3's repr.
func TestRepr(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, "None"},
		{false, "False"},
		{-12, "-12"},
		{uint8(7), "7"},
		{1.0, "1.0"},
		{78.5, "78.5"},
		{123456789012345.6, "123456789012345.6"},
		{math.Inf(1), "inf"},
		{float32(0.1), "0.1"},
		{"abc", "'abc'"},
		{"it's", `"it's"`},
		{`say "hi"`, `'say "hi"'`},
		{`both ' and "`, `'both \' and "'`},
		{"tab\tnl\n\\", `'tab\tnl\n\\'`},
		{"\x00\x7f", `'\x00\x7f'`},
		{"é", "'é'"},
		{"\u00a0", `'\xa0'`},
		{"\u2028", `'\u2028'`},
		{"😀", "'😀'"},
		{"\xff", `'\xff'`},
		{[]any{1, "a", nil}, "[1, 'a', None]"},
		{[]int{1, 2}, "[1, 2]"},
		{[]any{[]any{}}, "[[]]"},
		{Tuple{}, "()"},
		{Tuple{1, 2}, "(1, 2)"},
		{map[string]any{"k": Tuple{true}}, "{'k': (True,)}"},
		{map[int]string{2: "x", 1: "y", 10: "z"}, "{1: 'y', 2: 'x', 10: 'z'}"},
		{testEnum(1), "TestEnum.A"},
		{&Class{Name: "C"}, `"<class 'C'>"`},
	} {
		if got := pyRepr(tc.v); got != tc.want {
			t.Errorf("pyRepr(%#v) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

// TestEach ports test_iter_params: every parameter once, in definition order.
func TestEach(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e"}
	values := []any{true, nil, "zippidy", 78.5, 5}
	p := New()
	for i, k := range keys {
		must(t, p.Define(k, values[i], "description of "+k))
	}
	i := 0
	p.Each(func(name string, value any) {
		if name != keys[i] || value != values[i] {
			t.Errorf("item %d = %s %v", i, name, value)
		}
		i++
	})
	if i != len(keys) {
		t.Errorf("%d items", i)
	}
}

// TestSimilarKeys ports test_similar_keys; the other names were checked against the
// reference's _key_error_string.
func TestSimilarKeys(t *testing.T) {
	p := New().MustDefine("activation", "RELU", "Can be a string or a list of strings.").
		MustDefine("activations", "RELU", "Many activations.").
		MustDefine("cheesecake", nil, "dessert").
		MustDefine("tofu", nil, "not dessert")
	for _, tc := range []struct{ name, want string }{
		{"actuvation", "actuvation (did you mean: [activation,activations])"},
		{"tof", "tof"},
		{"tofuu", "tofuu (did you mean: [tofu])"},
		{"cheese", "cheese (did you mean: [cheesecake])"},
		{"activ", "activ (did you mean: [activation,activations])"},
		{"xyz", "xyz"},
		{"activationz", "activationz (did you mean: [activation,activations])"},
	} {
		err := p.Set(tc.name, 1)
		if !errors.Is(err, ErrUnknown) || err.Error() != ErrUnknown.Error()+": "+tc.want {
			t.Errorf("Set(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestFlattenAndUpdate(t *testing.T) {
	p := New().MustDefine("units", 4, "").MustDefine("name", "outer", "").
		MustDefine("sub", New().MustDefine("units", 8, "").MustDefine("act", "relu", ""), "")
	idx := Flatten(p)
	if idx["units"] != 8 || idx["act"] != "relu" || idx["name"] != "outer" || len(idx) != 3 {
		t.Errorf("Flatten = %v", idx)
	}
	args := map[string]any{"units": 16, "act": "tanh", "other": 1}
	must(t, Update(p, args))
	// A key is used once: the first match in definition order, depth first, takes it.
	for name, want := range map[string]any{"units": 16, "sub.units": 8, "sub.act": "tanh", "name": "outer"} {
		if v, _ := p.Get(name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if len(args) != 1 || args["other"] != 1 {
		t.Errorf("args left: %v", args)
	}
	p.Freeze()
	if err := Update(p, map[string]any{"units": 1}); !errors.Is(err, ErrImmutable) {
		t.Errorf("Update of a frozen Params: %v", err)
	}
}

// FuzzGet feeds arbitrary dotted names to Get, Set and Delete and values to String: errors
// are fine, panics are not, and Get of a name that Set accepted returns the value.
func FuzzGet(f *testing.F) {
	for _, s := range []string{"a", "a.b", "l[0].x", "l[-1].x", "l[9].x", "l[].x", "[0]", "a..b", ".", "l[0][1].x", "m.k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p := New().MustDefine("a", New().MustDefine("b", 1, ""), "").
			MustDefine("l", []*Params{New().MustDefine("x", 2, "")}, "").
			MustDefine("m", map[string]any{"k": name}, "")
		_, _ = p.Get(name)
		if err := p.Set(name, 7); err == nil {
			if v, err := p.Get(name); err != nil || v != 7 {
				t.Fatalf("Get(%q) after Set = %v, %v", name, v, err)
			}
		}
		_ = p.String()
		_ = p.Delete(name)
		_ = p.Copy().Equal(p)
	})
}
