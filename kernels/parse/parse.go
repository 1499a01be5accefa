package parse

import (
	"bytes"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/fid"
)

// Special values of the reference parsers (io.md §6.6).
const (
	// InvalidLabel is INVALID_LABEL, the lowest float32: an Example label position without
	// a value.
	InvalidLabel float32 = -math.MaxFloat32
	// FltMin is FLT_MIN, the smallest normal float32 (2^-126): an empty float list read as
	// a dim-1 dense feature of an Example or ExampleBatch.
	FltMin float32 = 0x1p-126
)

// parser holds the outputs of one Parse call.
type parser struct {
	mem    memory.Allocator
	rec    arrow.RecordBatch
	spec   *Spec
	src    batch.Source
	n      int
	comp   companions
	sparse []sparseOut
	dense  []*denseOut
	extra  []*denseOut
	line   lineID
}

// Parse parses a batch into the tensors Monolith's parse_example_batch, parse_examples or
// parse_instances would produce for spec, chosen by the batch's source (batch.SourceOf).
// The output is a new record of rec.NumRows() rows with spec.Schema(source); see the
// package doc for its layout and the rules. Inputs the reference parser rejects are an
// error wrapping ErrInput that names the feature and the row. The caller releases the
// result.
func Parse(mem memory.Allocator, rec arrow.RecordBatch, spec *Spec) (arrow.RecordBatch, error) {
	if spec == nil {
		return nil, fmt.Errorf("%w: nil spec", ErrSpec)
	}
	src, err := batch.SourceOf(rec.Schema())
	if err != nil {
		return nil, err
	}
	p := &parser{mem: mem, rec: rec, spec: spec, src: src, n: int(rec.NumRows()), comp: companionsOf(rec.Schema())}
	defer p.release()
	if err := p.alloc(); err != nil {
		return nil, err
	}
	switch src {
	case batch.SourceExampleBatch:
		err = p.exampleBatch()
	case batch.SourceExample:
		err = p.examples()
	default:
		err = p.instances()
	}
	if err != nil {
		return nil, err
	}
	return p.finish(), nil
}

func (p *parser) alloc() error {
	p.sparse = make([]sparseOut, len(p.spec.sparse))
	p.dense = make([]*denseOut, 0, len(p.spec.dense))
	p.extra = make([]*denseOut, 0, len(p.spec.extra))
	for _, f := range p.spec.dense {
		o, err := newDenseOut(p.mem, f.Name, f.Dim, f.DType, p.n)
		if err != nil {
			return err
		}
		p.dense = append(p.dense, o)
	}
	for i, f := range p.spec.extra {
		o, err := newDenseOut(p.mem, f.Name, f.Dim, p.spec.fields[i].kind.dtype(), p.n)
		if err != nil {
			return err
		}
		p.extra = append(p.extra, o)
	}
	return nil
}

func (p *parser) release() {
	for i := range p.sparse {
		p.sparse[i].release()
	}
	for _, o := range p.dense {
		o.release()
	}
	for _, o := range p.extra {
		o.release()
	}
}

