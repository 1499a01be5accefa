// Package filter implements Monolith's sample filters and label ops (io.md §3.7) over
// record batches in the schemas/batch layout, from any source (ExampleBatch, Example,
// Instance). It is a pure Go kernel: no Beam, no goroutines.
//
// # Ops
//
//	Monolith op              Go constructor              kind    config-string parser
//	filter_by_fids           NewFilterByFids             Filter
//	filter_by_value          NewFilterByValue            Filter  (LoadFilterValues)
//	filter_by_feature_value  NewFilterByFeatureValue     Filter  (LoadFilterValues)
//	special_strategy         NewSpecialStrategy          both    ParseStrategyConf
//	negative_sample          NewNegativeSample           Filter  ParseActionPriority, ParsePerActionDropRate
//	filter_by_label          NewFilterByLabel            Filter
//	add_action               NewAddAction                Op
//	add_label                NewAddLabel                 Op      ParseAddLabelConfig
//	scatter_label            NewScatterLabel             Op      ParseScatterLabelConfig
//	label_upper_bound        NewLabelUpperBound          Op
//	label_normalization      NewLabelNormalization       Op      ParseNormMethods
//	use_field_as_label       NewUseFieldAsLabel          Op
//	multi_label_gen          NewMultiLabelGen            Op      ParseActionPriority
//	instance_reweight        NewInstanceReweight         Op      ParseActionPriority, ParseReweightConfig
//
// Every op is a value built once from an options struct and validated there: a bad
// option is an error wrapping ErrConfig that names the op and the offending value, and
// the Parse functions name the bad token. A Filter's Keep appends the kept row indexes,
// ascending, to a reusable dst slice; Apply (or Select) turns them into a batch. An Op's
// Apply returns a new batch built with batch.WithLabels, batch.WithLineIDs and
// batch.Take; when an op changes nothing it may return its input, retained.
//
// # Behavior
//
// "Label" is the "__label__" column (list<float32>, one label per task); a batch without
// it has no labels, and a null cell is a row without labels. InvalidLabel is Monolith's
// INVALID_LABEL. LineId fields are read from the decoded "__line_id__.<field>" columns
// when the batch has them, else by decoding the "__line_id__" bytes with the generated
// matrixpb.LineId (field looked up by name); an absent LineId reads as the default
// message (sample_rate 1). Ops that modify a LineId (add_action, add_label) decode it,
// change it and marshal it deterministically; fields unknown to our schema survive (I3).
// Rows they do not modify keep their exact bytes.
//
// filter_by_fids reads, for Instance batches, the top-level v1 fids (the "fc_slot_<n>"
// columns) as the fid set, and their v1 slots plus the v2 slots of the named features'
// fids as the slot set; for Example and ExampleBatch batches, every fid_v1_list value
// (the original v1 fid, rebuilt with its "__v1hi__" signature bits) and every fid_v2_list
// value, with v1 slot fid>>54 and v2 slot fid>>48.
//
// filter_by_value compares one LineId field: integers as int64 (bool as 0/1), uint64
// fields against the operands reinterpreted as uint64, float fields widened exactly to
// float64, strings byte-wise. between is lower ≤ v < upper. Repeated integer fields take
// only any / all / diff; a row without values gives KeepEmpty.
//
// filter_by_feature_value reads the feature column of that name (Example named feature or
// ExampleBatch list). A cell that is unset, absent, of another list type or of a scalar
// kind gives KeepEmpty, as does a float, double or bytes list (or an int64 list under a
// non-set op) without exactly one value. Instance batches are an error.
//
// use_field_as_label's kernel is not open source: the behaviour (every label becomes
// max(label, v), v zeroed when OverwriteInvalidValue and v ≥ LabelThreshold) is inferred
// from the reference's docstring and tests.
//
// Errors: malformed input (a LineId that does not parse, a column of the wrong type) is
// an error naming the op, the column and, for per-row problems, the row (*RowError). No
// op panics on input. After an error the results are unspecified.
//
// # Determinism
//
// special_strategy, negative_sample and add_label are random. Each takes a Seed (0 means
// DefaultSeed, 0x5eed) and draws from its own math/rand/v2 PCG generator seeded with
// (Seed, 0x9e3779b97f4a7c15). The generator lives in the op value and advances across
// calls: the same seed and the same sequence of batches give the same result. Draws
// happen in row order, only where the reference draws: special_strategy one Float64 per
// row whose deciding strategy has a rate below 1 (keep iff ≤ rate); negative_sample one
// Uint64 per row below the threshold (random = (u mod 1000)/1000, keep iff ≥ rate);
// add_label one Float64 per (row, task) that reaches sampling with a rate not within
// 1e-6 of 1 (select iff < rate). Concurrent calls on one op serialize on its generator
// (then call order decides); use one op per stream for reproducible results. Keep and
// Apply of special_strategy each draw. Every other op is a pure function of its input.
//
// # Departures from Monolith
//
// Each item below is pinned by a test named TestDeparture….
//
//   - I4: any / all / diff on repeated fields use true set semantics: operands and
//     values are deduplicated, so all = every distinct operand is present.
//   - I5: filter_by_feature_value with a feature missing from the batch or the row keeps
//     the row iff KeepEmpty (the reference indexes position −1).
//   - I6: multi_label_gen accepts any scalar head field, rendered as text: integers in
//     decimal, strings as they are, floats in Go's shortest form, bools as 0/1. A
//     HeadToIndex key that an integer field can never render is a configuration error.
//   - I7: randomness is a seeded PCG, not an unseeded mt19937 (see Determinism); the
//     probabilities are the reference's, the sequences are not.
//   - special_strategy drops a row none of whose strategies is in StrategyList (the
//     reference falls off the end of the function); a rule's label on a row without
//     labels gives the row that one label.
//   - negative_sample keeps (does not sample) a row with no label at LabelIndex.
//   - filter_by_feature_value on an Instance batch is an ErrInput error (the reference
//     op reads Examples only).
//   - Settings the reference ignores or leaves undefined are configuration errors:
//     unknown LineId field names, add_action on a repeated field, unknown normalization
//     methods, keys given twice in a config string, indexes beyond MaxTasks.
//   - instance_reweight fails with a *RowError when a row would need more than
//     MaxReplicas copies; scale2int saturates to the int32 range (NaN gives 0).
//   - Operand files are read once at construction, not lazily (a missing file fails the
//     constructor); a LineId that does not parse is a *RowError, not a process abort.
package filter
