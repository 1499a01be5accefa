package model

import (
	"fmt"
	"strings"

	kmodel "github.com/monolith-go/monolith/kernels/model"
	"github.com/monolith-go/monolith/kernels/model/hyperparams"
)

// Net is what a registered model builds for one worker: a model over layout tensors.
// *kmodel.Model implements it. A Net is used by one goroutine at a time.
type Net interface {
	// Params lists the dense parameters, in the order Batch.Params holds them.
	Params() []kmodel.Param
	// Reads reports whether the model reads layout output i (others get zero gradients).
	Reads(i int) bool
	Forward(b kmodel.Batch, logits []float32) error
	Backward(dlogits []float32, g kmodel.Grads) error
}

// Spec is the configuration of a model: its registered name and the settings a model may
// read. It is plain data, carried with the pipeline to every worker.
type Spec struct {
	Name   string // registered model name: lr, fm, deepfm or a user's
	Bias   string // the [B, 1] bias layout (default "bias")
	Vec    string // the CONCAT layout of field vectors (default "vec")
	Hidden []int  // hidden widths (DeepFM)
}

// Constructor builds a model for the layout outputs inputs.
type Constructor func(spec Spec, inputs []kmodel.Input) (Net, error)

// Module is the module part of the registry keys of models: a model registered as "fm"
// has the key "models.fm" in the hyperparams registry (Monolith's model_registry).
const Module = "models"

// Registry is the model registry: a hyperparams.Registry whose entries' task params are
// instantiable (their "cls" builds the Net) and hold the Spec fields as params "bias",
// "vec" and "hidden". Safe for concurrent use; the zero value is empty.
type Registry struct {
	hp hyperparams.Registry
}

// modelParams is the ModelParams of a registered model.
type modelParams struct {
	name string
	c    Constructor
}

// Task returns the model's params: "cls", "name", "bias", "vec", "hidden", "inputs".
func (m modelParams) Task() (*hyperparams.Params, error) {
	cls := &hyperparams.Class{Name: m.name, New: func(p *hyperparams.Params) (any, error) {
		spec := Spec{Name: m.name}
		var err error
		if spec.Bias, err = hyperparams.GetAs[string](p, "bias"); err != nil {
			return nil, err
		}
		if spec.Vec, err = hyperparams.GetAs[string](p, "vec"); err != nil {
			return nil, err
		}
		if spec.Hidden, err = hyperparams.GetAs[[]int](p, "hidden"); err != nil {
			return nil, err
		}
		inputs, err := hyperparams.GetAs[[]kmodel.Input](p, "inputs")
		if err != nil {
			return nil, err
		}
		return m.c(spec, inputs)
	}}
	p := hyperparams.NewInstantiable(cls)
	p.MustDefine("name", m.name, "Name of the model.")
	p.MustDefine("bias", "bias", "The [B, 1] bias layout the model reads.")
	p.MustDefine("vec", "vec", "The CONCAT layout of field vectors the model reads.")
	p.MustDefine("hidden", []int(nil), "Widths of the hidden layers.")
	p.MustDefine("inputs", []kmodel.Input(nil), "The layout outputs, in output order.")
	return p, nil
}

// Register adds a model under name (key Module+"."+name). A name taken twice is an error.
func (r *Registry) Register(name string, c Constructor) error {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" || c == nil {
		return fmt.Errorf("transforms/model: register %q: empty name or nil constructor", name)
	}
	if _, err := r.hp.Register(Module, name, func() hyperparams.ModelParams { return modelParams{name: name, c: c} }); err != nil {
		return fmt.Errorf("transforms/model: register %q: %w", name, err)
	}
	return nil
}

// Names lists the registered models, sorted.
func (r *Registry) Names() []string {
	var out []string
	for _, k := range r.hp.Keys() {
		if n, ok := strings.CutPrefix(k, Module+"."); ok {
			out = append(out, n)
		}
	}
	return out
}

// New builds the registered model spec.Name for inputs: its task params, with spec's
// settings and the inputs set, instantiated.
func (r *Registry) New(spec Spec, inputs []kmodel.Input) (Net, error) {
	p, err := r.hp.Params(Module + "." + strings.ToLower(spec.Name))
	if err != nil {
		return nil, fmt.Errorf("transforms/model: %w", err)
	}
	for name, v := range map[string]any{"bias": spec.Bias, "vec": spec.Vec, "hidden": spec.Hidden, "inputs": inputs} {
		if err := p.Set(name, v); err != nil {
			return nil, fmt.Errorf("transforms/model: model %q: %w", spec.Name, err)
		}
	}
	n, err := hyperparams.Instantiate(p)
	if err != nil {
		return nil, fmt.Errorf("transforms/model: model %q: %w", spec.Name, err)
	}
	return n.(Net), nil
}

// builtin is the constructor of a kernels/model kind.
func builtin(kind kmodel.Kind) Constructor {
	return func(spec Spec, inputs []kmodel.Input) (Net, error) {
		m, err := kmodel.New(kmodel.Spec{Kind: kind, Bias: spec.Bias, Vec: spec.Vec, Hidden: spec.Hidden}, inputs)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
}

// models is the registry the transforms and monolith train use. It is written only by
// init functions (the built-in models here, users' models through Register), as Beam's
// type registry is, and read afterwards.
var models = func() *Registry {
	r := &Registry{}
	for _, k := range []kmodel.Kind{kmodel.LR, kmodel.FM, kmodel.DeepFM} {
		if err := r.Register(k.String(), builtin(k)); err != nil {
			panic(err)
		}
	}
	return r
}()

// Register adds a model to the registry the transforms and monolith train use. Call it
// from an init function of the program, so that every worker built from the program knows
// the model by name.
func Register(name string, c Constructor) error { return models.Register(name, c) }

// Names lists the models the transforms know.
func Names() []string { return models.Names() }

// New builds the registered model spec.Name for inputs.
func New(spec Spec, inputs []kmodel.Input) (Net, error) { return models.New(spec, inputs) }