// finish assembles the output record.
func (p *parser) finish() arrow.RecordBatch {
	schema := p.spec.schemas[p.src]
	cols := make([]arrow.Array, 0, len(p.sparse)+len(p.dense)+len(p.extra))
	for i := range p.sparse {
		cols = append(cols, p.sparse[i].array(p.mem, schema.Field(len(cols)).Type, p.n))
	}
	for _, o := range p.dense {
		cols = append(cols, o.array(schema.Field(len(cols)).Type, p.n))
	}
	for _, o := range p.extra {
		cols = append(cols, o.array(schema.Field(len(cols)).Type, p.n))
	}
	rec := array.NewRecordBatch(schema, cols, int64(p.n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// featureIndex returns the index of the feature column called name, or -1.
func (p *parser) featureIndex(name string) int {
	s := p.rec.Schema()
	for _, i := range s.FieldIndices(name) {
		if batch.IsFeature(s.Field(i)) {
			return i
		}
	}
	return -1
}

// roleIndex returns the index of the column with role r, or -1.
func (p *parser) roleIndex(r batch.Role) int {
	for i, f := range p.rec.Schema().Fields() {
		if batch.RoleOf(f) == r {
			return i
		}
	}
	return -1
}

// feature opens the feature column called name, or returns nil.
func (p *parser) feature(name string, wantHi bool) (*colView, error) {
	i := p.featureIndex(name)
	if i < 0 {
		return nil, nil
	}
	return openCol(p.rec, i, &p.comp, wantHi)
}

// canon opens the canonical column of role r as cells of kind k, or returns nil.
func (p *parser) canon(r batch.Role, k batch.Kind) (*colView, error) {
	i := p.roleIndex(r)
	if i < 0 {
		return nil, nil
	}
	return openCanon(p.rec, i, k)
}

func inputErr(name string, r int, format string, args ...any) error {
	return fmt.Errorf("%w: feature %q row %d: %s", ErrInput, name, r, fmt.Sprintf(format, args...))
}

// Sparse modes.
const (
	modeExample = iota // Example/ExampleBatch: fid lists, dense lists are an error
	modeSlot           // Instance fidv1 slot column, converted to v2
	modeSlotRaw        // Instance fidv1 slot column, raw v1 fids
	modeNamed          // Instance fidv2 feature: fid, then fid_list values
)

// fillSparse builds sparse output o from column v (nil: empty rows).
func (p *parser) fillSparse(o *sparseOut, v *colView, mode int) error {
	o.offBuf, o.offs = newBuf[int32](p.mem, p.n+1)
	if v == nil {
		return nil
	}
	if v.plainFids() && (mode != modeSlotRaw || v.hiOffs == nil && v.kind == batch.KindFidV2List) {
		// Every row is a fid list stored contiguously: copy the values at once.
		offs := v.offs[:p.n+1]
		base := offs[0]
		for r := range p.n {
			o.offs[r+1] = offs[r+1] - base
		}
		o.valBuf, o.vals = newBufUninit[uint64](p.mem, int(offs[p.n]-base))
		copy(o.vals, v.u64[base:offs[p.n]])
		return nil
	}
	total := 0
	it := v.iter()
	for r := 0; r < p.n; r++ {
		c, k := it.next()
		switch k {
		case batch.KindFidV1List, batch.KindFidV2List, batch.KindFidV2Lists, batch.KindFidV1Lists:
			if mode == modeExample && !k.IsFid() {
				break // list of lists: logged and skipped by the reference
			}
			vals, ok := v.fidsAt(c, k)
			if !ok {
				return v.layoutErr(r, k)
			}
			total += len(vals)
			if total > maxCells {
				return inputErr(v.name, r, "more than %d fids", maxCells)
			}
		case batch.KindFloatList, batch.KindDoubleList, batch.KindInt64List:
			if mode == modeExample {
				return inputErr(v.name, r, "a sparse feature holds %s values (Monolith aborts)", k)
			}
		case batch.KindBytesList:
			if mode == modeExample {
				return inputErr(v.name, r, "a sparse feature holds bytes_list values: shape must be 1 for bytes list")
			}
		}
		o.offs[r+1] = int32(total)
	}
	o.valBuf, o.vals = newBufUninit[uint64](p.mem, total)
	it = v.iter()
	for r := 0; r < p.n; r++ {
		c, k := it.next()
		if o.offs[r] == o.offs[r+1] {
			continue
		}
		vals, _ := v.fidsAt(c, k)
		dst := o.vals[o.offs[r]:o.offs[r+1]]
		if mode != modeSlotRaw || k != batch.KindFidV1List {
			copy(dst, vals)
			continue
		}
		hi := it.hiRow(r)
		if hi == nil {
			for i, f := range vals {
				dst[i] = fid.V2ToV1(f, 0)
			}
			continue
		}
		if len(hi) != len(vals) {
			return fmt.Errorf("%w: feature %q row %d: v1 signature bits do not match the fids", batch.ErrLayout, v.name, r)
		}
		for i, f := range vals {
			dst[i] = fid.V2ToV1(f, hi[i])
		}
	}
	return nil
}

// fillFeature applies Monolith's FillFeature (Example and ExampleBatch cells) of column v
// to dense output o. seen, when not nil, records the rows where the feature is present.
func (p *parser) fillFeature(o *denseOut, v *colView, seen []bool) error {
	dim := o.dim
	if o.dtype == Bytes {
		o.bb.ReserveData(v.binBound())
	}
	it := v.iter()
	for r := 0; r < p.n; r++ {
		c, k := it.next()
		if seen != nil && k != batch.KindAbsent {
			seen[r] = true
		}
		switch k {
		case batch.KindFidV1List, batch.KindFidV2List:
			return inputErr(v.name, r, "a dense %s feature holds %s values", o.dtype, k)
		case batch.KindFloatList, batch.KindDoubleList:
			if o.dtype != Float32 {
				return inputErr(v.name, r, "a dense %s feature holds %s values (Monolith aborts)", o.dtype, k)
			}
			row := o.f32[r*dim : r*dim+dim]
			if k == batch.KindFloatList {
				vals, ok := v.floats(c)
				if !ok {
					return v.layoutErr(r, k)
				}
				if dim == 1 && len(vals) == 0 {
					row[0] = FltMin
				} else {
					copy(row, vals)
				}
				break
			}
			vals, ok := v.doubles(c)
			if !ok {
				return v.layoutErr(r, k)
			}
			if dim == 1 && len(vals) == 0 {
				row[0] = FltMin
			}
			for j := range min(dim, len(vals)) {
				row[j] = float32(vals[j])
			}
		case batch.KindInt64List:
			vals, ok := v.int64s(c)
			if !ok {
				return v.layoutErr(r, k)
			}
			if dim == 1 && len(vals) == 0 {
				return inputErr(v.name, r, "empty int64_list for a dim-1 feature (Monolith aborts)")
			}
			if o.dtype != Int64 {
				return inputErr(v.name, r, "a dense %s feature holds %s values (Monolith aborts)", o.dtype, k)
			}
			copy(o.i64[r*dim:r*dim+dim], vals)
		case batch.KindBytesList:
			if dim != 1 {
				return inputErr(v.name, r, "shape must be 1 for bytes list")
			}
			s, e, ok := v.bytesRange(c)
			if !ok {
				return v.layoutErr(r, k)
			}
			if e == s {
				return inputErr(v.name, r, "empty bytes_list (Monolith aborts)")
			}
			if o.dtype != Bytes {
				return inputErr(v.name, r, "a dense %s feature holds %s values (Monolith aborts)", o.dtype, k)
			}
			o.bb.Append(v.bin.Value(s))
			continue
		}
		if o.dtype == Bytes {
			o.bb.AppendEmptyValue()
		}
	}
	if o.dtype == Bytes {
		o.filled = true
	}
	return nil
}

// writeExtras writes the extra features of row r from l.
func (p *parser) writeExtras(r int, l *lineID) {
	for i, f := range p.spec.fields {
		o := p.extra[i]
		dim := o.dim
		switch f.kind {
		case lkInt64:
			o.i64[r*dim] = l.int64Of(f.num)
		case lkFloat:
			o.f32[r*dim] = l.sampleRate
		case lkInts:
			a := l.ints(f.num)
			row := o.i64[r*dim : r*dim+dim]
			for j := range min(dim, len(a)) {
				row[j] = int64(a[j])
			}
		case lkBytes:
			o.bb.Append(l.bytesOf(f.num))
			o.bb.AppendEmptyValues(dim - 1)
		}
	}
}

// reserveExtras reserves room for bound bytes in every bytes extra.
func (p *parser) reserveExtras(bound int) {
	for _, o := range p.extra {
		if o.bb != nil {
			o.bb.ReserveData(min(bound, 1<<28))
			o.filled = true
		}
	}
}

// ---- ExampleBatch (parse_example_batch) ----

func (p *parser) exampleBatch() error {
	index := p.spec.byName
	for i, f := range p.rec.Schema().Fields() {
		var err error
		switch batch.RoleOf(f) {
		case batch.RoleFeature:
			switch f.Name {
			case batch.ListLabel, batch.ListInstanceWeight, batch.ListLineID:
				if !p.ebWants(f.Name) {
					continue
				}
				var v *colView
				if v, err = openCol(p.rec, i, &p.comp, false); err == nil {
					err = p.ebSpecial(f.Name, v)
				}
			default:
				j, ok := index[f.Name]
				if !ok || j.extra {
					continue
				}
				var v *colView
				if v, err = openCol(p.rec, i, &p.comp, false); err != nil {
					break
				}
				if j.sparse {
					err = p.fillSparse(&p.sparse[j.i], v, modeExample)
				} else {
					err = p.fillFeature(p.dense[j.i], v, nil)
				}
			}
		case batch.RoleLabel:
			if p.ebWants(batch.ListLabel) {
				var v *colView
				if v, err = openCanon(p.rec, i, batch.KindFloatList); err == nil {
					err = p.ebSpecial(batch.ListLabel, v)
				}
			}
		case batch.RoleInstanceWeight:
			if p.ebWants(batch.ListInstanceWeight) {
				var v *colView
				if v, err = openCanon(p.rec, i, batch.KindFloatValue); err == nil {
					err = p.ebSpecial(batch.ListInstanceWeight, v)
				}
			}
		case batch.RoleLineID:
			if p.ebWants(batch.ListLineID) {
				var v *colView
				if v, err = openCanon(p.rec, i, batch.KindBytesValue); err == nil {
					err = p.ebSpecial(batch.ListLineID, v)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ebWants reports whether the spec reads the reserved list name.
func (p *parser) ebWants(name string) bool {
	switch name {
	case batch.ListLabel:
		return p.spec.label >= 0
	case batch.ListInstanceWeight:
		return p.spec.iw >= 0
	}
	return len(p.spec.extra) > 0
}

// ebSpecial reads a reserved ExampleBatch list (__LABEL__, instance_weight, __LINE_ID__),
// either a canonical column or a feature column whose cells did not fit one.
func (p *parser) ebSpecial(name string, v *colView) error {
	it := v.iter()
	switch name {
	case batch.ListLabel:
		o := p.dense[p.spec.label]
		dim := o.dim
		for r := 0; r < p.n; r++ {
			c, k := it.next()
			var vals []float32
			if k == batch.KindFloatList {
				var ok bool
				if vals, ok = v.floats(c); !ok {
					return v.layoutErr(r, k)
				}
			}
			if dim == 1 && len(vals) == 0 {
				return inputErr(name, r, "no label for a dim-1 label (Monolith aborts)")
			}
			copy(o.f32[r*dim:r*dim+dim], vals)
		}
	case batch.ListInstanceWeight:
		o := p.dense[p.spec.iw]
		for r := 0; r < p.n; r++ {
			c, k := it.next()
			w, ok := float32(0), false
			switch k {
			case batch.KindFloatValue:
				if v.data != dtFloat {
					return v.layoutErr(r, k)
				}
				w, ok = v.f32[c], true
			case batch.KindFloatList:
				vals, ok2 := v.floats(c)
				if !ok2 {
					return v.layoutErr(r, k)
				}
				if len(vals) > 0 {
					w, ok = vals[0], true
				}
			}
			if !ok {
				return inputErr(name, r, "no float value (Monolith aborts)")
			}
			if !(w > 0) {
				w = 1
			}
			o.f32[r] = w
		}
	default:
		p.reserveExtras(v.binBound())
		for r := 0; r < p.n; r++ {
			c, k := it.next()
			var b []byte
			switch k {
			case batch.KindBytesValue:
				if v.data != dtBinary {
					return v.layoutErr(r, k)
				}
				b = v.bin.Value(c)
			case batch.KindBytesList:
				s, e, ok := v.bytesRange(c)
				if !ok {
					return v.layoutErr(r, k)
				}
				if e == s {
					return inputErr(name, r, "empty bytes_list (Monolith aborts)")
				}
				b = v.bin.Value(s)
			default:
				return inputErr(name, r, "no serialized LineId (Monolith aborts)")
			}
			if !p.line.parse(b) {
				return inputErr(name, r, "failed to parse the LineId")
			}
			p.writeExtras(r, &p.line)
		}
	}
	return nil
}

// ---- Example (parse_examples) ----

func (p *parser) examples() error {
	for i, f := range p.spec.sparse {
		v, err := p.feature(f.Name, false)
		if err == nil {
			err = p.fillSparse(&p.sparse[i], v, modeExample)
		}
		if err != nil {
			return err
		}
	}
	for i, f := range p.spec.dense {
		if i == p.spec.label || i == p.spec.iw {
			continue
		}
		v, err := p.feature(f.Name, false)
		if err == nil && v != nil {
			err = p.fillFeature(p.dense[i], v, nil)
		}
		if err != nil {
			return err
		}
	}
	if p.spec.label >= 0 {
		if err := p.exampleLabels(); err != nil {
			return err
		}
	}
	if p.spec.iw >= 0 {
		if err := p.exampleWeights(); err != nil {
			return err
		}
	}
	if len(p.spec.extra) > 0 {
		return p.exampleLineIDs()
	}
	return nil
}

// exampleLabels fills "label": from a named feature "label" where the row has one, else from
// the Example's labels extended by its __LABEL__ feature (ExtendExample), INVALID_LABEL
// where a position has no label.
func (p *parser) exampleLabels() error {
	o := p.dense[p.spec.label]
	dim := o.dim
	seen := make([]bool, p.n)
	named, err := p.feature(NameLabel, false)
	if err == nil && named != nil {
		err = p.fillFeature(o, named, seen)
	}
	if err != nil {
		return err
	}
	labels, err := p.canon(batch.RoleLabel, batch.KindFloatList)
	if err != nil {
		return err
	}
	extend, err := p.feature(batch.ListLabel, false)
	if err != nil {
		return err
	}
	var li, ei iter
	if labels != nil {
		li = labels.iter()
	}
	if extend != nil {
		ei = extend.iter()
	}
	for r := 0; r < p.n; r++ {
		var a, b []float32
		if labels != nil {
			if c, k := li.next(); k == batch.KindFloatList {
				a, _ = labels.floats(c)
			}
		}
		if extend != nil {
			if c, k := ei.next(); k == batch.KindFloatList {
				var ok bool
				if b, ok = extend.floats(c); !ok {
					return extend.layoutErr(r, k)
				}
			}
		}
		if seen[r] {
			continue
		}
		row := o.f32[r*dim : r*dim+dim]
		for j := range row {
			switch {
			case j < len(a):
				row[j] = a[j]
			case j-len(a) < len(b):
				row[j] = b[j-len(a)]
			default:
				row[j] = InvalidLabel
			}
		}
	}
	return nil
}

// exampleWeights fills "instance_weight": from a named feature "instance_weight" where the
// row has one, else the Example's weight when positive, else 1.
func (p *parser) exampleWeights() error {
	o := p.dense[p.spec.iw]
	seen := make([]bool, p.n)
	named, err := p.feature(NameInstanceWeight, false)
	if err == nil && named != nil {
		err = p.fillFeature(o, named, seen)
	}
	if err != nil {
		return err
	}
	w, err := p.canon(batch.RoleInstanceWeight, batch.KindFloatValue)
	if err != nil {
		return err
	}
	var it iter
	if w != nil {
		it = w.iter()
	}
	for r := 0; r < p.n; r++ {
		x := float32(0)
		if w != nil {
			if c, k := it.next(); k == batch.KindFloatValue {
				x = w.f32[c]
			}
		}
		if seen[r] {
			continue
		}
		if !(x > 0) {
			x = 1
		}
		o.f32[r] = x
	}
	return nil
}

// exampleLineIDs fills the extra features from each row's LineId: the __LINE_ID__ feature
// when the row has one (ExtendExample), else the Example's line_id.
func (p *parser) exampleLineIDs() error {
	lines, err := p.canon(batch.RoleLineID, batch.KindBytesValue)
	if err != nil {
		return err
	}
	extend, err := p.feature(batch.ListLineID, false)
	if err != nil {
		return err
	}
	bound := 0
	var li, ei iter
	if lines != nil {
		li, bound = lines.iter(), lines.binBound()
	}
	if extend != nil {
		ei, bound = extend.iter(), bound+extend.binBound()
	}
	p.reserveExtras(bound)
	for r := 0; r < p.n; r++ {
		var b []byte
		have, fromLine := false, false
		if lines != nil {
			if c, k := li.next(); k == batch.KindBytesValue {
				b, have, fromLine = lines.bin.Value(c), true, true
			}
		}
		if extend != nil {
			c, k := ei.next()
			switch k {
			case batch.KindAbsent:
			case batch.KindBytesList:
				s, e, ok := extend.bytesRange(c)
				if !ok {
					return extend.layoutErr(r, k)
				}
				if e == s {
					return inputErr(batch.ListLineID, r, "empty bytes_list (Monolith crashes)")
				}
				b, have, fromLine = extend.bin.Value(s), true, false
			default:
				return inputErr(batch.ListLineID, r, "holds %s, not a serialized LineId (Monolith crashes)", k)
			}
		}
		switch {
		case !have:
			p.line.reset()
		case !p.line.parse(b) && fromLine:
			return inputErr(batch.ColLineID, r, "cannot parse the LineId")
		}
		p.writeExtras(r, &p.line)
	}
	return nil
}

// ---- Instance (parse_instances) ----

func (p *parser) instances() error {
	for i, f := range p.spec.sparse {
		var v *colView
		var err error
		mode := modeNamed
		if f.FidV1 {
			mode = modeSlot
			if !p.spec.hasV2 {
				mode = modeSlotRaw
			}
			col := batch.SlotFeatureName(uint64(f.Slot))
			if col != f.Name && p.featureIndex(f.Name) >= 0 && p.featureIndex(col) >= 0 {
				return fmt.Errorf("%w: feature %q: the Instances have both slot %d fids and a feature named %q (D5)", ErrInput, f.Name, f.Slot, f.Name)
			}
			v, err = p.feature(col, mode == modeSlotRaw)
			if v != nil && v.inst != "fid" {
				v = nil // a named feature, not top-level fids
			}
		} else {
			v, err = p.feature(f.Name, false)
			if v != nil && v.inst != "" {
				v = nil // slot fids or the value field, not a named feature
			}
		}
		if err == nil {
			err = p.fillSparse(&p.sparse[i], v, mode)
		}
		if err != nil {
			return err
		}
	}
	for i, f := range p.spec.dense {
		var err error
		switch i {
		case p.spec.label:
			err = p.instanceLabels()
		case p.spec.iw:
			err = p.instanceWeights()
		default:
			var v *colView
			v, err = p.feature(f.Name, false)
			if err == nil && v != nil && v.inst == "" {
				err = p.instanceDense(p.dense[i], v)
			}
		}
		if err != nil {
			return err
		}
	}
	if len(p.spec.extra) == 0 {
		return nil
	}
	lines, err := p.canon(batch.RoleLineID, batch.KindBytesValue)
	if err != nil {
		return err
	}
	var it iter
	bound := 0
	if lines != nil {
		it, bound = lines.iter(), lines.binBound()
	}
	p.reserveExtras(bound)
	for r := 0; r < p.n; r++ {
		p.line.reset()
		if lines != nil {
			if c, k := it.next(); k == batch.KindBytesValue && !p.line.parse(lines.bin.Value(c)) {
				return inputErr(batch.ColLineID, r, "cannot parse the LineId")
			}
		}
		p.writeExtras(r, &p.line)
	}
	return nil
}

// instanceDense fills a dense feature from the Instance feature column v: float values
// (or a UE_QTZ-compressed bytes value) of exactly dim elements, int64 or bytes values of
// exactly dim elements; anything else leaves the row 0 or "".
func (p *parser) instanceDense(o *denseOut, v *colView) error {
	dim := o.dim
	if o.dtype == Bytes {
		o.bb.ReserveData(v.binBound())
	}
	it := v.iter()
	for r := 0; r < p.n; r++ {
		c, k := it.next()
		switch o.dtype {
		case Float32:
			row := o.f32[r*dim : r*dim+dim]
			switch k {
			case batch.KindFloatList:
				vals, ok := v.floats(c)
				if !ok {
					return v.layoutErr(r, k)
				}
				if len(vals) == dim {
					copy(row, vals)
				}
			case batch.KindBytesList:
				s, e, ok := v.bytesRange(c)
				if !ok {
					return v.layoutErr(r, k)
				}
				var payload []byte
				for j := s; j < e; j++ {
					if b := v.bin.Value(j); bytes.HasPrefix(b, qtzFlag) {
						payload = b[len(qtzFlag):]
					}
				}
				if len(payload) == 0 {
					break
				}
				n, ok := qtzLen(payload)
				if !ok {
					break // decompression fails: float values (none) do not have dim elements
				}
				if n != dim {
					return inputErr(v.name, r, "UE_QTZ value decompresses to %d floats, dim is %d", n, dim)
				}
				qtzDecode(payload, row)
			}
		case Int64:
			if k == batch.KindInt64List {
				vals, ok := v.int64s(c)
				if !ok {
					return v.layoutErr(r, k)
				}
				if len(vals) == dim {
					copy(o.i64[r*dim:r*dim+dim], vals)
				}
			}
		default:
			if k == batch.KindBytesList {
				s, e, ok := v.bytesRange(c)
				if !ok {
					return v.layoutErr(r, k)
				}
				if e-s == dim {
					o.bb.Append(v.bin.Value(s))
					continue
				}
			}
			o.bb.AppendEmptyValue()
		}
	}
	if o.dtype == Bytes {
		o.filled = true
	}
	return nil
}

// instanceLabels fills "label" with the first min(dim, n) labels, the rest 0.
func (p *parser) instanceLabels() error {
	o := p.dense[p.spec.label]
	v, err := p.canon(batch.RoleLabel, batch.KindFloatList)
	if err != nil || v == nil {
		return err
	}
	dim := o.dim
	it := v.iter()
	for r := 0; r < p.n; r++ {
		if c, k := it.next(); k == batch.KindFloatList {
			vals, _ := v.floats(c)
			copy(o.f32[r*dim:r*dim+dim], vals)
		}
	}
	return nil
}

// instanceWeights fills "instance_weight": the Instance's weight when set, else 1.
func (p *parser) instanceWeights() error {
	o := p.dense[p.spec.iw]
	v, err := p.canon(batch.RoleInstanceWeight, batch.KindFloatValue)
	if err != nil {
		return err
	}
	var it iter
	if v != nil {
		it = v.iter()
	}
	for r := 0; r < p.n; r++ {
		o.f32[r] = 1
		if v != nil {
			if c, k := it.next(); k == batch.KindFloatValue {
				o.f32[r] = v.f32[c]
			}
		}
	}
	return nil
}
