package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/featurelist"
	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/featstats"
	"github.com/monolith-go/monolith/kernels/layout"
	"github.com/monolith-go/monolith/kernels/shard"
	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// maxExamples bounds the example fids kept per feature.
const maxExamples = 5

// stateFormat is the version of the MarshalBinary encoding.
const stateFormat = 1

// Accumulator gathers the data checks of one or more batches. It keeps per-feature and
// per-layout counters only (no per-row data), so it stays small whatever the input. Build
// one with NewAccumulator, feed it batches with Add, combine accumulators with Merge, and
// ship it between workers with MarshalBinary/UnmarshalBinary; an unmarshaled Accumulator
// can be merged and can take more batches (it carries its config). The zero value is an
// empty accumulator that can only be merged into. Not safe for concurrent use.
type Accumulator struct {
	st state
	rt *runtime // built from st when first needed
}

// state is everything an Accumulator ships.
type state struct {
	Format  int    `json:"format"`
	Config  []byte `json:"config"` // deterministic wire bytes of the FeatureConfigs
	PS      int    `json:"ps_num"`
	Version int    `json:"version"`
	Unique  bool   `json:"unique"`

	Batches int64 `json:"batches"`
	Rows    int64 `json:"rows"`

	Features []featState `json:"features"` // configured features, in name order

	LayoutSkip     string        `json:"layout_skip,omitempty"` // why the layout check does not run
	Layouts        []layoutState `json:"layouts"`               // the layouts it runs, in name order
	LayoutErrors   int64         `json:"layout_errors"`         // batches on which the layout run failed as a whole
	LayoutError    string        `json:"layout_error,omitempty"`
	LayoutBatches  int64         `json:"layout_batches"` // batches the layout check ran on
	LayoutsSkipped []string      `json:"layouts_skipped,omitempty"`
}

// SlotCount is the number of fids seen with one slot.
type SlotCount struct {
	Slot int   `json:"slot"`
	Fids int64 `json:"fids"`
}

// featState holds the data of one configured feature.
type featState struct {
	Name         string `json:"name"`
	ExpectedSlot int    `json:"expected_slot"` // -1: none
	SlotSource   string `json:"slot_source,omitempty"`

	// Stats holds rows, fids, rows with fids and the fids-per-row histogram. Only its
	// exported fields are shipped; its slot set is not used (Slots is).
	Stats featstats.Feature `json:"stats"`
	Slots []SlotCount       `json:"slots"` // by slot

	Mismatch int64    `json:"mismatch"` // fids whose slot is not ExpectedSlot
	Examples []uint64 `json:"examples"` // the smallest distinct mismatching fids

	SharedRows     int64 `json:"shared_rows"`     // rows of batches with a SHARED column
	IndividualRows int64 `json:"individual_rows"` // rows of batches with an INDIVIDUAL column
	AbsentRows     int64 `json:"absent_rows"`     // rows of batches without the column

	ColumnErrors int64  `json:"column_errors"` // batches whose column could not be read
	ColumnError  string `json:"column_error,omitempty"`
}

// layoutState holds the layout check of one layout.
type layoutState struct {
	Name     string `json:"name"`
	Runs     int64  `json:"runs"`
	Failures int64  `json:"failures"`
	Failure  string `json:"failure,omitempty"`
}

// runtime is what Add needs besides the state; it is rebuilt from the state.
type runtime struct {
	single []*featcfg.Config // one config per feature, to read it as the kernels do
	in1    shard.Input

	lcfg *featcfg.Config // the valid subset of the config with every dims[0] -1 (what runs), or nil
	decl *featcfg.Config // the same with the declared shapes
	sh   *shard.Sharder
	lay  *layout.Layouter
	in   shard.Input
	outs [][]float32 // layout outputs, reused while the batch size stays the same
	rows int
}

// NewAccumulator returns an empty Accumulator for fc and opts. It fails only on invalid
// options or an unusable fc (not on a config with problems: see the package documentation).
func NewAccumulator(fc *examplepb.FeatureConfigs, opts Options) (*Accumulator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.resolved()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(fc)
	if err != nil {
		return nil, fmt.Errorf("pipelines/validate: feature configs: %w", err)
	}
	a := &Accumulator{st: state{Format: stateFormat, Config: b, PS: opts.PS, Version: opts.Version, Unique: opts.Unique}}
	for _, name := range featureNames(fc) {
		slot, src := expectedSlot(name, opts.FeatureList)
		a.st.Features = append(a.st.Features, featState{Name: name, ExpectedSlot: slot, SlotSource: src, Slots: []SlotCount{}, Examples: []uint64{}})
	}
	rt, skip, layouts, err := newRuntime(fc, opts)
	if err != nil {
		return nil, err
	}
	a.rt = rt
	a.st.LayoutSkip = skip
	a.st.LayoutsSkipped = layouts
	a.st.Layouts = []layoutState{}
	if rt.lcfg != nil {
		for _, l := range rt.lcfg.Layouts {
			a.st.Layouts = append(a.st.Layouts, layoutState{Name: l.Name})
		}
	}
	return a, nil
}

