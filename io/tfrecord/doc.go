// Package tfrecord reads and writes TFRecord files, TensorFlow's record framing.
// Monolith uses it for use_tfrecord training input, entry-dump files and serving warm-up data.
// It handles the framing only; compression of the whole stream lives in io/compress.
//
// Wire format of one record (records are concatenated, no file header or footer; frozen):
//
//	 0                8               12               12+len          16+len
//	+----------------+----------------+----------------+----------------+
//	| len   u64 LE   | masked crc32c  | payload        | masked crc32c  |
//	|                | of the 8 len   | (len bytes)    | of the payload |
//	|                | bytes, u32 LE  |                | u32 LE         |
//	+----------------+----------------+----------------+----------------+
//
// CRCs are CRC-32C (Castagnoli); masked = rotr(crc, 15) + 0xA282EAD8 (mod 2^32).
//
// EOF contract: Next returns (nil, io.EOF) only when the input ends exactly at a record
// boundary; any other end is a *CorruptError wrapping ErrTruncated, unless the reader was
// built WithAllowTruncatedTail, in which case a partial last record ends the stream with
// io.EOF (checksum mismatches and oversized lengths are errors in every mode).
//
// Divergence from TensorFlow: TensorFlow's buffered reader silently stops at a partial
// 12-byte header; this reader reports it as truncation unless WithAllowTruncatedTail is set.
// Lengths are checked before any allocation (ErrTooLarge at or above 2^64-4, as TensorFlow,
// and above the configurable maximum record size) and large payloads are read incrementally,
// so a short corrupt input never causes a large allocation.
//
// Readers and Writers are not safe for concurrent use.
package tfrecord
