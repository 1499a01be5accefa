// Package jsonl reads and writes record batches as JSON lines: one JSON object per line,
// each a schemas/batch.Row in its encoding/json form, so files can be read with jq or any
// JSON tool. Pure Go, no Beam.
//
// # File layout
//
//	{"batch_schema":"<base64 of batch.EncodeSchema>","batch_rows":2,"features":[...],"label":[1],...}\n
//	{"features":[{"name":"f","kind":"fid_v2_list","fids":[7]}],"label":null,...}\n
//	{"batch_schema":"...","features":null,"label":null,...}\n        (a batch without rows)
//
// The rows of a file are, in order, the rows of each batch as batch.Rows returns them. The
// first row of a batch carries batch_schema (base64 of batch.EncodeSchema) and batch_rows;
// a batch without rows is a single row with batch_rows absent. Field names, kind names and
// the "NaN", "Infinity" and "-Infinity" strings for special floats are those of batch.Row,
// batch.Kind and batch.Float32s/Float64s; bytes are base64 (encoding/json). The Reader
// rejects unknown fields, so a damaged key is an error rather than a silently dropped value.
//
// # Contracts
//
// Write does not retain the record. Read returns a record owned by the caller, who must
// Release it. Read returns (nil, io.EOF) only at a clean end: after the last row of the last
// batch, followed by nothing but white space. Input that ends inside a row or a batch yields
// a *CorruptError wrapping ErrTruncated; other damage yields a *CorruptError naming the
// batch, the record (0-based line index) and its byte offset. Read never panics on corrupt
// input. Errors are sticky. Close flushes and does not close the underlying writer.
//
// Readers and Writers are not safe for concurrent use.
package jsonl
