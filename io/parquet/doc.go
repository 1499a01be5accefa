// Package parquet reads and writes record batches as Parquet files through arrow-go's
// pqarrow, in a plain columnar form that DuckDB, Spark and pandas read directly.
// Pure Go, no Beam.
//
// # File layout
//
// A Parquet file has one schema, so the Writer takes it up front: FileSchema(every batch
// schema) is batch.UnionSchema of the batches' flat schemas (run-end encoded SHARED columns
// expanded to one value per row, null-typed columns giving way to typed ones, batch
// metadata dropped) plus one utf8 column, BatchColumn ("__batch__"):
//
//	f_user_id      list<uint64>   ...   __label__ list<float32>  ...   __batch__ utf8
//	[1, 2]                              [1]                            {"rows":3,"schema":"<base64>"}
//	[3]                                 [0]                            null
//	null                                [1]                            null
//	...                                                                {"rows":2,"schema":"<base64>"}
//
// Each Write flattens the batch (batch.Flatten), lays it out on the file schema
// (batch.Widen: columns the batch lacks are all null) and writes it as one row group (more
// if it exceeds WithMaxRowGroupRows). On the first row of each batch, __batch__ holds the
// JSON {"rows": n, "schema": base64 of batch.EncodeSchema}; it is null on the other rows.
// The Reader cuts the rows back into batches at the markers, whatever the row groups are
// (a batch may span row groups and a row group may hold several batches), and rebuilds
// each batch exactly with batch.Conform: SHARED columns re-encoded, null-typed columns,
// companions, field and schema metadata restored. A batch without rows has no row to
// carry its marker; such batches are listed in the file's key-value metadata under
// MetaEmptyBatches as JSON [{"at": rows written before it, "schema": base64}, ...].
//
// Column types are plain Parquet: lists are 3-level LIST groups, binary is BYTE_ARRAY,
// uint64 fids are INT64 annotated UINT_64 (Spark before 3.2 rejects it; DuckDB reads
// UBIGINT), null-typed columns are INT32 annotated UNKNOWN (all null). The Arrow schema is
// not stored (no ARROW:schema): the Parquet types map back to the same Arrow types, and
// arrow-go decodes a stored schema without bounds checks. Statistics are off for
// BatchColumn. Compression defaults to zstd (WithCompression).
//
// # Contracts
//
// Write does not retain the record. Read returns a record owned by the caller, who must
// Release it; Read returns (nil, io.EOF) after the last batch. Close the Reader to free its
// buffers (it does not close the file). A file that breaks the layout yields an error
// wrapping ErrFormat, naming the batch and its first row. Read never panics on corrupt
// input: arrow-go's Parquet decoder can panic on damaged pages, and those panics are
// recovered into errors (memory the decoder held at that point may not be returned to the
// allocator). Parquet pages carry no checksum, so damage inside a page can also decode to
// different values without an error. Errors are sticky. The Writer's Close writes the
// footer and does not close the underlying writer.
//
// Readers and Writers are not safe for concurrent use.
package parquet
