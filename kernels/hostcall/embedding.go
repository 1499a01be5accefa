package hostcall

import (
	"fmt"
	"math"
	"strings"
)

// Tensor and variable names of BaseEmbeddingHostCall.
const (
	LabelsForAUC = "labels_for_auc_calculation"
	PredsForAUC  = "y_pred_for_auc_calculation"
	ReqTime      = "req_time"
	SampleRate   = "sample_rate"
	UIDBucket    = "uid_bucket"

	LabelsVar      = "labels_tpu_variable"
	PredsVar       = "preds_tpu_variable"
	UIDBucketsVar  = "uid_buckets_tpu_variable"
	ReqTimesVar    = "req_times_tpu_variable"
	SampleRatesVar = "sample_rates_tpu_variable"
	CounterVar     = "tpu_variables_accumulated_times"

	// SampledBuckets: rows whose uid bucket (uid % 1000) is below int(0.01·1000) feed the AUC.
	SampledBuckets = 10
)

// aucMetrics are the names recorded even without scalar metrics; in caching mode the same
// names are deprecated and dropped.
var aucMetrics = map[string]bool{LabelsForAUC: true, PredsForAUC: true, SampleRate: true, ReqTime: true, UIDBucket: true}

// Keep is BaseEmbeddingHostCall's record filter: without scalar metrics only the AUC
// tensors are recorded, and in caching mode those are dropped (the caching variables
// carry them). The two together drop everything, the caching variables included, as in
// the reference.
func Keep(name string, scalarMetrics, caching bool) bool {
	if !scalarMetrics && !aucMetrics[name] {
		return false
	}
	return !(caching && aucMetrics[name])
}

// Number is an element type ComputeNewValue adds.
type Number interface {
	~int32 | ~int64 | ~float32 | ~float64
}

// ComputeNewValue returns base plus delta placed at offset: delta padded with zeros to
// len(base), rotated right by offset (modulo len(base), so it wraps), then added.
func ComputeNewValue[T Number](base, delta []T, offset int) ([]T, error) {
	if len(delta) > len(base) {
		return nil, fmt.Errorf("%w: delta of %d values for a base of %d", ErrInput, len(delta), len(base))
	}
	out := append([]T(nil), base...)
	if len(base) == 0 {
		return out, nil
	}
	shift := offset % len(base)
	if shift < 0 {
		shift += len(base)
	}
	for i, d := range delta {
		out[(i+shift)%len(base)] += d
	}
	return out, nil
}

// Cache is one core's caching variables (enable_caching_with_tpu_var_mode): TopK sampled
// labels, predictions and uid buckets per step and one request time and sample rate per
// step, for EveryN steps, and the number of steps cached.
type Cache struct {
	TopK, EveryN int
	Labels       []float32
	Preds        []float32
	UIDBuckets   []int32
	ReqTimes     []int64
	SampleRates  []float32
	Counter      int32
}

// NewCache returns empty caching variables; EveryN must be above 1.
func NewCache(topK, everyN int) (*Cache, error) {
	if everyN <= 1 || topK < 1 {
		return nil, fmt.Errorf("%w: caching needs host_call_every_n_steps > 1 and top k ≥ 1 (got %d, %d)", ErrInput, everyN, topK)
	}
	n := topK * everyN
	return &Cache{TopK: topK, EveryN: everyN, Labels: make([]float32, n), Preds: make([]float32, n),
		UIDBuckets: make([]int32, n), ReqTimes: make([]int64, everyN), SampleRates: make([]float32, everyN)}, nil
}

// Update caches one step (update_tpu_variables_ops): at a step ≡ 1 (mod EveryN) everything
// is cleared first; then labels, preds and uidBuckets (TopK values each) go at Counter·TopK,
// reqTimes and sampleRates at Counter, and Counter grows by one. On an error nothing changes.
func (c *Cache) Update(step int64, labels, preds []float32, uidBuckets []int32, reqTimes []int64, sampleRates []float32) error {
	for i, n := range []int{len(labels), len(preds), len(uidBuckets)} {
		if n != c.TopK {
			return fmt.Errorf("%w: %s has %d values, want %d", ErrInput, [...]string{"labels", "preds", "uid buckets"}[i], n, c.TopK)
		}
	}
	if n := int64(c.EveryN); (step%n+n)%n == 1 { // Python's floor modulo
		c.clear()
	}
	off := int(c.Counter) * c.TopK
	nl, err1 := ComputeNewValue(c.Labels, labels, off)
	np, err2 := ComputeNewValue(c.Preds, preds, off)
	nu, err3 := ComputeNewValue(c.UIDBuckets, uidBuckets, off)
	nr, err4 := ComputeNewValue(c.ReqTimes, reqTimes, int(c.Counter))
	ns, err5 := ComputeNewValue(c.SampleRates, sampleRates, int(c.Counter))
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			return err
		}
	}
	c.Labels, c.Preds, c.UIDBuckets, c.ReqTimes, c.SampleRates = nl, np, nu, nr, ns
	c.Counter++
	return nil
}

