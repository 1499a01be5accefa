// Package featcfg preprocesses a Monolith FeatureConfigs once, for the sharding and layout
// kernels: tables and features in their canonical (byte-wise name) order, per-feature
// embedding widths, and the layouts with their slices and output shapes (data-path.md §3.2,
// §4.2, §4.3).
//
// Validation happens here, at the boundary, so that the kernels never meet a bad config:
// a slice naming an unknown feature, slice bounds outside the feature's embedding, ADDN
// with FIRSTN, unequal widths in STACK or ADDN, NONE layouts whose shape count differs
// from their slice count, and shapes that disagree with the inferred ones are errors that
// name the layout and slice. Check lists every problem as a structured Problem; New
// returns the first of them, so the two never disagree. Decision D1 fixes FIRSTN addressing in multi-slice CONCAT and
// STACK layouts to what their declared shapes imply.
package featcfg

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/schemas/examplepb"
)

// ErrConfig is wrapped by every validation error.
var ErrConfig = errors.New("kernels/featcfg: invalid feature config")

// Code names the kind of a Problem. The values are stable: reports and tests key on them.
type Code string

// Problem codes. Feature problems: CodeUnknownPooling, CodeSliceDims, CodeNoSliceDims,
// CodeMaxSeqLen. Layout problems: the rest.
const (
	CodeUnknownPooling Code = "unknown-pooling"     // pooling_type is not SUM, MEAN or FIRSTN
	CodeSliceDims      Code = "slice-dims"          // a slice_dims entry is not positive
	CodeNoSliceDims    Code = "no-slice-dims"       // the feature has no slice_dims
	CodeMaxSeqLen      Code = "max-sequence-length" // FIRSTN without a positive length, or a negative length
	CodeUnknownOutType Code = "unknown-out-type"    // out_type is not CONCAT, STACK, ADDN or NONE
	CodeNoSlices       Code = "no-slices"           // the layout has no slice_configs
	CodeUnknownFeature Code = "unknown-feature"     // a slice names a feature that is not configured
	CodeInvalidFeature Code = "invalid-feature"     // a slice names a feature that has problems of its own
	CodeSliceBounds    Code = "slice-bounds"        // a slice lies outside its feature's embedding
	CodeFirstNLength   Code = "firstn-length"       // FIRSTN slices of one CONCAT/STACK output differ in length
	CodeAddNFirstN     Code = "addn-firstn"         // an ADDN layout pools with FIRSTN
	CodeMixedFirstN    Code = "mixed-firstn"        // a CONCAT/STACK output mixes FIRSTN and other poolings
	CodeUnequalWidths  Code = "unequal-widths"      // STACK or ADDN slices of different widths
	CodeShapeCount     Code = "shape-count"         // the number of shapes does not fit the out type
	CodeShapeBatch     Code = "shape-batch"         // a shape's dims[0] is neither -1 nor positive
	CodeShapeMismatch  Code = "shape-mismatch"      // a declared shape differs from the inferred one
)

// Problem is one validation problem of a FeatureConfigs. It is an error wrapping ErrConfig;
// its text is ErrConfig's followed by Message.
type Problem struct {
	Code    Code   `json:"code"`
	Feature string `json:"feature,omitempty"` // the feature concerned, if any
	Table   string `json:"table,omitempty"`   // that feature's table, if known
	Layout  string `json:"layout,omitempty"`  // the layout (out_configs key), for layout problems
	Slice   int    `json:"slice"`             // index of the slice config in the layout, or -1
	Shape   int    `json:"shape"`             // index of the shape in the layout, or -1
	Message string `json:"message"`           // names the feature or layout (and slice or shape)
}

func (p Problem) Error() string { return ErrConfig.Error() + ": " + p.Message }

// Unwrap returns ErrConfig.
func (p Problem) Unwrap() error { return ErrConfig }

// Pooling is how a slice pools the fids of one entry.
type Pooling int

