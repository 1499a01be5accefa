// Package batch defines the Arrow record batch that carries N rows of Monolith training
// data through monolith-go, and converts it losslessly to and from Example, ExampleBatch
// and Instance. Kernels read its columns zero-copy as Go slices (see Sparse and Dense).
//
// # Layout (version 1)
//
// A batch is an arrow.RecordBatch with one row per sample. Columns fall into four roles,
// recorded in the field metadata key "monolith.role":
//
//	role (absent)         one column per feature (ExampleBatch list, Example named feature,
//	                      Instance feature or Instance slot group), in first-appearance order
//	role label            "__label__"            list<float32>   labels, one per task
//	role instance_weight  "__instance_weight__"  float32         sample weight (null = absent)
//	role line_id          "__line_id__"          binary          serialized LineId (null = absent)
//	role data_source_key  "__data_source_key__"  uint32          data-flow tag
//	role extra            "__extra__"            binary          unmodelled fields of the row, as wire bytes
//	role line_id_field    "__line_id__.<field>"  typed           LineId fields decoded for filters (read-only)
//	role v1hi, cell       "__v1hi__:<f>", "__cell__:<f>"         companions of feature f (below)
//	role fid_order        "__fid_order__"        list<int32>     Instance only: original order of
//	                      the top-level fids as (slot column ordinal, run length) pairs, null
//	                      for rows already grouped by slot in column order; present only if needed
//
// Feature columns by cell kind (the Monolith Feature oneof; see Kind):
//
//	fid_v1_list, fid_v2_list      list<uint64>             v2 fids (v1 fids converted, see below)
//	float_list / double_list      list<float32> / list<float64>
//	int64_list / bytes_list       list<int64> / list<binary>
//	*_lists (sequence features)   list<list<T>>            fid_v1_lists keeps raw v1 fids
//	int64/float/double/bytes_value  int64 / float32 / float64 / binary
//
// Every sparse feature is a list<uint64> column of v2 fids, which is what the sharding and
// layout kernels read. Converting v1 to v2 drops signature bits 48..53; those six bits are
// kept per fid in the companion "__v1hi__:<f>" column (list<uint8>, same offsets) whenever
// any of them is non-zero, so the original v1 fids can be rebuilt exactly.
//
// Field metadata on a feature column: "monolith.kind" (the kind of every non-null cell),
// "monolith.null" (what a null cell is: "unset", a Feature whose oneof is unset; "no_feature",
// an Example NamedFeature without a Feature; or "absent", the row has no such feature), "monolith.id" and "monolith.sorted_id" (NamedFeatureList.id / NamedFeature.id).
// An explicitly set but empty list is an empty list, not a null. When a column's cells do
// not share one kind and one null meaning, its "__cell__:<f>" companion (uint8) holds the
// kind of every cell (a value kind or one of the null kinds) and "monolith.kind" is "mixed".
//
// # SHARED features: run-end encoding
//
// An ExampleBatch SHARED list holds one cell that applies to all N rows. Its column is
// run-end encoded (arrow.RUN_END_ENCODED with int32 run ends and a single run of length N)
// over a one-element values array of the column's type. We chose run-end encoding over a
// list-view or a side record because it is the Arrow type whose meaning is exactly "this
// value repeats for these rows": the values are stored once, the column still has N rows
// (so the record stays rectangular and every Arrow tool can expand it), IPC carries it
// natively, and a kernel can tell a shared feature from its type alone (Sparse.Shared)
// without extra metadata. List-view would need N offset/size pairs and hides sharing; a
// side record breaks the one-record-per-batch contract. Formats that lack run-end encoding
// (Parquet, Avro, JSON lines) expand the column and record which columns were shared.
//
// # Sources and losslessness
//
// Schema metadata "monolith.source" records whether the rows came from an ExampleBatch, an
// Example stream or an Instance stream. Conversions back to the same message type are
// lossless: values, cell kinds, unset versus empty cells, list order, ids, SHARED/INDIVIDUAL
// types, LineId bytes (including fields unknown to our schema, I3), and every field the
// layout does not model (kept as wire bytes in "__extra__" or in the schema metadata key
// "monolith.extra"). The one thing not kept is the order of named features inside an
// Example or Instance when rows disagree on it: rows are rebuilt in column order. (Instance
// top-level fids are grouped by slot into "fc_slot_<n>" columns; their original order,
// interleaving included, is kept exactly through "__fid_order__".)
//
// Conversions between types follow Monolith (io.md §2.10) with decision I8: label, line_id,
// instance_weight and data_source_key are carried across. A conversion that would drop data
// (for example double_list features into an Instance) fails with an error naming the
// feature instead.
//
// # Ownership
//
// Builders take a memory.Allocator; the returned record belongs to the caller, who must
// Release it. Views returned by Sparse and Dense alias the record's buffers and are valid
// until the record is released. Nothing in this package is safe for concurrent mutation;
// reading one record from several goroutines is safe.
package batch
