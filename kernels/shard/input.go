package shard

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/monolith-go/monolith/kernels/featcfg"
	"github.com/monolith-go/monolith/kernels/parse"
	"github.com/monolith-go/monolith/schemas/batch"
)

// FromBatch fills in with the entries of rec for the features of cfg, zero-copy (only the
// flattened offsets of Instance sequence features are computed). The mapping follows
// data-path.md §3.3:
//
//   - ExampleBatch: a column gives batch_size entries, or one shared entry when it is run-end
//     encoded (a SHARED list); a feature missing from the batch is one shared empty entry.
//   - Example: a column gives one entry per row, empty where the row lacks the feature; a
//     feature missing from the batch gives empty entries.
//   - Instance: a "fc_slot_N" or "slot_N" feature reads the top-level fids of slot N (the
//     batch's "fc_slot_N" column); other features read the named feature column, whose fid
//     lists ("fid") or sequences of fid lists ("fid_list", flattened in order) are the
//     entry. D5: a slot feature whose name also names an Instance feature is an error.
//
// A configured feature whose column holds values other than fids is an error naming it.
//
// rec may also be the output of kernels/parse (Monolith's non-fused path, where the
// parser has already expanded every feature to one fid list per row): each configured
// feature then reads the sparse column of its name, one entry per row, and a feature the
// parser did not output gives empty entries.
//
// in stays valid while rec is.
func (in *Input) FromBatch(rec arrow.RecordBatch, cfg *featcfg.Config) error {
	if _, parsed := rec.Schema().Metadata().GetValue(parse.MetaSource); parsed {
		return in.fromParsed(rec, cfg)
	}
	src, err := batch.SourceOf(rec.Schema())
	if err != nil {
		return err
	}
	rows := int(rec.NumRows())
	in.Rows = rows
	if cap(in.Features) < len(cfg.Features) {
		in.Features = make([]FeatureInput, len(cfg.Features))
	}
	in.Features = in.Features[:len(cfg.Features)]
	if cap(in.scratch) < len(cfg.Features) {
		in.scratch = make([][]int32, len(cfg.Features))
	}
	in.scratch = in.scratch[:len(cfg.Features)]
	s := rec.Schema()
	for f := range cfg.Features {
		ft := &cfg.Features[f]
		fi := &in.Features[f]
		*fi = FeatureInput{}
		name := ft.Name
		if src == batch.SourceInstance && ft.Slot >= 0 {
			slotCol := batch.SlotFeatureName(uint64(ft.Slot))
			if slotCol != name && len(s.FieldIndices(name)) > 0 && len(s.FieldIndices(slotCol)) > 0 {
				return fmt.Errorf("kernels/shard: feature %q: the Instances have both slot %d fids and a feature named %q (D5)", name, ft.Slot, name)
			}
			if len(s.FieldIndices(slotCol)) > 0 {
				name = slotCol
			}
		}
		idx := s.FieldIndices(name)
		if len(idx) == 0 {
			if src == batch.SourceExampleBatch {
				fi.Shared = true // absent from an ExampleBatch: one shared empty entry
			}
			continue
		}
		field := s.Field(idx[0])
		if !batch.IsFeature(field) {
			return fmt.Errorf("kernels/shard: feature %q: column %q is not a feature column", ft.Name, name)
		}
		k, mixed, err := batch.FeatureKind(field)
		if err != nil {
			return err
		}
		if src == batch.SourceInstance && !mixed && (k == batch.KindFidV2Lists) {
			if err := in.flattenSequence(f, rec.Column(idx[0]), rows); err != nil {
				return fmt.Errorf("kernels/shard: feature %q: %w", ft.Name, err)
			}
			continue
		}
		sp, err := batch.SparseAt(rec, idx[0])
		if err != nil {
			return fmt.Errorf("kernels/shard: feature %q: %w", ft.Name, err)
		}
		fi.Shared, fi.Offsets, fi.Values = sp.Shared, sp.Offsets, sp.Values
		if fi.Shared && src != batch.SourceExampleBatch {
			return fmt.Errorf("kernels/shard: feature %q is shared in a %s batch", ft.Name, src)
		}
	}
	return nil
}

// flattenSequence reads an Instance fid_list column (list<list<uint64>>): entry r is the
// concatenation of row r's inner lists, which are contiguous in the child values.
func (in *Input) flattenSequence(f int, col arrow.Array, rows int) error {
	outer, ok := col.(*array.List)
	if !ok {
		return fmt.Errorf("sequence column has type %s", col.DataType())
	}
	inner, ok := outer.ListValues().(*array.List)
	if !ok {
		return fmt.Errorf("sequence column has type %s", col.DataType())
	}
	vals, ok := inner.ListValues().(*array.Uint64)
	if !ok {
		return fmt.Errorf("sequence column has type %s", col.DataType())
	}
	oo := outer.Offsets()[outer.Offset() : outer.Offset()+rows+1]
	io := inner.Offsets()[inner.Offset():]
	off := in.scratch[f][:0]
	for r := 0; r <= rows; r++ {
		off = append(off, io[oo[r]])
	}
	in.scratch[f] = off
	in.Features[f] = FeatureInput{Offsets: off, Values: vals.Uint64Values()}
	return nil
}

// fromParsed maps the sparse columns of a kernels/parse output.
func (in *Input) fromParsed(rec arrow.RecordBatch, cfg *featcfg.Config) error {
	rows := int(rec.NumRows())
	in.Rows = rows
	if cap(in.Features) < len(cfg.Features) {
		in.Features = make([]FeatureInput, len(cfg.Features))
	}
	in.Features = in.Features[:len(cfg.Features)]
	s := rec.Schema()
	for f := range cfg.Features {
		name := cfg.Features[f].Name
		fi := &in.Features[f]
		*fi = FeatureInput{}
		idx := s.FieldIndices(name)
		if len(idx) == 0 {
			continue
		}
		if role, _ := s.Field(idx[0]).Metadata.GetValue(parse.MetaRole); role != "sparse" {
			return fmt.Errorf("kernels/shard: feature %q: parsed column is %q, not sparse", name, role)
		}
		col, ok := rec.Column(idx[0]).(*array.List)
		if !ok {
			return fmt.Errorf("kernels/shard: feature %q: parsed column has type %s", name, rec.Column(idx[0]).DataType())
		}
		vals, ok := col.ListValues().(*array.Uint64)
		if !ok || col.NullN() > 0 {
			return fmt.Errorf("kernels/shard: feature %q: parsed column must be non-null list<uint64>", name)
		}
		fi.Offsets = col.Offsets()[col.Offset() : col.Offset()+rows+1]
		fi.Values = vals.Uint64Values()
	}
	return nil
}
