package filter

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/monolith-go/monolith/schemas/matrixpb"
)

// MaxTasks bounds the number of labels a label op may write per row (scatter_label,
// multi_label_gen), so that a typo such as index 1e9 is an error, not an allocation.
const MaxTasks = 1 << 16

// rateOneEps: a sample rate within this distance of 1 always selects (add_label).
const rateOneEps = 1e-6

// AddLabelTask is one task of add_label's config ("pos_actions:neg_actions:sample_rate").
type AddLabelTask struct {
	PosActions []int32 // non-empty
	NegActions []int32 // disjoint from PosActions; may be empty
	SampleRate float64 // in [0, 1]
}

// AddLabelOptions configures add_label (io.md §3.7.7).
type AddLabelOptions struct {
	// Tasks, one label each, appended after the existing labels (see ParseAddLabelConfig).
	Tasks []AddLabelTask
	// NegativeValue is the label of a sampled negative.
	NegativeValue float32
	// NewSampleRate is written to line_id.sample_rate of every row; in (0, 1].
	NewSampleRate float32
	// Seed of the sampling generator; 0 means DefaultSeed.
	Seed uint64
}

// AddLabel is add_label. It is safe for concurrent use; calls draw from one generator in
// turn.
type AddLabel struct {
	tasks      []addLabelTask
	negValue   float32
	sampleRate float32
	rng        *source
}

type addLabelTask struct {
	pos, neg []int64 // sorted sets
	rate     float64
}

// NewAddLabel validates o and returns the op.
func NewAddLabel(o AddLabelOptions) (*AddLabel, error) {
	const op = "add_label"
	if len(o.Tasks) == 0 {
		return nil, configError(op, "no tasks")
	}
	if !(o.NewSampleRate > 0 && o.NewSampleRate <= 1) {
		return nil, configError(op, "new sample rate %v outside (0, 1]", o.NewSampleRate)
	}
	a := &AddLabel{negValue: o.NegativeValue, sampleRate: o.NewSampleRate, rng: newSource(o.Seed)}
	for i, t := range o.Tasks {
		if err := checkAddLabelTask(t); err != nil {
			return nil, configError(op, "task %d: %v", i, err)
		}
		a.tasks = append(a.tasks, addLabelTask{pos: int64Set(t.PosActions), neg: int64Set(t.NegActions), rate: t.SampleRate})
	}
	return a, nil
}

func int64Set(v []int32) []int64 {
	s := make([]int64, len(v))
	for i, x := range v {
		s[i] = int64(x)
	}
	return sortedSet(s)
}

// intersects reports whether vals holds a member of the sorted set.
func intersects(set, vals []int64) bool {
	for _, v := range vals {
		if contains(set, v) {
			return true
		}
	}
	return false
}

// Apply returns rec with one label appended per task and line_id.sample_rate set on every
// row. The caller must Release the result.
func (a *AddLabel) Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	const op = "add_label"
	n := int(rec.NumRows())
	labels, err := readLabels(op, rec)
	if err != nil {
		return nil, err
	}
	d, err := bindLineIDs(op, rec)
	if err != nil {
		return nil, err
	}
	actions, err := d.bind(fieldActions)
	if err != nil {
		return nil, err
	}
	out := newLabelOut(n, n*len(a.tasks))
	var buf []int64
	a.rng.mu.Lock()
	for r := range n {
		if buf, err = actions.intsAt(r, buf[:0]); err != nil {
			a.rng.mu.Unlock()
			return nil, err
		}
		start := len(out.vals)
		out.vals = append(out.vals, labels.row(r)...)
		if len(out.vals) > start && out.vals[start] <= 0 {
			out.vals[start] = InvalidLabel
		}
		for _, t := range a.tasks {
			v := InvalidLabel
			switch {
			case intersects(t.pos, buf):
				v = 1
			case len(t.neg) > 0 && !intersects(t.neg, buf):
			case math.Abs(t.rate-1) < rateOneEps || a.rng.r.Float64() < t.rate:
				v = a.negValue
			}
			out.vals = append(out.vals, v)
		}
		out.end()
	}
	a.rng.mu.Unlock()
	e := newLidEditor(d, n)
	for r := range n {
		if err := e.edit(r, func(m *matrixpb.LineId) { m.SampleRate = proto.Float32(a.sampleRate) }); err != nil {
			return nil, err
		}
	}
	labelled, err := out.withLabels(op, mem, rec)
	if err != nil {
		return nil, err
	}
	defer labelled.Release()
	return withLineIDs(op, mem, labelled, e.out)
}

