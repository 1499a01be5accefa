// Package avro reads and writes record batches as Avro object container files (OCF).
// Each Avro record is one batch.Row, with the schema schemas/avsc.Row; a batch is the run of
// rows that begins at a row carrying its batch schema. Pure Go, no Beam.
//
// # File layout
//
// A standard Avro OCF (Avro 1.11 spec, "Object Container Files"), readable by any Avro tool:
//
//	+--------+--------------------------------------+-----------+
//	| "Obj"1 | metadata map<bytes>: avro.schema =   | sync (16) |   header
//	|        | avsc.Row, avro.codec = null|deflate| |           |
//	|        | snappy                               |           |
//	+--------+--------------------------------------+-----------+
//	| count long | size long | size bytes of rows  | sync (16) |   block, repeated
//	+------------+-----------+---------------------+-----------+
//
// The rows of a file are, in order, the rows of each batch as batch.Rows returns them: the
// first row of a batch sets batch_schema (batch.EncodeSchema) and batch_rows; a batch
// without rows is a single row with batch_rows 0. Blocks are cut by size (WithBlockSize), so
// a block may hold parts of several batches and a batch may span blocks. The layout is
// frozen together with avsc.Row.
//
// The Writer encodes rows through github.com/linkedin/goavro/v2 (OCFWriter, converting rows
// to goavro's native maps by hand). The Reader decodes the container (with io/ocf,
// which ps/export shares) and the rows itself, because goavro sizes its buffers from
// counts read off the input (up to 2^31 items or bytes) and a corrupt count would exhaust
// memory. The Reader checks every count against the bytes that are left, caps a block at
// MaxBlockSize and accepts only files whose schema has the parsing canonical form of avsc.Row.
//
// # Contracts
//
// Write does not retain the record. Read returns a record owned by the caller, who must
// Release it. Read returns (nil, io.EOF) only at a clean end: after the last row of the last
// batch of a file that ends at a block boundary; a file that ends inside a block or inside a
// batch yields a *CorruptError wrapping ErrTruncated. Other damage yields a *CorruptError
// naming the batch, the row and the byte offset of its block; Read never panics on corrupt
// input. Errors are sticky. Close flushes the last block and does not close the underlying
// writer.
//
// Readers and Writers are not safe for concurrent use.
package avro
