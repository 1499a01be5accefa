package avro

import (
	"github.com/monolith-go/monolith/io/ocf"
	"github.com/monolith-go/monolith/schemas/batch"
)

// syncSize is the length of the sync marker (the container code is io/ocf's).
const syncSize = ocf.SyncSize

// decoder decodes single rows from buf, as the Reader decodes the rows of a block, and
// leaves the bytes after the row in buf.
type decoder struct {
	buf []byte
}

func (d *decoder) row() (batch.Row, error) {
	od := ocf.NewDecoder(d.buf, &ocfConfig)
	row, err := readRow(&od)
	d.buf = d.buf[len(d.buf)-od.Len():]
	return row, err
}
