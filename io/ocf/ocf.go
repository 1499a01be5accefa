// Package ocf reads and writes the container layer of Avro object container files: the header
// (magic, metadata, sync marker), blocks and their codecs (null, deflate, snappy), and the Avro
// binary encoding of primitive values. Callers encode and decode their own records.
package ocf

// Magic starts every Avro object container file.
const Magic = "Obj\x01"

// SyncSize is the length of the sync marker that ends the header and every block.
const SyncSize = 16

// Block codecs (the avro.codec header value).
const (
	Null    = "null"
	Deflate = "deflate"
	Snappy  = "snappy"
)

// MaxHeaderValue bounds one key or value of the header metadata.
const MaxHeaderValue = 16 << 20

// MaxBlockSize is the largest block the readers of this module accept by default
// (Config.MaxBlockSize), compressed or uncompressed.
const MaxBlockSize = 1 << 30

// KnownCodec reports whether codec is one of Null, Deflate and Snappy.
func KnownCodec(codec string) bool {
	switch codec {
	case Null, Deflate, Snappy:
		return true
	}
	return false
}

// Config describes one caller's files for a Reader and its Decoders: the errors to wrap, the
// limits, and what a block holds. A Config must not change while it is in use.
type Config struct {
	// ErrFormat is wrapped by every error about input that breaks the format.
	ErrFormat error
	// ErrTruncated is wrapped, with io.ErrUnexpectedEOF, by every error about input that
	// ends inside the header or a block.
	ErrTruncated error
	// Item and Items name what a block holds in messages, e.g. "row" and "rows".
	Item, Items string
	// MinItemSize is the encoded size of the smallest item: a block that claims more items
	// than its bytes can hold is rejected before anything is decoded.
	MinItemSize int
	// MaxBlockSize is the largest block accepted, compressed or uncompressed.
	MaxBlockSize int
}