// Poolings, with Monolith's PoolingType values.
const (
	Sum    Pooling = Pooling(examplepb.PoolingType_SUM)
	Mean   Pooling = Pooling(examplepb.PoolingType_MEAN)
	FirstN Pooling = Pooling(examplepb.PoolingType_FIRSTN)
)

func (p Pooling) String() string { return examplepb.PoolingType(p).String() }

// OutType is how a layout arranges its slices.
type OutType int

// Out types, with Monolith's OutType values.
const (
	Concat OutType = OutType(examplepb.OutType_CONCAT)
	Stack  OutType = OutType(examplepb.OutType_STACK)
	AddN   OutType = OutType(examplepb.OutType_ADDN)
	None   OutType = OutType(examplepb.OutType_NONE)
)

func (o OutType) String() string { return examplepb.OutType(o).String() }

// Feature is one configured feature.
type Feature struct {
	Name      string
	Index     int   // f_global: position in name order (nfl_offset, SliceConfig.feature_idx)
	Table     int   // index of its table in name order
	InTable   int   // position among its table's features (feature_in_table_index)
	SliceDims []int // FeatureConfig.slice_dims
	Dim       int   // D_f: sum of SliceDims
	Pooling   Pooling
	MaxSeqLen int // FeatureConfig.max_sequence_length
	// Slot is the slot of a "fc_slot_N" or "slot_N" name (Instance input maps top-level fids
	// by it), or -1.
	Slot int
}

// Table is one embedding table.
type Table struct {
	Name     string
	Features []int // feature indexes, in name order
}

// Slice is one slice of a layout: columns [Start, End) of a feature's embedding.
type Slice struct {
	Feature   int // feature index
	Start     int
	End       int
	Pooling   Pooling
	MaxSeqLen int
	SliceIdx  int // index of the feature slice starting at Start, else 0 (Monolith's slice_idx)
	// Offset of this slice within a row of the layout's output (CONCAT: column; STACK: slice
	// block; ADDN: 0; NONE: 0 in its own tensor).
	Offset int
}

// Width returns End - Start.
func (s Slice) Width() int { return s.End - s.Start }

// Layout is one output layout (out_configs entry).
type Layout struct {
	Name    string
	OutType OutType
	Slices  []Slice
	// Shapes as configured (dims[0] -1 or the batch size); one per output tensor.
	Shapes [][]int
	// RowSize is the number of floats per row of each output tensor.
	RowSize []int
	// FirstN is the sequence length L of a CONCAT or STACK layout that pools with FIRSTN,
	// else 0 (NONE layouts take L per slice).
	FirstN int
}

// Outputs returns the number of output tensors of the layout.
func (l *Layout) Outputs() int { return len(l.RowSize) }

// Config is a preprocessed FeatureConfigs. It is immutable and safe for concurrent use.
type Config struct {
	Features []Feature
	Tables   []Table
	Layouts  []Layout // in name order: the output order
	byName   map[string]int
	tables   map[string]int
	source   *examplepb.FeatureConfigs
}

// Feature returns the index of the named feature.
func (c *Config) Feature(name string) (int, bool) {
	i, ok := c.byName[name]
	return i, ok
}

// TableIndex returns the index of the named table.
func (c *Config) TableIndex(name string) (int, bool) {
	i, ok := c.tables[name]
	return i, ok
}

// Source returns the FeatureConfigs the Config was built from.
func (c *Config) Source() *examplepb.FeatureConfigs { return c.source }

// NumOutputs returns the total number of layout output tensors.
func (c *Config) NumOutputs() int {
	n := 0
	for i := range c.Layouts {
		n += c.Layouts[i].Outputs()
	}
	return n
}

