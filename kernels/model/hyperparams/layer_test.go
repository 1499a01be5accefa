package hyperparams

import (
	"errors"
	"strings"
	"testing"
)

// TestCreateChild ports base_layer_test.py test_create_child.
func TestCreateChild(t *testing.T) {
	p := LayerParams(LayerClass())
	must(t, p.Set("name", "test"))
	v, err := Instantiate(p)
	if err != nil {
		t.Fatal(err)
	}
	layer := v.(*Layer)
	must(t, layer.CreateChild("a", p))
	if !layer.HasChild("a") {
		t.Fatal("child a missing")
	}
	child, err := layer.Child("a")
	if err != nil || child.(*Layer).Name() != "test" {
		t.Errorf("Child(a) = %v, %v", child, err)
	}
}

// TestCreateChildren ports test_create_children.
func TestCreateChildren(t *testing.T) {
	p := LayerParams(LayerClass())
	must(t, p.Set("name", "test"))
	v, err := Instantiate(p)
	if err != nil {
		t.Fatal(err)
	}
	layer := v.(*Layer)
	must(t, layer.CreateChildren("a", []*Params{p, p}))
	c, err := layer.Child("a")
	if err != nil || len(c.([]any)) != 2 {
		t.Fatalf("Child(a) = %v, %v", c, err)
	}
}

func TestLayerNames(t *testing.T) {
	parent, err := NewLayer(LayerParams(LayerClass()).MustDefine("units", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	if parent.Name() != "BaseLayer" {
		t.Errorf("default name %q", parent.Name())
	}
	for _, tc := range []struct {
		name   string
		create func(ps []*Params) error
		want   []string
	}{
		{"unnamed child takes the parent's name", func(ps []*Params) error { return parent.CreateChild("c", ps[0]) }, []string{"BaseLayer"}},
		{"unnamed children are name_i", func(ps []*Params) error { return parent.CreateChildren("kids", ps) }, []string{"kids_0", "kids_1", "kept"}},
	} {
		ps := []*Params{LayerParams(LayerClass()), LayerParams(LayerClass()), LayerParams(LayerClass())}
		for _, p := range ps[:2] {
			must(t, p.Set("name", ""))
		}
		must(t, ps[2].Set("name", "kept"))
		must(t, tc.create(ps))
		for i, w := range tc.want {
			if n, _ := ps[i].Get("name"); n != w {
				t.Errorf("%s: params %d name %v, want %s", tc.name, i, n, w)
			}
		}
	}
	if got := strings.Join(parent.ChildNames(), ","); got != "c,kids" {
		t.Errorf("ChildNames = %s", got)
	}
	if _, err := parent.Child("nope"); !errors.Is(err, ErrNoChild) || !strings.Contains(err.Error(), "nope is not a sub-layer of Layer(BaseLayer)") {
		t.Errorf("Child(nope): %v", err)
	}
}

func TestLayerErrors(t *testing.T) {
	noName := LayerParams(LayerClass())
	must(t, noName.Set("name", ""))
	if _, err := NewLayer(noName); err == nil || !strings.Contains(err.Error(), `must have a "name"`) {
		t.Errorf("NewLayer without a name: %v", err)
	}
	if _, err := Instantiate(New().MustDefine("cls", nil, "")); !errors.Is(err, ErrNoClass) {
		t.Errorf("Instantiate without cls: %v", err)
	}
	if _, err := Instantiate(New()); !errors.Is(err, ErrUnknown) {
		t.Errorf("Instantiate of plain Params: %v", err)
	}
	l, _ := NewLayer(LayerParams(LayerClass()))
	bad := LayerParams(&Class{Name: "Broken", New: func(*Params) (any, error) { return nil, errors.New("boom") }})
	if err := l.CreateChild("x", bad); err == nil || !strings.Contains(err.Error(), "child x: boom") {
		t.Errorf("CreateChild of a failing class: %v", err)
	}
	if err := l.CreateChildren("xs", []*Params{LayerParams(LayerClass()), bad}); err == nil || !strings.Contains(err.Error(), "child xs[1]: boom") {
		t.Errorf("CreateChildren of a failing class: %v", err)
	}
	frozen := LayerParams(LayerClass())
	must(t, frozen.Set("name", ""))
	frozen.Freeze()
	if err := l.CreateChild("f", frozen); !errors.Is(err, ErrImmutable) {
		t.Errorf("CreateChild must name a frozen unnamed Params: %v", err)
	}
}
