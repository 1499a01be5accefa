package filter

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/monolith-go/monolith/schemas/batch"
	"github.com/monolith-go/monolith/schemas/fid"
)

// FidsOptions configures filter_by_fids (io.md §3.7.1). Empty lists disable their rule.
type FidsOptions struct {
	// FilterFids drops a row that holds any of these fids.
	FilterFids []uint64
	// HasFids drops a row that holds none of these fids.
	HasFids []uint64
	// SelectFids drops a row that does not hold all of these fids.
	SelectFids []uint64
	// HasActions drops a row whose line_id.actions holds none of these actions.
	HasActions []int32
	// ReqTimeMin drops a row whose line_id.req_time is below it.
	ReqTimeMin int64
	// SelectSlots drops a row that does not hold a fid of each of these slots (all > 0).
	SelectSlots []int32
}

// FidsFilter is filter_by_fids. It is safe for concurrent use.
//
// A row's fids are, for an Instance batch, its top-level v1 fids only (the "fc_slot_<n>"
// columns, as the original v1 values); for Example and ExampleBatch batches, the values
// of every fid_v1_list cell (original v1 values) and fid_v2_list cell. A row's slots are
// fid>>54 of its v1 fids plus fid>>48 of its v2 fids (for an Instance, of its named
// features' fids).
type FidsFilter struct {
	filter, has, sel []uint64 // sorted, deduplicated
	slots            []uint64 // sorted, deduplicated
	actions          []int64  // sorted, deduplicated
	reqTimeMin       int64
}

// NewFilterByFids validates o and returns the filter.
func NewFilterByFids(o FidsOptions) (*FidsFilter, error) {
	f := &FidsFilter{
		filter:     sortedSet(o.FilterFids),
		has:        sortedSet(o.HasFids),
		sel:        sortedSet(o.SelectFids),
		reqTimeMin: o.ReqTimeMin,
	}
	for _, s := range o.SelectSlots {
		if s <= 0 {
			return nil, configError("filter_by_fids", "select slot %d is not positive", s)
		}
		f.slots = append(f.slots, uint64(s))
	}
	f.slots = sortedSet(f.slots)
	for _, a := range o.HasActions {
		f.actions = append(f.actions, int64(a))
	}
	f.actions = sortedSet(f.actions)
	return f, nil
}

func sortedSet[T int64 | uint64](v []T) []T {
	s := slices.Clone(v)
	slices.Sort(s)
	return slices.Compact(s)
}

func contains[T int64 | uint64](set []T, v T) bool {
	_, ok := slices.BinarySearch(set, v)
	return ok
}

// Keep appends the indexes of the rows to keep to dst[:0].
func (f *FidsFilter) Keep(rec arrow.RecordBatch, dst []int) ([]int, error) {
	const op = "filter_by_fids"
	dst = dst[:0]
	n := int(rec.NumRows())
	d, err := bindLineIDs(op, rec)
	if err != nil {
		return dst, err
	}
	reqTime, err := d.bind(fieldReqTime)
	if err != nil {
		return dst, err
	}
	var actions *lidCol
	if len(f.actions) > 0 {
		if actions, err = d.bind(fieldActions); err != nil {
			return dst, err
		}
	}
	var cols []fidColumn
	needFids := len(f.filter)+len(f.has)+len(f.sel)+len(f.slots) > 0
	if needFids {
		if cols, err = fidColumns(op, rec); err != nil {
			return dst, err
		}
	}
	var selSeen, slotSeen setScratch
	var buf []int64
	for r := range n {
		t, err := reqTime.int64At(r)
		if err != nil {
			return dst, err
		}
		if t < f.reqTimeMin {
			continue
		}
		if needFids && !f.keepFids(cols, r, &selSeen, &slotSeen) {
			continue
		}
		if actions != nil {
			if buf, err = actions.intsAt(r, buf[:0]); err != nil {
				return dst, err
			}
			if !intersects(f.actions, buf) {
				continue
			}
		}
		dst = append(dst, r)
	}
	return dst, nil
}

// keepFids applies rules 4 to 7 to row r.
func (f *FidsFilter) keepFids(cols []fidColumn, r int, selSeen, slotSeen *setScratch) bool {
	selSeen.next(len(f.sel))
	slotSeen.next(len(f.slots))
	hasHit, selHits, slotHits := false, 0, 0
	for i := range cols {
		c := &cols[i]
		v1, vals, hi := c.row(r)
		for j, v := range vals {
			raw, slot := v, v>>48
			if v1 {
				var h uint8
				if hi != nil {
					h = hi[j]
				}
				raw = fid.V2ToV1(v, h)
				slot = raw >> 54
			}
			if c.fidSet {
				if len(f.filter) > 0 && contains(f.filter, raw) {
					return false
				}
				if !hasHit && len(f.has) > 0 && contains(f.has, raw) {
					hasHit = true
				}
				if len(f.sel) > 0 {
					if k, ok := slices.BinarySearch(f.sel, raw); ok && selSeen.seen[k] != selSeen.gen {
						selSeen.seen[k] = selSeen.gen
						selHits++
					}
				}
			}
			if len(f.slots) > 0 {
				if k, ok := slices.BinarySearch(f.slots, slot); ok && slotSeen.seen[k] != slotSeen.gen {
					slotSeen.seen[k] = slotSeen.gen
					slotHits++
				}
			}
		}
	}
	return (len(f.has) == 0 || hasHit) && selHits == len(f.sel) && slotHits == len(f.slots)
}

