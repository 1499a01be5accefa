// Package hyperparams is Monolith's hyperparameter registry (monolith/core/hyperparams.py,
// base_layer.py, base_model_params.py, model_registry.py): nested Params with Define, Set, Get
// and Delete by dotted name, Freeze, deep copies, the reference's text dump, and model registries.
//
// # Params
//
// A Params holds named parameters, each with a value and a description. Names match
// `^[a-z][a-z0-9_]*$` and are defined once (ErrInvalidName, ErrDuplicate). Get, Set and
// Delete take dotted names that walk nested *Params values ("inner.alpha"); a part may index
// a list of Params ("layers[1].dim", negative indices count from the end). A missing name is
// ErrUnknown, whose message suggests close names as the reference does
// ("actuvation (did you mean: [activation,activations])"); walking into a value that is not a
// Params is ErrNotParams. Freeze makes a Params immutable (ErrImmutable on Define, Set and
// Delete) but not the Params nested in it; copies of a frozen Params are frozen.
//
// Copy is deep for nested *Params, []any, Tuple and map[string]any values; any other value is
// copied by assignment, so pointers stay shared (the reference shares tensors the same way;
// it deep-copied every other Python object). Equal compares names and values (not
// descriptions), nested Params with Equal and other values with reflect.DeepEqual, so unlike
// Python 1 and 1.0 differ.
//
// # Text dump
//
// String prints the reference's format: parameters sorted by name, two spaces of indent per
// level, nested Params as a block, a string at the top of a line in double quotes without
// escapes, and every other value as Python's str of it: None, True/False, Python float repr,
// lists, tuples, dicts and nested Params inside containers as dicts sorted by key with repr'd
// keys and values (strings single-quoted). A value with a Repr() string method prints that
// string (in a container, quoted, as Python repr's the string Repr returned); a fmt.Stringer
// prints its String() (Python would print repr, "<TestEnum.B: 2>", inside containers).
//
// # Instantiable params and layers
//
// NewInstantiable defines the "cls" parameter, a *Class whose constructor Instantiate calls
// with the Params. The reference's other path, keyword arguments matched by signature
// introspection, has no Go counterpart; Flatten (its inverted index) and Update
// (update_params) are kept. Layer is BaseLayer without its TensorFlow parts: params with a
// "name", children created from Params (CreateChild, CreateChildren, Child). Its forward
// pass and the per-graph layer losses need a TensorFlow graph and are not ported.
// get_uname is not ported: the reference never records a name, so it returns its input.
//
// # Model registry
//
// A Registry maps keys to ModelParams constructors as model_registry does: Register files a
// model under "module.Name" and under the shortcut key (the "monolith.tasks." prefix and
// every "params." removed); a key taken twice is ErrDuplicateModel (checked for both keys
// before either is filed, where the reference could file one and fail on the other).
// Lookup and Params fail with ErrModelNotFound listing the known keys. The reference's
// import of a module by key has no Go counterpart: models register from init functions.
package hyperparams
