package hyperparams

import (
	"errors"
	"fmt"
	"sort"
)

// Errors of instantiation and layers.
var (
	// ErrNoClass: Instantiate of a Params whose "cls" is not set.
	ErrNoClass = errors.New("cls is not set")
	// ErrNoChild: Child of a name that is not a child.
	ErrNoChild = errors.New("no such sub-layer")
)

// Class is what an instantiable Params builds: a name (printed as Python prints a class)
// and a constructor that receives the Params.
type Class struct {
	Name string
	New  func(p *Params) (any, error)
}

// Repr prints the class as Python's str of a class does: <class 'Name'>.
func (c *Class) Repr() string { return "<class '" + c.Name + "'>" }

// String is Repr.
func (c *Class) String() string { return c.Repr() }

// NewInstantiable returns a Params whose "cls" parameter is c (InstantiableParams(cls)).
func NewInstantiable(c *Class) *Params {
	return New().MustDefine("cls", c, "Cls that this param object is associated with.")
}

// Instantiate builds the object p is configured for: the constructor of its "cls" called
// with p.
func Instantiate(p *Params) (any, error) {
	v, err := p.Get("cls")
	if err != nil {
		return nil, err
	}
	c, ok := v.(*Class)
	if !ok || c == nil || c.New == nil {
		return nil, ErrNoClass
	}
	return c.New(p)
}

// Layer is BaseLayer without TensorFlow: its params and its children.
type Layer struct {
	P        *Params
	children map[string]any
}

// LayerClass returns the Class of a plain Layer.
func LayerClass() *Class {
	return &Class{Name: "BaseLayer", New: func(p *Params) (any, error) { return NewLayer(p) }}
}

// LayerParams returns the params of a layer class: "cls" and "name", the name defaulting to
// the class name (BaseLayer.params()).
func LayerParams(c *Class) *Params {
	return NewInstantiable(c).MustDefine("name", c.Name, "Name of this layer object.")
}

// NewLayer makes a layer from its params, which must have a non-empty "name".
func NewLayer(p *Params) (*Layer, error) {
	name, err := p.Get("name")
	if err != nil {
		return nil, err
	}
	if s, _ := name.(string); s == "" {
		return nil, fmt.Errorf("hyperparams: layer params must have a \"name\"")
	}
	return &Layer{P: p, children: map[string]any{}}, nil
}

// Name returns the layer's "name".
func (l *Layer) Name() string {
	s, _ := GetAs[string](l.P, "name")
	return s
}

// String names the layer.
func (l *Layer) String() string { return "Layer(" + l.Name() + ")" }

// CreateChild instantiates p and stores the result as the child name. An empty "name" in p
// is first set to this layer's name (p is changed, as in the reference).
func (l *Layer) CreateChild(name string, p *Params) error {
	if err := defaultName(p, l.Name()); err != nil {
		return err
	}
	child, err := Instantiate(p)
	if err != nil {
		return fmt.Errorf("hyperparams: child %s: %w", name, err)
	}
	l.children[name] = child
	return nil
}

// CreateChildren instantiates each of ps and stores them, in order, as the child name (a
// []any); an empty "name" in ps[i] is first set to "name_i".
func (l *Layer) CreateChildren(name string, ps []*Params) error {
	list := make([]any, 0, len(ps))
	for i, p := range ps {
		if err := defaultName(p, fmt.Sprintf("%s_%d", name, i)); err != nil {
			return err
		}
		child, err := Instantiate(p)
		if err != nil {
			return fmt.Errorf("hyperparams: child %s[%d]: %w", name, i, err)
		}
		list = append(list, child)
	}
	l.children[name] = list
	return nil
}

func defaultName(p *Params, name string) error {
	v, err := p.Get("name")
	if err != nil {
		return err
	}
	if s, _ := v.(string); s == "" {
		return p.Set("name", name)
	}
	return nil
}

// Child returns the child called name: a child layer, or a []any for CreateChildren.
func (l *Layer) Child(name string) (any, error) {
	if c, ok := l.children[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w: %s is not a sub-layer of %s", ErrNoChild, name, l)
}

// HasChild reports whether name is a child.
func (l *Layer) HasChild(name string) bool {
	_, ok := l.children[name]
	return ok
}

// ChildNames returns the children's names, sorted.
func (l *Layer) ChildNames() []string {
	names := make([]string, 0, len(l.children))
	for n := range l.children {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
