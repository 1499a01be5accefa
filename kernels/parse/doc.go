// Package parse turns a batch of schemas/batch into the tensors Monolith's parsers produce:
// parse_example_batch, parse_examples or parse_instances (io.md §4), chosen by the batch's
// source, as one batch → batch function (Parse) driven by a validated request (Spec).
//
// # Request
//
// A Spec lists sparse features (SparseFeature), dense features (DenseFeature: name, dim,
// dtype float32 / int64 / bytes) and extra features (ExtraFeature: a LineId field and a
// dim). NewSpec checks it the way parsers.py and the kernels do, and a little more: names
// are unique across the three lists; dims are 1..MaxDim; bytes features have dim 1;
// "label" and "instance_weight" are float32 dense features and "instance_weight" has dim 1;
// "__LABEL__" and "__LINE_ID__" cannot be requested; extras name a LineId field other than
// the bool is_draw, typed as in §4.2 (integers int64, sample_rate float32, strings bytes;
// see ExtraType).
//
// Fidv1 slot features. parse_instances takes v1 slots (fidv1_features) beside feature
// names (fidv2_features). Here a SparseFeature with FidV1 set reads the Instance top-level
// fids of v1 slot Slot, which the batch keeps in the column "fc_slot_<Slot>"; NewSpec sets
// FidV1 for names "slot_<n>" and "fc_slot_<n>" (n ≤ 1023, Monolith's default output names),
// and SlotFeature builds one. Two fidv1 features cannot read one slot. For Example and
// ExampleBatch batches every sparse feature reads the column called Name.
//
// # Output
//
// Parse returns a new record (the caller releases it) with rec.NumRows() rows and the
// schema Spec.Schema(source): one column per requested feature, sparse features first,
// then dense, then extra features, each list in request order. It is not a batch of
// schemas/batch. Schema metadata "monolith.parse.source" names the source; field metadata
// "monolith.parse.role" is "sparse", "dense" or "extra". No value is null.
//
//	sparse  list<uint64>               the row's fids in stored order (no dedup, no sort):
//	                                   the RaggedTensor of §4.1, with uint64 for TF's int64
//	                                   (same bits). v2 fids, except Instance fidv1 features
//	                                   when no fidv2 feature is requested: Monolith then keeps
//	                                   raw v1 fids (field metadata "monolith.parse.fid"="v1").
//	dense   fixed_size_list<T>[dim]    T float32, int64 or binary; dim 1 too, as the main
//	extra   fixed_size_list<T>[dim]    parsers' [B, dim] tensors
//
// # Rules per source
//
// ExampleBatch (parse_example_batch). Columns are visited in list order and each row takes
// the cell of its list; a SHARED (run-end encoded) list gives its one cell to every row.
// Sparse: fid_v1_list values converted to v2, fid_v2_list values as stored; unset cells,
// lists of lists and scalar cells give nothing; float/double/int64 lists and bytes lists are
// rejected. Dense float (float_list or double_list): dim 1 takes value[0], or FLT_MIN
// (FltMin) for an empty list; dim > 1 writes the first min(dim, n) values over what is
// there. Dense int64 likewise from int64_list (an empty dim-1 list is rejected); bytes take
// value[0] of a non-empty bytes_list. A cell of another value type is rejected. "label" is
// written by the __LABEL__ list (first min(dim, n) values; a dim-1 label without a value is
// rejected) and by a list named "label" (as a dense float), in list order, the later
// overwriting; without either it stays 0. "instance_weight" is value[0] of the
// instance_weight list when > 0, else 1; a cell without a value is rejected; without the
// list it is 0. Extras come from each row's __LINE_ID__ (a cell without a serialized,
// parsable LineId is rejected); without the list every extra is 0 or "" (sample_rate 0).
//
// Example (parse_examples). Every Example is first extended as Monolith's ExtendExample does
// (§2.6) — the batch keeps the reserved named features as ordinary columns: a __LINE_ID__
// feature replaces line_id, a __LABEL__ float_list is appended to the labels, and an
// instance_weight feature sets the weight (never visible in the output: "instance_weight"
// is then read from that feature itself, see below). Sparse and dense features read
// the row's feature of that name with the cell rules above. "label": a named feature
// "label", when the row has one (even unset, which leaves 0), is read as a dense float;
// otherwise the extended labels, INVALID_LABEL (InvalidLabel) for every position without
// one. "instance_weight": a named feature of that name, when present, as a dense float
// (no > 0 rule); otherwise the Example's weight when > 0, else 1. Extras come from the
// extended line_id; an absent LineId reads the proto defaults (sample_rate 1).
//
// Instance (parse_instances). Fidv1 features: the top-level fids of the slot, in order,
// converted to v2 only when some fidv2 feature is requested. Fidv2 features: the named
// feature's fid values, then its fid_list values; anything else gives nothing. Dense float:
// a bytes_value starting with "UE_QTZ" is decoded (qtz8: f16 min and max then one byte
// per value, min + (max−min)/255·byte; payloads of at most 8 bytes: plain f16 values read
// with Monolith's Float16::get_m) and must have exactly dim values, else the batch is
// rejected; otherwise float_value is used when it has exactly dim values, else the row is 0.
// Int64 and bytes features likewise need exactly dim values (else 0 / ""). The Instance
// value field is not a named feature: a dense feature "value" reads 0. "label": the first
// min(dim, n) labels, the rest 0. "instance_weight": the weight when set, else 1. Extras
// from line_id, with the proto defaults when absent.
//
// Extras (all sources): scalar fields fill column 0 (the rest 0 or ""), repeated fields
// (actions, pre_actions, special_strategies) their first min(dim, n) values, the rest 0;
// uid and item_id are bit-cast to int64. They are decoded from the serialized LineId the
// batch keeps, so the "__line_id__.<field>" columns need not be present.
//
// The table of io.md §4.5 is tested row by row for every source (TestMissingValueTable).
//
// # Errors
//
// Where the reference aborts the process or fails the op — a value type the request does
// not accept, an empty int64 or bytes list for a dim-1 feature, bytes under a sparse name
// ("shape must be 1 for bytes list"), the ExampleBatch reserved lists without a value, an
// unparsable __LINE_ID__, a UE_QTZ vector of the wrong length — Parse returns an error
// wrapping ErrInput that names the feature and the row. So does a column of more than
// 2^31−1 values. A batch that does not follow the layout gives batch.ErrLayout.
//
// # Divergences from the reference
//
// Where Monolith has a bug, Parse implements the evident intent:
//
//   - chnid as an Example/ExampleBatch extra: the reference writes a float into the int64
//     tensor (a TensorFlow type-check abort); Parse writes the int64.
//   - Scalar LineId fields requested with dim > 1 from Examples/ExampleBatches: the
//     reference writes the value at flat position row of the [B, dim] buffer (the wrong
//     cell); Parse fills column 0, as parse_instances does. A repeated field other than
//     actions requested with dim 1 and no values reads an undefined element there; Parse
//     gives 0.
//   - SHARED __LABEL__, instance_weight and __LINE_ID__ lists: the reference fills only row
//     0 from them; Parse repeats them into every row, like every other SHARED list.
//   - A fid cell under an int64 dense name: the reference writes the fid count into cells of
//     the following rows; Parse rejects it, as it does for float and bytes features.
//   - Features named like a requested extra: the reference would also write such a feature
//     into the extra's tensor; Parse fills extras from the LineId only.
//   - ExtendExample: a __LINE_ID__ feature without a bytes value crashes the reference
//     whether or not extras are requested; Parse rejects it only when it reads extras. An
//     unparsable __LINE_ID__ leaves a partly parsed LineId in the reference; here all its
//     fields read their defaults.
//   - UE_QTZ f16 payloads (≤ 8 bytes): the reference counts len−4 values (too few, or a
//     crash below 4 bytes); Parse decodes len/2.
//   - Requests the reference accepts with odd results are refused by NewSpec:
//     instance_weight with dim > 1, label or instance_weight not float32, bytes dense
//     features of dim > 1 (parse_instances alone reads them), two fidv1 features of one slot.
//   - D5: on Instance batches a slot feature whose name also names an Instance feature, when
//     both columns exist, is rejected.
//
// Example batches must hold Examples as read from the wire, before ExtendExample (which is
// what schemas/batch stores); Parse applies it once.
//
// # Performance
//
// Every output column is built in Arrow buffers allocated from mem, once per batch: sparse
// columns in two passes (row lengths, then values; a column of plain fid lists is copied in
// one piece), dense columns written in place, bytes through builders reserved up front.
// Inner loops index slices of the input record; there are no per-value allocations or
// interface calls, so allocations per batch do not grow with its rows (TestAllocsPerBatch).
// Parse reads rec without modifying it and is safe for concurrent use.
package parse