func (c *Cache) clear() {
	clear(c.Labels)
	clear(c.Preds)
	clear(c.UIDBuckets)
	clear(c.ReqTimes)
	clear(c.SampleRates)
	c.Counter = 0
}

// Scalar is one scalar summary.
type Scalar struct {
	Name  string
	Value float64
}

// Summary is what one host call writes: its scalars in order, and the uid-sampled rows it
// serializes for DeepInsight (di_labels, di_preds; with DeepInsight di_req_times and the
// first sample rate, di_example_sample_rates).
type Summary struct {
	Step            int64
	Scalars         []Scalar
	SampledLabels   []float32
	SampledPreds    []float32
	SampledReqTimes []int64
	SampleRates     []float32
}

// Options configure Summarize and SummarizeCached.
type Options struct {
	TopK        int  // top_k_sampling_num_per_core
	EveryN      int  // host_call_every_n_steps (SummarizeCached)
	DeepInsight bool // enable_deepinsight
}

// reduce returns the scalar a "_avg", "_max" or "_sum" tensor writes.
func reduce(name string, data any) (float64, bool) {
	switch {
	case strings.Contains(name, "_avg"):
		return mean(data), true
	case strings.Contains(name, "_max"):
		return maxOf(data), true
	case strings.Contains(name, "_sum"):
		s, _ := sumOf(data)
		return s, true
	}
	return 0, false
}

// Summarize is the host call without caching variables (the reference's _host_call): per
// column after the global step, "_avg"/"_max"/"_sum" names write their mean, max or sum,
// the AUC tensors are collected, and any other name writes its first value; then the AUC
// part (see the package doc). auc accumulates across calls as TensorFlow's metric does.
func Summarize(cols []Column, auc *StreamingAUC, opt Options) (Summary, error) {
	step, err := GlobalStep(cols)
	if err != nil {
		return Summary{}, err
	}
	s := Summary{Step: step}
	var in aucInputs
	for _, col := range cols[1:] {
		name := col.Name
		if v, ok := reduce(name, col.Data); ok {
			s.Scalars = append(s.Scalars, Scalar{name, v})
			continue
		}
		var err error
		switch {
		case strings.Contains(name, LabelsForAUC):
			in.labels, err = floats(col)
		case strings.Contains(name, PredsForAUC):
			in.preds, err = floats(col)
		case strings.Contains(name, ReqTime):
			err = in.setReq(col)
		case strings.Contains(name, SampleRate):
			in.rates, err = floats(col)
		case strings.Contains(name, UIDBucket):
			in.uids, err = ints(col)
		default:
			var v float64
			v, err = first(col)
			s.Scalars = append(s.Scalars, Scalar{name, v})
		}
		if err != nil {
			return Summary{}, err
		}
	}
	if err := in.write(&s, auc, opt); err != nil {
		return Summary{}, err
	}
	return s, nil
}

