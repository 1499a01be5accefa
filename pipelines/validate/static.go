package validate

import (
	"errors"
	"fmt"
	"slices"

	"github.com/monolith-go/monolith/io/featurelist"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// Status is the outcome of a check or the severity of a finding.
type Status string

// Statuses, from best to worst (Skip sits apart: the check did not run).
const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
	Skip Status = "skip"
)

// worse returns the worse of two statuses among Pass, Warn and Fail.
func worse(a, b Status) Status {
	rank := func(s Status) int {
		switch s {
		case Fail:
			return 2
		case Warn:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// Check ids (see the package documentation).
const (
	CheckFeatureConfig   = "feature-config"
	CheckTable           = "table"
	CheckUnknownFeature  = "unknown-feature"
	CheckSliceBounds     = "slice-bounds"
	CheckAddNFirstN      = "addn-firstn"
	CheckEqualWidths     = "equal-widths"
	CheckLayoutStructure = "layout-structure"
	CheckShape           = "shape"
	CheckFeatureList     = "feature-list"
	CheckSlotConflict    = "slot-conflict"
	CheckSlotName        = "slot-name"
	CheckOccurrence      = "occurrence"
	CheckColumnType      = "column-type"
	CheckSlotMismatch    = "slot-mismatch"
	CheckSharedUse       = "shared-use"
	CheckLayout          = "layout"
)

// checkInfo describes one check of the catalog.
type checkInfo struct {
	id, kind, title string
}

// catalog lists every check in report order.
var catalog = []checkInfo{
	{CheckFeatureConfig, "static", "features have a known pooling, positive slice_dims and a valid max_sequence_length"},
	{CheckTable, "static", "every feature names a table (and, for --version 1, each table has one width)"},
	{CheckUnknownFeature, "static", "every layout slice names a configured feature"},
	{CheckSliceBounds, "static", "every slice lies inside its feature's embedding"},
	{CheckAddNFirstN, "static", "no ADDN layout pools with FIRSTN"},
	{CheckEqualWidths, "static", "STACK and ADDN slices have equal widths"},
	{CheckLayoutStructure, "static", "layouts have a known out_type, slices, consistent FIRSTN and valid features"},
	{CheckShape, "static", "declared shapes match the shapes the slices imply"},
	{CheckFeatureList, "static", "every configured feature is in the feature list with a slot that fits its version"},
	{CheckSlotConflict, "static", "no two configured features share a slot and feature_version"},
	{CheckSlotName, "static", "fc_slot_N / slot_N names agree with the feature list's slot"},
	{CheckOccurrence, "data", "every configured feature occurs in the data"},
	{CheckColumnType, "data", "every configured feature's column holds fids"},
	{CheckSlotMismatch, "data", "fids carry their feature's expected slot"},
	{CheckSharedUse, "data", "each feature is either SHARED or INDIVIDUAL, not both"},
	{CheckLayout, "data", "layouts on synthetic embeddings have their declared shapes and finite values"},
}

// checkOfCode maps featcfg problem codes to check ids.
var checkOfCode = map[featcfg.Code]string{
	featcfg.CodeUnknownPooling: CheckFeatureConfig,
	featcfg.CodeSliceDims:      CheckFeatureConfig,
	featcfg.CodeNoSliceDims:    CheckFeatureConfig,
	featcfg.CodeMaxSeqLen:      CheckFeatureConfig,
	featcfg.CodeUnknownFeature: CheckUnknownFeature,
	featcfg.CodeSliceBounds:    CheckSliceBounds,
	featcfg.CodeAddNFirstN:     CheckAddNFirstN,
	featcfg.CodeUnequalWidths:  CheckEqualWidths,
	featcfg.CodeUnknownOutType: CheckLayoutStructure,
	featcfg.CodeNoSlices:       CheckLayoutStructure,
	featcfg.CodeFirstNLength:   CheckLayoutStructure,
	featcfg.CodeMixedFirstN:    CheckLayoutStructure,
	featcfg.CodeInvalidFeature: CheckLayoutStructure,
	featcfg.CodeShapeCount:     CheckShape,
	featcfg.CodeShapeBatch:     CheckShape,
	featcfg.CodeShapeMismatch:  CheckShape,
}

// Finding is one problem a check found. Message names the feature, table or layout.
type Finding struct {
	Check   string `json:"check"`
	Status  Status `json:"status"`         // Fail or Warn
	Code    string `json:"code,omitempty"` // featcfg.Code for config problems
	Feature string `json:"feature,omitempty"`
	Table   string `json:"table,omitempty"`
	Layout  string `json:"layout,omitempty"`
	Slice   *int   `json:"slice,omitempty"` // index of the slice config in the layout
	Message string `json:"message"`
}

// Options are the settings of a validation run.
type Options struct {
	PS      int  // --ps-num: number of PS shards; 0 means 1
	Version int  // --version: sharding/layout op version 1..5; 0 means 5
	Unique  bool // deduplicate fids per feature when sharding (training mode)
	// FeatureList is the parsed --feature-list, or nil.
	FeatureList *featurelist.List
}

// ErrOptions is wrapped by errors about invalid Options.
var ErrOptions = errors.New("pipelines/validate: invalid options")

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if o.PS < 0 {
		return fmt.Errorf("%w: ps_num %d is negative", ErrOptions, o.PS)
	}
	if o.Version < 0 || o.Version > 5 {
		return fmt.Errorf("%w: version %d is not 1..5", ErrOptions, o.Version)
	}
	return nil
}

// resolved returns o with the defaults filled in.
func (o Options) resolved() Options {
	if o.PS == 0 {
		o.PS = 1
	}
	if o.Version == 0 {
		o.Version = 5
	}
	return o
}

// Static runs the static checks on fc and returns their findings, in catalog order of the
// featcfg problems (features, then layouts, by name), then the table and feature-list
// findings. Options are used as given (see Options for the defaults).
func Static(fc *examplepb.FeatureConfigs, opts Options) []Finding {
	opts = opts.resolved()
	var out []Finding
	probs := featcfg.Check(fc)
	invalid := map[string]bool{}
	for _, p := range probs {
		f := Finding{Check: checkOfCode[p.Code], Status: Fail, Code: string(p.Code), Feature: p.Feature, Table: p.Table,
			Layout: p.Layout, Message: p.Message}
		if f.Check == "" {
			f.Check = CheckLayoutStructure
		}
		if p.Slice >= 0 {
			f.Slice = new(int)
			*f.Slice = p.Slice
		}
		if p.Layout == "" {
			invalid[p.Feature] = true
		}
		out = append(out, f)
	}
	names := featureNames(fc)
	out = append(out, tableFindings(fc, names, invalid, opts)...)
	if opts.FeatureList != nil {
		out = append(out, listFindings(names, opts.FeatureList)...)
	}
	return out
}

// featureNames returns the configured feature names in byte-wise order.
func featureNames(fc *examplepb.FeatureConfigs) []string {
	names := make([]string, 0, len(fc.GetFeatureConfigs()))
	for name := range fc.GetFeatureConfigs() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// featureDim returns the sum of the positive slice_dims of a feature.
func featureDim(f *examplepb.FeatureConfig) int {
	d := 0
	for _, v := range f.GetSliceDims() {
		if v > 0 {
			d += int(v)
		}
	}
	return d
}

// tableFindings checks that every feature names a table and, for layout version 1, that
// the valid features of a table share one width.
func tableFindings(fc *examplepb.FeatureConfigs, names []string, invalid map[string]bool, opts Options) []Finding {
	var out []Finding
	type first struct {
		feature string
		dim     int
	}
	width := map[string]first{}
	reported := map[string]bool{}
	for _, name := range names {
		f := fc.GetFeatureConfigs()[name]
		t := f.GetTable()
		if t == "" {
			out = append(out, Finding{Check: CheckTable, Status: Fail, Feature: name,
				Message: fmt.Sprintf("feature %q has no table: its table is unset, and a FeatureConfigs defines a table only by naming it", name)})
			continue
		}
		if opts.Version != 1 || invalid[name] {
			continue
		}
		d := featureDim(f)
		w, ok := width[t]
		if !ok {
			width[t] = first{name, d}
			continue
		}
		if w.dim != d && !reported[t] {
			reported[t] = true
			out = append(out, Finding{Check: CheckTable, Status: Fail, Feature: name, Table: t,
				Message: fmt.Sprintf("table %q mixes embedding widths %d (feature %q) and %d (feature %q); layout version 1 needs one width per table",
					t, w.dim, w.feature, d, name)})
		}
	}
	return out
}

// listFindings checks the configured features against a feature list.
func listFindings(names []string, list *featurelist.List) []Finding {
	var out []Finding
	type key struct{ slot, version int }
	owner := map[key]string{}
	var conflicts []Finding
	for _, name := range names {
		lf, err := list.Lookup(name)
		if err != nil {
			out = append(out, Finding{Check: CheckFeatureList, Status: Fail, Feature: name,
				Message: fmt.Sprintf("feature %q is not in the feature list %s", name, list.Name)})
			continue
		}
		if !lf.HasSlot {
			out = append(out, Finding{Check: CheckFeatureList, Status: Warn, Feature: name,
				Message: fmt.Sprintf("feature %q has no slot in the feature list %s (line %d)", name, list.Name, lf.Line)})
			continue
		}
		v := lf.Version()
		switch {
		case v != 1 && v != 2:
			out = append(out, Finding{Check: CheckFeatureList, Status: Fail, Feature: name,
				Message: fmt.Sprintf("feature %q has feature_version %d in the feature list %s (line %d); fids are v1 or v2", name, v, list.Name, lf.Line)})
		case v == 1 && (lf.Slot < 0 || lf.Slot > 1023):
			out = append(out, Finding{Check: CheckFeatureList, Status: Fail, Feature: name,
				Message: fmt.Sprintf("feature %q has slot %d in the feature list %s (line %d); a v1 fid holds slots 0..1023", name, lf.Slot, list.Name, lf.Line)})
		case v == 2 && (lf.Slot < 0 || lf.Slot > 32767):
			out = append(out, Finding{Check: CheckFeatureList, Status: Fail, Feature: name,
				Message: fmt.Sprintf("feature %q has slot %d in the feature list %s (line %d); a v2 fid holds slots 0..32767", name, lf.Slot, list.Name, lf.Line)})
		}
		if n := featcfg.SlotOfName(name); n >= 0 && n != lf.Slot {
			out = append(out, Finding{Check: CheckSlotName, Status: Fail, Feature: name,
				Message: fmt.Sprintf("feature %q: its name says slot %d, the feature list %s says slot %d (line %d)", name, n, list.Name, lf.Slot, lf.Line)})
		}
		k := key{lf.Slot, v}
		if o, ok := owner[k]; ok {
			conflicts = append(conflicts, Finding{Check: CheckSlotConflict, Status: Fail, Feature: name,
				Message: fmt.Sprintf("features %q and %q share slot %d (feature_version %d) in the feature list %s", o, name, lf.Slot, v, list.Name)})
		} else {
			owner[k] = name
		}
	}
	return append(out, conflicts...)
}

// expectedSlot returns the slot the fids of a configured feature should carry and where it
// comes from ("feature list" or "name"), or -1 and "".
func expectedSlot(name string, list *featurelist.List) (int, string) {
	if list != nil {
		if lf, err := list.Lookup(name); err == nil && lf.HasSlot {
			return lf.Slot, "feature list"
		}
	}
	if n := featcfg.SlotOfName(name); n >= 0 {
		return n, "name"
	}
	return -1, ""
}
