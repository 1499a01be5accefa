// Package dataset reads Monolith training data of any supported on-disk form into Arrow
// batches (schemas/batch): framed PB streams and TFRecords of ExampleBatch, Example or
// Instance records, their text forms, and the batch files monolith-go writes.
//
// # Formats
//
// Format Auto decides per file from its name, after any compression suffix: .pbtxt /
// .pbtext / .textproto / .prototxt / .txt (protobuf text, one message), .json (protobuf
// JSON, one message), .dump (tree dump of one Instance), .parquet, .avro and .jsonl (batch
// files), .tfrecord / .tfrecords (TFRecord). Any other name is a framed stream whose framing
// is sniffed from its first bytes: a valid TFRecord length checksum means TFRecord,
// anything else a PB stream read with Options.Record.PB (Monolith's file default has a sort
// id).
//
// The message type of framed and text files comes from Options.Type. Left at zero it is
// sniffed: text is parsed strictly as ExampleBatch, Instance, then Example (the first that
// parses wins); a framed file's first non-empty record must decode, without unknown fields,
// as exactly one of the three, else the reader asks for the type.
//
// # Batches
//
// Every ExampleBatch record becomes one batch. Example and Instance records are gathered
// BatchRows at a time (default 1024) into one batch; the last batch of a file may be
// shorter, and batches never span files. A batch file yields its batches as stored.
//
// # Memory
//
// Framing copies a batch's records into one chunk buffer; Chunk.Decode (which may run on
// another goroutine) hands that buffer back once the batch holds its own copies. A
// Reader keeps the buffers that came back, its record reader's payload buffer and its
// buffered file reader for the next chunks and files; Readers opened one per file share
// them through Options.Buffers. Batches are allocated from Options.Mem, by default a pool
// that reuses the buffers of released batches.
//
// # data_source_key
//
// Monolith's FilePBDataset overwrites every message's data_source_key with the key of its
// LagrangeX header, or with 0 when the stream has no LagrangeX header. By default (DSKAuto)
// this package overwrites only when the stream has LagrangeX headers and keeps the message's
// own key otherwise, so a key written without headers is not lost; DSKHeader gives the
// reference behaviour exactly, DSKMessage never overwrites.
//
// # Errors
//
// Following decisions I1 and I2, any record that cannot be read or decoded stops the reader
// with an error naming the file, the record index and its byte offset in the decompressed
// stream; batches before it are delivered. Nothing is skipped silently.
//
// A Reader is not safe for concurrent use; Stats may be called from any goroutine.
package dataset
