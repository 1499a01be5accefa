package hyperparams

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Errors of the model registry.
var (
	// ErrDuplicateModel: Register of a key already registered.
	ErrDuplicateModel = errors.New("duplicate model registered")
	// ErrModelNotFound: Lookup or Params of a key never registered.
	ErrModelNotFound = errors.New("model not found")
)

// ModelParams is SingleTaskModelParams: it returns the params of a model's task. The
// reference's base class raising NotImplementedError is the interface itself: a model
// without Task does not compile.
type ModelParams interface {
	Task() (*Params, error)
}

// ClassPathPrefix is removed from module paths in shortcut keys.
const ClassPathPrefix = "monolith.tasks."

// ClassKey returns the registry key of the class name defined in module: "module.name", or
// the shortcut key with ClassPathPrefix and every "params." removed from module.
func ClassKey(module, name string, shortcut bool) string {
	if shortcut {
		module = strings.ReplaceAll(module, ClassPathPrefix, "")
		module = strings.ReplaceAll(module, "params.", "")
	}
	return module + "." + name
}

// Registry maps keys to ModelParams constructors; it is safe for concurrent use. The zero
// value is empty and ready.
type Registry struct {
	mu     sync.Mutex
	models map[string]func() ModelParams
}

// Register files newModel under its full and shortcut keys and returns the full key.
func (r *Registry) Register(module, name string, newModel func() ModelParams) (string, error) {
	if newModel == nil {
		return "", fmt.Errorf("hyperparams: Register %s.%s: nil constructor", module, name)
	}
	full := ClassKey(module, name, false)
	keys := []string{full}
	if short := ClassKey(module, name, true); short != full {
		keys = append(keys, short)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if _, ok := r.models[k]; ok {
			return "", fmt.Errorf("%w for key %s: %s.%s", ErrDuplicateModel, k, module, name)
		}
	}
	if r.models == nil {
		r.models = map[string]func() ModelParams{}
	}
	for _, k := range keys {
		r.models[k] = newModel
	}
	return full, nil
}

// Keys returns every registered key, sorted.
func (r *Registry) Keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.models))
	for k := range r.models {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Lookup returns the constructor registered under key (GetClass).
func (r *Registry) Lookup(key string) (func() ModelParams, error) {
	r.mu.Lock()
	f, ok := r.models[key]
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s (known models: %s)", ErrModelNotFound, key, strings.Join(r.Keys(), ", "))
	}
	return f, nil
}

// Params builds the model registered under key and returns its task params (GetParams).
func (r *Registry) Params(key string) (*Params, error) {
	f, err := r.Lookup(key)
	if err != nil {
		return nil, err
	}
	p, err := f().Task()
	if err != nil {
		return nil, fmt.Errorf("hyperparams: model %s: %w", key, err)
	}
	return p, nil
}
