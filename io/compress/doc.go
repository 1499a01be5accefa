// Package compress provides the whole-stream compression codecs of Monolith training data.
// A framed record stream (TFRecord or PB stream) is compressed as one byte stream; this
// package turns such a stream back into plain bytes, and plain bytes into such a stream.
//
// Codecs (the Monolith compression_type number is in parentheses):
//
//	None   (0 UNKNOW, 1 NO)  bytes pass through unchanged
//	Snappy (2)               Hadoop block-snappy, see below
//	Zstd   (3)               standard zstd frames; concatenated and skippable frames allowed
//	Zlib   (4)               RFC 1950 zlib stream (Python zlib.compress)
//	Gzip   (5)               RFC 1952 gzip, several members allowed (Python gzip.compress)
//	Auto                     not a codec: Detect picks one from a file-name suffix
//
// Hadoop block-snappy wire format (all lengths u32 big-endian, no magic, no checksum):
//
//	+----------------------+----------------------+--------------------+----------------------+-----
//	| u32 BE block length  | u32 BE chunk length  | raw snappy chunk   | u32 BE chunk length  | ...
//	| (uncompressed bytes) | (compressed bytes)   | (block format)     |                      |
//	+----------------------+----------------------+--------------------+----------------------+-----
//	  one block = its length, then chunks until their decoded sizes add up to the block length;
//	  blocks follow each other until the end of the stream.
//
// A block length of 0 is accepted as an empty block with no chunks (Hadoop writes one for an
// empty input). The reader never allocates from a declared length alone: a compressed chunk is
// read incrementally and is limited to MaxSnappyChunk bytes, and its decoded size must fit the
// rest of its block and the maximum snappy expansion of the bytes actually read.
//
// EOF contract: a reader returns io.EOF only after a complete stream (an empty input is a
// complete, empty stream); a stream that stops early yields an error that wraps ErrTruncated,
// ErrCorrupt and io.ErrUnexpectedEOF, and damaged data an error that wraps ErrCorrupt.
// I/O errors of the underlying reader are returned wrapped but without ErrCorrupt.
//
// Readers and writers are not safe for concurrent use.
package compress