// ScatterLabelOptions configures scatter_label (io.md §3.7.8); see ParseScatterLabelConfig.
type ScatterLabelOptions struct {
	// Index maps a chnid to the task whose label receives the row's label[0].
	Index map[int64]int
	// TaskNum is the number of labels written per row; 0 means max(Index)+1.
	TaskNum int
}

// ScatterLabel is scatter_label. It is safe for concurrent use.
type ScatterLabel struct {
	index   map[int64]int
	taskNum int
}

// NewScatterLabel validates o and returns the op.
func NewScatterLabel(o ScatterLabelOptions) (*ScatterLabel, error) {
	const op = "scatter_label"
	if len(o.Index) == 0 {
		return nil, configError(op, "empty chnid map")
	}
	maxIdx := -1
	for ch, i := range o.Index {
		if i < 0 || i >= MaxTasks {
			return nil, configError(op, "chnid %d: index %d outside [0, %d)", ch, i, MaxTasks)
		}
		maxIdx = max(maxIdx, i)
	}
	t := o.TaskNum
	if t == 0 {
		t = maxIdx + 1
	}
	if t <= maxIdx || t > MaxTasks {
		return nil, configError(op, "task number %d does not fit the largest index %d (limit %d)", t, maxIdx, MaxTasks)
	}
	return &ScatterLabel{index: maps.Clone(o.Index), taskNum: t}, nil
}

// Apply returns rec whose labels are TaskNum × InvalidLabel per row, except that the
// task mapped from line_id.chnid receives the row's old label[0] (InvalidLabel when it
// had none). The caller must Release the result.
func (s *ScatterLabel) Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	const op = "scatter_label"
	n := int(rec.NumRows())
	labels, err := readLabels(op, rec)
	if err != nil {
		return nil, err
	}
	d, err := bindLineIDs(op, rec)
	if err != nil {
		return nil, err
	}
	chnid, err := d.bind(fieldChnid)
	if err != nil {
		return nil, err
	}
	out := newLabelOut(n, n*s.taskNum)
	for r := range n {
		v := InvalidLabel
		if l := labels.row(r); len(l) > 0 {
			v = l[0]
		}
		ch, err := chnid.int64At(r)
		if err != nil {
			return nil, err
		}
		start := len(out.vals)
		out.vals = appendInvalid(out.vals, s.taskNum)
		if i, ok := s.index[ch]; ok {
			out.vals[start+i] = v
		}
		out.end()
	}
	return out.withLabels(op, mem, rec)
}

func appendInvalid(v []float32, n int) []float32 {
	for range n {
		v = append(v, InvalidLabel)
	}
	return v
}

// LabelFilterOptions configures filter_by_label (io.md §3.7.9).
type LabelFilterOptions struct {
	// Thresholds, one per label (at least one).
	Thresholds []float32
	// FilterEqual: a label equal to its threshold does not count as passing.
	FilterEqual bool
}

// LabelFilter is filter_by_label: it keeps a row when some label i passes Thresholds[i];
// rows with fewer labels than thresholds are dropped. It is safe for concurrent use.
type LabelFilter struct {
	t           []float32
	filterEqual bool
}

