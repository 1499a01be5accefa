// Package validate checks, before a training run, that a FeatureConfigs and a data set agree:
// static checks of the config (and of a feature list), data checks over the whole input, and
// a report as JSON, text and self-contained HTML. Run (pipeline.go) is the Beam pipeline
// behind `monolith validate`; the checks themselves (check.go, report.go) are plain Go.
//
// # Pipeline
//
// Run expands --input, then runs read (files split across workers) → one Accumulator per
// bundle → merge of the serialized accumulators (a few kilobytes each: per-feature counters,
// never batches) → the merged state to a file in the output directory, on the runner the
// runners.Options select. The driver reads that state back, builds the Report and writes
// the three reports. With a remote runner the output directory must be shared with the
// workers, as for any file sink.
//
// Use in Go: Static checks the config alone. For data, NewAccumulator, then Add every batch (in any
// split), Merge the accumulators (MarshalBinary/UnmarshalBinary ship them between workers),
// and Build the Report from the merged one; WriteJSON, WriteText and WriteHTML write it to the
// paths Files names, and Report.Failed decides the exit status.
//
// # Checks
//
// Every check has a stable id and ends as pass, fail, warn or skip; the run fails (non-zero
// exit) when any check fails. Static checks read only the config, the options and the
// feature list:
//
//	feature-config    pooling_type, slice_dims and max_sequence_length of every feature
//	table             every feature names a table; with --version 1 every table has one width
//	unknown-feature   every slice names a configured feature
//	slice-bounds      every slice lies inside its feature's embedding
//	addn-firstn       no ADDN layout pools with FIRSTN
//	equal-widths      STACK and ADDN slices have equal widths
//	layout-structure  known out_type, at least one slice, consistent FIRSTN, valid features
//	shape             declared shapes: count, dims[0], and equality with the inferred shapes
//	feature-list      every configured feature is in the feature list, with a slot that fits
//	                  its feature_version (v1: 0..1023, v2: 0..32767)
//	slot-conflict     no two configured features share a slot and feature_version
//	slot-name         a "fc_slot_N"/"slot_N" name agrees with the list's slot
//
// The first eight come from featcfg.Check (every problem, not only the first), grouped by
// Problem.Code; the last three are skipped without a feature list. Data checks read every
// batch (see Accumulator):
//
//	occurrence        every configured feature holds at least one fid somewhere
//	column-type       every configured feature's column can be read as fids
//	slot-mismatch     fids carry their feature's expected slot; without an expected slot, a
//	                  feature whose fids span several slots is a warning
//	shared-use        a feature is not SHARED in some rows and INDIVIDUAL in others (warning)
//	layout            sharding and fused_embedding_to_layout run on synthetic embeddings
//	                  (layout.SyntheticValue) for --version and --ps-num; every output has the
//	                  length its declared shape implies and only finite values
//
// # Decisions
//
//   - Tables: FeatureConfigs has no list of tables; a table exists as soon as a feature names
//     it. The only table that cannot exist is an unset one (""), which the table check fails.
//   - Expected slot of a feature: its feature-list slot when a list is given and has the
//     feature (looked up like the reference's feature_list[name]), else N of a
//     "fc_slot_N"/"slot_N" name, else none. Batches hold v2 fids (v1 fids are converted,
//     which keeps the slot), so a fid's slot is (fid>>48)&0x7FFF whatever the version.
//   - --version is the sharding/layout op version, unrelated to a feature list's
//     feature_version (the fid format), so the two are not compared. The one static check that
//     depends on --version is the table width of version 1.
//   - Data checks with an invalid config: features are read one at a time, so every configured
//     feature gets its statistics even when other parts of the config are invalid. The layout
//     check runs on the valid subset: the features and layouts without a problem of their own.
//     Layouts left out are listed in the layout check's summary (their problems fail the static
//     checks); if no layout is left, or the subset cannot be sharded, the check is skipped
//     and says why.
//   - Examples kept in an Accumulator are order independent (the smallest mismatching fids,
//     the lexically smallest failure message), so merging in any order gives the same state.
package validate