// newRuntime prepares the per-feature readers and the layout run on the valid subset of
// fc. skip says why the layout check cannot run; dropped lists the layouts left out.
func newRuntime(fc *examplepb.FeatureConfigs, opts Options) (rt *runtime, skip string, dropped []string, err error) {
	rt = &runtime{}
	for _, name := range featureNames(fc) {
		// Reading a column depends on the name only; a placeholder width keeps the one-feature
		// config valid even when the feature itself is not.
		one := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{name: {Table: "t", SliceDims: []int32{1}}}}
		c, err := featcfg.New(one)
		if err != nil {
			return nil, "", nil, fmt.Errorf("pipelines/validate: feature %q: %w", name, err)
		}
		rt.single = append(rt.single, c)
	}
	sub, dropped := validSubset(fc)
	if len(sub.GetOutConfigs()) == 0 {
		if len(fc.GetOutConfigs()) == 0 {
			return rt, "the feature configs have no layouts", dropped, nil
		}
		return rt, "no layout passed the static checks", dropped, nil
	}
	decl, err := featcfg.New(sub)
	if err != nil {
		return rt, fmt.Sprintf("the valid part of the config is still invalid: %v", err), dropped, nil
	}
	// The kernels run with dims[0] = -1 everywhere, so that a declared batch size that is not
	// the batch's fails its own layout (checked against decl) rather than the whole run.
	run := proto.Clone(sub).(*examplepb.FeatureConfigs)
	for _, oc := range run.GetOutConfigs() {
		for _, sh := range oc.GetShape() {
			if len(sh.GetDims()) > 0 {
				sh.Dims[0] = -1
			}
		}
	}
	cfg, err := featcfg.New(run)
	if err != nil {
		return rt, fmt.Sprintf("the valid part of the config is still invalid: %v", err), dropped, nil
	}
	if opts.Version == 1 {
		for _, t := range cfg.Tables {
			for _, f := range t.Features {
				if cfg.Features[f].Dim != cfg.Features[t.Features[0]].Dim {
					return rt, fmt.Sprintf("layout version 1 needs one width per table, and table %q has several (see the table check)", t.Name), dropped, nil
				}
			}
		}
	}
	sh, err := shard.New(cfg, shard.Options{PS: opts.PS, Version: opts.Version, Unique: opts.Unique})
	if err != nil {
		return rt, fmt.Sprintf("sharding cannot run: %v", err), dropped, nil
	}
	lay, err := layout.New(cfg, layout.Options{PS: opts.PS, Version: opts.Version})
	if err != nil {
		return rt, fmt.Sprintf("the layout kernel cannot run: %v", err), dropped, nil
	}
	rt.lcfg, rt.decl, rt.sh, rt.lay = cfg, decl, sh, lay
	return rt, "", dropped, nil
}

// validSubset returns fc without the features and layouts that have problems of their own,
// and the names of the layouts left out.
func validSubset(fc *examplepb.FeatureConfigs) (*examplepb.FeatureConfigs, []string) {
	badF, badL := map[string]bool{}, map[string]bool{}
	for _, p := range featcfg.Check(fc) {
		if p.Layout != "" {
			badL[p.Layout] = true
		} else {
			badF[p.Feature] = true
		}
	}
	sub := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}, OutConfigs: map[string]*examplepb.OutConfig{}}
	for name, f := range fc.GetFeatureConfigs() {
		if !badF[name] {
			sub.FeatureConfigs[name] = f
		}
	}
	var dropped []string
	for name, l := range fc.GetOutConfigs() {
		if badL[name] {
			dropped = append(dropped, name)
		} else {
			sub.OutConfigs[name] = l
		}
	}
	slices.Sort(dropped)
	return sub, dropped
}

// ensure builds the runtime of an unmarshaled Accumulator.
func (a *Accumulator) ensure() error {
	if a.rt != nil {
		return nil
	}
	if a.st.Config == nil {
		return errors.New("pipelines/validate: the zero Accumulator cannot take batches; use NewAccumulator")
	}
	fc := &examplepb.FeatureConfigs{}
	if err := proto.Unmarshal(a.st.Config, fc); err != nil {
		return fmt.Errorf("pipelines/validate: accumulator config: %w", err)
	}
	rt, _, _, err := newRuntime(fc, Options{PS: a.st.PS, Version: a.st.Version, Unique: a.st.Unique})
	if err != nil {
		return err
	}
	if rt.lcfg != nil {
		if len(rt.lcfg.Layouts) != len(a.st.Layouts) {
			return errors.New("pipelines/validate: accumulator layouts do not match its config")
		}
		for i := range rt.lcfg.Layouts {
			if rt.lcfg.Layouts[i].Name != a.st.Layouts[i].Name {
				return errors.New("pipelines/validate: accumulator layouts do not match its config")
			}
		}
	}
	a.rt = rt
	return nil
}