// NewFilterByLabel validates o and returns the filter.
func NewFilterByLabel(o LabelFilterOptions) (*LabelFilter, error) {
	if len(o.Thresholds) == 0 {
		return nil, configError("filter_by_label", "no thresholds")
	}
	return &LabelFilter{t: slices.Clone(o.Thresholds), filterEqual: o.FilterEqual}, nil
}

// Keep appends the indexes of the kept rows to dst[:0].
func (f *LabelFilter) Keep(rec arrow.RecordBatch, dst []int) ([]int, error) {
	dst = dst[:0]
	labels, err := readLabels("filter_by_label", rec)
	if err != nil {
		return dst, err
	}
	for r := range int(rec.NumRows()) {
		l := labels.row(r)
		if len(l) < len(f.t) {
			continue
		}
		for i, t := range f.t {
			if l[i] > t || l[i] == t && !f.filterEqual {
				dst = append(dst, r)
				break
			}
		}
	}
	return dst, nil
}

// UpperBoundOptions configures label_upper_bound (io.md §3.7.10).
type UpperBoundOptions struct {
	// Bounds, one per label of the bounded prefix (at least one).
	Bounds []float32
}

// LabelUpperBound is label_upper_bound. It is safe for concurrent use.
type LabelUpperBound struct{ b []float32 }

// NewLabelUpperBound validates o and returns the op.
func NewLabelUpperBound(o UpperBoundOptions) (*LabelUpperBound, error) {
	if len(o.Bounds) == 0 {
		return nil, configError("label_upper_bound", "no bounds")
	}
	return &LabelUpperBound{b: slices.Clone(o.Bounds)}, nil
}

// Apply returns rec with label[i] = min(label[i], Bounds[i]) in rows holding at least
// len(Bounds) labels (other rows unchanged). When nothing changes the result is rec,
// retained. The caller must Release the result.
func (u *LabelUpperBound) Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	const op = "label_upper_bound"
	labels, err := readLabels(op, rec)
	if err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	out := newLabelOut(n, len(labels.d.Values))
	changed := false
	for r := range n {
		start := len(out.vals)
		l := labels.row(r)
		out.vals = append(out.vals, l...)
		if len(l) >= len(u.b) {
			for i, b := range u.b {
				if out.vals[start+i] > b {
					out.vals[start+i], changed = b, true
				}
			}
		}
		out.end()
	}
	if !changed {
		rec.Retain()
		return rec, nil
	}
	return out.withLabels(op, mem, rec)
}

// NormMethod is a label_normalization method.
type NormMethod uint8

// Normalization methods (io.md §3.7.11); v is the method's value, x the label.
const (
	NormLog       NormMethod = iota + 1 // ln(max(x+v, 0))
	NormScale                           // x / v
	NormScale2Int                       // x / v truncated toward zero to int32 (saturating; NaN gives 0)
	NormPow                             // (x+1)^v
	NormRepow                           // x^v if x > 0, else 0
	NormScaleLog                        // ln(max(x/v+1, 0))
)

var normNames = [...]string{NormLog: "log", NormScale: "scale", NormScale2Int: "scale2int", NormPow: "pow", NormRepow: "repow", NormScaleLog: "scalelog"}

// String returns the method's config name (ParseNormMethod is its inverse).
func (m NormMethod) String() string {
	if m >= NormLog && m <= NormScaleLog {
		return normNames[m]
	}
	return "NormMethod(" + strconv.Itoa(int(m)) + ")"
}

// NormOptions configures label_normalization.
type NormOptions struct {
	// Methods are applied in sequence to every label; see ParseNormMethods.
	Methods []NormMethod
	// Values, one per method.
	Values []float32
}

// LabelNormalization is label_normalization. It is safe for concurrent use.
type LabelNormalization struct {
	m []NormMethod
	v []float32
}