// SummarizeCached is the host call with caching variables (_host_call_with_tpu): the
// columns are the Cache fields of every core; the used part (Counter of core 0 steps) feeds
// the AUC part, rows are dropped when the "stopping_signals" sum is not zero, and the
// deprecated per-step AUC names write nothing.
func SummarizeCached(cols []Column, auc *StreamingAUC, opt Options) (Summary, error) {
	step, err := GlobalStep(cols)
	if err != nil {
		return Summary{}, err
	}
	s := Summary{Step: step}
	var labels, preds, uids, reqs, rates, counter *Column
	var stopping *int64
	for i := range cols[1:] {
		col := &cols[i+1]
		name := col.Name
		if v, ok := reduce(name, col.Data); ok {
			s.Scalars = append(s.Scalars, Scalar{name, v})
			continue
		}
		switch {
		case strings.Contains(name, LabelsVar):
			labels = col
		case strings.Contains(name, PredsVar):
			preds = col
		case strings.Contains(name, UIDBucketsVar):
			uids = col
		case strings.Contains(name, ReqTimesVar):
			reqs = col
		case strings.Contains(name, SampleRatesVar):
			rates = col
		case strings.Contains(name, CounterVar):
			counter = col
		case strings.Contains(name, "stopping_signals"):
			sum, _ := sumOf(col.Data)
			n := int64(sum)
			stopping = &n
		case !aucMetrics[name]:
			v, err := first(*col)
			if err != nil {
				return Summary{}, err
			}
			s.Scalars = append(s.Scalars, Scalar{name, v})
		}
	}
	for name, c := range map[string]*Column{LabelsVar: labels, PredsVar: preds, UIDBucketsVar: uids,
		ReqTimesVar: reqs, SampleRatesVar: rates, CounterVar: counter} {
		if c == nil {
			return Summary{}, fmt.Errorf("%w: no %s column", ErrInput, name)
		}
	}
	width := opt.EveryN * opt.TopK
	for _, c := range []*Column{labels, preds, uids} {
		if c.Width != width {
			return Summary{}, fmt.Errorf("%w: %s is %d wide, want every_n·top_k = %d", ErrInput, c.Name, c.Width, width)
		}
	}
	for _, c := range []*Column{reqs, rates} {
		if c.Width != opt.EveryN {
			return Summary{}, fmt.Errorf("%w: %s is %d wide, want every_n = %d", ErrInput, c.Name, c.Width, opt.EveryN)
		}
	}
	counts, err := ints(*counter)
	if err != nil || counter.Width != 1 || len(counts) == 0 {
		return Summary{}, fmt.Errorf("%w: %s must hold one integer per core", ErrInput, CounterVar)
	}
	used := int(counts[0])
	if used < 0 || used > opt.EveryN {
		return Summary{}, fmt.Errorf("%w: %d steps cached, the cache holds %d", ErrInput, used, opt.EveryN)
	}
	in := aucInputs{stopping: stopping}
	var errs [5]error
	in.labels, errs[0] = floats(usedPart(*labels, used*opt.TopK))
	in.preds, errs[1] = floats(usedPart(*preds, used*opt.TopK))
	in.uids, errs[2] = ints(usedPart(*uids, used*opt.TopK))
	errs[3] = in.setReq(usedPart(*reqs, used))
	in.rates, errs[4] = floats(usedPart(*rates, 1))
	for _, err := range errs {
		if err != nil {
			return Summary{}, err
		}
	}
	s.Scalars = append(s.Scalars,
		Scalar{"uid_buckets_tpu_variable_avg", mean(in.uids)},
		Scalar{"accumulated_times_tpu_variable_avg", mean(counts)},
		Scalar{"used_slice_len_avg", float64(used * opt.TopK)})
	if stopping != nil {
		s.Scalars = append(s.Scalars, Scalar{"stopping_signals_sum", float64(*stopping)})
	}
	if err := in.write(&s, auc, opt); err != nil {
		return Summary{}, err
	}
	return s, nil
}

// usedPart returns the first k values of every core's row.
func usedPart(c Column, k int) Column {
	return Column{Name: c.Name, Cores: c.Cores, Width: k, Data: split(c.Data, c.Cores, c.Width, 0, k)}
}

// aucInputs are the tensors the AUC part reads (_write_summary_ops); a nil slice is a
// tensor the host call did not get (floats and ints never return nil for a column).
type aucInputs struct {
	labels, preds, rates []float32
	uids                 []int64 // nil: no uid buckets
	reqs                 []int64 // row-major
	stopping             *int64
}

func (in *aucInputs) setReq(c Column) error {
	v, ok := c.Data.([]int64)
	if !ok {
		return fmt.Errorf("%w: %s is %T, want []int64", ErrInput, c.Name, c.Data)
	}
	if v == nil {
		v = []int64{}
	}
	in.reqs = v
	return nil
}

// floats returns a float32 column's values (never nil).
func floats(c Column) ([]float32, error) {
	v, ok := c.Data.([]float32)
	if !ok {
		return nil, fmt.Errorf("%w: %s is %T, want []float32", ErrInput, c.Name, c.Data)
	}
	if v == nil {
		v = []float32{}
	}
	return v, nil
}