// fidColumn reads the fids of one flat fid feature column row by row without copying:
// a local, allocation-free counterpart of batch.RawFids.
type fidColumn struct {
	sp     batch.Sparse
	fidSet bool // contributes to the fid set (not only to the slot set)
	v1     bool // every value cell is fid_v1_list (column kind)
	cells  *array.Uint8
	cmap   rowMap
	hi     *array.List // "__v1hi__:<f>"
	hiVals []uint8
	hmap   rowMap
}

// row returns whether row r's cell holds v1 fids, its stored (v2) values and, for v1
// cells with a signature companion, their high signature bits.
func (c *fidColumn) row(r int) (v1 bool, vals []uint64, hi []uint8) {
	vals = c.sp.Row(r)
	v1 = c.v1
	if c.cells != nil {
		v1 = batch.Kind(c.cells.Value(c.cmap.at(r))) == batch.KindFidV1List
	}
	if !v1 || c.hi == nil || len(vals) == 0 {
		return v1, vals, nil
	}
	p := c.hmap.at(r)
	s, e := c.hi.ValueOffsets(p)
	if int(e-s) != len(vals) || s < 0 || int(e) > len(c.hiVals) {
		return v1, vals, nil // malformed companion: checked in fidColumns
	}
	return v1, vals, c.hiVals[s:e]
}

// fidColumns collects the flat fid feature columns of rec (see FidsFilter).
func fidColumns(op string, rec arrow.RecordBatch) ([]fidColumn, error) {
	src, err := batch.SourceOf(rec.Schema())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	s := rec.Schema()
	fidList := arrow.ListOf(arrow.PrimitiveTypes.Uint64)
	var cols []fidColumn
	for i, fld := range s.Fields() {
		if !batch.IsFeature(fld) {
			continue
		}
		kind, mixed, err := batch.FeatureKind(fld)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		vals, _ := physical(rec.Column(i))
		if !arrow.TypeEqual(vals.DataType(), fidList) || !mixed && !kind.IsFid() {
			continue
		}
		sp, err := batch.SparseAt(rec, i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		c := fidColumn{sp: sp, v1: !mixed && kind == batch.KindFidV1List, fidSet: true}
		if src == batch.SourceInstance {
			inst, _ := fld.Metadata.GetValue(batch.MetaInstance)
			c.fidSet = inst == "fid"
		}
		if mixed {
			col, err := column(op, rec, "__cell__:"+fld.Name)
			if err != nil {
				return nil, err
			}
			var ok bool
			if col != nil {
				var pv arrow.Array
				pv, c.cmap = physical(col)
				c.cells, ok = pv.(*array.Uint8)
			}
			if !ok {
				return nil, inputError(op, "feature %q has mixed kinds but no uint8 cell-kind column", fld.Name)
			}
		}
		col, err := column(op, rec, "__v1hi__:"+fld.Name)
		if err != nil {
			return nil, err
		}
		if col != nil {
			pv, m := physical(col)
			l, ok := pv.(*array.List)
			var u8 *array.Uint8
			if ok {
				u8, ok = l.ListValues().(*array.Uint8)
			}
			if !ok {
				return nil, inputError(op, "column %q has type %s, want list<uint8>", "__v1hi__:"+fld.Name, col.DataType())
			}
			c.hi, c.hiVals, c.hmap = l, u8.Uint8Values(), m
			if err := c.checkHi(op, rec.NumRows(), fld.Name); err != nil {
				return nil, err
			}
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// checkHi verifies that the signature companion has one entry per fid of every v1 cell.
func (c *fidColumn) checkHi(op string, rows int64, name string) error {
	for r := range int(rows) {
		v1, vals, _ := c.row(r)
		if !v1 || len(vals) == 0 {
			continue
		}
		s, e := c.hi.ValueOffsets(c.hmap.at(r))
		if int(e-s) != len(vals) || s < 0 || int(e) > len(c.hiVals) {
			return &RowError{Op: op, Column: "__v1hi__:" + name, Row: r, Err: fmt.Errorf("%d signature entries for %d fids", e-s, len(vals))}
		}
	}
	return nil
}
