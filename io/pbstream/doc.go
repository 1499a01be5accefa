// Package pbstream reads and writes Monolith's "PB stream" framing, the length-prefixed
// record format of PBDataset/FilePBDataset training files, Kafka messages and string_to_variant.
// It handles the framing only; compression of the whole stream lives in io/compress.
//
// Wire format of one record (all integers u64 little-endian; no magic, no checksum; frozen).
// Which optional parts are present is not stored in the stream: reader and writer must be
// configured with the same Options.
//
//	LagrangeX:  +-------------+-------------+-----------+
//	            | H (u64)     | N (u64)     | payload   |   H = ... | key:24 | pb_type:8
//	            +-------------+-------------+-----------+   key = low 32 bits of H, low byte cleared
//
//	otherwise:  +---------------------+----------------------+-------------+-------------+-----------+
//	            | [KafkaDumpPrefix]   | [HasSortID]          | [KafkaDump] | N (u64)     | payload   |
//	            | A (u64);            | L (u64) + L bytes;   | u64,        |             | (N bytes) |
//	            | if A == 0: B (u64)  | if A != 0: A bytes   | ignored     |             |           |
//	            +---------------------+----------------------+-------------+-------------+-----------+
//
// The reader follows Monolith's algorithm exactly (io.md §1.2.2): with KafkaDumpPrefix a
// non-zero A is taken as the sort-id length and no L is read (and A is dropped when HasSortID
// is off); with LagrangeX the other three options are ignored. A payload length of 0xFEFEFEFE
// is Monolith's "DEADBEEF" sentinel and yields ErrSentinel. The writer emits the canonical
// form: LagrangeX header H = data_source_key | pb_type, or A = B = 0 and L = len(sort id).
//
// EOF contract: Next returns io.EOF only when the input ends exactly at a record boundary;
// any other end is a *CorruptError wrapping ErrTruncated, unless the reader was built
// WithAllowTruncatedTail, in which case a partial last record ends the stream with io.EOF
// (Monolith's silent end of file). Lengths are checked before any allocation and large
// payloads are read incrementally; ErrTooLarge reports lengths at or above 2^64-4 or above
// the configured maximum record size. Divergence: Monolith's stdin reader treats an
// oversized length as end of data; this reader reports ErrTooLarge.
//
// Readers and Writers are not safe for concurrent use.
package pbstream