// NewLabelNormalization validates o and returns the op.
func NewLabelNormalization(o NormOptions) (*LabelNormalization, error) {
	const op = "label_normalization"
	if len(o.Methods) == 0 {
		return nil, configError(op, "no methods")
	}
	if len(o.Methods) != len(o.Values) {
		return nil, configError(op, "%d methods but %d values", len(o.Methods), len(o.Values))
	}
	for i, m := range o.Methods {
		if m < NormLog || m > NormScaleLog {
			return nil, configError(op, "method %d: unknown method %s", i, m)
		}
	}
	return &LabelNormalization{m: slices.Clone(o.Methods), v: slices.Clone(o.Values)}, nil
}

// normalize applies the methods in sequence, in float32 as the reference does.
func (l *LabelNormalization) normalize(x float32) float32 {
	for i, m := range l.m {
		v := l.v[i]
		switch m {
		case NormLog:
			x = float32(math.Log(float64(max(x+v, 0))))
		case NormScale:
			x /= v
		case NormScale2Int:
			x = float32(scale2int(x / v))
		case NormPow:
			x = float32(math.Pow(float64(x+1), float64(v)))
		case NormRepow:
			if x > 0 {
				x = float32(math.Pow(float64(x), float64(v)))
			} else {
				x = 0
			}
		case NormScaleLog:
			x = float32(math.Log(float64(max(x/v+1, 0))))
		}
	}
	return x
}

func scale2int(f float32) int32 {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt32:
		return math.MaxInt32
	case f <= math.MinInt32:
		return math.MinInt32
	}
	return int32(f)
}

// Apply returns rec with every label normalized. The caller must Release the result.
func (l *LabelNormalization) Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	const op = "label_normalization"
	labels, err := readLabels(op, rec)
	if err != nil {
		return nil, err
	}
	if !labels.has {
		rec.Retain()
		return rec, nil
	}
	n := int(rec.NumRows())
	out := newLabelOut(n, len(labels.d.Values))
	for r := range n {
		for _, x := range labels.row(r) {
			out.vals = append(out.vals, l.normalize(x))
		}
		out.end()
	}
	return out.withLabels(op, mem, rec)
}

// DefaultLabelThreshold is use_field_as_label's reference label_threshold.
const DefaultLabelThreshold = 7200

// FieldAsLabelOptions configures use_field_as_label (io.md §3.7.12).
type FieldAsLabelOptions struct {
	// Field is a numeric scalar LineId field.
	Field string
	// OverwriteInvalidValue: a field value ≥ LabelThreshold counts as 0.
	OverwriteInvalidValue bool
	// LabelThreshold (reference default DefaultLabelThreshold; the zero value is 0).
	LabelThreshold float64
}

// DefaultFieldAsLabelOptions returns the reference defaults for field.
func DefaultFieldAsLabelOptions(field string) FieldAsLabelOptions {
	return FieldAsLabelOptions{Field: field, LabelThreshold: DefaultLabelThreshold}
}

// FieldAsLabel is use_field_as_label. Its kernel is not open source; the behaviour is
// inferred from the reference's docstring and tests (io.md §3.7.12): every label becomes
// max(label, v) where v is the field's value. It is safe for concurrent use.
type FieldAsLabel struct {
	field     *lidField
	overwrite bool
	threshold float64
}

// NewUseFieldAsLabel validates o and returns the op.
func NewUseFieldAsLabel(o FieldAsLabelOptions) (*FieldAsLabel, error) {
	const op = "use_field_as_label"
	f, err := lineIDField(op, o.Field)
	if err != nil {
		return nil, err
	}
	if f.class != classInt && f.class != classUint && f.class != classFloat {
		return nil, configError(op, "field %q is %s; a numeric scalar field is needed", o.Field, f.class)
	}
	if math.IsNaN(o.LabelThreshold) {
		return nil, configError(op, "NaN label threshold")
	}
	return &FieldAsLabel{field: f, overwrite: o.OverwriteInvalidValue, threshold: o.LabelThreshold}, nil
}