// SlotOfName returns the slot of a "fc_slot_N" or "slot_N" feature name, or -1. Like
// Monolith's stoi, a numeric prefix is enough ("slot_12x" is 12).
func SlotOfName(name string) int {
	rest, ok := strings.CutPrefix(name, "fc_slot_")
	if !ok {
		if rest, ok = strings.CutPrefix(name, "slot_"); !ok {
			return -1
		}
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	if end == 0 {
		return -1
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil {
		return -1
	}
	return n
}

// New preprocesses and validates fc. When fc has problems, New returns the first problem
// Check reports (a Problem, which wraps ErrConfig): New and Check never disagree.
func New(fc *examplepb.FeatureConfigs) (*Config, error) {
	c, probs := build(fc)
	if len(probs) > 0 {
		return nil, probs[0]
	}
	return c, nil
}

// Check returns every problem of fc, in a fixed order: features in name order (each
// feature's problems in the order New would meet them), then layouts in name order. It
// returns nil exactly when New accepts fc. A slice that names an unknown or invalid feature,
// or lies outside its feature's embedding, is left out of that layout's width checks, and a
// layout with any other problem gets no shape comparison (its shape cannot be inferred).
func Check(fc *examplepb.FeatureConfigs) []Problem {
	_, probs := build(fc)
	return probs
}

// build preprocesses fc, collecting every problem. The Config is nil when there is one.
func build(fc *examplepb.FeatureConfigs) (*Config, []Problem) {
	c := &Config{byName: map[string]int{}, tables: map[string]int{}, source: fc}
	var probs []Problem
	names := make([]string, 0, len(fc.GetFeatureConfigs()))
	for name := range fc.GetFeatureConfigs() {
		names = append(names, name)
	}
	slices.Sort(names) // byte-wise, as C++ std::string ordering
	var tableNames []string
	for _, name := range names {
		t := fc.GetFeatureConfigs()[name].GetTable()
		if _, ok := c.tables[t]; !ok {
			c.tables[t] = 0
			tableNames = append(tableNames, t)
		}
	}
	slices.Sort(tableNames)
	c.Tables = make([]Table, len(tableNames))
	for i, t := range tableNames {
		c.tables[t] = i
		c.Tables[i].Name = t
	}
	invalid := make([]bool, len(names))
	for i, name := range names {
		f := fc.GetFeatureConfigs()[name]
		ft := Feature{Name: name, Index: i, Table: c.tables[f.GetTable()], Pooling: Pooling(f.GetPoolingType()),
			MaxSeqLen: int(f.GetMaxSequenceLength()), Slot: SlotOfName(name)}
		n := len(probs)
		bad := func(code Code, format string, args ...any) {
			probs = append(probs, Problem{Code: code, Feature: name, Table: f.GetTable(), Slice: -1, Shape: -1,
				Message: fmt.Sprintf(format, args...)})
		}
		switch ft.Pooling {
		case Sum, Mean, FirstN:
		default:
			bad(CodeUnknownPooling, "feature %q: unknown pooling type %d", name, f.GetPoolingType())
		}
		for j, d := range f.GetSliceDims() {
			if d <= 0 {
				bad(CodeSliceDims, "feature %q: slice_dims[%d] = %d must be positive", name, j, d)
				continue
			}
			ft.SliceDims = append(ft.SliceDims, int(d))
			ft.Dim += int(d)
		}
		if len(f.GetSliceDims()) == 0 {
			bad(CodeNoSliceDims, "feature %q has no slice_dims", name)
		}
		if ft.Pooling == FirstN && ft.MaxSeqLen <= 0 {
			bad(CodeMaxSeqLen, "feature %q pools with FIRSTN but max_sequence_length is %d", name, ft.MaxSeqLen)
		} else if ft.MaxSeqLen < 0 {
			bad(CodeMaxSeqLen, "feature %q: max_sequence_length %d is negative", name, ft.MaxSeqLen)
		}
		invalid[i] = len(probs) > n
		t := &c.Tables[ft.Table]
		ft.InTable = len(t.Features)
		t.Features = append(t.Features, i)
		c.byName[name] = i
		c.Features = append(c.Features, ft)
	}
	layouts := make([]string, 0, len(fc.GetOutConfigs()))
	for name := range fc.GetOutConfigs() {
		layouts = append(layouts, name)
	}
	slices.Sort(layouts)
	for _, name := range layouts {
		l, lp := c.layout(name, fc.GetOutConfigs()[name], invalid)
		probs = append(probs, lp...)
		c.Layouts = append(c.Layouts, l)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return c, nil
}

// layout validates one OutConfig and computes its slices and shapes. invalid flags the
// features that have problems of their own.
func (c *Config) layout(name string, oc *examplepb.OutConfig, invalid []bool) (Layout, []Problem) {
	l := Layout{Name: name, OutType: OutType(oc.GetOutType())}
	var probs []Problem
	bad := func(code Code, slice, shape int, feature, format string, args ...any) {
		p := Problem{Code: code, Layout: name, Feature: feature, Slice: slice, Shape: shape,
			Message: fmt.Sprintf("layout %q: %s", name, fmt.Sprintf(format, args...))}
		if fi, ok := c.byName[feature]; ok {
			p.Table = c.Tables[c.Features[fi].Table].Name
		}
		probs = append(probs, p)
	}
	typeOK := true
	switch l.OutType {
	case Concat, Stack, AddN, None:
	default:
		typeOK = false
		bad(CodeUnknownOutType, -1, -1, "", "unknown out_type %d", oc.GetOutType())
	}
	if len(oc.GetSliceConfigs()) == 0 {
		bad(CodeNoSlices, -1, -1, "", "has no slice_configs")
		return l, probs
	}
	hasFirstN, hasOther := false, false
	usable := make([]bool, len(oc.GetSliceConfigs()))
	for i, sc := range oc.GetSliceConfigs() {
		fi, ok := c.byName[sc.GetFeatureName()]
		if !ok {
			bad(CodeUnknownFeature, i, -1, sc.GetFeatureName(), "slice %d names unknown feature %q", i, sc.GetFeatureName())
			l.Slices = append(l.Slices, Slice{Feature: -1, Start: int(sc.GetStart()), End: int(sc.GetEnd())})
			continue
		}
		f := &c.Features[fi]
		s := Slice{Feature: fi, Start: int(sc.GetStart()), End: int(sc.GetEnd()), Pooling: f.Pooling, MaxSeqLen: f.MaxSeqLen}
		l.Slices = append(l.Slices, s)
		if invalid[fi] {
			bad(CodeInvalidFeature, i, -1, f.Name, "slice %d names feature %q, which is invalid", i, f.Name)
			continue
		}
		if s.Start < 0 || s.End <= s.Start || s.End > f.Dim {
			bad(CodeSliceBounds, i, -1, f.Name, "slice %d of feature %q is [%d, %d), outside its embedding [0, %d)", i, f.Name, s.Start, s.End, f.Dim)
			continue
		}
		usable[i] = true
		off := 0
		for j, d := range f.SliceDims {
			if off == s.Start {
				l.Slices[i].SliceIdx = j
				break
			}
			off += d
		}
		if s.Pooling == FirstN {
			hasFirstN = true
			if typeOK && l.OutType != None && l.FirstN != 0 && l.FirstN != s.MaxSeqLen {
				bad(CodeFirstNLength, i, -1, f.Name, "FIRSTN slices with different max_sequence_length (%d and %d) in one %s output", l.FirstN, s.MaxSeqLen, l.OutType)
			} else if l.OutType != None {
				l.FirstN = s.MaxSeqLen
			}
		} else {
			hasOther = true
		}
	}
	if l.OutType == AddN && hasFirstN {
		bad(CodeAddNFirstN, -1, -1, "", "ADDN cannot pool with FIRSTN")
	}
	if hasFirstN && hasOther && (l.OutType == Concat || l.OutType == Stack) {
		bad(CodeMixedFirstN, -1, -1, "", "mixes FIRSTN and non-FIRSTN slices in one %s output", l.OutType)
	}
	if l.OutType == Stack || l.OutType == AddN {
		ref := slices.Index(usable, true)
		for i, s := range l.Slices {
			if ref >= 0 && i != ref && usable[i] && s.Width() != l.Slices[ref].Width() {
				bad(CodeUnequalWidths, i, -1, c.Features[s.Feature].Name, "%s needs equal slice widths; slice %d is %d wide, slice %d is %d",
					l.OutType, i, s.Width(), ref, l.Slices[ref].Width())
			}
		}
	}
	shapes := oc.GetShape()
	clean := len(probs) == 0
	if typeOK && len(shapes) > 0 {
		want := 1
		if l.OutType == None {
			want = len(l.Slices)
		}
		if len(shapes) != want {
			clean = false
			if l.OutType == None {
				bad(CodeShapeCount, -1, -1, "", "NONE needs one shape per slice: %d shapes for %d slices", len(shapes), len(l.Slices))
			} else {
				bad(CodeShapeCount, -1, -1, "", "%s needs exactly one shape, has %d", l.OutType, len(shapes))
			}
		}
	}
	// Inferred shapes (dims[0] = -1 for the batch) and per-slice offsets; only for a layout
	// without other problems.
	var inferred [][]int
	if clean {
		inferred = l.infer()
	}
	for i, sh := range shapes {
		dims := make([]int, len(sh.GetDims()))
		for j, d := range sh.GetDims() {
			dims[j] = int(d)
		}
		if len(dims) == 0 || dims[0] != -1 && dims[0] <= 0 {
			bad(CodeShapeBatch, -1, i, "", "shape %d %v: dims[0] must be -1 (the batch) or the batch size", i, dims)
			continue
		}
		if inferred != nil && !slices.Equal(dims[1:], inferred[i][1:]) {
			bad(CodeShapeMismatch, -1, i, "", "shape %d is %v, the slices imply %v", i, dims, inferred[i])
			continue
		}
		l.Shapes = append(l.Shapes, dims)
	}
	if len(probs) > 0 {
		return l, probs
	}
	// Configured shapes agree with the inferred ones; missing shapes are inferred.
	if len(shapes) == 0 {
		l.Shapes = inferred
	}
	for _, sh := range l.Shapes {
		n := 1
		for _, d := range sh[1:] {
			n *= d
		}
		l.RowSize = append(l.RowSize, n)
	}
	return l, nil
}

// infer returns the shapes the slices of a valid layout imply (dims[0] = -1 for the batch)
// and sets the slices' offsets.
func (l *Layout) infer() [][]int {
	var inferred [][]int
	L := l.FirstN
	w0 := l.Slices[0].Width()
	seq := func(dims ...int) []int {
		if L > 0 {
			return append([]int{-1, L}, dims...)
		}
		return append([]int{-1}, dims...)
	}
	switch l.OutType {
	case Concat:
		sum := 0
		for i := range l.Slices {
			l.Slices[i].Offset = sum
			sum += l.Slices[i].Width()
		}
		inferred = [][]int{seq(sum)}
	case Stack:
		if L > 0 {
			inferred = [][]int{{-1, len(l.Slices), L, w0}}
		} else {
			inferred = [][]int{{-1, len(l.Slices), w0}}
		}
		for i := range l.Slices {
			l.Slices[i].Offset = i * max(L, 1) * w0
		}
	case AddN:
		inferred = [][]int{{-1, w0}}
	case None:
		for i := range l.Slices {
			if l.Slices[i].Pooling == FirstN {
				inferred = append(inferred, []int{-1, l.Slices[i].MaxSeqLen, l.Slices[i].Width()})
			} else {
				inferred = append(inferred, []int{-1, l.Slices[i].Width()})
			}
		}
	}
	return inferred
}

// OutputShape returns the shape of output tensor i of layout l for a batch of b rows.
func (l *Layout) OutputShape(i, b int) []int {
	sh := slices.Clone(l.Shapes[i])
	if sh[0] == -1 {
		sh[0] = b
	}
	return sh
}

// CheckBatch reports whether every configured dims[0] agrees with a batch of b rows.
func (c *Config) CheckBatch(b int) error {
	for _, l := range c.Layouts {
		for i, sh := range l.Shapes {
			if sh[0] != -1 && sh[0] != b {
				return fmt.Errorf("%w: layout %q shape %d has dims[0] = %d but the batch has %d rows", ErrConfig, l.Name, i, sh[0], b)
			}
		}
	}
	return nil
}
