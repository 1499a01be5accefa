// Package recordio opens Monolith training-data files: one record framing (PB stream or
// TFRecord) around one whole-stream codec (none, snappy, zstd, zlib, gzip).
// It is the entry point the rest of monolith-go uses; the formats themselves live in
// io/pbstream, io/tfrecord and io/compress.
//
// Layering of a file (the framing applies to the decompressed bytes, as in Monolith):
//
//	file bytes --[io/compress codec]--> framed stream --[io/pbstream | io/tfrecord]--> records
//
//	 PB stream: [headers per pbstream.Options] | N u64 LE | payload (N bytes) | ...
//	 TFRecord:  len u64 LE | crc32c(len) u32 | payload | crc32c(payload) u32 | ...
//
// Offsets reported in records and errors are byte offsets in the decompressed stream, like
// Monolith's iterator offsets. Open("-") reads standard input, which is never decompressed
// (as in Monolith); Create("-") writes standard output, never compressed.
//
// EOF contract: Next returns io.EOF only when the stream ends exactly at a record boundary
// and, for compressed input, the compressed stream is complete; an empty file is an empty
// stream for every codec. Any other end is a *CorruptError naming the file, the offset and
// the record index, wrapping ErrTruncated; with Options.AllowTruncatedTail a partial last
// record (or an incomplete compressed stream) ends the stream with io.EOF instead, which is
// Monolith's silent end of file. Damaged compressed data, checksum mismatches, oversized
// lengths and the PB-stream DEADBEEF sentinel are errors in every mode. Hadoop snappy has no
// end marker, so a snappy file cut exactly between blocks that fall on a record boundary
// reads as a complete, shorter file.
//
// This error policy is decision I1 of the project (shared/spec/decisions.md); the PB-stream
// header handling follows decision I9 (exact reader, canonical writer).
//
// Create writes to a temporary file beside the target ("<name>.tmp-*"), and Close flushes,
// fsyncs and renames it into place, so readers never see a partial file; Abort discards it.
//
// Readers and Writers are not safe for concurrent use.
package recordio