// Apply returns rec with every label raised to at least the field's value. Rows without
// labels keep none. The caller must Release the result.
func (u *FieldAsLabel) Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	const op = "use_field_as_label"
	labels, err := readLabels(op, rec)
	if err != nil {
		return nil, err
	}
	if !labels.has {
		rec.Retain()
		return rec, nil
	}
	d, err := bindLineIDs(op, rec)
	if err != nil {
		return nil, err
	}
	c, err := d.bind(u.field)
	if err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	out := newLabelOut(n, len(labels.d.Values))
	for r := range n {
		l := labels.row(r)
		if len(l) > 0 {
			v, err := c.numberAt(r)
			if err != nil {
				return nil, err
			}
			if u.overwrite && v >= u.threshold {
				v = 0
			}
			fv := float32(v)
			for _, x := range l {
				out.vals = append(out.vals, max(x, fv))
			}
		}
		out.end()
	}
	return out.withLabels(op, mem, rec)
}

// MultiLabelGenOptions configures multi_label_gen (io.md §3.7.13).
type MultiLabelGenOptions struct {
	// HeadToIndex maps the head field's value, as text, to a task index.
	HeadToIndex map[string]int
	// HeadField is a scalar LineId field; "" means "chnid". Integer fields are matched
	// as decimal text, string fields as they are, float fields in Go's shortest 'g'
	// form, bool fields as "0" / "1" (I6).
	HeadField string
	// PosActions and NegActions decide the label from the most prior action.
	PosActions, NegActions []int32
	// UseOriginLabel takes the row's label[0] (InvalidLabel if none) instead.
	UseOriginLabel bool
	// PosLabel (reference default 1) and NegLabel (default 0).
	PosLabel, NegLabel float32
	// ActionPriority orders actions, first = most prior (see ParseActionPriority).
	ActionPriority []int32
	// TaskNum is the number of labels per row; 0 means max(HeadToIndex)+1.
	TaskNum int
}

// DefaultMultiLabelGenOptions returns the reference defaults: head field chnid, positive
// label 1, negative label 0.
func DefaultMultiLabelGenOptions() MultiLabelGenOptions {
	return MultiLabelGenOptions{HeadField: "chnid", PosLabel: 1}
}

// MultiLabelGen is multi_label_gen. It is safe for concurrent use.
type MultiLabelGen struct {
	head       *lidField
	byInt      map[int64]int
	byUint     map[uint64]int
	byText     map[string]int
	pos, neg   []int64
	origin     bool
	posL, negL float32
	ranks      actionRanks
	taskNum    int
}

// NewMultiLabelGen validates o and returns the op. A HeadToIndex key that the head
// field's text form can never produce (for an integer field, anything but canonical
// decimal) is an error.
func NewMultiLabelGen(o MultiLabelGenOptions) (*MultiLabelGen, error) {
	const op = "multi_label_gen"
	name := o.HeadField
	if name == "" {
		name = "chnid"
	}
	f, err := lineIDField(op, name)
	if err != nil {
		return nil, err
	}
	if f.class == classInts {
		return nil, configError(op, "head field %q is repeated", name)
	}
	if len(o.HeadToIndex) == 0 {
		return nil, configError(op, "empty head_to_index")
	}
	g := &MultiLabelGen{head: f, pos: int64Set(o.PosActions), neg: int64Set(o.NegActions),
		origin: o.UseOriginLabel, posL: o.PosLabel, negL: o.NegLabel, ranks: newActionRanks(o.ActionPriority)}
	for _, a := range g.pos {
		if contains(g.neg, a) {
			return nil, configError(op, "action %d is both positive and negative", a)
		}
	}
	maxIdx := -1
	switch f.class {
	case classInt:
		g.byInt = map[int64]int{}
	case classUint:
		g.byUint = map[uint64]int{}
	default:
		g.byText = map[string]int{}
	}
	for k, i := range o.HeadToIndex {
		if i < 0 || i >= MaxTasks {
			return nil, configError(op, "head %q: index %d outside [0, %d)", k, i, MaxTasks)
		}
		maxIdx = max(maxIdx, i)
		switch {
		case g.byInt != nil:
			v, err := strconv.ParseInt(k, 10, 64)
			if err != nil || strconv.FormatInt(v, 10) != k {
				return nil, configError(op, "head %q is not a decimal integer, so %s never matches it", k, name)
			}
			g.byInt[v] = i
		case g.byUint != nil:
			v, err := strconv.ParseUint(k, 10, 64)
			if err != nil || strconv.FormatUint(v, 10) != k {
				return nil, configError(op, "head %q is not a decimal unsigned integer, so %s never matches it", k, name)
			}
			g.byUint[v] = i
		default:
			g.byText[k] = i
		}
	}
	g.taskNum = o.TaskNum
	if g.taskNum == 0 {
		g.taskNum = maxIdx + 1
	}
	if g.taskNum <= maxIdx || g.taskNum > MaxTasks {
		return nil, configError(op, "task number %d does not fit the largest index %d (limit %d)", g.taskNum, maxIdx, MaxTasks)
	}
	return g, nil
}

