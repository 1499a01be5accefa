// Package featcfg preprocesses a Monolith FeatureConfigs once, for the sharding and layout
// kernels: tables and features in their canonical (byte-wise name) order, per-feature
// embedding widths, and the layouts with their slices and output shapes (data-path.md §3.2,
// §4.2, §4.3).
//
// Validation happens here, at the boundary, so that the kernels never meet a bad config:
// a slice naming an unknown feature, slice bounds outside the feature's embedding, ADDN
// with FIRSTN, unequal widths in STACK or ADDN, NONE layouts whose shape count differs
// from their slice count, and shapes that disagree with the inferred ones are errors that
// name the layout and slice. Decision D1 fixes FIRSTN addressing in multi-slice CONCAT and
// STACK layouts to what their declared shapes imply.
package featcfg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/io/pbtext"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// ErrConfig is wrapped by every validation error.
var ErrConfig = errors.New("kernels/featcfg: invalid feature config")

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

// New preprocesses and validates fc.
func New(fc *examplepb.FeatureConfigs) (*Config, error) {
	c := &Config{byName: map[string]int{}, tables: map[string]int{}, source: fc}
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
	for i, name := range names {
		f := fc.GetFeatureConfigs()[name]
		ft := Feature{Name: name, Index: i, Table: c.tables[f.GetTable()], Pooling: Pooling(f.GetPoolingType()),
			MaxSeqLen: int(f.GetMaxSequenceLength()), Slot: SlotOfName(name)}
		switch ft.Pooling {
		case Sum, Mean, FirstN:
		default:
			return nil, fmt.Errorf("%w: feature %q: unknown pooling type %d", ErrConfig, name, f.GetPoolingType())
		}
		for j, d := range f.GetSliceDims() {
			if d <= 0 {
				return nil, fmt.Errorf("%w: feature %q: slice_dims[%d] = %d must be positive", ErrConfig, name, j, d)
			}
			ft.SliceDims = append(ft.SliceDims, int(d))
			ft.Dim += int(d)
		}
		if ft.Dim == 0 {
			return nil, fmt.Errorf("%w: feature %q has no slice_dims", ErrConfig, name)
		}
		if ft.Pooling == FirstN && ft.MaxSeqLen <= 0 {
			return nil, fmt.Errorf("%w: feature %q pools with FIRSTN but max_sequence_length is %d", ErrConfig, name, ft.MaxSeqLen)
		}
		if ft.MaxSeqLen < 0 {
			return nil, fmt.Errorf("%w: feature %q: max_sequence_length %d is negative", ErrConfig, name, ft.MaxSeqLen)
		}
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
		l, err := c.layout(name, fc.GetOutConfigs()[name])
		if err != nil {
			return nil, err
		}
		c.Layouts = append(c.Layouts, l)
	}
	return c, nil
}

// layout validates one OutConfig and computes its slices and shapes.
func (c *Config) layout(name string, oc *examplepb.OutConfig) (Layout, error) {
	l := Layout{Name: name, OutType: OutType(oc.GetOutType())}
	bad := func(format string, args ...any) (Layout, error) {
		return Layout{}, fmt.Errorf("%w: layout %q: %s", ErrConfig, name, fmt.Sprintf(format, args...))
	}
	switch l.OutType {
	case Concat, Stack, AddN, None:
	default:
		return bad("unknown out_type %d", oc.GetOutType())
	}
	if len(oc.GetSliceConfigs()) == 0 {
		return bad("has no slice_configs")
	}
	hasFirstN, hasOther := false, false
	for i, sc := range oc.GetSliceConfigs() {
		fi, ok := c.byName[sc.GetFeatureName()]
		if !ok {
			return bad("slice %d names unknown feature %q", i, sc.GetFeatureName())
		}
		f := &c.Features[fi]
		s := Slice{Feature: fi, Start: int(sc.GetStart()), End: int(sc.GetEnd()), Pooling: f.Pooling, MaxSeqLen: f.MaxSeqLen}
		if s.Start < 0 || s.End <= s.Start || s.End > f.Dim {
			return bad("slice %d of feature %q is [%d, %d), outside its embedding [0, %d)", i, f.Name, s.Start, s.End, f.Dim)
		}
		off := 0
		for j, d := range f.SliceDims {
			if off == s.Start {
				s.SliceIdx = j
				break
			}
			off += d
		}
		if s.Pooling == FirstN {
			hasFirstN = true
			if l.OutType != None && l.FirstN != 0 && l.FirstN != s.MaxSeqLen {
				return bad("FIRSTN slices with different max_sequence_length (%d and %d) in one %s output", l.FirstN, s.MaxSeqLen, l.OutType)
			}
			if l.OutType != None {
				l.FirstN = s.MaxSeqLen
			}
		} else {
			hasOther = true
		}
		l.Slices = append(l.Slices, s)
	}
	if l.OutType == AddN && hasFirstN {
		return bad("ADDN cannot pool with FIRSTN")
	}
	if hasFirstN && hasOther && l.OutType != None {
		return bad("mixes FIRSTN and non-FIRSTN slices in one %s output", l.OutType)
	}
	w0 := l.Slices[0].Width()
	for i, s := range l.Slices {
		if (l.OutType == Stack || l.OutType == AddN) && s.Width() != w0 {
			return bad("%s needs equal slice widths; slice %d is %d wide, slice 0 is %d", l.OutType, i, s.Width(), w0)
		}
	}
	// Inferred shapes (dims[0] = -1 for the batch) and per-slice offsets.
	var inferred [][]int
	L := l.FirstN
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
	// Configured shapes must agree with the inferred ones; missing shapes are inferred.
	shapes := oc.GetShape()
	if len(shapes) == 0 {
		l.Shapes = inferred
	} else {
		if len(shapes) != len(inferred) {
			if l.OutType == None {
				return bad("NONE needs one shape per slice: %d shapes for %d slices", len(shapes), len(l.Slices))
			}
			return bad("%s needs exactly one shape, has %d", l.OutType, len(shapes))
		}
		for i, sh := range shapes {
			dims := make([]int, len(sh.GetDims()))
			for j, d := range sh.GetDims() {
				dims[j] = int(d)
			}
			if len(dims) == 0 || dims[0] != -1 && dims[0] <= 0 {
				return bad("shape %d %v: dims[0] must be -1 (the batch) or the batch size", i, dims)
			}
			want := inferred[i]
			if !slices.Equal(dims[1:], want[1:]) {
				return bad("shape %d is %v, the slices imply %v", i, dims, want)
			}
			l.Shapes = append(l.Shapes, dims)
		}
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

// Load reads a FeatureConfigs from protobuf text (.pbtxt and friends) or JSON (.json).
func Load(path string) (*examplepb.FeatureConfigs, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kernels/featcfg: %w", err)
	}
	f := pbtext.Text
	if strings.EqualFold(filepath.Ext(path), ".json") {
		f = pbtext.JSON
	}
	fc := &examplepb.FeatureConfigs{}
	if err := pbtext.Unmarshal(path, b, f, fc); err != nil {
		return nil, err
	}
	return fc, nil
}

// LoadFile reads and preprocesses a FeatureConfigs file.
func LoadFile(path string) (*Config, error) {
	fc, err := Load(path)
	if err != nil {
		return nil, err
	}
	c, err := New(fc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