// write adds the AUC part: uid-bucket sampling, the streaming AUC, the DeepInsight rows and
// the four averages.
func (in *aucInputs) write(s *Summary, auc *StreamingAUC, opt Options) error {
	var missing []string
	for i, ok := range []bool{in.labels != nil, in.preds != nil, in.reqs != nil, in.rates != nil} {
		if !ok {
			missing = append(missing, [...]string{"labels", "predictions", "request times", "sample rates"}[i])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the host call needs %s", ErrInput, strings.Join(missing, ", "))
	}
	labels, preds, reqs := in.labels, in.preds, any(in.reqs)
	if len(labels) != len(preds) {
		return fmt.Errorf("%w: %d labels, %d predictions", ErrInput, len(labels), len(preds))
	}
	if in.uids != nil {
		if len(in.uids) != len(labels) {
			return fmt.Errorf("%w: %d uid buckets for %d labels", ErrInput, len(in.uids), len(labels))
		}
		var idx []int
		if in.stopping == nil || *in.stopping == 0 {
			for i, b := range in.uids {
				if b < SampledBuckets {
					idx = append(idx, i)
				}
			}
		}
		labels, preds = gather(labels, idx), gather(preds, idx)
		s.SampledLabels, s.SampledPreds = labels, preds
		if opt.DeepInsight {
			// Each request time repeated TopK times along its row, then sampled like the labels.
			rep := make([]int64, 0, len(in.reqs)*opt.TopK)
			for _, r := range in.reqs {
				for k := 0; k < opt.TopK; k++ {
					rep = append(rep, r)
				}
			}
			if len(rep) != len(in.labels) {
				return fmt.Errorf("%w: %d request times × top k %d do not match %d labels", ErrInput, len(in.reqs), opt.TopK, len(in.labels))
			}
			s.SampledReqTimes = gather(rep, idx)
			reqs = s.SampledReqTimes
		}
	}
	if err := auc.Update(labels, preds); err != nil {
		return err
	}
	s.Scalars = append(s.Scalars, Scalar{"auc", auc.Value()})
	if opt.DeepInsight {
		if len(in.rates) == 0 {
			return fmt.Errorf("%w: no sample rate", ErrInput)
		}
		s.SampleRates = in.rates[:1]
	}
	s.Scalars = append(s.Scalars,
		Scalar{"sampled_labels_variable_avg", mean(labels)},
		Scalar{"sampled_preds_variable_avg", mean(preds)},
		Scalar{"req_times_variable_avg", mean(reqs)},
		Scalar{"sample_rates_variable_avg", mean(in.rates)})
	return nil
}

func gather[T any](v []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, j := range idx {
		out[i] = v[j]
	}
	return out
}

func lenOf(data any) int {
	_, n, _ := dtypeOf(data)
	return n
}

// ints converts an integer column to int64 (never nil).
func ints(c Column) ([]int64, error) {
	switch d := c.Data.(type) {
	case []int64:
		if d == nil {
			d = []int64{}
		}
		return d, nil
	case []int32:
		out := make([]int64, len(d))
		for i, v := range d {
			out[i] = int64(v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %s is %T, want an integer column", ErrInput, c.Name, c.Data)
}

// first returns the first value (t[0]) as a float64.
func first(c Column) (float64, error) {
	if lenOf(c.Data) == 0 {
		return 0, fmt.Errorf("%w: %s is empty", ErrInput, c.Name)
	}
	return at(c.Data, 0), nil
}

func at(data any, i int) float64 {
	switch d := data.(type) {
	case []float32:
		return float64(d[i])
	case []float64:
		return d[i]
	case []int32:
		return float64(d[i])
	case []int64:
		return float64(d[i])
	case []bool:
		if d[i] {
			return 1
		}
	}
	return 0
}

// sumOf returns the sum and whether the values are integers (bools count as 0 and 1).
func sumOf(data any) (float64, bool) {
	switch d := data.(type) {
	case []int32:
		var s int64
		for _, v := range d {
			s += int64(v)
		}
		return float64(s), true
	case []int64:
		var s int64
		for _, v := range d {
			s += v
		}
		return float64(s), true
	case []bool:
		var s int64
		for _, v := range d {
			if v {
				s++
			}
		}
		return float64(s), true
	}
	var s float64
	for i, n := 0, lenOf(data); i < n; i++ {
		s += at(data, i)
	}
	return s, false
}

// mean is tf.reduce_mean: integer tensors divide with truncation (an integer result). An
// empty tensor gives NaN.
func mean(data any) float64 {
	n := lenOf(data)
	if n == 0 {
		return math.NaN()
	}
	s, isInt := sumOf(data)
	if isInt {
		return float64(int64(s) / int64(n))
	}
	return s / float64(n)
}

// maxOf is tf.reduce_max; an empty tensor gives NaN.
func maxOf(data any) float64 {
	n := lenOf(data)
	if n == 0 {
		return math.NaN()
	}
	m := at(data, 0)
	for i := 1; i < n; i++ {
		m = math.Max(m, at(data, i))
	}
	return m
}