// Add accumulates the data checks of one batch (schemas/batch layout). It does not retain
// rec. Problems of the data are counted, not returned; the error reports a record that does
// not follow the batch layout, or an unusable Accumulator.
func (a *Accumulator) Add(rec arrow.RecordBatch) error {
	if err := a.ensure(); err != nil {
		return err
	}
	src, err := batch.SourceOf(rec.Schema())
	if err != nil {
		return fmt.Errorf("pipelines/validate: %w", err)
	}
	rows := int(rec.NumRows())
	a.st.Batches++
	a.st.Rows += int64(rows)
	for f := range a.st.Features {
		a.addFeature(rec, src, f, rows)
	}
	a.runLayouts(rec, rows)
	return nil
}

// addFeature accumulates configured feature f of rec.
func (a *Accumulator) addFeature(rec arrow.RecordBatch, src batch.Source, f, rows int) {
	fs, rt := &a.st.Features[f], a.rt
	cfg := rt.single[f]
	if err := rt.in1.FromBatch(rec, cfg); err != nil {
		fs.ColumnErrors++
		fs.ColumnError = minMessage(fs.ColumnError, err.Error())
		fs.Stats.AddRows(rows)
		return
	}
	fi := &rt.in1.Features[0]
	if !hasColumn(rec.Schema(), src, &cfg.Features[0]) || fi.Offsets == nil {
		fs.AbsentRows += int64(rows)
		fs.Stats.AddRows(rows)
		return
	}
	if fi.Shared {
		fs.SharedRows += int64(rows)
	} else {
		fs.IndividualRows += int64(rows)
	}
	// Only the fids the entries reference (a sliced column's values may be wider); Sparse
	// takes absolute offsets, so the view needs no rebasing.
	offs := fi.Offsets[:fi.Entries(rows)+1]
	fs.Stats.Add(batch.Sparse{Name: fs.Name, Rows: rows, Shared: fi.Shared, Offsets: offs, Values: fi.Values})
	vals := fi.Values[offs[0]:offs[len(offs)-1]]
	cur, run := -1, int64(0)
	for _, v := range vals {
		s := featurelist.SlotV2(v)
		if s != cur {
			if run > 0 {
				fs.addSlot(cur, run)
			}
			cur, run = s, 0
		}
		run++
		if fs.ExpectedSlot >= 0 && s != fs.ExpectedSlot {
			fs.Mismatch++
			fs.addExample(v)
		}
	}
	if run > 0 {
		fs.addSlot(cur, run)
	}
}

// hasColumn reports whether the batch has the column the kernels read for ft (the rule of
// shard.Input.FromBatch).
func hasColumn(s *arrow.Schema, src batch.Source, ft *featcfg.Feature) bool {
	if src == batch.SourceInstance && ft.Slot >= 0 && len(s.FieldIndices(batch.SlotFeatureName(uint64(ft.Slot)))) > 0 {
		return true
	}
	return len(s.FieldIndices(ft.Name)) > 0
}

// addSlot counts n fids of slot s.
func (fs *featState) addSlot(s int, n int64) {
	i, ok := slices.BinarySearchFunc(fs.Slots, s, func(c SlotCount, s int) int { return c.Slot - s })
	if ok {
		fs.Slots[i].Fids += n
		return
	}
	fs.Slots = slices.Insert(fs.Slots, i, SlotCount{Slot: s, Fids: n})
}

// addExample keeps v if it is among the maxExamples smallest distinct mismatching fids.
func (fs *featState) addExample(v uint64) {
	i, ok := slices.BinarySearch(fs.Examples, v)
	if ok || i >= maxExamples {
		return
	}
	if len(fs.Examples) == maxExamples {
		fs.Examples = fs.Examples[:maxExamples-1]
	}
	fs.Examples = slices.Insert(fs.Examples, i, v)
}

