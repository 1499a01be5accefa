package export

import "github.com/monolith-go/monolith/io/ocf"

// The tests build Avro files by hand with these (the container code is io/ocf's).
const (
	avroMagic = ocf.Magic
	syncSize  = ocf.SyncSize
)

func appendLong(b []byte, v int64) []byte    { return ocf.AppendLong(b, v) }
func appendString(b []byte, s string) []byte { return ocf.AppendString(b, s) }
