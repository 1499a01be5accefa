package train

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/monolith-go/monolith/transforms/filter"
	"github.com/monolith-go/monolith/transforms/label"
)

// OpSpec is one filter or label op of a training config (exactly one field set), as the
// transforms take it.
type OpSpec struct {
	Filter *filter.Config `json:",omitempty"`
	Label  *label.Config  `json:",omitempty"`
}

// Name returns the op's Monolith name.
func (o OpSpec) Name() string {
	switch {
	case o.Filter != nil:
		n, _ := o.Filter.Op()
		return n
	case o.Label != nil:
		n, _ := o.Label.Op()
		return n
	}
	return ""
}

// filterOps and labelOps map Monolith's op names to the Config field holding their
// options (io.md §3.7).
var (
	filterOps = map[string]string{
		filter.OpFilterByLabel: "ByLabel", filter.OpFilterByFids: "ByFids", filter.OpFilterByValue: "ByValue",
		filter.OpFilterByFeatureValue: "ByFeatureValue", filter.OpNegativeSample: "NegativeSample",
		filter.OpSpecialStrategy: "SpecialStrategy",
	}
	labelOps = map[string]string{
		label.OpAddAction: "AddAction", label.OpAddLabel: "AddLabel", label.OpScatterLabel: "ScatterLabel",
		label.OpLabelUpperBound: "UpperBound", label.OpLabelNormalization: "Normalization",
		label.OpUseFieldAsLabel: "FieldAsLabel", label.OpMultiLabelGen: "MultiLabelGen",
		label.OpInstanceReweight: "InstanceReweight",
	}
)

// parseOps decodes a filters: or labels: section (section names it in errors): a list of
// one-key objects, the op's Monolith name → its options, whose keys are the option
// fields in snake_case (or as the Go field names). Each op is validated as the transform
// will run it (Resolve: operand files read, values checked); errors name the section, the
// op's position and name, and the field.
func parseOps(section string, raw json.RawMessage) ([]OpSpec, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%w: %s: want a list of {op_name: {options}}: %v", ErrConfig, section, err)
	}
	names := filterOps
	if section == "labels" {
		names = labelOps
	}
	out := make([]OpSpec, 0, len(items))
	for i, item := range items {
		if len(item) != 1 {
			return nil, fmt.Errorf("%w: %s[%d]: want exactly one op name, got %d keys", ErrConfig, section, i, len(item))
		}
		for op, opts := range item {
			field, ok := names[op]
			if !ok {
				known := make([]string, 0, len(names))
				for n := range names {
					known = append(known, n)
				}
				slices.Sort(known)
				return nil, fmt.Errorf("%w: %s[%d]: unknown op %q (known: %s)", ErrConfig, section, i, op, strings.Join(known, ", "))
			}
			var spec OpSpec
			var target reflect.Value
			if section == "labels" {
				spec.Label = &label.Config{}
				target = reflect.ValueOf(spec.Label).Elem().FieldByName(field)
			} else {
				spec.Filter = &filter.Config{}
				target = reflect.ValueOf(spec.Filter).Elem().FieldByName(field)
			}
			// target is a nil *Options field: fill a new one.
			v := reflect.New(target.Type().Elem())
			if err := decodeOptions(opts, v.Interface(), section+"["+fmt.Sprint(i)+"]."+op); err != nil {
				return nil, err
			}
			target.Set(v)
			var err error
			if spec.Filter != nil {
				var c filter.Config
				c, err = spec.Filter.Resolve()
				spec.Filter = &c
			} else {
				var c label.Config
				c, err = spec.Label.Resolve()
				spec.Label = &c
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %s[%d] %s: %v", ErrConfig, section, i, op, err)
			}
			out = append(out, spec)
		}
	}
	return out, nil
}

// decodeOptions decodes raw into dst (a pointer to an options struct), matching object
// keys to struct fields without case or underscores (drop_rate → DropRate) and refusing
// unknown fields with their path.
func decodeOptions(raw json.RawMessage, dst any, path string) error {
	var v any
	if len(raw) == 0 || string(raw) == "null" {
		v = map[string]any{}
	} else if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	norm, err := normalize(v, reflect.TypeOf(dst).Elem(), path)
	if err != nil {
		return err
	}
	b, err := json.Marshal(norm)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	return nil
}

// normalize renames the keys of objects decoded into structs to the struct's field names.
func normalize(v any, t reflect.Type, path string) (any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: %s: want an object of %s's fields", ErrConfig, path, t.Name())
		}
		fields := map[string]reflect.StructField{}
		var names []string
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fields[fold(f.Name)] = f
			names = append(names, snake(f.Name))
		}
		out := make(map[string]any, len(obj))
		for k, val := range obj {
			f, ok := fields[fold(k)]
			if !ok {
				return nil, fmt.Errorf("%w: %s: unknown field %q (fields: %s)", ErrConfig, path, k, strings.Join(names, ", "))
			}
			nv, err := normalize(val, f.Type, path+"."+snake(f.Name))
			if err != nil {
				return nil, err
			}
			out[f.Name] = nv
		}
		return out, nil
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return v, nil // json reports the type mismatch
		}
		out := make([]any, len(list))
		for i, e := range list {
			nv, err := normalize(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = nv
		}
		return out, nil
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		out := make(map[string]any, len(obj))
		for k, val := range obj { // map keys are data: kept as they are
			nv, err := normalize(val, t.Elem(), path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = nv
		}
		return out, nil
	}
	return v, nil
}

// fold is a name without case and underscores.
func fold(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

// snake is a Go field name in snake_case (DropRate → drop_rate).
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 && !(s[i-1] >= 'A' && s[i-1] <= 'Z') {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