// runLayouts shards rec and runs the layouts on synthetic embeddings, checking every
// output's length and values.
func (a *Accumulator) runLayouts(rec arrow.RecordBatch, rows int) {
	rt := a.rt
	if rt.lcfg == nil {
		return
	}
	a.st.LayoutBatches++
	fail := func(what string, err error) {
		a.st.LayoutErrors++
		a.st.LayoutError = minMessage(a.st.LayoutError, fmt.Sprintf("batch of %d rows: %s: %v", rows, what, err))
	}
	if err := rt.in.FromBatch(rec, rt.lcfg); err != nil {
		fail("reading the features", err)
		return
	}
	res, err := rt.sh.Shard(&rt.in)
	if err != nil {
		fail("sharding", err)
		return
	}
	bufs := layout.ListBuffers(rt.lcfg, res, layout.SyntheticValue)
	emb, err := layout.Arrange(res.Version, rt.lcfg, res, bufs)
	if err != nil {
		fail("arranging the embeddings", err)
		return
	}
	if rt.outs == nil || rt.rows != rows {
		rt.outs, rt.rows = rt.lay.Outputs(rows), rows
	}
	outs := rt.outs // Forward overwrites them
	if err := rt.lay.Forward([]layout.Sharded{layout.FromShard(res)}, emb, outs); err != nil {
		fail("fused_embedding_to_layout", err)
		return
	}
	o := 0
	for li := range rt.decl.Layouts {
		l, ls := &rt.decl.Layouts[li], &a.st.Layouts[li]
		ls.Runs++
		msg := ""
		for i := 0; i < l.Outputs(); i, o = i+1, o+1 {
			if msg != "" {
				continue
			}
			shape := l.OutputShape(i, rows)
			want := 1
			for _, d := range shape {
				want *= d
			}
			if len(outs[o]) != want {
				msg = fmt.Sprintf("output %d has %d floats, its shape %v holds %d", i, len(outs[o]), shape, want)
				if d := l.Shapes[i][0]; d != -1 {
					msg = fmt.Sprintf("shape %d declares dims[0] = %d; %s", i, d, msg)
				}
				continue
			}
			for j, v := range outs[o] {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					msg = fmt.Sprintf("output %d: element %d is %v", i, j, v)
					break
				}
			}
		}
		if msg != "" {
			ls.Failures++
			ls.Failure = minMessage(ls.Failure, fmt.Sprintf("batch of %d rows: %s", rows, msg))
		}
	}
}

// minMessage returns the lexically smaller non-empty message (an order-independent pick).
func minMessage(a, b string) string {
	if a == "" || b != "" && b < a {
		return b
	}
	return a
}

// Merge adds the batches accumulated by o. Both must come from the same config and
// options; a zero Accumulator on either side is an identity.
func (a *Accumulator) Merge(o *Accumulator) error {
	if o == nil || o.st.Config == nil {
		return nil
	}
	if a.st.Config == nil {
		b, err := o.MarshalBinary()
		if err != nil {
			return err
		}
		return a.UnmarshalBinary(b)
	}
	if !bytes.Equal(a.st.Config, o.st.Config) || a.st.PS != o.st.PS || a.st.Version != o.st.Version || a.st.Unique != o.st.Unique ||
		len(a.st.Features) != len(o.st.Features) || len(a.st.Layouts) != len(o.st.Layouts) {
		return errors.New("pipelines/validate: merging accumulators of different configs or options")
	}
	a.st.Batches += o.st.Batches
	a.st.Rows += o.st.Rows
	for i := range a.st.Features {
		f, g := &a.st.Features[i], &o.st.Features[i]
		f.Stats.Merge(&g.Stats)
		for _, s := range g.Slots {
			f.addSlot(s.Slot, s.Fids)
		}
		f.Mismatch += g.Mismatch
		for _, v := range g.Examples {
			f.addExample(v)
		}
		f.SharedRows += g.SharedRows
		f.IndividualRows += g.IndividualRows
		f.AbsentRows += g.AbsentRows
		f.ColumnErrors += g.ColumnErrors
		f.ColumnError = minMessage(f.ColumnError, g.ColumnError)
	}
	for i := range a.st.Layouts {
		l, m := &a.st.Layouts[i], &o.st.Layouts[i]
		l.Runs += m.Runs
		l.Failures += m.Failures
		l.Failure = minMessage(l.Failure, m.Failure)
	}
	a.st.LayoutBatches += o.st.LayoutBatches
	a.st.LayoutErrors += o.st.LayoutErrors
	a.st.LayoutError = minMessage(a.st.LayoutError, o.st.LayoutError)
	return nil
}

// MarshalBinary encodes the Accumulator (as JSON; deterministic, so equal accumulators
// encode to equal bytes).
func (a *Accumulator) MarshalBinary() ([]byte, error) {
	return json.Marshal(&a.st)
}

// UnmarshalBinary replaces a with the Accumulator encoded in b.
func (a *Accumulator) UnmarshalBinary(b []byte) error {
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("pipelines/validate: decode accumulator: %w", err)
	}
	if st.Format != stateFormat {
		return fmt.Errorf("pipelines/validate: decode accumulator: format %d, want %d", st.Format, stateFormat)
	}
	a.st, a.rt = st, nil
	return nil
}

// Rows returns the number of rows accumulated.
func (a *Accumulator) Rows() int64 { return a.st.Rows }

// Batches returns the number of batches accumulated.
func (a *Accumulator) Batches() int64 { return a.st.Batches }