// mostPrior returns the most prior action of a row (io.md §3.7.13).
func (g *MultiLabelGen) mostPrior(actions []int64) (int64, bool) {
	if len(actions) == 0 {
		return 0, false
	}
	if g.ranks == nil || len(actions) == 1 {
		return actions[0], true
	}
	if a, _, ok := g.ranks.best(actions); ok {
		return a, true
	}
	return actions[0], true
}

// Apply returns rec whose labels are TaskNum × InvalidLabel per row, except that the task
// mapped from the head field receives the row's value. The caller must Release the
// result.
func (g *MultiLabelGen) Apply(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	const op = "multi_label_gen"
	n := int(rec.NumRows())
	labels, err := readLabels(op, rec)
	if err != nil {
		return nil, err
	}
	d, err := bindLineIDs(op, rec)
	if err != nil {
		return nil, err
	}
	head, err := d.bind(g.head)
	if err != nil {
		return nil, err
	}
	var actions *lidCol
	if !g.origin {
		if actions, err = d.bind(fieldActions); err != nil {
			return nil, err
		}
	}
	out := newLabelOut(n, n*g.taskNum)
	var buf []int64
	var text []byte
	for r := range n {
		v := InvalidLabel
		if g.origin {
			if l := labels.row(r); len(l) > 0 {
				v = l[0]
			}
		} else {
			if buf, err = actions.intsAt(r, buf[:0]); err != nil {
				return nil, err
			}
			if a, ok := g.mostPrior(buf); ok {
				switch {
				case contains(g.pos, a):
					v = g.posL
				case contains(g.neg, a):
					v = g.negL
				}
			}
		}
		idx, ok := -1, false
		switch g.head.class {
		case classInt:
			var h int64
			if h, err = head.int64At(r); err == nil {
				idx, ok = g.byInt[h]
			}
		case classUint:
			var h uint64
			if h, err = head.uint64At(r); err == nil {
				idx, ok = g.byUint[h]
			}
		case classFloat:
			var h float64
			if h, err = head.float64At(r); err == nil {
				bits := 64
				if g.head.fd.Kind() == protoreflect.FloatKind {
					bits = 32
				}
				text = strconv.AppendFloat(text[:0], h, 'g', -1, bits)
				idx, ok = g.byText[string(text)]
			}
		default:
			var h string
			if h, err = head.stringAt(r); err == nil {
				idx, ok = g.byText[h]
			}
		}
		if err != nil {
			return nil, err
		}
		start := len(out.vals)
		out.vals = appendInvalid(out.vals, g.taskNum)
		if ok {
			out.vals[start+idx] = v
		}
		out.end()
	}
	return out.withLabels(op, mem, rec)
}
